"""A moto server on loopback for tests that drive real boto3 clients over HTTP (as tests/lambda/conftest.py does)."""
from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def moto_server(script: Path | None = None):
    """A moto server on a free loopback port; `script` runs it instead of moto's own (a harness that patches moto
    first, e.g. tests/moto_cloudformation.py)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = Path(sys.executable).parent / "moto_server"
    cmd = ([sys.executable, str(script)] if script else [str(server)] if server.exists()
           else [sys.executable, "-m", "moto.server"])
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd + ["-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"moto server exited: {log.read().decode()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"moto server did not answer on {url}") from None
                    time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)
