"""`make attach`: the attach step for a platform in attach mode (cluster.existing), run by the role the config names
(cluster.existing.attach_role_arn) after `make deploy`. It acts on the existing cluster only through Session Manager,
prints every command before it runs it, and asks first (`--yes` skips the question, `--dry-run` only prints).

    make attach CONFIG=config/examples/attach-existing-slurm.yaml [ARGS="--profiles --dry-run"]
    .venv/bin/python -m cli.attach --config ... [--profiles] [--dry-run] [--yes]

Partitions (a file system without an S3 link, storage.lustre.existing without data_bucket): on Slurm, one Session
Manager session to the existing controller (`aws ssm start-session --target sagemaker-cluster:<cluster id>_<controller
group>-<instance id> --document-name AWS-StartInteractiveCommand`, the way AWS's Studio + HyperPod template reaches
it: awslabs/awsome-distributed-ai@95b939cd 1.architectures/5.sagemaker-hyperpod/slurm-studio/studio-slurm.yaml,
`manage_fsx_partition`) runs lifecycle/attach/make_partitions.sh as root there: the partitions of the config's users
(per-user mode) or the shared one. The script travels inside the command, base64-encoded, and is never written to a
file on the node. With `--profiles`, the profiles created in the domain outside the stack (console, CLI) get their
partition too, and their FSx mount is merged into the profile (what lambda/fsx_partitions/profile_events.py does for
S3-linked file systems). Session Manager's own logging, where the account turns it on, records the session.

Exit status: 0 done; 1 not confirmed, or a partition refused on the node; 2 bad input, no credentials, an AWS error.
"""
from __future__ import annotations

import argparse
import base64
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cli.preconditions import loaded_config, missing_credentials, one_line  # noqa: E402
from platform_config import PlatformConfig  # noqa: E402

PARTITION_SCRIPT = ROOT / "lifecycle" / "attach" / "make_partitions.sh"
SHARED_PARTITION = "shared"  # stacks/studio_stack.py SHARED_PARTITION
PRIVATE_MODE, SHARED_MODE = "0700", "2775"
SESSION_DOCUMENT = "AWS-StartInteractiveCommand"


class AttachError(RuntimeError):
    pass


@dataclass(frozen=True)
class Partition:
    name: str
    uid: int
    gid: int
    mode: str

    @property
    def entry(self) -> str:
        return f"{self.name}:{self.uid}:{self.gid}:{self.mode}"


def partition_parent(cfg: PlatformConfig) -> str:
    """The partitions' parent below the mount, as Studio mounts them: <file_system_path>/<partition_root>."""
    base = cfg.storage.lustre.data_repository.file_system_path.strip("/")
    return f"{base}/{cfg.studio.partition_root}" if base else cfg.studio.partition_root


def config_partitions(cfg: PlatformConfig) -> list[Partition]:
    """What the stack's profiles mount: the shared partition (root, the shared group, 2775) or one per config user."""
    if cfg.shared_fsx:
        return [Partition(SHARED_PARTITION, 0, cfg.studio.shared_gid, SHARED_MODE)]
    return [Partition(u.name, u.uid, u.group_id, PRIVATE_MODE) for u in cfg.users]


def profile_partitions(sagemaker, domain_id: str, cfg: PlatformConfig) -> list[Partition]:
    """Profiles of the domain that are not config users, with the POSIX identity Studio runs them as. A profile
    without one (CustomPosixUserConfig) or whose uid is a config user's is refused: it would own someone else's
    files."""
    config_uids = {u.uid: u.name for u in cfg.users}
    found: list[Partition] = []
    names = [p["UserProfileName"] for page in sagemaker.get_paginator("list_user_profiles").paginate(
        DomainIdEquals=domain_id) for p in page["UserProfiles"]]
    for name in sorted(set(names) - {u.name for u in cfg.users}):
        settings = sagemaker.describe_user_profile(DomainId=domain_id, UserProfileName=name).get("UserSettings", {})
        posix = settings.get("CustomPosixUserConfig")
        if not posix:
            raise AttachError(f"profile {name}: no CustomPosixUserConfig, so Studio does not run it as a known uid; "
                              "give it one (UpdateUserProfile) or delete it")
        if posix["Uid"] in config_uids:
            raise AttachError(f"profile {name}: uid {posix['Uid']} is config user {config_uids[posix['Uid']]}'s; "
                              "a partition would give it their files")
        found.append(Partition(name, posix["Uid"], posix["Gid"], PRIVATE_MODE))
    return found


def remote_command(cfg: PlatformConfig, partitions: Sequence[Partition], script: bytes | None = None) -> str:
    """The shell command the session runs on the controller: the partition script, carried base64-encoded in the
    command (nothing is written to the node's disk), run by root with the mount, the parent and the entries."""
    payload = base64.b64encode(script if script is not None else PARTITION_SCRIPT.read_bytes()).decode()
    args = " ".join(shlex.quote(a) for a in [cfg.storage.lustre.mount_path, partition_parent(cfg),
                                               *(p.entry for p in partitions)])
    return f"sudo bash -c \"$(echo {payload} | base64 -d)\" make_partitions {args}"


def controller_target(sagemaker, cfg: PlatformConfig) -> str:
    """Session Manager's target for the existing controller: sagemaker-cluster:<cluster id>_<group>-<instance id>
    (HyperPod developer guide, "Access your SageMaker HyperPod cluster nodes"), after checking the cluster is the one
    the config names and in service."""
    existing = cfg.cluster.existing
    cluster = sagemaker.describe_cluster(ClusterName=existing.name)
    if cluster["ClusterArn"] != existing.arn:
        raise AttachError(f"cluster.existing.arn: {existing.arn!r}, but cluster {existing.name} is "
                          f"{cluster['ClusterArn']!r}")
    if cluster.get("ClusterStatus") != "InService":
        raise AttachError(f"cluster {existing.name} is {cluster.get('ClusterStatus')}, not InService; try again once "
                          "it is")
    nodes = [n for page in sagemaker.get_paginator("list_cluster_nodes").paginate(
        ClusterName=existing.name, InstanceGroupNameContains=existing.controller_group)
        for n in page["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == existing.controller_group and n["InstanceStatus"]["Status"] == "Running"]
    if not nodes:
        raise AttachError(f"cluster.existing.controller_group: no running node in group "
                          f"{existing.controller_group!r} of cluster {existing.name}")
    cluster_id = existing.arn.rsplit("/", 1)[1]
    return f"sagemaker-cluster:{cluster_id}_{existing.controller_group}-{nodes[0]['InstanceId']}"


def session_command(target: str, command: str, region: str) -> list[str]:
    """The AWS CLI command line that runs `command` on `target` (needs the session-manager-plugin)."""
    import json
    return ["aws", "ssm", "start-session", "--region", region, "--target", target, "--document-name",
            SESSION_DOCUMENT, "--parameters", json.dumps({"command": [command]})]


def domain_id(cloudformation, cfg: PlatformConfig) -> str:
    stack = cloudformation.describe_stacks(StackName=f"{cfg.name}-studio")["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    if "DomainId" not in outputs:
        raise AttachError(f"stack {cfg.name}-studio has no DomainId output; run `make deploy` first")
    return outputs["DomainId"]


def merge_mounts(sagemaker, domain: str, cfg: PlatformConfig, partitions: Sequence[Partition]) -> None:
    """Mount each profile's partition (keeping its other file systems), as the S3 path's event handler does."""
    sys.path.insert(0, str(ROOT / "lambda" / "fsx_partitions"))
    from partitions import merge_file_system_config  # lambda/fsx_partitions/partitions.py
    parent = "/" + partition_parent(cfg)
    for p in partitions:
        merge_file_system_config(sagemaker, domain, p.name, cfg.storage.lustre.existing.file_system_id,
                                 f"{parent}/{p.name}")


def run(argv: list[str] | None = None, clients: Callable[[str], object] | None = None,
        execute: Callable[[list[str]], int] | None = None, ask: Callable[[str], str] = input) -> int:
    args = parse_args(argv)
    cfg = loaded_config(args.config)
    if cfg is None:
        return 2
    existing = cfg.cluster.existing
    if existing is None:
        print(f"{args.config}: not an attach config (no cluster.existing); nothing to attach", file=sys.stderr)
        return 2
    if cfg.orchestrator != "slurm":
        print("orchestrator: eks: the partition Job is not part of `make attach` yet; create the partitions as "
              "docs/attach.md shows", file=sys.stderr)
        return 2
    if cfg.storage.lustre.existing.data_bucket is not None:
        print("storage.lustre.existing.data_bucket is set: the stack creates the partitions through S3; nothing to "
              "do on the controller", file=sys.stderr)
        return 0
    if clients is None:
        problem = missing_credentials(args.profile)
        if problem:
            print(problem, file=sys.stderr)
            return 2
        import boto3
        session = boto3.Session(profile_name=args.profile, region_name=cfg.deployment.region)
        clients = session.client
    from botocore.exceptions import BotoCoreError, ClientError
    try:
        sagemaker = clients("sagemaker")
        partitions = config_partitions(cfg)
        extra: list[Partition] = []
        domain = ""
        if args.profiles:
            domain = domain_id(clients("cloudformation"), cfg)
            extra = profile_partitions(sagemaker, domain, cfg)
        target = controller_target(sagemaker, cfg)
    except (AttachError, ClientError, BotoCoreError) as error:
        print(one_line(error), file=sys.stderr)
        return 2
    command = session_command(target, remote_command(cfg, [*partitions, *extra]), cfg.deployment.region)
    print(f"cluster {existing.name}, controller {target}")
    print(f"partitions under {cfg.storage.lustre.mount_path}/{partition_parent(cfg)}: "
          + ", ".join(f"{p.name} ({p.uid}:{p.gid} {p.mode})" for p in [*partitions, *extra]))
    print("runs, as root on the controller, lifecycle/attach/make_partitions.sh through:")
    print("  " + shlex.join(command[:-2]) + " --parameters '<the command: the script, base64, and its arguments>'")
    if args.dry_run:
        print(command[-1])
        return 0
    if not args.yes and ask(f"Type the platform's name ({cfg.name}) to go on: ").strip() != cfg.name:
        print("not confirmed; nothing changed", file=sys.stderr)
        return 1
    status = (execute or (lambda cmd: subprocess.run(cmd, check=False).returncode))(command)
    if status != 0:
        print(f"the session ended with status {status}: see the lines above (a refused partition names why)",
              file=sys.stderr)
        return 1
    if extra:
        try:
            merge_mounts(sagemaker, domain, cfg, extra)
        except (ClientError, BotoCoreError, ValueError) as error:
            print(one_line(error), file=sys.stderr)
            return 2
        print(f"mounted their partitions in {len(extra)} profile(s) created outside the stack")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make attach", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="an attach config (cluster.existing)")
    parser.add_argument("--profile", help="AWS profile (default: boto3's chain)")
    parser.add_argument("--profiles", action="store_true",
                        help="also the partitions of profiles created in the domain outside the stack")
    parser.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run())
