"""A HyperPod node's lifecycle-script log, from CloudWatch Logs: HyperPod's log group
/aws/sagemaker/Clusters/<name>/<cluster id>, stream LifecycleConfig/<group>/<instance id> (cli/watch.py).

    make logs NODE=worker-group-1:2 [FOLLOW=1]
    python -m cli.logs --config config/my-cluster.yaml NODE [--follow] [--profile P]

NODE is controller, login, <group> or <group>:<index> (index: launch order within the group, as `make connect`).
--follow keeps printing new lines until Ctrl-C. Without credentials, or when the node or its stream does not exist,
one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time


from cli.preconditions import one_line
from cli.status import session_for, target
from cli.watch import cluster_log_group, cluster_nodes


def node_stream(sagemaker, cluster_name: str, node: str) -> tuple[str, str]:
    """(log group, stream) of NODE. controller and login name the one group of the cluster whose name says so (read
    from DescribeCluster, so the config need not validate)."""
    cluster = sagemaker.describe_cluster(ClusterName=cluster_name)
    names = [g["InstanceGroupName"] for g in cluster.get("InstanceGroups", [])]
    group, _, index = node.partition(":")
    if group in ("controller", "login") and group not in names:
        matches = [n for n in names if group in n]
        if len(matches) != 1:
            raise SystemExit(f"NODE={node}: no single {group} group among {', '.join(names)}; name the group")
        group = matches[0]
    if group not in names:
        raise SystemExit(f"NODE={node}: no instance group {group!r}; the cluster's groups: {', '.join(names)}")
    if index and not index.isdigit():
        raise SystemExit(f"NODE={node}: the index after ':' must be a number such as {group}:0")
    members = [n for n in cluster_nodes(sagemaker, cluster_name) if n["InstanceGroupName"] == group]
    members.sort(key=lambda n: (n["LaunchTime"], n["InstanceId"]))
    position = int(index or 0)
    if position >= len(members):
        raise SystemExit(
            f"{group}:{position}: the group has {len(members)} node(s)"
            if members
            else f"{group}: the group has no nodes yet"
        )
    return (
        cluster_log_group(cluster["ClusterArn"], cluster_name),
        f"LifecycleConfig/{group}/{members[position]['InstanceId']}",
    )


def read(logs, log_group: str, stream: str, follow: bool, every: float = 5.0, out=print) -> None:
    from botocore.exceptions import ClientError

    token = None
    while True:
        kwargs = {"logGroupName": log_group, "logStreamName": stream, "startFromHead": True}
        if token:
            kwargs["nextToken"] = token
        try:
            page = logs.get_log_events(**kwargs)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise SystemExit(
                    f"no log stream {stream} in {log_group} yet: the node has not started its lifecycle scripts"
                ) from None
            raise
        for event in page["events"]:
            out(event["message"].rstrip("\n"))
        if page.get("nextForwardToken") == token or not page["events"]:
            if not follow:
                return
            time.sleep(every)
        token = page.get("nextForwardToken")


def main(argv: list[str] | None = None, session=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.logs", description=__doc__.split("\n\n")[0])
    parser.add_argument("node", nargs="?", default="controller", help="controller, login, <group> or <group>:<index>")
    parser.add_argument("--config", default="config/default.yaml")
    parser.add_argument("--profile")
    parser.add_argument("--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    args = parser.parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        session = session or session_for(args.profile, "logs")
        tgt = target(args.config)
        sagemaker = session.client("sagemaker", region_name=tgt.region)
        log_group, stream = node_stream(sagemaker, tgt.name, args.node)
        read(session.client("logs", region_name=tgt.region), log_group, stream, args.follow)
    except SystemExit as stop:
        print(stop if str(stop).startswith("logs:") else f"logs: {stop}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"logs: {one_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
