"""Whole-template checks on every variant: cfn-lint clean, CloudFormation limits, cdk-nag clean and strict."""
from __future__ import annotations

import json
import subprocess
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from conftest import ALL_VARIANTS, ROOT

MAX_RESOURCES = 500
MAX_TEMPLATE_BYTES = 1_000_000


def test_cfn_lint_has_no_errors_or_warnings(synth):
    paths = [str(path) for v in ALL_VARIANTS for path in synth(v).all_template_paths()]
    assert len(paths) >= 25
    cfn_lint = str(ROOT / ".venv" / "bin" / "cfn-lint") if (ROOT / ".venv" / "bin" / "cfn-lint").exists() else "cfn-lint"
    result = subprocess.run([cfn_lint, "--format", "parseable", *paths],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_templates_stay_within_cloudformation_limits(synth, variant):
    s = synth(variant)
    for path in s.all_template_paths():
        resources = len(json.loads(path.read_text())["Resources"])
        assert resources < MAX_RESOURCES, f"{variant}/{path.name}: {resources} resources"
        assert path.stat().st_size < MAX_TEMPLATE_BYTES, f"{variant}/{path.name}: {path.stat().st_size} bytes"


def test_large_variant_really_is_large(synth):
    s = synth("large")
    (cluster,) = [r for r in s.templates["cluster"]["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert len(cluster["Properties"]["InstanceGroups"]) == 20
    assert len(s.config.users) == 1000 and s.config.shared_fsx is False


def test_every_variant_passes_cdk_nag(synth):
    """Synthesis itself raises on an unacknowledged finding; this also checks the report each stack gets."""
    for variant in ALL_VARIANTS:
        for stack in synth(variant).platform.stacks:
            report = AwsSolutionsChecks().validate_scope(stack)
            assert report.success, f"{variant}/{stack.stack_name}: {[v.rule_name for v in report.violations]}"


def test_unacknowledged_finding_fails_synth(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Probe")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Resource::\*\]"):
        app.synth()


def test_acknowledgments_carry_specific_reasons(synth):
    """Every acknowledgment names a rule and a reason of substance, and lands in the template metadata."""
    reasons = {}
    for stack in synth("default").platform.stacks:
        for construct in stack.node.find_all():
            for entry in construct.node.metadata:
                if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                    # aws-cdk-lib acknowledges some of its own CloudFormation checks; ours are the nag ones.
                    reasons.update({k: v for k, v in entry.data.items() if "AwsSolutions" in k})
    assert reasons, "expected acknowledgments on the BucketDeployment handler and the execution role"
    for rule, reason in reasons.items():
        assert len(reason) > 60, f"{rule}: reason too thin: {reason!r}"


def test_library_and_local_constructs_folder_coexist():
    code = ("import aws_cdk, constructs; from constructs.efa_security_group import EfaSecurityGroup; "
            "from constructs import Construct; print(Construct.__module__)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert not (ROOT / "constructs" / "__init__.py").exists()


def test_synth_makes_no_aws_lookups(synth):
    for variant in ALL_VARIANTS:
        manifest = json.loads((synth(variant).out_dir / "manifest.json").read_text())
        assert "missing" not in manifest, f"{variant} asked for context lookups: {manifest.get('missing')}"
