"""cdk-nag on every variant: each stack's report clean, an unacknowledged finding fails the synthesis, and every
acknowledgment names a rule and a reason of substance. cfn-lint on the templates: test_templates.py."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from support.variants import ALL_VARIANTS


def test_every_variant_passes_cdk_nag(synth):
    """Synthesis itself raises on an unacknowledged finding; this also checks the report each stack gets
    (AwsSolutionsChecks().validate_scope on every stack of the synthesized app, recorded where it was synthesized)."""
    for variant in ALL_VARIANTS:
        s = synth(variant)
        assert set(s.nag_reports) == {f"{s.config.name}-{role}" for role in s.templates}, variant
        for stack_name, report in s.nag_reports.items():
            assert report["success"], f"{variant}/{stack_name}: {report['violations']}"


def test_unacknowledged_finding_fails_synth(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Probe")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Resource::\*\]"):
        app.synth()


def test_acknowledgments_carry_specific_reasons(synth):
    """Every acknowledgment names a rule and a reason of substance, and lands in the cloud assembly's metadata
    (<stack>.metadata.json by construct path, nested stacks' in their parent's: as the constructs' metadata holds it,
    92 entries on the default variant at 5868658, read here without a walk over the live constructs)."""
    s = synth("default")
    metadata = sorted(s.out_dir.glob("*.metadata.json"))
    assert [p.name for p in metadata] == sorted(f"{s.config.name}-{role}.metadata.json" for role in s.templates)
    acknowledged = [
        (path, rule, reason)
        for file in metadata
        for path, entries in json.loads(file.read_text()).items()
        for entry in entries
        if entry["type"] == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule, reason in entry["data"].items()
        if "AwsSolutions" in rule  # aws-cdk-lib acknowledges some of its own CloudFormation checks; ours are nag's.
    ]
    assert acknowledged, "expected acknowledgments on the BucketDeployment handler and the execution role"
    for path, rule, reason in acknowledged:
        assert len(reason) > 60, f"{path}: {rule}: reason too thin: {reason!r}"
