"""FsxAccessGroup synthesized once in a probe stack: custom resource, least-privilege IAM, cdk-nag clean."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from support import cfn_lint
from support.variants import cdk_json_context
from constructs.fsx_access_group import FsxAccessGroup
from support.iam import statements_of


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("fsx-access-group")
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context())
    stack = cdk.Stack(app, "Probe")  # environment-agnostic: ARNs and nag findings carry tokens
    studio_group = cdk.CfnResource(
        stack,
        "StudioGroup",
        type="AWS::EC2::SecurityGroup",
        properties={"GroupDescription": "Studio access", "VpcId": "vpc-0123456789abcdef0"},
    )
    access = FsxAccessGroup(
        stack,
        "LustreAccess",
        file_system_id="fs-0123456789abcdef0",
        security_group_id=studio_group.ref,
        vpc_id="vpc-0123456789abcdef0",
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on any unacknowledged cdk-nag finding
    template_path = out_dir / "Probe.template.json"
    return stack, access, Template.from_json(json.loads(template_path.read_text())), template_path


def _handler_statements(template: Template) -> list[dict]:
    return statements_of(template.to_json(), "LustreAccessOnEventServiceRole", prefix=True)


def test_custom_resource_carries_file_system_and_group(synthesized):
    _, _, template, _ = synthesized
    template.resource_count_is("Custom::FsxAccessGroup", 1)
    template.has_resource_properties(
        "Custom::FsxAccessGroup",
        {
            "ServiceToken": {"Fn::GetAtt": [Match.string_like_regexp("LustreAccessProvider"), "Arn"]},
            "FileSystemId": "fs-0123456789abcdef0",
            "SecurityGroupId": {"Ref": "StudioGroup"},
        },
    )


def test_handler_runtime_asset_and_log_retention(synthesized):
    *_, template, template_path = synthesized
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.14",
            "Handler": "access_group.on_event",
            "LoggingConfig": {"LogGroup": {"Ref": Match.string_like_regexp("LustreAccessOnEventLogs")}},
        },
    )
    assert len(template.find_resources("AWS::Logs::LogGroup", {"Properties": {"RetentionInDays": 90}})) == 2
    (asset,) = [p for p in template_path.parent.glob("asset.*") if (p / "access_group.py").exists()]
    assert sorted(p.name for p in asset.iterdir()) == [
        "access_group.py",
        "aws_clients.py",
    ]  # no __pycache__: stable asset hash


def test_modify_is_scoped_to_the_vpc_and_never_to_star(synthesized):
    _, _, template, _ = synthesized
    statements = _handler_statements(template)
    (modify,) = [s for s in statements if s["Action"] == "ec2:ModifyNetworkInterfaceAttribute"]
    resources = json.dumps(modify["Resource"])
    assert '"*"' not in resources
    assert ":network-interface/*" in resources and ":security-group/*" in resources
    vpc_arn = json.dumps(modify["Condition"]["ArnEquals"]["ec2:Vpc"])
    assert ":vpc/vpc-0123456789abcdef0" in vpc_arn
    (describe,) = [s for s in statements if s is not modify]
    assert sorted(describe["Action"]) == ["ec2:DescribeNetworkInterfaces", "fsx:DescribeFileSystems"]
    assert describe["Resource"] == "*"  # neither Describe action supports resource-level permissions


def test_handler_policy_outlives_the_custom_resource(synthesized):
    """Delete must run while the handler can still act: the resource depends on the handler and its policy."""
    _, access, template, _ = synthesized
    stack = cdk.Stack.of(access)
    function_id = stack.get_logical_id(access.on_event.node.default_child)
    policy_id = stack.get_logical_id(access.on_event.role.node.find_child("DefaultPolicy").node.default_child)
    assert policy_id in template.to_json()["Resources"][function_id]["DependsOn"]


def test_cdk_nag_report_is_clean(synthesized):
    stack, _, _, _ = synthesized
    report = AwsSolutionsChecks().validate_scope(stack)
    assert report.success, [v.rule_name for v in report.violations]


def test_cfn_lint_is_clean(synthesized):
    *_, template_path = synthesized
    # W3005 (a Lambda's DependsOn on its role) is aws-cdk-lib's; the platform silences it with an aspect.
    assert cfn_lint.lint([template_path], "--ignore-checks", "W3005") == {template_path: []}
