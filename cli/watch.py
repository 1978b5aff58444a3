"""Node progress of the platform's HyperPod cluster, one line per instance group, while `make deploy` waits for the
cluster stack (HyperPod takes 15-30 minutes and CloudFormation says nothing in between):

    worker-group-1: 2/4 Running, 2 Pending; last lifecycle line: <time> [on_init_complete] STEP-START mount_fsx

    python -m cli.watch CLUSTER_NAME [--region R] [--profile P] [--every 30] [--once]

Read from SageMaker (DescribeCluster: each group's target count; ListClusterNodes: each node's InstanceStatus) and
CloudWatch Logs (HyperPod's log group /aws/sagemaker/Clusters/<name>/<cluster id>, one stream per node named
LifecycleConfig/<group>/<instance id>, https://docs.aws.amazon.com/sagemaker/latest/dg/
sagemaker-hyperpod-cluster-management-slurm.html). Read-only.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any
from collections.abc import Callable, Iterable


from cli.preconditions import missing_credentials, one_line

CLUSTER_TYPE = "AWS::SageMaker::Cluster"


def cluster_log_group(cluster_arn: str, cluster_name: str) -> str:
    return f"/aws/sagemaker/Clusters/{cluster_name}/{cluster_arn.rsplit('/', 1)[-1]}"


def cluster_nodes(sagemaker, cluster_name: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster_name):
        nodes += page["ClusterNodeSummaries"]
    return sorted(nodes, key=lambda n: (n["InstanceGroupName"], n["LaunchTime"], n["InstanceId"]))


def last_lines(logs, log_group: str, stream_prefix: str, count: int = 1) -> list[str]:
    """The last `count` lines of the newest stream under `stream_prefix` ([] when there is none yet)."""
    from botocore.exceptions import ClientError

    try:
        streams = logs.describe_log_streams(logGroupName=log_group, logStreamNamePrefix=stream_prefix)["logStreams"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return []
        raise
    streams = [s for s in streams if s.get("lastEventTimestamp")]
    if not streams:
        return []
    newest = max(streams, key=lambda s: s["lastEventTimestamp"])
    events = logs.get_log_events(
        logGroupName=log_group, logStreamName=newest["logStreamName"], limit=count, startFromHead=False
    )["events"]
    return [e["message"].rstrip("\n") for e in events]


def progress(sagemaker, logs, cluster_name: str) -> list[str]:
    """One line per instance group: running nodes of the target count, the other states, the newest lifecycle line."""
    cluster = sagemaker.describe_cluster(ClusterName=cluster_name)
    by_group: dict[str, Counter] = {}
    for node in cluster_nodes(sagemaker, cluster_name):
        by_group.setdefault(node["InstanceGroupName"], Counter())[node["InstanceStatus"]["Status"]] += 1
    log_group = cluster_log_group(cluster["ClusterArn"], cluster_name)
    lines = []
    for group in cluster.get("InstanceGroups", []):
        name = group["InstanceGroupName"]
        states = by_group.get(name, Counter())
        target = group.get("TargetCount", group.get("CurrentCount", 0))
        others = ", ".join(f"{n} {state}" for state, n in sorted(states.items()) if state != "Running")
        line = f"{name}: {states.get('Running', 0)}/{target} Running" + (f", {others}" if others else "")
        last = last_lines(logs, log_group, f"LifecycleConfig/{name}/")
        if last:
            line += f"; last lifecycle line: {last[-1]}"
        lines.append(line)
    return lines


def clusters_in(stacks: Iterable[Any]) -> list[tuple[str, str | None]]:
    """(cluster name, region) of every HyperPod cluster the assembly's stacks define with a literal name."""
    found = []
    for stack in stacks:
        for resource in stack.template.get("Resources", {}).values():
            name = resource.get("Properties", {}).get("ClusterName")
            if resource.get("Type") == CLUSTER_TYPE and isinstance(name, str):
                found.append((name, stack.region))
    return found


def node_watcher(
    clients: Callable[[str, str | None], Any], stacks: Iterable[Any], every: float, out: Callable[[str], None] = print
) -> Callable[[], None] | None:
    """What `make deploy` calls while it waits: every `every` seconds at most, the progress of the assembly's
    HyperPod cluster once it exists. Quiet before the cluster exists; a failed read is one line, never an abort."""
    from botocore.exceptions import BotoCoreError, ClientError

    targets = clusters_in(stacks)
    if not targets:
        return None
    last = [float("-inf")]

    def tick() -> None:
        if time.monotonic() - last[0] < every:
            return
        last[0] = time.monotonic()
        for name, region in targets:
            try:
                lines = progress(clients("sagemaker", region), clients("logs", region), name)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") in ("ResourceNotFound", "ValidationException"):
                    continue  # not created yet
                out(f"{name}: node progress unavailable: {one_line(error)}")
                continue
            except BotoCoreError as error:
                out(f"{name}: node progress unavailable: {one_line(error)}")
                continue
            for line in lines:
                out(line)

    return tick


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.watch", description=__doc__.split("\n\n")[0])
    parser.add_argument("cluster_name")
    parser.add_argument("--region")
    parser.add_argument("--profile")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between reports (default 30)")
    parser.add_argument("--once", action="store_true", help="report once and exit")
    args = parser.parse_args(argv)
    problem = missing_credentials(args.profile)
    if problem:
        print(f"watch: {problem}", file=sys.stderr)
        return 2
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    try:
        while True:
            for line in progress(session.client("sagemaker"), session.client("logs"), args.cluster_name):
                print(line, flush=True)
            if args.once:
                return 0
            time.sleep(args.every)
    except (BotoCoreError, ClientError) as error:
        print(f"watch: {one_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
