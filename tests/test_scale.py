"""A university's Studio: 5,000 users in per-user mode stay within CloudFormation's quotas.

Checked on a smaller generated config (tests/support/variants.py per_user_config: 181 users whose names and uids are as long
as the config allows, so each user's share of a template is the largest it can be): every template within the quotas,
then the arithmetic that takes it to 5,000 users (resources and bytes per user and per users stack, users per nested
stack, what each users stack adds to the parent). `make bench` synthesizes 5,000 users (tools/bench.py).

Quotas, "Understand CloudFormation quotas",
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html: 500 resources, 200
parameters and 200 outputs per template; a template body of 1 MB from S3 (51,200 bytes inline: CDK passes none
inline, every template is an S3 file asset, checked below); a nested stack creates, updates or deletes at most
2,500 resources per operation.
"""

from __future__ import annotations

import json
import math

import pytest

from stacks.studio_stack import StudioStack

USERS_PER_NESTED_STACK_WITH_TOKENS = StudioStack.USERS_PER_NESTED_STACK_WITH_TOKENS

MAX_RESOURCES = 500
MAX_PARAMETERS = 200
MAX_OUTPUTS = 200
MAX_TEMPLATE_BYTES = 1_000_000  # "1 MB"; the smaller reading
MAX_NESTED_STACK_OPERATION = 2_500
USERS = 5_000
GENERATED = "per_user_181"  # two full users stacks of 90 and one of 1


@pytest.fixture(scope="module")
def generated(synth):
    return synth(GENERATED)


def _stats(path) -> dict:
    template = json.loads(path.read_text())
    resources = template.get("Resources", {})
    return {
        "resources": len(resources),
        "parameters": len(template.get("Parameters", {})),
        "outputs": len(template.get("Outputs", {})),
        "bytes": path.stat().st_size,
        "users": sum(r["Type"] == "AWS::SageMaker::UserProfile" for r in resources.values()),
    }


def test_every_template_of_the_generated_config_is_within_the_quotas_and_reaches_cloudformation_from_s3(generated):
    paths = generated.all_template_paths()
    for path in paths:
        stats = _stats(path)
        assert stats["resources"] <= MAX_RESOURCES and stats["parameters"] <= MAX_PARAMETERS, (path.name, stats)
        assert stats["outputs"] <= MAX_OUTPUTS and stats["bytes"] <= MAX_TEMPLATE_BYTES, (path.name, stats)
    manifest = json.loads((generated.out_dir / "manifest.json").read_text())
    uploaded = {
        asset["source"]["path"]
        for assets in generated.out_dir.glob("*.assets.json")
        for asset in json.loads(assets.read_text())["files"].values()
    }
    assert {p.name for p in paths} <= uploaded
    stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    assert stacks and all(a["properties"]["stackTemplateAssetObjectUrl"].startswith("s3://") for a in stacks)


def test_5000_users_fit_by_the_arithmetic_of_the_generated_config(generated):
    per_stack = USERS_PER_NESTED_STACK_WITH_TOKENS
    users_stacks = {name: _stats(generated.out_dir / name) for name in generated.nested}
    assert sorted(s["users"] for s in users_stacks.values()) == [1, per_stack, per_stack]
    assert len(generated.config.users) == 181 and generated.config.shared_fsx is False
    full = next(s for s in users_stacks.values() if s["users"] == per_stack)
    one = next(s for s in users_stacks.values() if s["users"] == 1)

    # A users stack is a fixed part plus the same resources for every user: exactly linear.
    per_user = (full["resources"] - one["resources"]) / (per_stack - 1)
    fixed = one["resources"] - per_user
    assert per_user == 5  # profile, partition, token secret, its resource policy, execution role
    assert all(s["resources"] == fixed + per_user * s["users"] for s in users_stacks.values())
    bytes_per_user = (full["bytes"] - one["bytes"]) / (per_stack - 1)
    assert {s["parameters"] for s in users_stacks.values()} == {full["parameters"]}  # not per user
    assert {s["outputs"] for s in users_stacks.values()} == {0}

    # What each users stack adds to the parent: one AWS::CloudFormation::Stack, its bytes; nothing else grows.
    parent_path = generated.template_path("studio")
    parent, parent_stats = json.loads(parent_path.read_text()), _stats(parent_path)
    entries = [lid for lid, r in parent["Resources"].items() if r["Type"] == "AWS::CloudFormation::Stack"]
    assert len(entries) == len(users_stacks) == 3
    assert len(json.dumps(parent, indent=1)) == parent_stats["bytes"]  # CDK writes templates as json.dumps(indent=1)

    def without(lid: str) -> int:
        return len(
            json.dumps({**parent, "Resources": {k: v for k, v in parent["Resources"].items() if k != lid}}, indent=1)
        )

    # An entry's bytes as written, plus 16 for the longer ids of stacks 10 to 56 ("Users56" for "Users3").
    entry_bytes = max(parent_stats["bytes"] - without(lid) for lid in entries) + 16

    stacks = math.ceil(USERS / per_stack)
    at_5000 = {
        "users stacks": stacks,
        "resources per users stack": fixed + per_user * per_stack,
        "bytes per users stack": one["bytes"] + bytes_per_user * (per_stack - 1),
        "parent resources": parent_stats["resources"] + stacks - len(entries),
        "parent bytes": parent_stats["bytes"] + (stacks - len(entries)) * entry_bytes,
    }
    assert at_5000["users stacks"] == 56
    assert at_5000["resources per users stack"] == 452 <= min(MAX_RESOURCES, MAX_NESTED_STACK_OPERATION), at_5000
    assert at_5000["bytes per users stack"] <= MAX_TEMPLATE_BYTES, at_5000
    assert at_5000["parent resources"] <= MAX_RESOURCES, at_5000
    assert at_5000["parent bytes"] <= MAX_TEMPLATE_BYTES, at_5000
    assert parent_stats["parameters"] <= MAX_PARAMETERS and parent_stats["outputs"] <= MAX_OUTPUTS


def test_the_thousand_user_variant_has_the_users_stacks_the_arithmetic_predicts(synth):
    large = synth("large")
    per_stack = USERS_PER_NESTED_STACK_WITH_TOKENS
    assert len(large.nested) == math.ceil(len(large.config.users) / per_stack) == 12
    counts = sorted(_stats(large.out_dir / name)["users"] for name in large.nested)
    assert counts == [1000 - 11 * per_stack] + [per_stack] * 11
