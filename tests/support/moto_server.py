"""A moto server on loopback for tests that drive real boto3 clients over HTTP, and what each test needs of it: an
empty account, clients, the environment a command line reads."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.ports import free_port

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
# moto's EC2 loads its catalogue of public AMIs into every region it starts, after each reset too (~0.25 s of the
# server's CPU each time); nothing here describes or launches images. moto's server also adds CORS headers for
# browsers (flask-cors, on every answer: ~1.5 % of the server's CPU), which no AWS API answer carries and no SDK reads.
SERVER_SETTINGS = {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false", "MOTO_DISABLE_GLOBAL_CORS": "true"}


# moto's server without three of its costs that change no answer (a KMS key's private key made on first use, its
# list of service modules read once, botocore's data read through one loader: moto_lean.py), with the three
# CloudFormation change-set behaviours of the real service that moto lacks, patched in when CloudFormation is first
# asked (moto_cloudformation.py's docstring).
SERVER = Path(__file__).with_name("moto_cloudformation.py")


def moto_command(port: int) -> list[str]:
    """moto's server (SERVER) on 127.0.0.1:port."""
    return [sys.executable, str(SERVER), "-H", "127.0.0.1", "-p", str(port)]


@contextmanager
def moto_server(*, timeout: float = 20) -> Iterator[str]:
    """A moto server on a free loopback port, its URL once it answers; stopped on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            moto_command(port),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **SERVER_SETTINGS},
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"moto server exited with {proc.returncode}: {log.read().decode()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"moto server did not answer on {url} within {timeout:.0f}s") from None
                    time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def reset(url: str) -> None:
    """Empties moto's account: every test starts from nothing."""
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).close()


@functools.cache
def _botocore_data() -> Any:
    """botocore's service models and endpoints (JSON files: endpoints.json is 1.2 MB, EC2's and SageMaker's models are
    megabytes), read once per process instead of once per session: a session's loader keeps what it read, and a new
    session makes a new loader. What the loader holds is botocore's installed data, the same for every session; each
    session keeps its own events, credentials and clients."""
    from botocore.loaders import create_loader

    return create_loader()


def session(**kwargs: Any):
    """A real boto3 Session (boto3.session.Session(**kwargs)) whose botocore session reads botocore's data through
    the process's one loader."""
    import boto3.session
    import botocore.session

    core = botocore.session.Session()
    core.register_component("data_loader", _botocore_data())
    return boto3.session.Session(botocore_session=core, **kwargs)


def client(url: str, service: str, region: str, **config: Any):
    """A real boto3 client of `service` at moto with test credentials, one attempt per call (a failure shows at
    once); `config` adds botocore Config keys (e.g. read_timeout)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        service,
        region_name=region,
        endpoint_url=url,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=Config(retries={"total_max_attempts": 1}, **config),
    )


def environment(url: str, region: str) -> dict[str, str]:
    """What a process reads to reach moto as this account: endpoint, credentials, region, no profile or metadata."""
    return {
        "AWS_ENDPOINT_URL": url,
        **CREDENTIALS,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def no_credentials_env() -> dict[str, str]:
    """This process's environment without any AWS credential source: no AWS_* variables, config and credential files
    /dev/null, no instance metadata. A command run with it must fail for want of credentials, never reach AWS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    )
    return env
