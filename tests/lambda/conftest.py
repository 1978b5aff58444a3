"""Handler tests: the real boto3 client talks HTTP to a moto server started once per session.

Calls moto 5.2 does not implement (FSx data repository tasks, SageMaker user profiles) go through
botocore.stub.Stubber on an otherwise real client; everything else reaches moto over HTTP.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from botocore.stub import Stubber

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lambda" / "fsx_partitions"))

import partitions  # noqa: E402

REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _moto_command(port: int) -> list[str]:
    script = Path(sys.executable).parent / "moto_server"
    if script.exists():
        return [str(script), "-H", "127.0.0.1", "-p", str(port)]
    return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]


@pytest.fixture(scope="session")
def moto_endpoint():
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(_moto_command(port), stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"moto server exited with {proc.returncode}: {log.read().decode()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"moto server did not answer on {url} within 20s")
                    time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(autouse=True)
def aws_env(moto_endpoint, monkeypatch, tmp_path):
    """Fake credentials, a region and AWS_ENDPOINT_URL pointing at moto; no real config files are read."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    request = urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(request, timeout=5).close()
    yield


class Recorder:
    """Records the operations a real client sends, to prove what did (not) happen."""

    def __init__(self, client):
        self.calls: list[tuple[str, dict]] = []
        client.meta.events.register("provide-client-params", self._record)

    def _record(self, params, model, **_):
        self.calls.append((model.name, dict(params)))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def s3():
    return partitions.client("s3")


@pytest.fixture
def s3_calls(s3):
    return Recorder(s3)


@pytest.fixture
def bucket(s3):
    s3.create_bucket(Bucket="data-bucket")
    return "data-bucket"


@pytest.fixture
def fsx():
    client = partitions.client("fsx")
    with Stubber(client) as stub:
        yield client, stub


@pytest.fixture
def sagemaker():
    client = partitions.client("sagemaker")
    with Stubber(client) as stub:
        yield client, stub


class Sleeps(list):
    """An injected sleep that records the delays instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        assert seconds >= 0
        self.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()
