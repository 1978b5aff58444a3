"""cli/replacement_guard.py's reading of CloudFormation: change sets as DescribeChangeSet returns them (botocore's
model; moto does not compute replacements, so the CloudFormation client is a real one under botocore's Stubber, which
validates every request and response against that model), one built from a synthesized subnet move, and the
deployed snapshot read from the storage stack's template. What the guard makes of templates:
test_replacement_guard_templates.py; the whole flow through the real CDK CLI: test_replacement_guard.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import boto3
import pytest
from botocore.stub import Stubber

from support.day2_matrix import synth_change
from cli import replacement_guard as guard
from cli.template_replacements import compare


STACK = "ml-cluster-storage"


CHANGE_SET_ARN = "arn:aws:cloudformation:us-west-2:111122223333:changeSet/hyperpod-replacement-guard/1"


@pytest.fixture
def cfn(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("cloudformation", region_name="us-west-2")
    with Stubber(client) as stub:
        yield client, stub


def change_set(stack, changes, next_token=None):
    page = {
        "ChangeSetName": guard.CHANGE_SET,
        "ChangeSetId": CHANGE_SET_ARN,
        "StackName": stack,
        "StackId": f"arn:aws:cloudformation:us-west-2:111122223333:stack/{stack}/1",
        "CreationTime": datetime(2026, 11, 22, tzinfo=timezone.utc),
        "ExecutionStatus": "AVAILABLE",
        "Status": "CREATE_COMPLETE",
        "Changes": [{"Type": "Resource", "ResourceChange": c} for c in changes],
    }
    if next_token:
        page["NextToken"] = next_token
    return page


def resource_change(finding, physical_id):
    """A ResourceChange for a finding of the template analysis, shaped as DescribeChangeSet returns it."""
    change = {
        "Action": "Remove" if finding.action == "delete" else "Modify",
        "LogicalResourceId": finding.logical_id,
        "PhysicalResourceId": physical_id,
        "ResourceType": finding.resource_type,
    }
    if finding.action == "replace":
        prop = finding.reason.split(":")[0].split(" ")[0].split("/")[0]
        change["Replacement"] = "True"
        change["Details"] = [
            {
                "Target": {"Attribute": "Properties", "Name": prop, "RequiresRecreation": "Always"},
                "Evaluation": "Static",
                "ChangeSource": "DirectModification",
            }
        ]
    return change


# On the worker that runs test_day2.py's matrix, whose per-process cache (synth_change) already holds both syntheses.
@pytest.mark.xdist_group("day2")
def test_the_guard_stops_a_synthesized_replacement(cfn):
    """Moving the private subnet (a synthesized change) replaces the file system; its change set is refused,
    naming the resource and the property."""
    client, stub = cfn
    _, before = synth_change("default", None)
    _, after = synth_change("default", "private_subnet_cidr")
    fsx = [f for f in compare(before, after) if f.resource_type == "AWS::FSx::FileSystem"]
    assert fsx and fsx[0].action == "replace"
    stub.add_response(
        "describe_change_set",
        change_set(STACK, [resource_change(fsx[0], "fs-0123456789abcdef0")]),
        {"ChangeSetName": guard.CHANGE_SET, "StackName": STACK},
    )
    found = guard.violations(guard.describe_changes(client, STACK, guard.CHANGE_SET))
    stub.assert_no_pending_responses()
    assert [(v.logical_id, v.action) for v in found] == [(fsx[0].logical_id, "replace")]
    assert "SubnetIds" in str(found[0]) and "fs-0123456789abcdef0" in str(found[0])
    assert guard.blocking(found, set(), allow_all=False) == found
    assert guard.blocking(found, {fsx[0].logical_id}, allow_all=False) == []
    assert guard.blocking(found, set(), allow_all=True) == []


def test_pages_nested_change_sets_removals_and_conditional_replacements(cfn):
    client, stub = cfn
    nested_arn = "arn:aws:cloudformation:us-west-2:111122223333:changeSet/nested/2"
    nested_stack = "arn:aws:cloudformation:us-west-2:111122223333:stack/ml-cluster-studio-Users1-X/3"
    stub.add_response(
        "describe_change_set",
        change_set(
            "ml-cluster-studio",
            [
                {
                    "Action": "Modify",
                    "LogicalResourceId": "Domain",
                    "PhysicalResourceId": "d-abc",
                    "ResourceType": "AWS::SageMaker::Domain",
                    "Replacement": "Conditional",
                    "Details": [
                        {
                            "Target": {
                                "Attribute": "Properties",
                                "Name": "VpcId",
                                "RequiresRecreation": "Conditionally",
                            },
                            "Evaluation": "Dynamic",
                            "ChangeSource": "ResourceReference",
                            "CausingEntity": "Vpc",
                        }
                    ],
                },
                {
                    "Action": "Modify",
                    "LogicalResourceId": "ExecutionRole",
                    "PhysicalResourceId": "r",
                    "ResourceType": "AWS::IAM::Role",
                    "Replacement": "True",
                },  # stateless: not the guard's business
            ],
            next_token="page-2",
        ),
        {"ChangeSetName": guard.CHANGE_SET, "StackName": "ml-cluster-studio"},
    )
    stub.add_response(
        "describe_change_set",
        change_set(
            "ml-cluster-studio",
            [
                {
                    "Action": "Modify",
                    "LogicalResourceId": "Users1",
                    "PhysicalResourceId": nested_stack,
                    "ResourceType": "AWS::CloudFormation::Stack",
                    "Replacement": "False",
                    "ChangeSetId": nested_arn,
                },
            ],
        ),
        {"ChangeSetName": guard.CHANGE_SET, "StackName": "ml-cluster-studio", "NextToken": "page-2"},
    )
    stub.add_response(
        "describe_change_set",
        change_set(
            "ml-cluster-studio-Users1-X",
            [
                {
                    "Action": "Remove",
                    "LogicalResourceId": "Profilebob",
                    "PhysicalResourceId": "bob",
                    "ResourceType": "AWS::SageMaker::UserProfile",
                },
                {
                    "Action": "Modify",
                    "LogicalResourceId": "Profilealice",
                    "PhysicalResourceId": "alice",
                    "ResourceType": "AWS::SageMaker::UserProfile",
                    "Replacement": "False",
                },
            ],
        ),
        {"ChangeSetName": nested_arn},
    )
    found = guard.violations(guard.describe_changes(client, "ml-cluster-studio", guard.CHANGE_SET))
    stub.assert_no_pending_responses()
    assert [(v.stack, v.logical_id, v.action) for v in found] == [
        ("ml-cluster-studio", "Domain", "may replace"),
        ("ml-cluster-studio-Users1-X", "Profilebob", "delete"),
    ]
    assert "Properties VpcId (from Vpc) [conditionally requires recreation]" in str(found[0])


def test_no_change_set_means_no_changes(cfn):
    client, stub = cfn
    stub.add_client_error("describe_change_set", service_error_code="ChangeSetNotFound", http_status_code=404)
    assert guard.describe_changes(client, STACK, guard.CHANGE_SET) == []


def test_deployed_snapshot_is_read_from_the_storage_template(cfn, synth):
    client, stub = cfn
    storage = synth("default").templates["storage"]
    stub.add_response(
        "get_template", {"TemplateBody": json.dumps(storage)}, {"StackName": STACK, "TemplateStage": "Original"}
    )
    stub.add_client_error(
        "get_template",
        service_error_code="ValidationError",
        service_message=f"Stack with id {STACK} does not exist",
        http_status_code=400,
    )
    snapshot = guard.deployed_snapshot(client, STACK)
    assert snapshot["lustre"]["throughput_mib_per_tib"] == 250 and snapshot["network"]["az_ids"] == ["usw2-az2"]
    assert guard.deployed_snapshot(client, STACK) is None
