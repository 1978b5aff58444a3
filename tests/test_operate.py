"""cli/status.py, cli/logs.py, cli/diagnose.py, cli/watch.py and `make help`.

CloudFormation, CloudWatch Logs and FSx are the worker's moto server (tests/support/moto_cloudformation.py, which
also fails a stack the way CloudFormation does). SageMaker's cluster and nodes are botocore's Stubber on a real client (every request and
response validated against botocore's model): moto implements DescribeCluster and ListClusterNodes but every node it
makes is Running and every cluster InService, so it cannot stand for Pending or Failed nodes or a FailureMessage.
The lifecycle log a node writes is produced by running lifecycle/hyperpod/lib/common.sh's `step` in a failing bash
script, not typed here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from support.paths import ROOT
from support.moto_server import reset
from cli import diagnose, logs, status, watch

NAME = "ops-cluster"
REGION = "us-west-2"
ARN = f"arn:aws:sagemaker:{REGION}:123456789012:cluster/abc123def456"
LOG_GROUP = f"/aws/sagemaker/Clusters/{NAME}/abc123def456"
T0 = datetime(2026, 11, 28, 10, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def endpoint(moto_endpoint):
    """The worker's moto server (tests/conftest.py; its CloudFormation fails a stack's change set as
    support/moto_cloudformation.py says), emptied for this module: the module starts from an empty account, as it
    did with a server of its own, without starting one (~2.5 s of CPU with moto's CloudFormation)."""
    reset(moto_endpoint)
    return moto_endpoint


class Session:
    """What the commands take as `session`: real boto3 clients, SageMaker's under a Stubber, the rest at moto."""

    def __init__(self, url, sagemaker):
        self.url, self.sagemaker = url, sagemaker

    def client(self, service, region_name=None):
        if service == "sagemaker":
            return self.sagemaker
        return boto3.client(
            service,
            region_name=region_name,
            endpoint_url=self.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


def node(group, instance_id, state, message=None, minutes=0):
    status = {"Status": state}
    if message:
        status["Message"] = message
    return {
        "InstanceGroupName": group,
        "InstanceId": instance_id,
        "InstanceType": "ml.g5.8xlarge",
        "LaunchTime": T0 + timedelta(minutes=minutes),
        "InstanceStatus": status,
    }


def cluster(status_="Creating", failure=None, groups=(("controller-machine", 1), ("worker-group-1", 4))):
    described = {
        "ClusterArn": ARN,
        "ClusterName": NAME,
        "ClusterStatus": status_,
        "CreationTime": T0,
        "InstanceGroups": [
            {
                "InstanceGroupName": g,
                "TargetCount": n,
                "CurrentCount": 0,
                "InstanceType": "ml.g5.8xlarge",
                "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-x/lc", "OnCreate": "x.sh"},
                "ExecutionRole": "arn:aws:iam::123456789012:role/r",
            }
            for g, n in groups
        ],
        "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
    }
    if failure:
        described["FailureMessage"] = failure
    return described


def stubbed_sagemaker(*rounds):
    """A SageMaker client answering DescribeCluster then ListClusterNodes once per (cluster, nodes) round."""
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    stub = Stubber(client)
    for described, nodes in rounds:
        stub.add_response("describe_cluster", described, {"ClusterName": NAME})
        stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes}, {"ClusterName": NAME})
    stub.activate()
    return client, stub


def failing_node_log(tmp_path):
    """What a node's on_init_complete.sh writes when its mount_fsx step fails: the real `step` of lib/common.sh."""
    script = tmp_path / "on_init_complete.sh"
    script.write_text(f"""#!/usr/bin/env bash
set -euo pipefail
source {ROOT}/lifecycle/hyperpod/lib/common.sh
start_log on_init_complete
step validate_parameters true
step mount_fsx bash -c 'echo "mounting fs-0123456789abcdef0 at /fsx"; \
echo "mount.lustre: mount 10.0.64.5@tcp:/abcdefgh at /fsx failed: Connection timed out" >&2; exit 5'
step create_users true
""")
    # LOG_FLUSH_SECONDS: a failed node waits 60 s for CloudWatch before it exits (lib/common.sh); not here.
    env = dict(os.environ, LOG_DIR=str(tmp_path / "log"), LOG_FLUSH_SECONDS="0")
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 5, result.stderr
    return (tmp_path / "log" / "on_init_complete.log").read_text()


def put_log(url, stream, text):
    client = Session(url, None).client("logs", REGION)
    try:
        client.create_log_group(logGroupName=LOG_GROUP)
    except client.exceptions.ResourceAlreadyExistsException:
        pass
    client.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    client.put_log_events(
        logGroupName=LOG_GROUP,
        logStreamName=stream,
        logEvents=[{"timestamp": now + i, "message": line} for i, line in enumerate(text.splitlines())],
    )


def failed_stack(url, name):
    """A stack whose creation CloudFormation (moto, patched) rolled back: a bucket whose name is taken."""
    s3 = Session(url, None).client("s3", REGION)
    s3.create_bucket(Bucket=f"{name}-taken", CreateBucketConfiguration={"LocationConstraint": REGION})
    cfn = Session(url, None).client("cloudformation", REGION)
    change_set = cfn.create_change_set(
        StackName=name,
        ChangeSetName="c",
        ChangeSetType="CREATE",
        TemplateBody=json.dumps(
            {"Resources": {"Data": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": f"{name}-taken"}}}}
        ),
    )
    cfn.execute_change_set(ChangeSetName=change_set["Id"])
    assert cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"] == "ROLLBACK_COMPLETE"


def test_a_failed_lifecycle_step_is_named_with_script_step_exit_code_and_last_lines(endpoint, tmp_path, capsys):
    put_log(endpoint, "LifecycleConfig/worker-group-1/i-0aaaaaaaaaaaaaaa1", failing_node_log(tmp_path))
    failed_stack(endpoint, f"{NAME}-cluster")
    nodes = [
        node("controller-machine", "i-0ccccccccccccccc1", "Running"),
        node("worker-group-1", "i-0aaaaaaaaaaaaaaa1", "Failure", "Lifecycle scripts did not run successfully"),
    ]
    client, stub = stubbed_sagemaker((cluster("Failed", "Instance group worker-group-1 failed"), nodes))
    assert diagnose.main(["--config", str(config(tmp_path))], session=Session(endpoint, client)) == 1
    stub.assert_no_pending_responses()
    out = capsys.readouterr().out
    assert "A lifecycle script failed on a node [lifecycle-step]" in out
    assert (
        "where: node worker-group-1:0 i-0aaaaaaaaaaaaaaa1, log LifecycleConfig/worker-group-1/i-0aaaaaaaaaaaaaaa1"
        in out
    )
    assert (
        "what: script on_init_complete, step mount_fsx, exit code 5; last lines: mounting fs-0123456789abcdef0 "
        "at /fsx | mount.lustre: mount 10.0.64.5@tcp:/abcdefgh at /fsx failed: Connection timed out\n"
    ) in out
    assert "make logs NODE=<group>:<index>" in out
    # the stack's rollback is explained by the node: no separate rollback-cause finding
    assert "[rollback-cause]" not in out


def test_the_rollback_cause_is_the_first_failure_when_nothing_else_explains_it(endpoint, tmp_path, capsys):
    failed_stack(endpoint, f"{NAME}2-storage")
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(client) as stub:
        stub.add_client_error("describe_cluster", "ResourceNotFound", "Cluster not found", http_status_code=400)
        assert diagnose.main(["--config", str(config(tmp_path, NAME + "2"))], session=Session(endpoint, client)) == 1
    out = capsys.readouterr().out
    assert "A stack rolled back: the first resource that failed [rollback-cause]" in out
    assert f"where: CloudFormation {NAME}2-storage: Data (AWS::S3::Bucket) CREATE_FAILED" in out


@pytest.mark.parametrize(
    "key, message, detail",
    [
        (
            "capacity",
            'CREATE_FAILED: Resource handler returned message: "We currently do not have sufficient capacity '
            "for ml.p5.48xlarge in the Availability Zone usw2-az2 (Service: SageMaker, Status Code: 400, Request ID: "
            '0f1)" (HandlerErrorCode: GeneralServiceException)',
            "sufficient capacity for ml.p5.48xlarge",
        ),
        (
            "capacity",
            "InsufficientInstanceCapacity: ml.g5.48xlarge is not supported in your requested Availability "
            "Zone (usw2-az4)",
            "usw2-az4",
        ),
        (
            "quota",
            "CREATE_FAILED: Resource handler returned message: \"The account-level service limit 'ml.p5.48xlarge "
            "for cluster usage' is 0 Instances, with current utilization of 0 Instances and a request delta of 2 Instances. "
            '(Service: SageMaker, Status Code: 400) (ErrorCode: ResourceLimitExceeded)"',
            "ml.p5.48xlarge for cluster usage",
        ),
        (
            "iam-denied",
            'CREATE_FAILED: Resource handler returned message: "User: arn:aws:sts::123456789012:assumed-role/'
            "cdk-hnb659fds-cfn-exec-role-123456789012-us-west-2/AWSCloudFormation is not authorized to perform: "
            "iam:CreateServiceLinkedRole on resource: arn:aws:iam::123456789012:role/aws-service-role/sagemaker."
            "amazonaws.com/AWSServiceRoleForAmazonSageMaker because no identity-based policy allows the "
            'iam:CreateServiceLinkedRole action (Service: Iam, Status Code: 403)"',
            "arn:aws:sts::123456789012:assumed-role/cdk-hnb659fds-cfn-exec-role-123456789012-us-west-2/AWSCloudFormation "
            "may not iam:CreateServiceLinkedRole",
        ),
        (
            "subnet-addresses",
            "Instance group worker-group-1: InsufficientFreeAddressesInSubnet: the subnet "
            "subnet-0123456789abcdef0 has 3 free IP addresses, 10 are needed",
            "subnet-0123456789abcdef0",
        ),
        (
            "fsx-network",
            "CREATE_FAILED: The security group sg-0123456789abcdef0 does not permit Lustre LNET network "
            "traffic on port 988",
            "port 988",
        ),
    ],
)
def test_each_class_of_the_catalogue_is_named_with_its_fix(key, message, detail):
    findings = diagnose.classify([diagnose.Evidence("somewhere", message)])
    assert [f.failure.key for f in findings] == [key]
    assert detail in findings[0].detail
    assert findings[0].failure.fix in str(findings[0])


def test_the_deploy_guide_holds_the_catalogue():
    """docs/deploy.md "My first deploy failed" is `python -m cli.diagnose --catalogue`, verbatim."""
    assert diagnose.catalogue_markdown() in (ROOT / "docs" / "deploy.md").read_text()


def test_the_bundle_is_redacted(tmp_path):
    planted = (
        "AKIAABCDEFGHIJKLMNOP",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "hunter2-password",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    )
    evidence = [
        diagnose.Evidence(
            "node",
            f"aws_access_key_id={planted[0]} secret {planted[1]}\n"
            f"db_password: {planted[2]}\n-----BEGIN PRIVATE KEY-----\n{planted[3]}\n"
            "-----END PRIVATE KEY-----\nmount failed on port 988",
        )
    ]
    path = diagnose.bundle(tmp_path / "b.tar.gz", ["stacks:"], evidence, diagnose.classify(evidence))
    with tarfile.open(path) as tar:
        content = "".join(tar.extractfile(m).read().decode() for m in tar.getmembers())
    assert "port 988" in content and "[REDACTED]" in content
    for secret in planted:
        assert secret not in content
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_status_shows_stacks_cluster_nodes_and_fsx(endpoint, tmp_path, capsys):
    failed_stack(endpoint, f"{NAME}3-cluster")
    fsx = Session(endpoint, None).client("fsx", REGION)
    fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=["subnet-0123456789abcdef0"],
        Tags=[{"Key": "hyperpod-platform", "Value": f"{NAME}3"}],
    )
    nodes = [
        node("worker-group-1", "i-0b1", "Running"),
        node("worker-group-1", "i-0b2", "Pending", minutes=1),
        node("worker-group-1", "i-0b3", "Failure", "InsufficientInstanceCapacity", minutes=2),
    ]
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(client) as stub:
        described = cluster(groups=(("worker-group-1", 4),))
        described["ClusterName"] = f"{NAME}3"
        stub.add_response("describe_cluster", described, {"ClusterName": f"{NAME}3"})
        stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes}, {"ClusterName": f"{NAME}3"})
        assert status.main(["--config", str(config(tmp_path, NAME + "3"))], session=Session(endpoint, client)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "stacks:"
    assert out[1].startswith(f"  {NAME}3-cluster: ROLLBACK_COMPLETE; first failure: Data (AWS::S3::Bucket): ")
    assert f"cluster {NAME}3: Creating" in out
    assert "  worker-group-1: 1/4 Running (ml.g5.8xlarge)" in out
    assert "    worker-group-1:2 i-0b3 Failure: InsufficientInstanceCapacity" in out
    assert "    worker-group-1:1 i-0b2 Pending" in out
    # moto's DescribeFileSystems has no Lifecycle field: the state shows as "?"
    assert any(re.fullmatch(r"FSx fs-\w+: \S+ \(1200 GiB\)", line) for line in out), out


def test_the_watcher_line_per_group(endpoint, tmp_path):
    """What `make deploy` prints every 30 s while HyperPod works: running of target, the other states, the newest
    lifecycle line of the group (here the marker the real `step` wrote last)."""
    log = failing_node_log(tmp_path)
    put_log(endpoint, "LifecycleConfig/worker-group-1/i-0w1", log)
    nodes = [
        node("controller-machine", "i-0c1", "Running"),
        node("worker-group-1", "i-0w1", "Running"),
        node("worker-group-1", "i-0w2", "Running", minutes=1),
        node("worker-group-1", "i-0w3", "Pending"),
        node("worker-group-1", "i-0w4", "Pending"),
    ]
    client, stub = stubbed_sagemaker((cluster(), nodes))
    lines = watch.progress(client, Session(endpoint, None).client("logs", REGION), NAME)
    stub.assert_no_pending_responses()
    assert lines[0] == "controller-machine: 1/1 Running"
    assert lines[1] == f"worker-group-1: 2/4 Running, 2 Pending; last lifecycle line: {log.splitlines()[-1]}"
    assert lines[1].endswith("[on_init_complete] STEP-FAILED mount_fsx rc=5")


def test_logs_prints_the_nodes_stream(endpoint, tmp_path, capsys):
    put_log(endpoint, "LifecycleConfig/worker-group-1/i-0l2", "first line\nsecond line")
    nodes = [node("worker-group-1", "i-0l1", "Running"), node("worker-group-1", "i-0l2", "Running", minutes=1)]
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(client) as stub:
        stub.add_response("describe_cluster", cluster(groups=(("worker-group-1", 2),)), {"ClusterName": NAME})
        stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes}, {"ClusterName": NAME})
        assert (
            logs.main(["--config", str(config(tmp_path)), "worker-group-1:1"], session=Session(endpoint, client)) == 0
        )
        stub.add_response("describe_cluster", cluster(groups=(("worker-group-1", 2),)), {"ClusterName": NAME})
        assert logs.main(["--config", str(config(tmp_path)), "worker-group-9"], session=Session(endpoint, client)) == 2
    captured = capsys.readouterr()
    assert captured.out == "first line\nsecond line\n"
    assert captured.err == (
        "logs: NODE=worker-group-9: no instance group 'worker-group-9'; the cluster's groups: worker-group-1\n"
    )


def config(tmp_path, name=NAME):
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ndeployment:\n  region: {REGION}\n")
    return path


def test_make_help_lists_every_user_command():
    """Every target the Makefile documents (a `##` comment above it) is in `make help`, once."""
    makefile = (ROOT / "Makefile").read_text()
    documented = re.findall(r"^## .*\n(?:## .*\n)*(?:[A-Z_]+ \?=.*\n|[A-Z_]+ = .*\n)*([a-z-]+):", makefile, re.M)
    shown = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    listed = re.findall(r"^make (\S+)", shown, re.M)
    maintainers_only = {"studio-eksctl", "schema", "hyperpod-chart", "help"}  # documented in the Makefile itself
    assert set(documented) - maintainers_only == set(listed)
    assert len(listed) == len(set(listed))
    for target in ("plan", "deploy", "diff", "status", "logs", "diagnose", "connect", "destroy", "preflight"):
        assert target in listed


def test_the_deploy_watcher_is_quiet_before_the_cluster_exists_and_reports_once_per_period(endpoint):
    from cli.replacement_guard import Stack

    name = "ops-watch"  # a log group of its own: no lifecycle line yet
    stacks = [
        Stack(
            name=f"{name}-cluster",
            region=REGION,
            template={
                "Resources": {"HyperPod": {"Type": "AWS::SageMaker::Cluster", "Properties": {"ClusterName": name}}}
            },
            template_file=None,
        )
    ]
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    printed = []
    with Stubber(client) as stub:
        stub.add_client_error("describe_cluster", "ResourceNotFound", "Cluster not found", http_status_code=400)
        described = cluster(groups=(("worker-group-1", 2),))
        described["ClusterName"] = name
        stub.add_response("describe_cluster", described, {"ClusterName": name})
        stub.add_response(
            "list_cluster_nodes",
            {"ClusterNodeSummaries": [node("worker-group-1", "i-0q1", "Pending")]},
            {"ClusterName": name},
        )
        session = Session(endpoint, client)
        tick = watch.node_watcher(
            lambda service, region: session.client(service, region), stacks, every=0.2, out=printed.append
        )
        tick()  # no cluster yet: nothing printed
        assert printed == []
        tick()  # within the period: no call at all (the stub would have no answer left to give)
        __import__("time").sleep(0.25)
        tick()
        stub.assert_no_pending_responses()
    assert printed == ["worker-group-1: 0/2 Running, 1 Pending"]
    assert watch.node_watcher(lambda s, r: None, [], every=30) is None  # no cluster in the assembly: no watcher
