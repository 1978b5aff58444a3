"""cli/replacement_guard.py's whole flow. Its reading of change sets (botocore's Stubber):
test_replacement_guard_reading.py; what it makes of templates: test_replacement_guard_templates.py.

The whole flow (first deployment, an allowed update, a refused one, a failed execution, the plan, diff): the guard
runs the pinned CDK CLI (node_modules/.bin/cdk, the real binary) and boto3 against the worker's moto server on
loopback (AWS_ENDPOINT_URL), with the three change-set behaviours moto 5.2.5 lacks patched in by the harness
(tests/support/moto_cloudformation.py: change sets by stack and name, ChangeSetNotFound, a failed execution that rolls
the stack back). The assemblies are small hand-written ones (S3 buckets, SQS queues, an IAM role: what moto's
CloudFormation creates), shaped like the platform's: a storage stack with the create-only snapshot, a Studio stack
with a parameter, stacks that depend on others and one that does not."""

from __future__ import annotations

import copy
import json
import subprocess

import boto3
import pytest

from support.moto_server import reset, session
from support.paths import ROOT
from cli import replacement_guard as guard


# --- the whole flow against moto, through the real CDK CLI -------------------------------------------------------


@pytest.fixture
def aws(moto_endpoint, monkeypatch):
    """The worker's moto server (tests/conftest.py; its CloudFormation has the change-set behaviours of
    support/moto_cloudformation.py), emptied; fake credentials and AWS_ENDPOINT_URL for the guard's boto3 clients
    and for the CDK CLI it starts."""
    reset(moto_endpoint)
    # The guard's Clients make a boto3 Session per run (per process in use); here each reads botocore's data through
    # the process's one loader instead of parsing endpoints.json and the models again (~80 ms of CPU a run).
    monkeypatch.setattr(boto3, "Session", session)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-west-2",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }.items():
        monkeypatch.setenv(name, value)
    return lambda service: boto3.client(service, region_name="us-west-2", endpoint_url=moto_endpoint)


def _snapshot():
    from platform_config import load_config
    from platform_config.day2 import snapshot

    return json.loads(json.dumps(snapshot(load_config(str(ROOT / "config" / "default.yaml")))))


def _queue(name):
    return {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": name}}


def platform(
    prefix,
    *,
    logs_bucket=True,
    shared_fsx="True",
    snapshot=None,
    storage_extra=None,
    studio_extra=None,
    extra_queue="extra-1",
):
    """Templates by stack: network <- storage <- studio, and `extra` beside them all (so two run at once)."""
    storage = {
        "Metadata": {guard.SNAPSHOT_METADATA_KEY: snapshot or _snapshot()},
        "Resources": {"DataBucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": f"{prefix}-data"}}},
    }
    if logs_bucket:
        storage["Resources"]["LogsBucket"] = {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": f"{prefix}-logs"}}
    storage["Resources"].update(storage_extra or {})
    studio = {
        "Parameters": {
            "SharedFSx": {"Type": "String", "Default": shared_fsx, "AllowedValues": ["True", "False"]},
            "BootstrapVersion": {
                "Type": "AWS::SSM::Parameter::Value<String>",
                "Default": "/cdk-bootstrap/hnb659fds/version",
            },
        },
        "Resources": {"Queue": _queue(f"{prefix}-studio"), **(studio_extra or {})},
    }
    del studio["Parameters"]["BootstrapVersion"]  # the CDK's own; moto resolves no SSM parameter types
    return {
        f"{prefix}-network": ({"Resources": {"Queue": _queue(f"{prefix}-network")}}, []),
        f"{prefix}-storage": (storage, [f"{prefix}-network"]),
        f"{prefix}-studio": (studio, [f"{prefix}-storage"]),
        f"{prefix}-extra": ({"Resources": {"Queue": _queue(f"{prefix}-{extra_queue}")}}, []),
    }


def assembly(directory, stacks):
    """A cloud assembly as `cdk synth` writes it (manifest.json and templates) for the CLI's `--app DIR`."""
    directory.mkdir()
    artifacts = {}
    for name, (template, depends_on) in stacks.items():
        (directory / f"{name}.template.json").write_text(json.dumps(template))
        artifacts[name] = {
            "type": "aws:cloudformation:stack",
            "environment": "aws://unknown-account/us-west-2",
            "properties": {"templateFile": f"{name}.template.json", "stackName": name},
            "dependencies": depends_on,
        }
    (directory / "manifest.json").write_text(json.dumps({"version": "52.0.0", "artifacts": artifacts}))
    return str(directory)


def deployed(cfn, stacks):
    """The stacks as a first deployment leaves them, made with CreateStack (the first deployment through the CLI is
    tested once, in the first test; the CLI costs seconds a run)."""
    for name, (template, _) in stacks.items():
        parameters = [
            {"ParameterKey": k, "ParameterValue": v["Default"]} for k, v in template.get("Parameters", {}).items()
        ]
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(template), Parameters=parameters)
    return stacks


def deny(cfn, stack):
    policy = json.loads(cfn.get_stack_policy(StackName=stack)["StackPolicyBody"])
    return sorted(r for s in policy["Statement"] if s["Effect"] == "Deny" for r in s["Resource"])


def resources(cfn, stack):
    return sorted(r["LogicalResourceId"] for r in cfn.describe_stack_resources(StackName=stack)["StackResources"])


def pending_change_sets(cfn, stacks):
    """Change sets left on the stacks: executed ones are gone (CloudFormation removes them), failed ones stay."""
    return [
        (s, c["ChangeSetName"])
        for s in stacks
        for c in cfn.list_change_sets(StackName=s)["Summaries"]
        if c["StackName"] == s and c.get("ExecutionStatus") != "EXECUTE_FAILED"
    ]


def test_first_deploy_then_refused_then_allowed_update_and_the_final_policy(aws, tmp_path, capsys):
    """First deployment through `cdk deploy --all --app DIR`; an update that deletes a bucket is refused after its
    change sets were prepared by the CLI, and they are deleted; with ALLOW it executes stack by stack and the
    parameter reaches the stack once (through the change set); afterwards the allowed bucket is protected again
    (issue 38, item 1: the final policy document read back with GetStackPolicy). moto's change sets carry no
    PhysicalResourceId."""
    cfn = aws("cloudformation")
    v1 = platform("g1")
    assert guard.run(["deploy", "--assembly", assembly(tmp_path / "v1", v1), "--poll", "0.2"]) == 0
    assert "first deployment" in capsys.readouterr().out
    assert {cfn.describe_stacks(StackName=s)["Stacks"][0]["StackStatus"] for s in v1} == {"CREATE_COMPLETE"}
    assert deny(cfn, "g1-storage") == ["LogicalResourceId/DataBucket", "LogicalResourceId/LogsBucket"]

    v2 = assembly(tmp_path / "v2", platform("g1", logs_bucket=False, shared_fsx="False", extra_queue="extra-2"))
    assert guard.run(["deploy", "--assembly", v2, "--poll", "0.2"]) == 1
    out = capsys.readouterr().out
    assert "refused: g1-storage: LogsBucket (AWS::S3::Bucket (no physical id)) would be deleted" in out
    assert "refusing to deploy: 1 stateful resource(s)" in out
    assert pending_change_sets(cfn, v1) == []  # prepared (the CLI printed them), then deleted
    assert "deleted change set g1-storage/hyperpod-replacement-guard-" in out
    assert resources(cfn, "g1-storage") == ["DataBucket", "LogsBucket"]
    assert cfn.describe_stacks(StackName="g1-studio")["Stacks"][0]["Parameters"] == [
        {"ParameterKey": "SharedFSx", "ParameterValue": "True"}
    ]

    assert (
        guard.run(["deploy", "--assembly", v2, "--allow", "LogsBucket", "--allow", "DataBucket", "--poll", "0.2"]) == 0
    )
    out = capsys.readouterr().out
    assert "allowed: g1-storage: LogsBucket (AWS::S3::Bucket (no physical id)) would be deleted" in out
    assert resources(cfn, "g1-storage") == ["DataBucket"]
    assert cfn.describe_stacks(StackName="g1-studio")["Stacks"][0]["Parameters"] == [
        {"ParameterKey": "SharedFSx", "ParameterValue": "False"}
    ]
    # graph order: storage starts after network is done, studio after storage
    executed = [line.split(":")[0] for line in out.splitlines() if ": executing change set" in line]
    assert executed.index("g1-network") < executed.index("g1-storage") < executed.index("g1-studio")
    assert set(executed[:2]) == {"g1-network", "g1-extra"}  # side by side: extra depends on nothing
    # DataBucket was allowed for this deployment only: the policy the guard leaves denies replacing it again
    assert deny(cfn, "g1-storage") == ["LogicalResourceId/DataBucket"]
    assert pending_change_sets(cfn, v1) == []


def test_a_never_in_place_edit_is_refused_before_any_change_set(aws, tmp_path, capsys):
    cfn = aws("cloudformation")
    deployed(cfn, platform("g2"))
    changed = copy.deepcopy(_snapshot())
    changed["lustre"]["throughput_mib_per_tib"] = 500
    assert (
        guard.run(
            ["deploy", "--assembly", assembly(tmp_path / "v2", platform("g2", snapshot=changed)), "--poll", "0.2"]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "storage.lustre.throughput_mib_per_tib: 250 -> 500" in out
    assert "+ " not in out  # no cdk command ran: nothing was prepared
    assert cfn.list_change_sets(StackName="g2-storage")["Summaries"] == []


def test_a_failed_execution_stops_deletes_the_rest_and_restores_the_policy(aws, tmp_path, capsys):
    """The storage stack's update fails (a bucket name another owner holds): the stack rolls back, its dependants'
    change sets are never executed and are deleted, and the allowed resource is protected again."""
    cfn = aws("cloudformation")
    deployed(cfn, platform("g3"))
    aws("s3").create_bucket(Bucket="g3-taken", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    clash = {"Clash": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "g3-taken"}}}
    v2 = assembly(tmp_path / "v2", platform("g3", shared_fsx="False", storage_extra=clash))
    capsys.readouterr()
    assert guard.run(["deploy", "--assembly", v2, "--allow", "DataBucket", "--poll", "0.2"]) == 1
    captured = capsys.readouterr()
    assert "deploy failed: g3-storage ended UPDATE_ROLLBACK_COMPLETE: Clash (AWS::S3::Bucket): " in captured.err
    assert "g3-studio: executing" not in captured.out
    assert "deleted change set g3-studio/hyperpod-replacement-guard-" in captured.out
    assert pending_change_sets(cfn, platform("g3")) == []
    assert cfn.describe_stacks(StackName="g3-studio")["Stacks"][0]["Parameters"][0]["ParameterValue"] == "True"
    # from the assembly's template: the rolled-back Clash too (a policy naming a resource the stack lacks is inert)
    assert deny(cfn, "g3-storage") == [
        "LogicalResourceId/Clash",
        "LogicalResourceId/DataBucket",
        "LogicalResourceId/LogsBucket",
    ]


def test_plan_prints_the_verdict_per_stack_and_leaves_nothing_behind(aws, tmp_path, capsys):
    cfn = aws("cloudformation")
    deployed(cfn, platform("g4"))
    role = {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": "sts:AssumeRole",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                        }
                    ]
                },
                "Policies": [
                    {
                        "PolicyName": "read",
                        "PolicyDocument": {
                            "Statement": [
                                {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::g4-data/*"}
                            ]
                        },
                    }
                ],
            },
        }
    }
    v2 = assembly(tmp_path / "v2", platform("g4", logs_bucket=False, shared_fsx="False", studio_extra=role))
    capsys.readouterr()
    assert guard.run(["plan", "--assembly", v2]) == 1  # deploy would refuse the deletion
    out = capsys.readouterr().out
    assert "g4-studio: 1 add" in out
    assert "  parameter SharedFSx: True -> False" in out
    assert "  IAM widens: Role: + s3:GetObject on arn:aws:s3:::g4-data/*" in out
    assert "refused: g4-storage: LogsBucket (AWS::S3::Bucket (no physical id)) would be deleted" in out
    assert pending_change_sets(cfn, platform("g4")) == []
    assert resources(cfn, "g4-studio") == ["Queue"] and resources(cfn, "g4-storage") == ["DataBucket", "LogsBucket"]


def test_diff_and_the_deploy_options_run_through_the_real_cli(aws, tmp_path, capsys):
    """`make diff` and `make deploy ARGS='STACK --no-rollback'` as the pinned CLI takes them."""
    cfn = aws("cloudformation")
    directory = assembly(tmp_path / "v1", platform("g5"))
    assert guard.run(["deploy", "g5-network", "--no-rollback", "--assembly", directory, "--poll", "0.2"]) == 0
    assert [s["StackName"] for s in cfn.describe_stacks()["Stacks"] if s["StackName"].startswith("g5-")] == [
        "g5-network"
    ]  # only the named stack (--exclusively)
    assert guard.run(["diff", "g5-network", "--assembly", directory]) == 0
    assert guard.run(["deploy", "nope", "--assembly", directory]) == 2
    assert "no stack nope in" in capsys.readouterr().err


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
    assert capsys.readouterr().err == (
        'deploy: Could not connect to the endpoint URL: "https://cloudformation.us-west-2.amazonaws.com/"\n'
    )


def test_the_one_synthesis_runs_through_the_real_cli(monkeypatch, tmp_path, capsys):
    """The synth command line make deploy/plan/diff build (`cdk synth -c config=... --output DIR`), through the pinned
    CLI and app.py; every later cdk command reads DIR (the flow tests above run those)."""
    monkeypatch.setenv("CONFIG", "config/default.yaml")
    # This test is about the command line, not the templates: the default config's templates are synthesized with
    # CDK's built-in CloudFormation validation on by the suite's shared synth("default") (tests/support/synthesis.py)
    # and linted in test_templates.py. Off here, this app.py process does not pay the validator's start (~9 s CPU).
    monkeypatch.setenv("CDK_VALIDATION", "false")
    out = tmp_path / "out"
    assert guard.run(["parameters", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "--parameters ml-cluster-studio:SharedFSx=True"
    assert {s.name for s in guard.assembly_stacks(out)} >= {
        "ml-cluster-network",
        "ml-cluster-storage",
        "ml-cluster-studio",
    }
