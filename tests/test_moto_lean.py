"""The tests' moto server (tests/support/moto_lean.py) makes a KMS key's private key when it is first used, lists moto's
service modules once and reads botocore's data through one loader: its keys still encrypt and decrypt, sign and
verify, and the public key GetPublicKey returns is the one that signed, however many calls in between, several at once
included; the module list kept is moto's own, and moto's package directory is not listed again; so are a response
class's method names, listed once; sessions share the loader of their data path, and the server's EC2 regions are
those a fresh session lists; the server logs no line per request but still its errors, and its answers carry no CORS
headers."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.serialization import load_der_public_key

from support import moto_lean
from support.moto_server import client, reset

REGION = "us-west-2"
MESSAGE = b"the platform's release manifest"


@pytest.fixture
def kms(moto_endpoint):
    reset(moto_endpoint)
    return client(moto_endpoint, "kms", REGION)


def test_moto_lists_its_service_modules_once_and_the_same(monkeypatch):
    """Checked in this process: the function patches moto's module, which monkeypatch restores afterwards."""
    from moto import backends

    monkeypatch.setattr(backends, "list_of_moto_modules", backends.list_of_moto_modules)
    fresh = list(backends.list_of_moto_modules())
    moto_lean.list_moto_modules_once()

    def forbidden(path):
        raise AssertionError(f"listed {path} again")

    monkeypatch.setattr(os, "listdir", forbidden)
    assert list(backends.list_of_moto_modules()) == fresh
    assert {"s3", "kms", "cloudformation", "ec2", "fsx", "sagemaker", "secretsmanager"} <= set(fresh)


def test_moto_lists_a_response_classs_methods_once_and_the_same(monkeypatch):
    """Checked in this process, on two response classes whose actions moto answers through call_action."""
    import inspect

    from moto.core import responses
    from moto.kms.responses import KmsResponse
    from moto.sts.responses import TokenResponse

    monkeypatch.setattr(responses, "method_names_from_class", responses.method_names_from_class)
    fresh = {c: responses.method_names_from_class(c) for c in (KmsResponse, TokenResponse)}
    moto_lean.list_response_methods_once()
    assert {c: responses.method_names_from_class(c) for c in fresh} == fresh

    def forbidden(*args, **kwargs):
        raise AssertionError("listed again")

    monkeypatch.setattr(inspect, "getmembers", forbidden)
    assert {c: responses.method_names_from_class(c) for c in fresh} == fresh
    assert "create_key" in fresh[KmsResponse] and "get_caller_identity" in fresh[TokenResponse]


@pytest.fixture
def loaders_restored(monkeypatch):
    """botocore's and moto's create_loader as they are, restored after the test whatever read_botocore_data_once did."""
    import botocore.session
    from moto.core import utils

    monkeypatch.setattr(botocore.session, "create_loader", botocore.session.create_loader)
    monkeypatch.setattr(utils, "create_loader", utils.create_loader)


def test_sessions_read_botocore_data_through_one_loader_per_data_path(loaders_restored, monkeypatch, tmp_path):
    """Checked in this process, as moto makes its sessions (boto3.Session()). That the shared loader answers as a
    fresh session's does: test_the_servers_regions_are_botocores."""
    import boto3

    moto_lean.read_botocore_data_once()

    first, second = boto3.Session(), boto3.Session()
    loader = first._session.get_component("data_loader")
    assert second._session.get_component("data_loader") is loader
    # Another data path (AWS_DATA_PATH) is another loader, which searches it.
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    other = boto3.Session()._session.get_component("data_loader")
    assert other is not loader and str(tmp_path) in other.search_paths


def test_moto_reads_its_service_models_through_one_loader_with_its_extras(loaders_restored):
    """moto's models (botocore's, with moto's extras merged in: sqs's service-2 has extras) are read through one
    loader, and read the same as through a fresh one. Checked in this process."""
    from moto.core import utils

    fresh = {s: utils.create_loader().load_service_model(s, "service-2") for s in ("sqs", "s3")}
    assert utils.create_loader() is not utils.create_loader()
    moto_lean.read_botocore_data_once()

    loader = utils.create_loader()
    assert utils.create_loader() is loader and moto_root_searched(loader)
    for service, model in fresh.items():
        assert loader.load_service_model(service, "service-2") == model
        assert loader.load_service_model(service, "service-2") == model  # the extras merged once, not per read


def moto_root_searched(loader) -> bool:
    import moto

    return any(Path(p) == Path(moto.__file__).parent for p in loader.search_paths)


def test_the_servers_regions_are_botocores(moto_endpoint):
    """EC2's region table, which moto builds from botocore's data as it imports EC2 (the aws, aws-us-gov and aws-cn
    partitions: moto/ec2/models/availability_zones_and_regions.py) through the server's shared loader, lists the
    regions a fresh botocore session of this process knows in them."""
    import boto3

    reset(moto_endpoint)
    fresh = boto3.Session()
    partitions = ("aws", "aws-us-gov", "aws-cn")
    known = {r for p in partitions for r in fresh.get_available_regions("ec2", partition_name=p)}
    answered = client(moto_endpoint, "ec2", REGION).describe_regions(AllRegions=True)["Regions"]
    assert {r["RegionName"] for r in answered} == known and "us-west-2" in known


@pytest.fixture
def werkzeug_logger_restored():
    """werkzeug's logger as it is, restored after the test whatever no_request_log did."""
    import logging

    logger = logging.getLogger("werkzeug")
    level = logger.level
    yield logger
    logger.setLevel(level)


def test_the_server_logs_no_request_line_and_still_its_errors(werkzeug_logger_restored, caplog):
    """Through werkzeug's own logging, as its server logs a request it answered and one that raised, from its first
    message on (the level it sets when none is): checked in this process."""
    import logging

    from werkzeug import _internal

    werkzeug_logger_restored.setLevel(logging.NOTSET)  # as in a fresh server process
    moto_lean.no_request_log()
    _internal._log("info", '127.0.0.1 - - [29/Nov/2026 22:00:00] "HEAD /data-bucket/studio/ HTTP/1.1" 200 -')
    _internal._log("error", "Error on request:\nTraceback (most recent call last): ...")
    assert [(r.levelname, r.getMessage().split(":")[0]) for r in caplog.records] == [("ERROR", "Error on request")]


def test_the_servers_answers_carry_no_cors_headers(moto_endpoint):
    """AWS's API answers carry none and no SDK reads them; moto's server adds them unless told not to."""
    reset(moto_endpoint)
    answer = client(moto_endpoint, "s3", REGION).list_buckets()["ResponseMetadata"]["HTTPHeaders"]
    assert not [h for h in answer if h.startswith("access-control-")], answer


def test_a_symmetric_key_encrypts_and_decrypts(kms):
    key = kms.create_key()["KeyMetadata"]["KeyId"]
    blob = kms.encrypt(KeyId=key, Plaintext=MESSAGE)["CiphertextBlob"]
    assert kms.decrypt(CiphertextBlob=blob)["Plaintext"] == MESSAGE


@pytest.mark.parametrize(
    "spec, algorithm, check",
    [
        (
            "RSA_2048",
            "RSASSA_PSS_SHA_256",
            lambda public, signature: public.verify(
                signature, MESSAGE, padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.MAX_LENGTH), hashes.SHA256()
            ),
        ),
        (
            "ECC_NIST_P256",
            "ECDSA_SHA_256",
            lambda public, signature: public.verify(signature, MESSAGE, ec.ECDSA(hashes.SHA256())),
        ),
    ],
)
def test_an_asymmetric_key_signs_with_the_private_key_of_its_public_key(kms, spec, algorithm, check):
    key = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec=spec)["KeyMetadata"]["KeyId"]
    with ThreadPoolExecutor(4) as pool:  # the first uses at once: one private key for all of them
        signatures = list(
            pool.map(lambda _: kms.sign(KeyId=key, Message=MESSAGE, SigningAlgorithm=algorithm)["Signature"], range(4))
        )
    public = load_der_public_key(kms.get_public_key(KeyId=key)["PublicKey"])
    for signature in signatures:
        check(public, signature)  # raises InvalidSignature for another key's signature
        assert kms.verify(KeyId=key, Message=MESSAGE, Signature=signature, SigningAlgorithm=algorithm)["SignatureValid"]
    other = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec=spec)["KeyMetadata"]["KeyId"]
    assert load_der_public_key(kms.get_public_key(KeyId=other)["PublicKey"]) != public
