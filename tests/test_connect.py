"""cli/connect.py against a moto server holding a HyperPod cluster (CreateCluster/ListClusterNodes over HTTP)."""

from __future__ import annotations

import shlex
import sys

import boto3
import pytest
from botocore.stub import Stubber

from support.moto_server import client, reset
from cli import connect

REGION = "us-west-2"


@pytest.fixture(scope="module")
def sagemaker(moto_endpoint):
    """The worker's moto server (tests/conftest.py), emptied for this module and holding its cluster: the module's
    tests run together on one worker (tests/test_parallel_suite.py), without a server of their own (~2 s of CPU)."""
    reset(moto_endpoint)
    api = client(moto_endpoint, "sagemaker", REGION)
    groups = [
        ("controller-machine", "ml.m5.xlarge", 1),
        ("login-group", "ml.m5.xlarge", 1),
        ("worker-group-1", "ml.g5.8xlarge", 3),
        ("worker-group-10", "ml.g5.8xlarge", 1),
    ]
    api.create_cluster(
        ClusterName="ml-cluster",
        InstanceGroups=[
            {
                "InstanceGroupName": g,
                "InstanceType": t,
                "InstanceCount": n,
                "ThreadsPerCore": 1,
                "ExecutionRole": "arn:aws:iam::123456789012:role/r",
                "LifeCycleConfig": {
                    "SourceS3Uri": "s3://sagemaker-lifecycle/p",
                    "OnInitComplete": "on_init_complete.sh",
                },
            }
            for g, t, n in groups
        ],
        VpcConfig={"SecurityGroupIds": ["sg-12345678"], "Subnets": ["subnet-12345678"]},
    )
    return api


def nodes(client, group):
    found = [
        n
        for n in client.list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == group
    ]
    return sorted(found, key=lambda n: (n["LaunchTime"], n["InstanceId"]))


def cluster_id(client):
    return client.describe_cluster(ClusterName="ml-cluster")["ClusterArn"].rsplit("/", 1)[1]


def test_print_builds_the_ssm_target_from_list_cluster_nodes(sagemaker, capsys):
    assert connect.main(["controller", "--print"], sagemaker=sagemaker) == 0
    node = nodes(sagemaker, "controller-machine")[0]["InstanceId"]
    assert capsys.readouterr().out == (
        f"aws ssm start-session --target sagemaker-cluster:{cluster_id(sagemaker)}_"
        f"controller-machine-{node} --region us-west-2\n"
    )


def test_group_and_index_pick_that_node_not_a_similarly_named_group(sagemaker, capsys):
    assert connect.main(["worker-group-1:2", "--print", "--profile", "ml"], sagemaker=sagemaker) == 0
    third = nodes(sagemaker, "worker-group-1")[2]["InstanceId"]
    out = capsys.readouterr().out
    assert f"_worker-group-1-{third} --region us-west-2 --profile ml\n" in out
    # worker-group-10 matches InstanceGroupNameContains=worker-group-1 but is another group.
    assert connect.main(["worker-group-1:3", "--print"], sagemaker=sagemaker) == 2
    assert "worker-group-1:3: the group has 3 node(s) (indexes 0-2)" in capsys.readouterr().err


def test_unknown_node_names_what_is_allowed(sagemaker, capsys):
    assert connect.main(["gpu", "--print"], sagemaker=sagemaker) == 2
    assert (
        "NODE=gpu: no instance group 'gpu'; allowed: controller, login, controller-machine, login-group, "
        "worker-group-1 (optionally :<index>)"
    ) in capsys.readouterr().err


def test_ssh_config_entry_finds_the_node_when_ssh_connects(sagemaker, capsys):
    """The entry holds no instance id (HyperPod replaces failed nodes): its ProxyCommand is this command with --proxy,
    which resolves group and index through ListClusterNodes at each connect."""
    assert connect.main(["worker-group-1:2", "--ssh-config", "--profile", "ml"]) == 0  # no AWS call, no credentials
    entry = capsys.readouterr().out
    config = (connect.ROOT / "config" / "default.yaml").resolve()
    assert entry == (
        "Host ml-cluster-worker-group-1-2\n"
        "  User ubuntu\n"
        f"  ProxyCommand cd {connect.ROOT} && {sys.executable} -m cli.connect --config {config} worker-group-1:2 "
        "--proxy %p --profile ml\n"
    )
    proxy = shlex.split(entry.split("&& ", 1)[1].replace("%p", "22"))[3:]
    assert connect.main([*proxy, "--print"], sagemaker=sagemaker) == 0
    third = nodes(sagemaker, "worker-group-1")[2]["InstanceId"]
    assert capsys.readouterr().out == (
        f"aws ssm start-session --target sagemaker-cluster:{cluster_id(sagemaker)}_worker-group-1-{third} "
        "--document-name AWS-StartSSHSession --parameters portNumber=22 --region us-west-2 --profile ml\n"
    )


def test_missing_session_manager_plugin_is_said_clearly(sagemaker, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert connect.main(["login"], sagemaker=sagemaker) == 2
    err = capsys.readouterr().err
    assert "aws and session-manager-plugin not found on PATH" in err and "or run with --print" in err


def test_access_denied_names_the_permissions():
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(client) as stub:
        stub.add_client_error("describe_cluster", "AccessDeniedException", "no", 400)
        with pytest.raises(
            connect.ConnectError, match="needs sagemaker:DescribeCluster and sagemaker:ListClusterNodes"
        ):
            from platform_config import PlatformConfig

            connect.resolve(client, PlatformConfig(), "login-group", 0)


def test_run_as_starts_the_session_with_the_clusters_run_as_document(sagemaker, capsys, tmp_path):
    assert connect.main(["login", "--print", "--run-as"], sagemaker=sagemaker) == 0
    node = nodes(sagemaker, "login-group")[0]["InstanceId"]
    assert capsys.readouterr().out == (
        f"aws ssm start-session --target sagemaker-cluster:{cluster_id(sagemaker)}_"
        f"login-group-{node} --region us-west-2 --document-name ml-cluster-RunAsShell\n"
    )
    off = tmp_path / "c.yaml"
    off.write_text("cluster: {login_access: {run_as: false}}\n")
    assert connect.main(["login", "--print", "--run-as", "--config", str(off)], sagemaker=sagemaker) == 2
    assert "no run-as Session document" in capsys.readouterr().err


@pytest.mark.parametrize("code", ["ThrottlingException", "ValidationException", "InternalFailure"])
def test_any_refused_call_is_one_line_not_a_traceback(code, capsys):
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(client) as stub:
        stub.add_client_error("describe_cluster", code, "the service said\nno", 400)
        assert connect.main(["controller", "--print"], sagemaker=client) == 2
    err = capsys.readouterr().err
    assert err == f"connect: {code} on DescribeCluster: the service said no\n"


def test_credentials_that_fail_at_the_first_call_are_one_line(capsys):
    """Credentials the SDK cannot use (here the signer finds none) stop with one line, not NoCredentialsError's
    traceback."""
    from botocore.exceptions import NoCredentialsError

    def no_credentials(**_):
        raise NoCredentialsError()

    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    client.meta.events.register_first("before-call.sagemaker.DescribeCluster", no_credentials)
    assert connect.main(["controller", "--print"], sagemaker=client) == 2
    assert capsys.readouterr().err == "connect: cannot reach SageMaker in us-west-2: Unable to locate credentials\n"
