"""Open a shell on a HyperPod node through SSM, or print the command / an SSH config entry.

    make connect NODE=controller            # or login, <group>, <group>:<index>
    .venv/bin/python -m cli.connect --config ... login --print
    .venv/bin/python -m cli.connect --config ... worker-group-1:3 --ssh-config >> ~/.ssh/config
        # then `ssh ml-cluster-worker-group-1-3`: the ProxyCommand (--proxy) finds the group's node 3 at each connect
    .venv/bin/python -m cli.connect --config ... login --run-as   # as your own user (SSMSessionRunAs tag)

HyperPod nodes are SSM managed instances addressed as `sagemaker-cluster:<cluster-id>_<group>-<instance-id>`
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-run-jobs-slurm-access-nodes.html). The instance
comes from ListClusterNodes; <index> counts the group's nodes in launch order from 0. SSH (VS Code Remote-SSH) goes
through the AWS-StartSSHSession document, so nodes need no inbound port.

Anything that stops it (no credentials, no such cluster or group, a refused call, no Session Manager plugin) is said
in one line on stderr, with exit status 2.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path


from cli.preconditions import missing_credentials, one_line
from platform_config import ConfigError, PlatformConfig, load_config
from platform_config.login_access import session_run_as

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "session-manager-plugin"
PLUGIN_DOC = (
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html"
)


class ConnectError(Exception):
    pass


def parse_node(cfg: PlatformConfig, node: str) -> tuple[str, int]:
    name, _, index = node.partition(":")
    if name in ("controller", "login"):
        groups = cfg.group(name)
        if not groups:
            raise ConnectError(f"NODE={node}: this config has no {name} group")
        name = groups[0].name
    names = [g.name for g in cfg.cluster.instance_groups]
    if name not in names:
        raise ConnectError(
            f"NODE={node}: no instance group {name!r}; allowed: controller, login, "
            f"{', '.join(names)} (optionally :<index>)"
        )
    if index and not index.isdigit():
        raise ConnectError(f"NODE={node}: the index after ':' must be a number such as {name}:0")
    return name, int(index or 0)


def resolve(sagemaker, cfg: PlatformConfig, group: str, index: int) -> str:
    """The SSM target of the index-th node (launch order) of group."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        arn = sagemaker.describe_cluster(ClusterName=cfg.name)["ClusterArn"]
        nodes = []
        for page in sagemaker.get_paginator("list_cluster_nodes").paginate(
            ClusterName=cfg.name, InstanceGroupNameContains=group
        ):
            nodes += [n for n in page["ClusterNodeSummaries"] if n["InstanceGroupName"] == group]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("AccessDenied", "AccessDeniedException"):
            raise ConnectError(
                f"{code} on {exc.operation_name}: the caller needs sagemaker:DescribeCluster and "
                f"sagemaker:ListClusterNodes on cluster {cfg.name}, and ssm:StartSession on it"
            ) from None
        if code == "ResourceNotFound" or "not found" in str(exc).lower():
            raise ConnectError(
                f"cluster {cfg.name!r} does not exist in {sagemaker.meta.region_name}; deploy it first (make deploy)"
            ) from None
        raise ConnectError(
            f"{code} on {exc.operation_name}: {one_line(exc.response.get('Error', {}).get('Message', ''))}"
        ) from None
    except BotoCoreError as exc:  # no or expired credentials, no network
        raise ConnectError(f"cannot reach SageMaker in {sagemaker.meta.region_name}: {one_line(exc)}") from None
    nodes.sort(key=lambda n: (n["LaunchTime"], n["InstanceId"]))
    if index >= len(nodes):
        raise ConnectError(
            f"{group}:{index}: the group has {len(nodes)} node(s) (indexes 0-{len(nodes) - 1})"
            if nodes
            else f"{group}: the group has no nodes yet"
        )
    cluster_id = arn.rsplit("/", 1)[1]
    return f"sagemaker-cluster:{cluster_id}_{group}-{nodes[index]['InstanceId']}"


def run_as_document(cluster_name: str) -> str:
    """The cluster's run-as Session document (constructs/session_run_as.py names it; imported here only when used,
    because importing a construct starts the CDK's Node process)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from constructs.session_run_as import session_document_name

    return session_document_name(cluster_name)


def session_command(target: str, region: str | None, profile: str | None, document: str | None = None) -> list[str]:
    """`region` None (deployment.region: null): the AWS CLI's own default, as for the boto3 session."""
    cmd = ["aws", "ssm", "start-session", "--target", target, *(["--region", region] if region else [])]
    cmd += ["--document-name", document] if document else []
    return cmd + (["--profile", profile] if profile else [])


def ssh_config(cfg: PlatformConfig, config_path: str, group: str, index: int, user: str, profile: str | None) -> str:
    """An ~/.ssh/config entry whose ProxyCommand finds the node when you connect (this command with --proxy): HyperPod
    replaces failed nodes with new instances, so an instance id written today goes stale."""
    proxy = [
        sys.executable,
        "-m",
        "cli.connect",
        "--config",
        str(Path(config_path).resolve()),
        f"{group}:{index}",
        "--proxy",
        "%p",
    ] + (["--profile", profile] if profile else [])
    return (
        f"Host {cfg.name}-{group}-{index}\n"
        f"  User {user}\n"
        f"  ProxyCommand cd {shlex.quote(str(ROOT))} && {shlex.join(proxy)}\n"
    )


def ssh_session_command(target: str, port: str, region: str | None, profile: str | None) -> list[str]:
    return [
        "aws",
        "ssm",
        "start-session",
        "--target",
        target,
        "--document-name",
        "AWS-StartSSHSession",
        "--parameters",
        f"portNumber={port}",
        *(["--region", region] if region else []),
    ] + (["--profile", profile] if profile else [])


def main(argv: list[str] | None = None, sagemaker=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cli.connect", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("node", help="controller, login, <group> or <group>:<index>")
    parser.add_argument("--config", default="config/default.yaml")
    parser.add_argument("--profile")
    parser.add_argument("--print", action="store_true", help="print the command instead of starting the session")
    parser.add_argument("--ssh-config", action="store_true", help="print an ~/.ssh/config entry through SSM")
    parser.add_argument("--user", default="ubuntu", help="SSH user for --ssh-config")
    parser.add_argument(
        "--proxy",
        metavar="PORT",
        help="ssh's ProxyCommand (what --ssh-config writes): find the node now and start an SSH session "
        "to PORT through SSM",
    )
    parser.add_argument(
        "--run-as",
        action="store_true",
        help="use the cluster's run-as Session document: a shell as the user in your IAM principal's "
        "SSMSessionRunAs tag (cluster.login_access.run_as)",
    )
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        if args.run_as and not session_run_as(cfg):
            raise ConnectError(
                "--run-as: this config has no run-as Session document (Slurm with cluster.login_access.run_as: true)"
            )
        group, index = parse_node(cfg, args.node)
        region = cfg.deployment.region
        if args.ssh_config:  # no AWS call: the node is found when ssh connects (--proxy)
            print(ssh_config(cfg, args.config, group, index, args.user, args.profile), end="")
            return 0
        if sagemaker is None:
            problem = missing_credentials(args.profile)
            if problem:
                raise ConnectError(problem)
            import boto3

            sagemaker = boto3.Session(profile_name=args.profile, region_name=region).client("sagemaker")
        target = resolve(sagemaker, cfg, group, index)
    except (ConfigError, ConnectError) as exc:
        print(f"connect: {exc}", file=sys.stderr)
        return 2
    if args.proxy:
        command = ssh_session_command(target, args.proxy, region, args.profile)
    else:
        command = session_command(target, region, args.profile, run_as_document(cfg.name) if args.run_as else None)
    if args.print:
        print(shlex.join(command))
        return 0
    missing = [c for c in ("aws", PLUGIN) if shutil.which(c) is None]
    if missing:
        print(
            f"connect: {' and '.join(missing)} not found on PATH; install the AWS CLI and the Session Manager "
            f"plugin ({PLUGIN_DOC}), or run with --print",
            file=sys.stderr,
        )
        return 2
    os.execvp(command[0], command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
