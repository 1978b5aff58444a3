"""Keeps the SSH load balancer's target group equal to the login group's running nodes.

Invoked by EventBridge on HyperPod's events for the cluster (a login node replaced, the cluster updated), hourly as a
safety net, and once per deployment through a custom resource. Every invocation reconciles from the source of truth,
whatever the event says: ListClusterNodes for the login group, DescribeClusterNode for each running node's
`PrivatePrimaryIp` (botocore's sagemaker service model, ClusterNodeDetails), then RegisterTargets for new addresses
and DeregisterTargets for addresses no running login node has. A second run changes nothing. Raises to fail, so
EventBridge retries and CloudFormation reports the deployment as failed.

Environment: CLUSTER_NAME, LOGIN_GROUP, TARGET_GROUP_ARN, SSH_PORT; AWS_REGION (set by Lambda), optionally
AWS_ENDPOINT_URL (tests).
"""

from __future__ import annotations

import logging
import os
from typing import Any
from collections.abc import Mapping

from aws_clients import client

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

# ClusterInstanceStatusDetails.Status values (botocore's sagemaker model); only a Running node serves SSH.
SERVING = "Running"
# Targets on their way out; a login node that comes back is registered again.
LEAVING = ("draining",)


def login_node_ips(sagemaker, cluster: str, group: str) -> set[str]:
    """Private IPv4 addresses of the group's running nodes. InstanceGroupNameContains matches substrings, so the
    group name is compared exactly."""
    ips = set()
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(
        ClusterName=cluster, InstanceGroupNameContains=group
    ):
        for node in page["ClusterNodeSummaries"]:
            if node["InstanceGroupName"] != group or node["InstanceStatus"]["Status"] != SERVING:
                continue
            details = sagemaker.describe_cluster_node(ClusterName=cluster, NodeId=node["InstanceId"])["NodeDetails"]
            ip = details.get("PrivatePrimaryIp")
            if not ip:
                raise RuntimeError(f"{cluster}: running login node {node['InstanceId']} has no PrivatePrimaryIp yet")
            ips.add(ip)
    return ips


def registered_ips(elbv2, target_group_arn: str) -> set[str]:
    health = elbv2.describe_target_health(TargetGroupArn=target_group_arn)["TargetHealthDescriptions"]
    return {t["Target"]["Id"] for t in health if t.get("TargetHealth", {}).get("State") not in LEAVING}


def reconcile(sagemaker, elbv2, *, cluster: str, group: str, target_group_arn: str, port: int) -> dict[str, list[str]]:
    """Idempotent: registers what is missing, deregisters what no running login node has."""
    wanted = login_node_ips(sagemaker, cluster, group)
    current = registered_ips(elbv2, target_group_arn)
    add, remove = sorted(wanted - current), sorted(current - wanted)
    if add:
        elbv2.register_targets(TargetGroupArn=target_group_arn, Targets=[{"Id": ip, "Port": port} for ip in add])
    if remove:
        elbv2.deregister_targets(TargetGroupArn=target_group_arn, Targets=[{"Id": ip, "Port": port} for ip in remove])
    LOG.info("%s/%s: registered %s, deregistered %s, serving %s", cluster, group, add, remove, sorted(wanted))
    return {"registered": add, "deregistered": remove, "targets": sorted(wanted)}


def handler(event: Mapping[str, Any], _context: Any = None) -> dict:
    env = os.environ
    if event.get("RequestType") == "Delete":  # the target group goes with the stack; nothing to undo
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    result = reconcile(
        client("sagemaker"),
        client("elbv2"),
        cluster=env["CLUSTER_NAME"],
        group=env["LOGIN_GROUP"],
        target_group_arn=env["TARGET_GROUP_ARN"],
        port=int(env["SSH_PORT"]),
    )
    if "RequestType" in event:  # custom resource: one per target group
        return {"PhysicalResourceId": env["TARGET_GROUP_ARN"], "Data": {"Targets": ",".join(result["targets"])}}
    return result
