"""Handler tests: the real boto3 client talks HTTP to a moto server (tests/conftest.py's moto_endpoint, one per
process).

Calls moto 5.2 does not implement (FSx data repository tasks, SageMaker user profiles) go through
botocore.stub.Stubber on an otherwise real client; everything else reaches moto over HTTP.
"""

from __future__ import annotations

import partitions
import pytest
from botocore.stub import Stubber

from support.moto_server import reset
from support.recording import Recorder, Sleeps

REGION = "us-east-1"


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
    reset(moto_endpoint)
    yield


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


@pytest.fixture
def clients_by_name(monkeypatch, fsx, sagemaker):
    """As in Lambda, where nothing passes clients in: a handler makes each client by service name through
    partitions.client. FSx and SageMaker get the fsx and sagemaker fixtures' clients (real clients under Stubber);
    any other name a real client to moto server, so a misspelt service name fails as it would in Lambda."""
    real = partitions.client
    stubbed = {"fsx": fsx[0], "sagemaker": sagemaker[0]}
    monkeypatch.setattr(partitions, "client", lambda service, **kwargs: stubbed.get(service) or real(service, **kwargs))


@pytest.fixture
def sleeps():
    return Sleeps()
