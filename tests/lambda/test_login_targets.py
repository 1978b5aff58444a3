"""The login target handler against moto's Elastic Load Balancing v2 (real HTTP) and a Stubber for the two
SageMaker calls whose answers moto cannot give: moto's ClusterNode has no PrivatePrimaryIp and never changes state,
so a replaced login node cannot be expressed there. Stubber checks every request and response against botocore's
sagemaker service model."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from botocore.stub import Stubber

ROOT = Path(__file__).resolve().parents[2]

import login_targets

CLUSTER, GROUP = "research-cluster", "login-group"
LAUNCHED = datetime(2026, 11, 1, tzinfo=timezone.utc)


@pytest.fixture
def elbv2():
    return login_targets.client("elbv2")


@pytest.fixture
def target_group(elbv2):
    ec2 = login_targets.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return elbv2.create_target_group(
        Name="login-ssh", Protocol="TCP", Port=22, VpcId=vpc, TargetType="ip", HealthCheckProtocol="TCP"
    )["TargetGroups"][0]["TargetGroupArn"]


def node(instance_id: str, group: str = GROUP, status: str = "Running") -> dict:
    return {
        "InstanceGroupName": group,
        "InstanceId": instance_id,
        "InstanceType": "ml.m5.xlarge",
        "LaunchTime": LAUNCHED,
        "InstanceStatus": {"Status": status},
    }


def stubbed_sagemaker(nodes: list[dict], ips: dict[str, str]) -> tuple[object, Stubber]:
    sagemaker = login_targets.client("sagemaker")
    stub = Stubber(sagemaker)
    stub.add_response(
        "list_cluster_nodes",
        {"ClusterNodeSummaries": nodes},
        {"ClusterName": CLUSTER, "InstanceGroupNameContains": GROUP},
    )
    for n in nodes:
        if n["InstanceGroupName"] == GROUP and n["InstanceStatus"]["Status"] == "Running":
            details = {
                "InstanceGroupName": GROUP,
                "InstanceId": n["InstanceId"],
                "InstanceStatus": {"Status": "Running"},
            }
            if n["InstanceId"] in ips:
                details["PrivatePrimaryIp"] = ips[n["InstanceId"]]
            stub.add_response(
                "describe_cluster_node", {"NodeDetails": details}, {"ClusterName": CLUSTER, "NodeId": n["InstanceId"]}
            )
    stub.activate()
    return sagemaker, stub


def run(nodes, ips, elbv2, target_group):
    sagemaker, stub = stubbed_sagemaker(nodes, ips)
    result = login_targets.reconcile(
        sagemaker, elbv2, cluster=CLUSTER, group=GROUP, target_group_arn=target_group, port=22
    )
    stub.assert_no_pending_responses()
    return result


def targets(elbv2, target_group) -> dict[str, str]:
    return {
        t["Target"]["Id"]: t["TargetHealth"]["State"]
        for t in elbv2.describe_target_health(TargetGroupArn=target_group)["TargetHealthDescriptions"]
    }


def live(elbv2, target_group) -> set[str]:
    return {ip for ip, state in targets(elbv2, target_group).items() if state != "draining"}


def test_registers_the_running_login_nodes_only(elbv2, target_group):
    nodes = [
        node("i-0aaaaaaaaaaaaaaa1"),
        node("i-0aaaaaaaaaaaaaaa2"),
        node("i-0aaaaaaaaaaaaaaa3", status="Pending"),  # not serving yet
        node("i-0bbbbbbbbbbbbbbb1", group="login-group-2"),
    ]  # InstanceGroupNameContains matched it too
    result = run(nodes, {"i-0aaaaaaaaaaaaaaa1": "10.0.64.10", "i-0aaaaaaaaaaaaaaa2": "10.0.64.11"}, elbv2, target_group)
    assert result["registered"] == ["10.0.64.10", "10.0.64.11"] and result["deregistered"] == []
    assert live(elbv2, target_group) == {"10.0.64.10", "10.0.64.11"}
    assert {
        t["Target"]["Port"]
        for t in elbv2.describe_target_health(TargetGroupArn=target_group)["TargetHealthDescriptions"]
    } == {22}


def test_a_replaced_login_node_is_swapped_and_a_second_run_changes_nothing(elbv2, target_group):
    run(
        [node("i-0aaaaaaaaaaaaaaa1"), node("i-0aaaaaaaaaaaaaaa2")],
        {"i-0aaaaaaaaaaaaaaa1": "10.0.64.10", "i-0aaaaaaaaaaaaaaa2": "10.0.64.11"},
        elbv2,
        target_group,
    )
    # HyperPod replaced i-...2 with i-...4 at a new address
    after = [node("i-0aaaaaaaaaaaaaaa1"), node("i-0aaaaaaaaaaaaaaa4")]
    ips = {"i-0aaaaaaaaaaaaaaa1": "10.0.64.10", "i-0aaaaaaaaaaaaaaa4": "10.0.64.12"}
    result = run(after, ips, elbv2, target_group)
    assert result == {
        "registered": ["10.0.64.12"],
        "deregistered": ["10.0.64.11"],
        "targets": ["10.0.64.10", "10.0.64.12"],
    }
    assert live(elbv2, target_group) == {"10.0.64.10", "10.0.64.12"}
    assert run(after, ips, elbv2, target_group) == {
        "registered": [],
        "deregistered": [],
        "targets": ["10.0.64.10", "10.0.64.12"],
    }


def test_no_running_login_node_empties_the_target_group(elbv2, target_group):
    run([node("i-0aaaaaaaaaaaaaaa1")], {"i-0aaaaaaaaaaaaaaa1": "10.0.64.10"}, elbv2, target_group)
    result = run([node("i-0aaaaaaaaaaaaaaa1", status="ShuttingDown")], {}, elbv2, target_group)
    assert result["deregistered"] == ["10.0.64.10"] and live(elbv2, target_group) == set()


def test_a_running_node_without_an_address_fails_the_run(elbv2, target_group):
    with pytest.raises(RuntimeError, match="i-0aaaaaaaaaaaaaaa1 has no PrivatePrimaryIp"):
        run([node("i-0aaaaaaaaaaaaaaa1")], {}, elbv2, target_group)
    assert targets(elbv2, target_group) == {}


def test_handler_reconciles_on_events_and_custom_resource_requests(elbv2, target_group, monkeypatch):
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("LOGIN_GROUP", GROUP)
    monkeypatch.setenv("TARGET_GROUP_ARN", target_group)
    monkeypatch.setenv("SSH_PORT", "22")
    sagemaker, stub = stubbed_sagemaker([node("i-0aaaaaaaaaaaaaaa1")], {"i-0aaaaaaaaaaaaaaa1": "10.0.64.10"})
    real = login_targets.client
    monkeypatch.setattr(login_targets, "client", lambda service: sagemaker if service == "sagemaker" else real(service))
    # The shape of a HyperPod cluster event (sagemaker-hyperpod-cluster-events-reference); the handler reconciles
    # from ListClusterNodes whatever the event carries.
    event = {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker HyperPod Cluster Event",
        "detail": {
            "EventDetails": {
                "ClusterName": CLUSTER,
                "InstanceGroupName": GROUP,
                "InstanceId": "i-0aaaaaaaaaaaaaaa1",
                "ResourceType": "Instance",
            }
        },
    }
    assert login_targets.handler(event)["registered"] == ["10.0.64.10"]
    stub.assert_no_pending_responses()
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [node("i-0aaaaaaaaaaaaaaa1")]})
    stub.add_response(
        "describe_cluster_node",
        {"NodeDetails": {"InstanceId": "i-0aaaaaaaaaaaaaaa1", "PrivatePrimaryIp": "10.0.64.10"}},
    )
    created = login_targets.handler({"RequestType": "Create", "ResourceProperties": {}})
    assert created == {"PhysicalResourceId": target_group, "Data": {"Targets": "10.0.64.10"}}
    # Delete calls nothing: the Stubber would raise on an unexpected call
    assert login_targets.handler({"RequestType": "Delete", "PhysicalResourceId": target_group}) == {
        "PhysicalResourceId": target_group
    }
    assert live(elbv2, target_group) == {"10.0.64.10"}


def test_a_draining_address_that_is_wanted_again_is_registered_again(target_group):
    """moto drops a deregistered target at once; Elastic Load Balancing keeps it `draining` for the deregistration
    delay, so that state comes from a Stubber here."""
    elbv2 = login_targets.client("elbv2")
    with Stubber(elbv2) as stub:
        stub.add_response(
            "describe_target_health",
            {
                "TargetHealthDescriptions": [
                    {"Target": {"Id": "10.0.64.10", "Port": 22}, "TargetHealth": {"State": "draining"}}
                ]
            },
            {"TargetGroupArn": target_group},
        )
        stub.add_response(
            "register_targets", {}, {"TargetGroupArn": target_group, "Targets": [{"Id": "10.0.64.10", "Port": 22}]}
        )
        result = run([node("i-0aaaaaaaaaaaaaaa1")], {"i-0aaaaaaaaaaaaaaa1": "10.0.64.10"}, elbv2, target_group)
        stub.assert_no_pending_responses()
    assert result["registered"] == ["10.0.64.10"]
