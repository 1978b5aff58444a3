"""FsxPartitions synthesized once in a probe stack: what each partition handler's role may list in the data bucket.

Each handler (custom resource OnEvent and IsComplete, the profile-events function) needs s3:ListBucket so that S3
answers a missing marker with 404 rather than 403; listing is scoped by the s3:prefix condition to the partition
root. The check is per statement of each handler's role: a listing statement without its condition would let the
handler enumerate every key of the shared data bucket, even while another statement still names the prefix."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest

from support.variants import cdk_json_context
from constructs.fsx_partitions import FsxPartitions
from support.iam import actions, statements_of
from support.intrinsics import flatten

BUCKET = "ml-cluster-data-111122223333"
S3_PREFIX = "datasets/"
PARTITION_ROOT = "studio"
HANDLERS = ("OnEvent", "IsComplete", "ProfileEvents")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> dict:
    out_dir = tmp_path_factory.mktemp("fsx-partitions")
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context(stage_assets=False))
    stack = cdk.Stack(app, "Probe")
    # One handler with a fixed role name (as a bucket policy that names roles before they exist needs), two with the
    # roles their functions make: both ways of getting a role carry the same statements.
    partitions = FsxPartitions(
        stack,
        "Partitions",
        file_system_id="fs-0123456789abcdef0",
        file_system_path="/data",
        data_bucket_name=BUCKET,
        s3_prefix=S3_PREFIX,
        partition_root=PARTITION_ROOT,
        role_names={"ProfileEvents": "probe-profile-events"},
    )
    partitions.watch_profiles(
        domain_id="d-probe0000001",
        domain_arn_prefix="arn:aws:sagemaker:us-west-2:111122223333:user-profile/d-probe0000001",
        condition=None,
        reserved_uids={20001: "alice"},
    )
    app.synth()
    return json.loads((out_dir / "Probe.template.json").read_text())


def role_of(template: dict, handler: str) -> str:
    """The logical id of the role the handler's function runs as."""
    (function,) = [
        r
        for lid, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function"
        and lid.startswith(f"Partitions{handler}")
        and not lid.startswith(f"Partitions{handler}Logs")
    ]
    return function["Properties"]["Role"]["Fn::GetAtt"][0]


def arns(statement: dict) -> list[str]:
    """The statement's resources with the partition (the only token in them) resolved to aws."""
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]

    return [flatten(resource, {"AWS::Partition": "aws"}) for resource in resources]


def is_listing(statement: dict) -> bool:
    return any(a.lower().startswith("s3:list") or a in ("s3:*", "*") for a in actions(statement))


@pytest.mark.parametrize("handler", HANDLERS)
def test_every_list_statement_of_a_partition_handler_is_limited_to_the_partition_root(template, handler):
    statements = statements_of(template, role_of(template, handler))
    listing = [s for s in statements if is_listing(s)]
    assert listing, f"{handler}: no s3:ListBucket (a missing marker would answer 403, not 404)"
    for statement in listing:
        assert actions(statement) == ["s3:ListBucket"], statement
        assert statement.get("Condition") == {"StringLike": {"s3:prefix": [f"{S3_PREFIX}{PARTITION_ROOT}/*"]}}, (
            f"{handler}: a list statement without the partition root's prefix condition: {statement}"
        )
        assert arns(statement) == [f"arn:aws:s3:::{BUCKET}"], statement


@pytest.mark.parametrize("handler", HANDLERS)
def test_partition_handlers_read_and_write_markers_only_under_the_partition_root(template, handler):
    objects = [
        s
        for s in statements_of(template, role_of(template, handler))
        if any(a.startswith("s3:") for a in actions(s)) and not is_listing(s)
    ]
    assert objects and all(sorted(actions(s)) == ["s3:GetObject", "s3:PutObject"] for s in objects), objects
    for statement in objects:
        assert arns(statement) == [f"arn:aws:s3:::{BUCKET}/{S3_PREFIX}{PARTITION_ROOT}/*"], statement
