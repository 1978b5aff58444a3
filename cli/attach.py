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

On EKS (cluster.existing.partition_claim): a Kubernetes Job, as AWS's Studio + HyperPod EKS template makes them
(sagemaker-studio-fsx-stack.yaml, `create_fsx_partition`: a pod mounting the file system's claim), runs the same script
as root in cluster.existing.partition_image with the claim mounted; the script comes in a ConfigMap. `make attach`
applies both with the caller's kubectl context, waits for the Job and prints its log.

Slurm login (Slurm, every run): a Studio space is a login node of the existing cluster once the Slurm login secret holds
its controller's slurm.conf, Slurm version, munge key and client bundle, which the platform's own controller
publishes in build mode (lifecycle/hyperpod/publish_slurm_login.sh). Here a session runs
lifecycle/attach/read_slurm_login.sh as root on the existing controller, from a tools archive this step stores under
the lifecycle bucket's slurm-client/ prefix and the controller fetches by a presigned URL, checked against the sha256
in the command. It builds the same value (lifecycle/hyperpod/lib/slurm_login_value.py) and the controller's own client
bundle (build_slurm_client_bundle.sh) and uploads both through presigned PUT URLs, so the munge key never appears in the
session's output. This step then checks them (the bundle's bytes against the sha256 the value names, the names Studio
expects), stores the bundle under its sha256 name, writes the secret when it changed, and deletes the hand-over
objects. Studio's lifecycle config installs the bundle only if its sha256 is the secret's (slurm_login_node.sh), as in
build mode.

Per-user auth/jwt (Slurm, `shared_fsx: false`): Studio spaces get no munge key, so the existing slurmctld must accept
Slurm's auth/jwt tokens, signed with a key only it and the platform's token issuer hold. Before the login step, a first
session runs lifecycle/attach/enable_slurm_jwt.sh `plan` on the controller (from the same tools archive), which prints
the exact change (the key file it makes, the diff of the file slurm.conf includes, the backup, the reconfigure or
restart, the rollback); nothing changes until you confirm (or pass `--yes`). A second session then runs it with
`apply`: backup, key, settings, `scontrol reconfigure`, and a rollback when `scontrol ping` does not report slurmctld
UP or it refuses the key's tokens. It hands the key over through a presigned PUT URL; this step writes it to the
platform's key secret (<name>/slurm-jwt-key, read by the token issuer only) and deletes the hand-over object. A second
run changes nothing on the controller. The login step then publishes the login value without a munge key.

Exit status: 0 done; 1 not confirmed, or a step refused (or rolled back) on the node; 2 bad input, no credentials, an
AWS error.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import io
import json
import secrets
import shlex
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from typing import Any
from pathlib import Path
from collections.abc import Callable, Sequence

from cli.preconditions import loaded_config, missing_credentials, one_line
from platform_config import PlatformConfig
from platform_config.attach import ExistingCluster
from platform_config.storage import ExistingLustre

ROOT = Path(__file__).resolve().parent.parent

PARTITION_SCRIPT = ROOT / "lifecycle" / "attach" / "make_partitions.sh"
SHARED_PARTITION = "shared"  # stacks/studio_stack.py StudioStack.SHARED_PARTITION
PRIVATE_MODE, SHARED_MODE = "0700", "2775"
SESSION_DOCUMENT = "AWS-StartInteractiveCommand"
# The prefix of the lifecycle bucket the attach role may write (constructs/lifecycle_scripts.py SLURM_CLIENT_PREFIX;
# importing it would start the CDK's kernel): the client bundle, and the hand-over objects of this step.
SLURM_CLIENT_PREFIX = "slurm-client"
# What the controller runs for the login step, by its name in the archive (the repository's layout below lifecycle/).
LOGIN_TOOLS = (
    "attach/read_slurm_login.sh",
    "attach/enable_slurm_jwt.sh",
    "hyperpod/lib/common.sh",
    "hyperpod/lib/jwt_probe.py",
    "hyperpod/lib/marked_block.py",
    "hyperpod/lib/slurm_login_value.py",
    "hyperpod/build_slurm_client_bundle.sh",
)
PRESIGNED_SECONDS = 3600


class AttachError(RuntimeError):
    pass


def existing_cluster(cfg: PlatformConfig) -> ExistingCluster:
    """cluster.existing: `make attach` runs only on an attach config (run() refuses any other)."""
    if cfg.cluster.existing is None:
        raise AttachError("cluster.existing: not set; make attach is for a platform in front of an existing cluster")
    return cfg.cluster.existing


def existing_lustre(cfg: PlatformConfig) -> ExistingLustre:
    """storage.lustre.existing: the config's attach rules require it with cluster.existing."""
    if cfg.storage.lustre.existing is None:
        raise AttachError("storage.lustre.existing: not set; an attach config names the file system the cluster mounts")
    return cfg.storage.lustre.existing


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
    names = [
        p["UserProfileName"]
        for page in sagemaker.get_paginator("list_user_profiles").paginate(DomainIdEquals=domain_id)
        for p in page["UserProfiles"]
    ]
    for name in sorted(set(names) - {u.name for u in cfg.users}):
        settings = sagemaker.describe_user_profile(DomainId=domain_id, UserProfileName=name).get("UserSettings", {})
        posix = settings.get("CustomPosixUserConfig")
        if not posix:
            raise AttachError(
                f"profile {name}: no CustomPosixUserConfig, so Studio does not run it as a known uid; "
                "give it one (UpdateUserProfile) or delete it"
            )
        if posix["Uid"] in config_uids:
            raise AttachError(
                f"profile {name}: uid {posix['Uid']} is config user {config_uids[posix['Uid']]}'s; "
                "a partition would give it their files"
            )
        found.append(Partition(name, posix["Uid"], posix["Gid"], PRIVATE_MODE))
    return found


def remote_command(cfg: PlatformConfig, partitions: Sequence[Partition], script: bytes | None = None) -> str:
    """The shell command the session runs on the controller: the partition script, carried base64-encoded in the
    command (nothing is written to the node's disk), run by root with the mount, the parent and the entries."""
    payload = base64.b64encode(script if script is not None else PARTITION_SCRIPT.read_bytes()).decode()
    args = " ".join(
        shlex.quote(a) for a in [cfg.storage.lustre.mount_path, partition_parent(cfg), *(p.entry for p in partitions)]
    )
    return f'sudo bash -c "$(echo {payload} | base64 -d)" make_partitions {args}'


def controller_target(sagemaker, cfg: PlatformConfig) -> str:
    """Session Manager's target for the existing controller: sagemaker-cluster:<cluster id>_<group>-<instance id>
    (HyperPod developer guide, "Access your SageMaker HyperPod cluster nodes"), after checking the cluster is the one
    the config names and in service."""
    existing = existing_cluster(cfg)
    cluster = sagemaker.describe_cluster(ClusterName=existing.name)
    if cluster["ClusterArn"] != existing.arn:
        raise AttachError(
            f"cluster.existing.arn: {existing.arn!r}, but cluster {existing.name} is {cluster['ClusterArn']!r}"
        )
    if cluster.get("ClusterStatus") != "InService":
        raise AttachError(
            f"cluster {existing.name} is {cluster.get('ClusterStatus')}, not InService; try again once it is"
        )
    nodes = [
        n
        for page in sagemaker.get_paginator("list_cluster_nodes").paginate(
            ClusterName=existing.name, InstanceGroupNameContains=existing.controller_group
        )
        for n in page["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == existing.controller_group and n["InstanceStatus"]["Status"] == "Running"
    ]
    if not nodes:
        raise AttachError(
            f"cluster.existing.controller_group: no running node in group "
            f"{existing.controller_group!r} of cluster {existing.name}"
        )
    cluster_id = existing.arn.rsplit("/", 1)[1]
    return f"sagemaker-cluster:{cluster_id}_{existing.controller_group}-{nodes[0]['InstanceId']}"


def session_command(target: str, command: str, region: str) -> list[str]:
    """The AWS CLI command line that runs `command` on `target` (needs the session-manager-plugin)."""
    return [
        "aws",
        "ssm",
        "start-session",
        "--region",
        region,
        "--target",
        target,
        "--document-name",
        SESSION_DOCUMENT,
        "--parameters",
        json.dumps({"command": [command]}),
    ]


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
        merge_file_system_config(sagemaker, domain, p.name, existing_lustre(cfg).file_system_id, f"{parent}/{p.name}")


JOB_MOUNT = "/fsx"  # where the partition Job mounts the claim (the file system's root)


def partition_job(cfg: PlatformConfig, partitions: Sequence[Partition], script: bytes | None = None) -> list[dict]:
    """A ConfigMap holding make_partitions.sh and a Job running it as root with the claim mounted at JOB_MOUNT. Named
    after what it does (the entries and the script), so a rerun with the same partitions is the same Job."""
    existing = existing_cluster(cfg)
    body = (script if script is not None else PARTITION_SCRIPT.read_bytes()).decode()
    args = [JOB_MOUNT, partition_parent(cfg), *(p.entry for p in partitions)]
    digest = hashlib.sha256(json.dumps([body, args]).encode()).hexdigest()[:10]
    name = f"{cfg.name[:30]}-partitions-{digest}".lower()
    labels = {"app.kubernetes.io/name": "studio-partitions", "app.kubernetes.io/part-of": cfg.name.lower()}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": existing.partition_namespace, "labels": labels},
        "data": {"make_partitions.sh": body},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": existing.partition_namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "partitions",
                            "image": existing.partition_image,
                            "command": ["bash", "/attach/make_partitions.sh"],
                            "args": args,
                            # root: it creates root-owned parents and chowns each partition to its user
                            "securityContext": {
                                "runAsUser": 0,
                                "runAsGroup": 0,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
                            },
                            "volumeMounts": [
                                {"name": "fsx", "mountPath": JOB_MOUNT},
                                {"name": "script", "mountPath": "/attach", "readOnly": True},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "fsx", "persistentVolumeClaim": {"claimName": existing.partition_claim}},
                        {"name": "script", "configMap": {"name": name}},
                    ],
                },
            },
        },
    }
    return [config_map, job]


def kubectl_steps(objects: list[dict], manifest: Path) -> list[list[str]]:
    """Apply, wait for the Job, print its log (the caller's current kubectl context)."""
    job = objects[-1]["metadata"]
    return [
        ["kubectl", "apply", "-f", str(manifest)],
        ["kubectl", "-n", job["namespace"], "wait", "--for=condition=complete", "--timeout=600s", f"job/{job['name']}"],
        ["kubectl", "-n", job["namespace"], "logs", f"job/{job['name']}"],
    ]


def tools_archive() -> bytes:
    """LOGIN_TOOLS as a reproducible tar.gz (sorted, fixed owner and times, gzip without a timestamp)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(LOGIN_TOOLS):
            data = (ROOT / "lifecycle" / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime, info.uid, info.gid = len(data), 0o755, 0, 0, 0
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


@dataclass(frozen=True)
class LoginHandover:
    bucket: str
    value_key: str
    bundle_key: str
    remote: str  # the command the session runs on the controller


def store_tools(s3, bucket: str) -> tuple[str, str]:
    """Stores the tools archive under its sha256 name; returns (key, sha256)."""
    archive = tools_archive()
    sha = hashlib.sha256(archive).hexdigest()
    key = f"{SLURM_CLIENT_PREFIX}/attach-tools-{sha}.tar.gz"
    s3.put_object(Bucket=bucket, Key=key, Body=archive)
    return key, sha


def presigned(s3, method: str, bucket: str, key: str) -> str:
    return s3.generate_presigned_url(method, Params={"Bucket": bucket, "Key": key}, ExpiresIn=PRESIGNED_SECONDS)


def tools_command(s3, bucket: str, tools: tuple[str, str], tool: str, *args: str) -> str:
    """The command a session runs as root on the controller: fetch the tools archive by a presigned URL, check its
    sha256, unpack it in a private directory (removed on exit) and run `tool` (its path in the archive) with args."""
    key, sha = tools
    script = (
        'set -euo pipefail; d="$(mktemp -d)"; trap \'rm -rf "$d"\' EXIT; '
        f'curl -fsS -o "$d/tools.tgz" {shlex.quote(presigned(s3, "get_object", bucket, key))}; '
        f'echo "{sha}  $d/tools.tgz" | sha256sum -c --quiet; tar -xzf "$d/tools.tgz" -C "$d"; '
        f'bash "$d/{tool}" ' + " ".join(shlex.quote(a) for a in args)
    )
    return f"sudo bash -c {shlex.quote(script)}"


def prepare_login(
    s3, bucket: str, nonce: str | None = None, auth: str = "munge", tools: tuple[str, str] | None = None
) -> LoginHandover:
    """Stores the tools archive (named by its sha256), signs the URLs for this run and builds the command."""
    tools = tools or store_tools(s3, bucket)
    nonce = nonce or secrets.token_hex(8)
    value_key = f"{SLURM_CLIENT_PREFIX}/attach-{nonce}/value.json"
    bundle_key = f"{SLURM_CLIENT_PREFIX}/attach-{nonce}/bundle.tar.gz"
    remote = tools_command(
        s3,
        bucket,
        tools,
        "attach/read_slurm_login.sh",
        auth,
        f"s3://{bucket}/{SLURM_CLIENT_PREFIX}/",
        presigned(s3, "put_object", bucket, value_key),
        presigned(s3, "put_object", bucket, bundle_key),
    )
    return LoginHandover(bucket=bucket, value_key=value_key, bundle_key=bundle_key, remote=remote)


@dataclass(frozen=True)
class JwtHandover:
    bucket: str
    key_key: str
    plan: str  # the command that prints the controller-side change
    apply: str  # the command that makes it and hands the key over


def prepare_jwt(s3, bucket: str, nonce: str | None = None, tools: tuple[str, str] | None = None) -> JwtHandover:
    """The two sessions of the auth/jwt step (enable_slurm_jwt.sh plan, then apply) and where the key comes back."""
    tools = tools or store_tools(s3, bucket)
    key_key = f"{SLURM_CLIENT_PREFIX}/attach-{nonce or secrets.token_hex(8)}/jwt_key.json"
    return JwtHandover(
        bucket=bucket,
        key_key=key_key,
        plan=tools_command(s3, bucket, tools, "attach/enable_slurm_jwt.sh", "plan"),
        apply=tools_command(
            s3, bucket, tools, "attach/enable_slurm_jwt.sh", "apply", presigned(s3, "put_object", bucket, key_key)
        ),
    )


def jwt_key_secret_name(cfg: PlatformConfig) -> str:
    """constructs/platform_role_names.py slurm_jwt_key_secret_name (importing it would start the CDK's kernel)."""
    return f"{cfg.name}/slurm-jwt-key"


def finish_jwt(s3, secretsmanager, handover: JwtHandover, secret_id: str) -> str:
    """Checks the key the controller handed over (an HS256 key of at least 32 bytes) and writes it to the key secret;
    the hand-over object is deleted whatever happens. Returns a one-line summary. The attach role may not read the
    secret (its policy lets only the token issuer read: stacks/slurm_login_stack.py, OnlyTheTokenIssuerReads), so a
    rerun is made idempotent by the version's ClientRequestToken, derived from the value: Secrets Manager ignores a
    PutSecretValue whose token and value match an existing version (PutSecretValue, ClientRequestToken:
    https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_PutSecretValue.html)."""
    try:
        value = json.loads(s3.get_object(Bucket=handover.bucket, Key=handover.key_key)["Body"].read())
        if not isinstance(value, dict) or set(value) != {"jwt_hs256_key_b64"}:
            raise AttachError(
                'the controller handed over something else than {"jwt_hs256_key_b64": ...}; nothing written'
            )
        if len(base64.b64decode(value["jwt_hs256_key_b64"], validate=True)) < 32:
            raise AttachError("the controller handed over no auth/jwt key of 32 bytes or more; nothing written")
        string = json.dumps(value)
        version = hashlib.sha256(b"hyperpod-platform slurm-jwt-key\n" + string.encode()).hexdigest()
        secretsmanager.put_secret_value(SecretId=secret_id, SecretString=string, ClientRequestToken=version)
        return f"the auth/jwt key is in {secret_id} (version {version[:12]}...; a rerun with the same key adds none)"
    finally:
        s3.delete_object(Bucket=handover.bucket, Key=handover.key_key)


LOGIN_FIELDS = (
    "slurm_version",
    "controller_host",
    "controller_addr",
    "controllers",
    "slurmctld_port",
    "cluster_name",
    "auth",
    "slurm_conf",
    "slurm_conf_includes",
    "client_bundle",
)


def finish_login(s3, secretsmanager, handover: LoginHandover, secret_arn: str, auth: str = "munge") -> str:
    """Checks what the controller handed over, stores the bundle under its sha256 name, writes the secret when it
    changed; the hand-over objects are deleted whatever happens. Returns a one-line summary. In per-user mode
    (auth jwt) the value must hold no munge key; in shared mode it must hold one."""
    try:
        value = json.loads(s3.get_object(Bucket=handover.bucket, Key=handover.value_key)["Body"].read())
        missing = [f for f in LOGIN_FIELDS if f not in value]
        if missing or value.get("auth") != auth or ("munge_key_b64" in value) != (auth == "munge"):
            raise AttachError(
                f"the controller's login value lacks {missing or f'auth: {auth}'} (or has a munge key "
                "in per-user mode, or none in shared mode); nothing written"
            )
        bundle = value["client_bundle"]
        data = s3.get_object(Bucket=handover.bucket, Key=handover.bundle_key)["Body"].read()
        sha = hashlib.sha256(data).hexdigest()
        prefix = f"s3://{handover.bucket}/{SLURM_CLIENT_PREFIX}/"
        name = bundle.get("s3_uri", "").removeprefix(prefix)
        if (
            sha != bundle.get("sha256")
            or not bundle.get("s3_uri", "").startswith(prefix)
            or name != f"slurm-client-{value['slurm_version']}-{sha}.tar.gz"
        ):
            raise AttachError(
                f"the client bundle handed over (sha256 {sha}) is not the one the value names "
                f"({bundle.get('s3_uri')}, {bundle.get('sha256')}); nothing written"
            )
        s3.put_object(Bucket=handover.bucket, Key=f"{SLURM_CLIENT_PREFIX}/{name}", Body=data)
        try:
            current = json.loads(secretsmanager.get_secret_value(SecretId=secret_arn)["SecretString"])
        except secretsmanager.exceptions.ResourceNotFoundException:  # a new secret has no value yet
            current = None
        if current != value:
            secretsmanager.put_secret_value(SecretId=secret_arn, SecretString=json.dumps(value, sort_keys=True))
        return (
            f"Slurm {value['slurm_version']} of cluster {value['cluster_name']}, slurmctld "
            f"{value['controller_host']} ({value['controller_addr']}), bundle {name}: "
            + ("secret updated" if current != value else "secret already current")
        )
    finally:
        for key in (handover.value_key, handover.bundle_key):
            s3.delete_object(Bucket=handover.bucket, Key=key)


def stack_outputs(cloudformation, stack_name: str) -> dict[str, str]:
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def run(
    argv: list[str] | None = None,
    clients: Callable[[str], Any] | None = None,
    execute: Callable[[list[str]], int] | None = None,
    ask: Callable[[str], str] = input,
) -> int:
    args = parse_args(argv)
    cfg = loaded_config(args.config)
    if cfg is None:
        return 2
    existing = cfg.cluster.existing
    if existing is None:
        print(f"{args.config}: not an attach config (no cluster.existing); nothing to attach", file=sys.stderr)
        return 2
    if cfg.orchestrator != "slurm":
        return run_eks(args, cfg, execute, ask)
    auth = "munge" if cfg.shared_fsx else "jwt"
    steps = [s for s in ("jwt", "login", "partitions") if args.step in (s, "all")]
    if existing_lustre(cfg).data_bucket is not None and "partitions" in steps:
        print("storage.lustre.existing.data_bucket is set: the stack creates the partitions through S3")
        steps.remove("partitions")
    if "jwt" in steps and auth == "munge":
        if args.step == "jwt":
            print(
                "shared_fsx: true: Studio users authenticate with the cluster's munge key; per-user auth/jwt is "
                "for shared_fsx: false",
                file=sys.stderr,
            )
            return 2
        steps.remove("jwt")
    if not steps:
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

    run_session = execute or (lambda cmd: subprocess.run(cmd, check=False).returncode)
    try:
        sagemaker = clients("sagemaker")
        target = controller_target(sagemaker, cfg)
        print(f"cluster {existing.name}, controller {target}")
        partitions: list[Partition] = []
        extra: list[Partition] = []
        domain = ""
        if "partitions" in steps:
            partitions = config_partitions(cfg)
            if args.profiles:
                domain = domain_id(clients("cloudformation"), cfg)
                extra = profile_partitions(sagemaker, domain, cfg)
            print(
                f"partitions: as root, lifecycle/attach/make_partitions.sh under {cfg.storage.lustre.mount_path}/"
                f"{partition_parent(cfg)}: "
                + ", ".join(f"{p.name} ({p.uid}:{p.gid} {p.mode})" for p in [*partitions, *extra])
            )
        if "jwt" in steps:
            print(
                "jwt: as root, lifecycle/attach/enable_slurm_jwt.sh turns on auth/jwt at slurmctld (per-user "
                "mode): a first session prints the exact change and changes nothing, then you are asked, then a "
                "second session makes it (backup, key, settings, reconfigure; rollback when slurmctld does not come "
                f"back) and the key goes into the secret {jwt_key_secret_name(cfg)}"
            )
        if "login" in steps:
            print(
                "login: as root, lifecycle/attach/read_slurm_login.sh reads slurm.conf, the Slurm version"
                + (", the munge key" if auth == "munge" else " (no munge key: per-user mode)")
                + " and the controller's client; they come back through presigned S3 URLs and go into the Slurm "
                "login secret"
            )
        print("each through: " + shlex.join(session_command(target, "<command>", cfg.deployment.region)))
        if args.dry_run:
            if partitions or extra:
                print(remote_command(cfg, [*partitions, *extra]))
            return 0
        question = f"Type the platform's name ({cfg.name}) to go on: "
        s3: Any = None  # a boto3 client (boto3 ships no types)
        bucket: str | None = None
        tools: tuple[str, str] | None = None
        if "jwt" in steps or "login" in steps:
            s3 = clients("s3")
            bucket = stack_outputs(clients("cloudformation"), f"{cfg.name}-storage")["LifecycleBucketName"]
            tools = store_tools(s3, bucket)
        if "jwt" in steps:
            assert bucket is not None  # looked up above for the jwt and login steps
            handover = prepare_jwt(s3, bucket, tools=tools)
            print("jwt: the change on the controller (nothing is changed yet):", flush=True)
            status = run_session(session_command(target, handover.plan, cfg.deployment.region))
            if status != 0:
                print(
                    f"jwt: the controller refused (status {status}, see the lines above); nothing changed",
                    file=sys.stderr,
                )
                return 1
            if (
                not args.yes
                and ask(f"Type the platform's name ({cfg.name}) to make this change on the controller: ").strip()
                != cfg.name
            ):
                print("not confirmed; nothing changed", file=sys.stderr)
                return 1
            question = ""  # confirmed once for the whole run
            status = run_session(session_command(target, handover.apply, cfg.deployment.region))
            if status != 0:
                s3.delete_object(Bucket=bucket, Key=handover.key_key)
                print(
                    f"jwt: the session ended with status {status}; see the lines above (when slurmctld did not come "
                    "back, the script restored the backup and says so)",
                    file=sys.stderr,
                )
                return 1
            print("jwt: " + finish_jwt(s3, clients("secretsmanager"), handover, jwt_key_secret_name(cfg)))
        if question and not args.yes and ask(question).strip() != cfg.name:
            print("not confirmed; nothing changed", file=sys.stderr)
            return 1
        if "login" in steps:
            secret_arn = stack_outputs(clients("cloudformation"), f"{cfg.name}-slurm-login")["SlurmLoginSecretArn"]
            assert bucket is not None  # looked up above for the jwt and login steps
            login = prepare_login(s3, bucket, auth=auth, tools=tools)
            status = run_session(session_command(target, login.remote, cfg.deployment.region))
            if status != 0:
                for key in (login.value_key, login.bundle_key):
                    s3.delete_object(Bucket=bucket, Key=key)
                print(f"login: the session ended with status {status}; see the lines above", file=sys.stderr)
                return 1
            print("login: " + finish_login(s3, clients("secretsmanager"), login, secret_arn, auth=auth))
        if partitions or extra:
            status = run_session(
                session_command(target, remote_command(cfg, [*partitions, *extra]), cfg.deployment.region)
            )
            if status != 0:
                print(
                    f"partitions: the session ended with status {status}: see the lines above (a refused "
                    "partition names why)",
                    file=sys.stderr,
                )
                return 1
            if extra:
                merge_mounts(sagemaker, domain, cfg, extra)
                print(f"partitions: mounted in {len(extra)} profile(s) created outside the stack")
    except (AttachError, ClientError, BotoCoreError, ValueError, KeyError) as error:
        print(one_line(error), file=sys.stderr)
        return 2
    return 0


def run_eks(
    args: argparse.Namespace, cfg: PlatformConfig, execute: Callable[[list[str]], int] | None, ask: Callable[[str], str]
) -> int:
    """EKS: the partition Job, when the file system has no S3 link (the access entries are the eks-access stack's)."""
    existing = existing_cluster(cfg)
    if existing_lustre(cfg).data_bucket is not None or existing.partition_claim is None:
        print(
            "nothing to do on EKS: the stack makes the partitions through the file system's S3 link, and the Studio "
            "roles' access entries are in the eks-access stack"
        )
        return 0
    import tempfile

    objects = partition_job(cfg, config_partitions(cfg))
    manifest = Path(tempfile.mkdtemp(prefix="attach-")) / "partitions.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=1))
    steps = kubectl_steps(objects, manifest)
    print(
        f"partitions: a Job in namespace {existing.partition_namespace} runs lifecycle/attach/make_partitions.sh as "
        f"root in {existing.partition_image} with claim {existing.partition_claim} mounted; through your kubectl "
        f"context (the EKS cluster {existing.eks_cluster_name}):"
    )
    print("\n".join("  " + shlex.join(step) for step in steps) + f"\n  ({manifest})")
    if args.dry_run:
        print(manifest.read_text())
        return 0
    if not args.yes and ask(f"Type the platform's name ({cfg.name}) to go on: ").strip() != cfg.name:
        print("not confirmed; nothing changed", file=sys.stderr)
        return 1
    run_step = execute or (lambda cmd: subprocess.run(cmd, check=False).returncode)
    for step in steps:
        status = run_step(step)
        if status != 0:
            print(
                f"`{shlex.join(step)}` ended with status {status}; see the Job's log (a refused partition names why)",
                file=sys.stderr,
            )
            return 1
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cli.attach", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="an attach config (cluster.existing)")
    parser.add_argument("--profile", help="AWS profile (default: boto3's chain)")
    parser.add_argument(
        "--profiles",
        action="store_true",
        help="also the partitions of profiles created in the domain outside the stack",
    )
    parser.add_argument(
        "--step",
        choices=("all", "jwt", "login", "partitions"),
        default="all",
        help="jwt: auth/jwt at the controller (per-user mode); login: the Slurm login secret; "
        "partitions: partitions without an S3 link; all (default)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run())
