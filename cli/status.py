"""Where the deployed platform is: each stack's state and last failure reason, the HyperPod cluster's status, its nodes
per instance group with their InstanceStatus and message, the FSx file systems' state.

    make status CONFIG=config/my-cluster.yaml
    python -m cli.status --config config/my-cluster.yaml [--profile P]

Read-only: CloudFormation DescribeStacks/DescribeStackEvents, SageMaker DescribeCluster/ListClusterNodes, FSx
DescribeFileSystems (the platform's: tagged hyperpod-platform=<name>). Without credentials, or when a call is refused,
one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from cli.preconditions import missing_credentials, one_line
from cli.watch import cluster_nodes

PLATFORM_TAG = "hyperpod-platform"
CANCELLED = ("Resource creation cancelled", "Resource update cancelled")


@dataclass(frozen=True)
class Target:
    name: str
    region: str | None


def target(config_path: str) -> Target:
    """The platform's name and region from the config file, read without validating the rest (status, logs and
    diagnose must work where `make synth` would not, e.g. before the Studio tools bundle is built)."""
    import yaml

    try:
        data = yaml.safe_load(Path(config_path).read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise SystemExit(f"cannot read {config_path}: {one_line(error)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise SystemExit(f"{config_path}: name: missing; the platform's name is what its stacks are called after")
    region = (data.get("deployment") or {}).get("region", "us-west-2")
    return Target(name=data["name"], region=region)


def platform_stacks(cfn, name: str, nested: bool = False) -> list[dict[str, Any]]:
    """The platform's stacks (named <name>-...), not deleted ones; nested stacks too with `nested`."""
    stacks = []
    for page in cfn.get_paginator("describe_stacks").paginate():
        stacks += [
            s for s in page["Stacks"] if s["StackName"].startswith(f"{name}-") and (nested or not s.get("ParentId"))
        ]
    return sorted(stacks, key=lambda s: s["StackName"])


def failed_events(cfn, stack: str) -> list[dict[str, Any]]:
    """The *_FAILED events of the stack's last operation (since its last User Initiated event), oldest first,
    without the cancellations that follow the first failure."""
    events: list[dict[str, Any]] = []
    for page in cfn.get_paginator("describe_stack_events").paginate(StackName=stack):
        for event in page["StackEvents"]:  # newest first
            events.append(event)
            if (
                event.get("ResourceStatusReason") == "User Initiated"
                and event["ResourceType"] == "AWS::CloudFormation::Stack"
            ):
                break
        else:
            continue
        break
    return [
        e
        for e in reversed(events)
        if e["ResourceStatus"].endswith("_FAILED")
        and not any(c in (e.get("ResourceStatusReason") or "") for c in CANCELLED)
    ]


def file_systems(fsx, name: str) -> list[dict[str, Any]]:
    found = []
    for page in fsx.get_paginator("describe_file_systems").paginate():
        found += [f for f in page["FileSystems"] if {"Key": PLATFORM_TAG, "Value": name} in f.get("Tags", [])]
    return found


def report(session, tgt: Target) -> list[str]:
    from botocore.exceptions import ClientError

    cfn = session.client("cloudformation", region_name=tgt.region)
    lines = ["stacks:"]
    stacks = platform_stacks(cfn, tgt.name)
    if not stacks:
        lines.append(f"  none named {tgt.name}-* in {tgt.region}: not deployed (make deploy)")
    for stack in stacks:
        line = f"  {stack['StackName']}: {stack['StackStatus']}"
        failures = (
            failed_events(cfn, stack["StackName"])
            if "FAIL" in stack["StackStatus"] or "ROLLBACK" in stack["StackStatus"]
            else []
        )
        if failures:
            first = failures[0]
            line += (
                f"; first failure: {first['LogicalResourceId']} ({first['ResourceType']}): "
                f"{one_line(Exception(first.get('ResourceStatusReason', '')))}"
            )
        elif stack.get("StackStatusReason"):
            line += f"; {one_line(Exception(stack['StackStatusReason']))}"
        lines.append(line)
    sagemaker = session.client("sagemaker", region_name=tgt.region)
    try:
        cluster = sagemaker.describe_cluster(ClusterName=tgt.name)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in ("ResourceNotFound", "ValidationException"):
            raise
        lines.append(f"cluster {tgt.name}: does not exist")
    else:
        status = f"cluster {tgt.name}: {cluster['ClusterStatus']}"
        if cluster.get("FailureMessage"):
            status += f": {one_line(Exception(cluster['FailureMessage']))}"
        lines.append(status)
        nodes = cluster_nodes(sagemaker, tgt.name)
        for group in cluster.get("InstanceGroups", []):
            members = [n for n in nodes if n["InstanceGroupName"] == group["InstanceGroupName"]]
            running = sum(n["InstanceStatus"]["Status"] == "Running" for n in members)
            lines.append(
                f"  {group['InstanceGroupName']}: {running}/{group.get('TargetCount', len(members))} "
                f"Running ({group.get('InstanceType', '?')})"
            )
            for index, node in enumerate(members):
                state = node["InstanceStatus"]
                message = (
                    f": {one_line(Exception(state['Message']))}"
                    if state.get("Message") and state["Status"] != "Running"
                    else ""
                )
                where = f"{group['InstanceGroupName']}:{index} {node['InstanceId']}"
                lines.append(f"    {where} {state['Status']}{message}")
    fsx = session.client("fsx", region_name=tgt.region)
    systems = file_systems(fsx, tgt.name)
    for system in systems:
        line = (
            f"FSx {system['FileSystemId']}: {system.get('Lifecycle', '?')} ({system.get('StorageCapacity', '?')} GiB)"
        )
        if system.get("FailureDetails", {}).get("Message"):
            line += f": {one_line(Exception(system['FailureDetails']['Message']))}"
        lines.append(line)
    if not systems:
        lines.append(f"FSx: none tagged {PLATFORM_TAG}={tgt.name}")
    return lines


def session_for(profile: str | None, command: str):
    """A boto3 session, or SystemExit with one line when there are no credentials."""
    problem = missing_credentials(profile)
    if problem:
        raise SystemExit(f"{command}: {problem}")
    import boto3

    return boto3.Session(profile_name=profile)


def main(argv: list[str] | None = None, session=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.status", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/default.yaml")
    parser.add_argument("--profile")
    args = parser.parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        session = session or session_for(args.profile, "status")
        tgt = target(args.config)
        for line in report(session, tgt):
            print(line)
    except SystemExit as stop:
        print(stop if str(stop).startswith("status:") else f"status: {stop}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"status: {one_line(error)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
