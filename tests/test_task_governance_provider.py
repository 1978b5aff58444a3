"""TaskGovernanceProvider synthesized once in a probe stack with one Custom::ComputeQuota: handlers, waiter,
least-privilege IAM, cdk-nag clean."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from support.variants import cdk_json_context
from constructs.task_governance_provider import TaskGovernanceProvider
from support.iam import by_sid, statements_of

CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef012345"
QUOTA_PROPERTIES = {
    "Name": "team-a",
    "ClusterArn": CLUSTER_ARN,
    "ComputeQuotaConfig": {
        "ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "Count": 2}],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50},
    },
    "ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": 10},
}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("task-governance")
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context(stage_assets=False))
    stack = cdk.Stack(app, "Probe")  # environment-agnostic: ARNs and nag findings carry tokens
    provider = TaskGovernanceProvider(stack, "Governance", cluster_arn=CLUSTER_ARN)
    cdk.CfnResource(
        stack,
        "TeamAQuota",
        type="Custom::ComputeQuota",
        properties={"ServiceToken": provider.service_token, **QUOTA_PROPERTIES},
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on any unacknowledged cdk-nag finding
    return stack, Template.from_json(json.loads((out_dir / "Probe.template.json").read_text()))


def _statements_by_sid(template: Template, role: str) -> dict[str, dict]:
    return by_sid(statements_of(template.to_json(), role, prefix=True))


def _arn(resource: str) -> dict:
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":sagemaker:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":{resource}/*",
            ],
        ]
    }


GOVERNANCE = [_arn("cluster-scheduler-config"), _arn("compute-quota")]


def test_quota_keeps_the_native_property_shape_and_uses_the_provider(synthesized):
    _, template = synthesized
    template.has_resource_properties(
        "Custom::ComputeQuota",
        {
            "ServiceToken": {"Fn::GetAtt": [Match.string_like_regexp("GovernanceProviderframeworkonEvent"), "Arn"]},
            **QUOTA_PROPERTIES,
        },
    )


def test_handlers_runtime_and_log_retention(synthesized):
    _, template = synthesized
    for handler in ("governance.on_event", "governance.is_complete"):
        template.has_resource_properties("AWS::Lambda::Function", {"Runtime": "python3.14", "Handler": handler})
    assert len(template.find_resources("AWS::Logs::LogGroup", {"Properties": {"RetentionInDays": 90}})) == 3


def test_waiter_polls_every_20_seconds_for_30_minutes(synthesized):
    _, template = synthesized
    (machine,) = template.find_resources("AWS::StepFunctions::StateMachine").values()
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    assert '\\"IntervalSeconds\\":20' in definition and '\\"MaxAttempts\\":90' in definition


def test_on_event_is_scoped_to_the_cluster_and_governance_resources(synthesized):
    _, template = synthesized
    statements = _statements_by_sid(template, "GovernanceOnEventServiceRole")
    assert set(statements) == {"CreateOnCluster", "ManageGovernance", "FindEarlierAttempts"}
    create = statements["CreateOnCluster"]
    assert sorted(create["Action"]) == ["sagemaker:CreateClusterSchedulerConfig", "sagemaker:CreateComputeQuota"]
    assert create["Resource"] == [CLUSTER_ARN, *GOVERNANCE]
    manage = statements["ManageGovernance"]
    assert sorted(manage["Action"]) == sorted(
        [
            f"sagemaker:{verb}{noun}"
            for verb in ("Describe", "Update", "Delete")
            for noun in ("ClusterSchedulerConfig", "ComputeQuota")
        ]
        + ["sagemaker:AddTags", "sagemaker:DeleteTags", "sagemaker:ListTags"]
    )
    assert manage["Resource"] == GOVERNANCE
    find = statements["FindEarlierAttempts"]
    assert sorted(find["Action"]) == ["sagemaker:ListClusterSchedulerConfigs", "sagemaker:ListComputeQuotas"]
    assert find["Resource"] == "*"  # the only wildcard: List supports no resource-level permissions


def test_is_complete_only_describes_and_deletes(synthesized):
    _, template = synthesized
    (watch,) = _statements_by_sid(template, "GovernanceIsCompleteServiceRole").values()
    assert sorted(watch["Action"]) == [
        "sagemaker:DeleteClusterSchedulerConfig",
        "sagemaker:DeleteComputeQuota",
        "sagemaker:DescribeClusterSchedulerConfig",
        "sagemaker:DescribeComputeQuota",
    ]
    assert watch["Resource"] == GOVERNANCE


def test_cdk_nag_report_is_clean(synthesized):
    stack, _ = synthesized
    report = AwsSolutionsChecks().validate_scope(stack)
    assert report.success, [v.rule_name for v in report.violations]
