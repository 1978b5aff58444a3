"""cli/replacement_guard.py: change sets as CloudFormation's DescribeChangeSet returns them (botocore's model;
moto does not compute replacements, so the CloudFormation client is a real one under botocore's Stubber, which
validates every request and response against that model)."""
from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone

import boto3
import pytest
from botocore.stub import Stubber

from test_day2 import _synth
from cli import replacement_guard as guard
from cli.template_replacements import compare

STACK = "ml-cluster-storage"
CHANGE_SET_ARN = "arn:aws:cloudformation:us-west-2:111122223333:changeSet/hyperpod-replacement-guard/1"


@pytest.fixture
def cfn(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("cloudformation", region_name="us-west-2")
    with Stubber(client) as stub:
        yield client, stub


def change_set(stack, changes, next_token=None):
    page = {"ChangeSetName": guard.CHANGE_SET, "ChangeSetId": CHANGE_SET_ARN, "StackName": stack,
            "StackId": f"arn:aws:cloudformation:us-west-2:111122223333:stack/{stack}/1",
            "CreationTime": datetime(2026, 11, 22, tzinfo=timezone.utc), "ExecutionStatus": "AVAILABLE",
            "Status": "CREATE_COMPLETE", "Changes": [{"Type": "Resource", "ResourceChange": c} for c in changes]}
    if next_token:
        page["NextToken"] = next_token
    return page


def resource_change(finding, physical_id):
    """A ResourceChange for a finding of the template analysis, shaped as DescribeChangeSet returns it."""
    change = {"Action": "Remove" if finding.action == "delete" else "Modify",
              "LogicalResourceId": finding.logical_id, "PhysicalResourceId": physical_id,
              "ResourceType": finding.resource_type}
    if finding.action == "replace":
        prop = finding.reason.split(":")[0].split(" ")[0].split("/")[0]
        change["Replacement"] = "True"
        change["Details"] = [{"Target": {"Attribute": "Properties", "Name": prop, "RequiresRecreation": "Always"},
                              "Evaluation": "Static", "ChangeSource": "DirectModification"}]
    return change


def test_the_guard_stops_a_synthesized_replacement(cfn):
    """Moving the private subnet (a synthesized change) replaces the file system; its change set is refused,
    naming the resource and the property."""
    client, stub = cfn
    _, before = _synth("default", None)
    _, after = _synth("default", "private_subnet_cidr")
    fsx = [f for f in compare(before, after) if f.resource_type == "AWS::FSx::FileSystem"]
    assert fsx and fsx[0].action == "replace"
    stub.add_response("describe_change_set", change_set(STACK, [resource_change(fsx[0], "fs-0123456789abcdef0")]),
                      {"ChangeSetName": guard.CHANGE_SET, "StackName": STACK})
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
    stub.add_response("describe_change_set", change_set("ml-cluster-studio", [
        {"Action": "Modify", "LogicalResourceId": "Domain", "PhysicalResourceId": "d-abc", "ResourceType":
         "AWS::SageMaker::Domain", "Replacement": "Conditional", "Details": [
             {"Target": {"Attribute": "Properties", "Name": "VpcId", "RequiresRecreation": "Conditionally"},
              "Evaluation": "Dynamic", "ChangeSource": "ResourceReference", "CausingEntity": "Vpc"}]},
        {"Action": "Modify", "LogicalResourceId": "ExecutionRole", "PhysicalResourceId": "r", "ResourceType":
         "AWS::IAM::Role", "Replacement": "True"},  # stateless: not the guard's business
    ], next_token="page-2"), {"ChangeSetName": guard.CHANGE_SET, "StackName": "ml-cluster-studio"})
    stub.add_response("describe_change_set", change_set("ml-cluster-studio", [
        {"Action": "Modify", "LogicalResourceId": "Users1", "PhysicalResourceId": nested_stack,
         "ResourceType": "AWS::CloudFormation::Stack", "Replacement": "False", "ChangeSetId": nested_arn},
    ]), {"ChangeSetName": guard.CHANGE_SET, "StackName": "ml-cluster-studio", "NextToken": "page-2"})
    stub.add_response("describe_change_set", change_set("ml-cluster-studio-Users1-X", [
        {"Action": "Remove", "LogicalResourceId": "Profilebob", "PhysicalResourceId": "bob",
         "ResourceType": "AWS::SageMaker::UserProfile"},
        {"Action": "Modify", "LogicalResourceId": "Profilealice", "PhysicalResourceId": "alice",
         "ResourceType": "AWS::SageMaker::UserProfile", "Replacement": "False"},
    ]), {"ChangeSetName": nested_arn})
    found = guard.violations(guard.describe_changes(client, "ml-cluster-studio", guard.CHANGE_SET))
    stub.assert_no_pending_responses()
    assert [(v.stack, v.logical_id, v.action) for v in found] == [
        ("ml-cluster-studio", "Domain", "may replace"), ("ml-cluster-studio-Users1-X", "Profilebob", "delete")]
    assert "Properties VpcId (from Vpc) [conditionally requires recreation]" in str(found[0])


def test_no_change_set_means_no_changes(cfn):
    client, stub = cfn
    stub.add_client_error("describe_change_set", service_error_code="ChangeSetNotFound", http_status_code=404)
    assert guard.describe_changes(client, STACK, guard.CHANGE_SET) == []


def test_deployed_snapshot_is_read_from_the_storage_template(cfn):
    client, stub = cfn
    _, templates = _synth("default", None)
    storage = templates["ml-cluster-storage.template.json"]
    stub.add_response("get_template", {"TemplateBody": json.dumps(storage)},
                      {"StackName": STACK, "TemplateStage": "Original"})
    stub.add_client_error("get_template", service_error_code="ValidationError",
                          service_message=f"Stack with id {STACK} does not exist", http_status_code=400)
    snapshot = guard.deployed_snapshot(client, STACK)
    assert snapshot["lustre"]["throughput_mib_per_tib"] == 250 and snapshot["network"]["az_ids"] == ["usw2-az2"]
    assert guard.deployed_snapshot(client, STACK) is None


def test_stack_policy_denies_replacing_and_deleting_stateful_resources():
    _, templates = _synth("default", None)
    storage = templates["ml-cluster-storage.template.json"]
    ids = guard.stateful_ids(storage)
    types = {storage["Resources"][i]["Type"] for i in ids}
    assert {"AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation", "AWS::S3::Bucket", "AWS::KMS::Key"} <= types
    allow, deny = guard.stack_policy(ids)["Statement"]
    assert allow == {"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}
    assert deny["Effect"] == "Deny" and deny["Action"] == ["Update:Replace", "Update:Delete"]
    assert deny["Resource"] == [f"LogicalResourceId/{i}" for i in sorted(ids)]


def test_every_template_parameter_is_passed_with_the_config_value(tmp_path):
    _, templates = _synth("per_user", None)
    stacks = [guard.Stack(name=f.removesuffix(".template.json"), region="us-west-2", template=t,
                          template_file=tmp_path / f) for f, t in templates.items() if ".nested." not in f]
    assert guard.parameter_arguments(stacks) == ["--parameters", "course-cluster-studio:SharedFSx=False"]


def test_deploy_refuses_a_never_in_place_edit_before_any_change_set(monkeypatch, cfn, capsys, tmp_path):
    """The whole deploy flow with the CLI recorded: the day-2 rules stop it; nothing is prepared or executed."""
    client, stub = cfn
    config, before = _synth("default", None)
    _, after = _synth("default", "raise_fsx_throughput")
    out = _write_assembly(after, tmp_path)
    commands = []
    monkeypatch.setattr(guard, "_cdk", lambda *args: commands.append(args))
    monkeypatch.setattr(guard, "_client", lambda region: client)
    stub.add_response("get_template", {"TemplateBody": json.dumps(before["ml-cluster-storage.template.json"])},
                      {"StackName": STACK, "TemplateStage": "Original"})
    assert guard.run(["deploy", "--out", str(out)]) == 1
    assert [c[0] for c in commands] == ["synth"]
    assert "storage.lustre.throughput_mib_per_tib: 250 -> 500" in capsys.readouterr().out


def test_deploy_stops_on_a_replacement_and_executes_only_when_allowed(monkeypatch, cfn, capsys, tmp_path):
    client, stub = cfn
    _, templates = _synth("default", None)
    out = _write_assembly(templates, tmp_path)
    commands = []
    monkeypatch.setattr(guard, "_cdk", lambda *args: commands.append(args))
    monkeypatch.setattr(guard, "_client", lambda region: client)
    bucket = {"Action": "Modify", "LogicalResourceId": "DataBucketE3889A50", "PhysicalResourceId": "b",
              "ResourceType": "AWS::S3::Bucket", "Replacement": "True", "Details": [
                  {"Target": {"Attribute": "Properties", "Name": "BucketName", "RequiresRecreation": "Always"},
                   "Evaluation": "Static", "ChangeSource": "DirectModification"}]}

    def expect_deploy(allowed):
        stub.add_response("get_template", {"TemplateBody": json.dumps(templates["ml-cluster-storage.template.json"])})
        for name in [s.name for s in guard.assembly_stacks(out)]:
            stub.add_response("describe_change_set", change_set(name, [bucket] if name == STACK else []),
                              {"ChangeSetName": guard.CHANGE_SET, "StackName": name})
        if allowed:  # relaxed for the allowed bucket during the deployment, then restored, on every stack
            for _ in range(2 * len(guard.assembly_stacks(out))):
                stub.add_response("set_stack_policy", {})

    expect_deploy(allowed=False)
    assert guard.run(["deploy", "--out", str(out)]) == 1
    assert [c[0] for c in commands] == ["synth", "deploy"] and "--method=prepare-change-set" in commands[1]
    # no dependencies in this hand-written manifest: every stack may deploy at once
    assert commands[1][commands[1].index("--concurrency") + 1] == str(len(guard.assembly_stacks(out)))
    assert "DataBucketE3889A50 (AWS::S3::Bucket b) would be replaced because of Properties BucketName" in \
        capsys.readouterr().out
    stub.assert_no_pending_responses()  # and no stack policy was touched: the stub holds none
    commands.clear()
    expect_deploy(allowed=True)
    assert guard.run(["deploy", "--out", str(out), "--allow", "DataBucketE3889A50"]) == 0
    assert [c[0] for c in commands] == ["synth", "deploy", "deploy"]
    assert "--method=execute-change-set" in commands[2]
    stub.assert_no_pending_responses()


def _write_assembly(templates, out):
    """A cloud assembly directory holding `templates` and a manifest naming the four stacks."""
    artifacts = {}
    for file, template in templates.items():
        (out / file).write_text(json.dumps(template))
        if ".nested." not in file:
            name = file.removesuffix(".template.json")
            artifacts[name] = {"type": "aws:cloudformation:stack", "environment": "aws://unknown-account/us-west-2",
                               "properties": {"templateFile": file, "stackName": name}}
    (out / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))
    return out


def test_a_failed_cdk_step_is_one_line_with_its_exit_status(monkeypatch, capsys):
    """main() around run(): cdk's own output is above; the guard adds one line, not a CalledProcessError traceback."""
    def failing_cdk(*args):
        raise subprocess.CalledProcessError(3, ["node_modules/.bin/cdk", *args])
    monkeypatch.setattr(guard, "missing_credentials", lambda profile=None: None)
    monkeypatch.setattr(guard, "_cdk", failing_cdk)
    assert guard.main(["diff"]) == 3
    assert capsys.readouterr().err == "diff: `cdk synth` failed with exit status 3 (its output is above)\n"


def test_a_failed_aws_call_is_one_line(monkeypatch, capsys):
    from botocore.exceptions import EndpointConnectionError

    def unreachable(argv):
        raise EndpointConnectionError(endpoint_url="https://cloudformation.us-west-2.amazonaws.com/")
    monkeypatch.setattr(guard, "missing_credentials", lambda profile=None: None)
    monkeypatch.setattr(guard, "run", unreachable)
    assert guard.main(["deploy"]) == 2
    assert capsys.readouterr().err == ('deploy: Could not connect to the endpoint URL: '
                                       '"https://cloudformation.us-west-2.amazonaws.com/"\n')
