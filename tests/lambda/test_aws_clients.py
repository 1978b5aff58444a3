"""lambda/shared/aws_clients.py, the one boto3 client of the handlers: botocore's standard retry mode with a bounded
number of attempts, linked into every function folder that calls AWS and carried by each function's asset."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import botocore.endpoint
import pytest
from support.raw_answers import answer
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "lambda" / "shared" / "aws_clients.py"
sys.path.insert(0, str(SHARED.parent))

import aws_clients  # noqa: E402

FUNCTIONS = sorted(d for d in (ROOT / "lambda").iterdir() if d.is_dir() and d.name != "shared")


class SlowDown:
    """A before-send hook: the first `times` attempts get S3's 503 SlowDown, later ones an empty 200."""

    def __init__(self, times: int):
        self.times, self.attempts = times, 0

    def __call__(self, request, **_):
        self.attempts += 1
        if self.attempts <= self.times:
            body = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
            return answer(request, 503, body)
        return answer(request, 200)


@pytest.fixture
def s3(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-west-2",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    }.items():
        monkeypatch.setenv(name, value)
    return aws_clients.client("s3")


@pytest.fixture
def backoffs(monkeypatch):
    """botocore sleeps between attempts in botocore.endpoint; record instead of sleeping."""
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=delays.append))
    return delays


def test_throttling_is_retried_with_backoff_until_served(s3, backoffs):
    slow = SlowDown(times=3)
    s3.meta.events.register("before-send.s3.HeadObject", slow)
    s3.head_object(Bucket="data", Key="marker/")
    assert slow.attempts == 4 and len(backoffs) == 3 and all(delay >= 0 for delay in backoffs)


def test_throttling_gives_up_after_max_attempts_in_all(s3, backoffs):
    slow = SlowDown(times=100)
    s3.meta.events.register("before-send.s3.HeadObject", slow)
    with pytest.raises(ClientError, match="SlowDown"):
        s3.head_object(Bucket="data", Key="marker/")
    assert slow.attempts == aws_clients.MAX_ATTEMPTS == 8 and len(backoffs) == 7


def test_the_region_is_the_functions_own_unless_named(s3, monkeypatch):
    assert s3.meta.region_name == "us-west-2"
    assert aws_clients.client("grafana", region="eu-west-1").meta.region_name == "eu-west-1"


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda d: d.name)
def test_handlers_make_clients_only_through_the_shared_module(function):
    """No function folder builds a boto3 client or a retry config of its own; one that imports aws_clients holds the
    link to the one copy (a copy would drift)."""
    modules = [p for p in function.glob("*.py") if p.name != "aws_clients.py"]
    for module in modules:
        text = module.read_text()
        assert not re.search(r"boto3\.client\(|Config\(retries", text), f"{module}: use aws_clients.client"
    imports = any(re.search(r"^(from aws_clients import|import aws_clients)", p.read_text(), re.M) for p in modules)
    link = function / "aws_clients.py"
    if imports:
        assert link.is_symlink() and link.resolve() == SHARED, f"{link} must link ../shared/aws_clients.py"
    else:
        assert not link.exists(), f"{link}: nothing in {function.name} imports it"


def test_every_function_asset_carries_the_shared_module_itself(tmp_path):
    """Synthesize one function per folder as the constructs package them (constructs/lambda_assets.py) and read
    each staged asset: the link is followed, so the zip holds the file."""
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_

    from constructs.lambda_assets import RUNTIME, handler_code

    linked = [d for d in FUNCTIONS if (d / "aws_clients.py").is_symlink()]
    assert len(linked) >= 8
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Assets")
    functions = {
        d.name: lambda_.Function(stack, d.name, runtime=RUNTIME, handler="x.handler", code=handler_code(d))
        for d in linked
    }
    app.synth()
    for name, function in functions.items():
        key = stack.resolve(function.node.default_child.code)["s3Key"]
        staged = tmp_path / f"asset.{key.removesuffix('.zip')}" / "aws_clients.py"
        assert staged.is_file() and not staged.is_symlink(), f"{name}: {staged}"
        assert staged.read_bytes() == SHARED.read_bytes()
