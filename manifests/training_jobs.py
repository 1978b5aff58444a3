"""Elastic training jobs for the EKS orchestrator: typed inputs -> HyperPodPyTorchJob manifests.

Same layers as the config model (platform_config/): strict YAML, pydantic shapes and ranges, then `job_errors` for
cross-field rules, every problem reported at once as `path: value — what is allowed`. The platform's task-governance
teams and priority classes arrive as plain arguments, so this module does not depend on the platform config model.

Field names follow the HyperPod training operator (see the header of schemas/hyperpodpytorchjob-crd.yaml);
queue and priority labels follow HyperPod task governance: `hyperpod-ns-<team>-localqueue`, `<priority>-priority`.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin
from collections.abc import Collection, Mapping

import yaml
from pydantic import BaseModel, Field, PositiveInt, ValidationError

from manifests.kubernetes_objects import JOB_SERVICE_ACCOUNT, MLFLOW_CONFIG_MAP, MLFLOW_URI_KEY
from platform_config import ConfigError
from platform_config.fields import InstanceType, PinnedImage, PosixName, Strict, pattern
from platform_config.loading import StrictYamlLoader, format_pydantic_error
from manifests.team_identities import StudioFiles

API_VERSION = "sagemaker.amazonaws.com/v1"
KIND = "HyperPodPyTorchJob"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
FSX_CLAIM = "fsx-claim"  # the team's own FSx directory (manifests/kubernetes_objects.py)
FSX_MOUNT = "/fsx"
DATASETS_CLAIM = "fsx-datasets"  # the shared datasets directory, read-only
DATASETS_MOUNT = "/datasets"
ACCELERATORS = ("nvidia.com/gpu", "aws.amazon.com/neurondevice")
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# hyperpod-elastic-agent 1.1.3 reports a scaling event to the training script (elastic_event_detected()) only in
# this mode; the agent hands its own environment's value to the workers, so it is set on the container
# (hyperpod_elastic_agent/elastic_event_handler.py and elastic_agent/hyperpod_elastic_agent.py worker_env, 1.1.3 sdist).
SIGNAL_COORDINATION = {"name": "HYPERPOD_SIGNAL_COORDINATION", "value": "distributed"}
# Where the agent's rendezvous writes pod_resourceconfig.json (rendezvous/hyperpod_rendezvous_backend.py, 1.1.3): an
# emptyDir there is writable whatever user the pod runs as, not only by the image's own user.
AGENT_CONFIG_DIR = "/opt/ml/input/config"
# The tracking server's ARN, from the ConfigMap the cluster stack puts in each team namespace when MLflow is on;
# optional, so without MLflow the variable is simply unset and the scripts log nothing.
MLFLOW_ENV = {
    "name": "MLFLOW_TRACKING_URI",
    "valueFrom": {"configMapKeyRef": {"name": MLFLOW_CONFIG_MAP, "key": MLFLOW_URI_KEY, "optional": True}},
}
# Artifacts go through URLs the tracking server issues, so a job needs no S3 rights on the server's artifact bucket:
# sagemaker-mlflow 0.5.0 (the image's pin) sagemaker_mlflow/s3_presigned_artifact_repo.py, registered as MLflow's s3
# artifact repository; its README, "Presigned S3 artifact uploads" (aws/sagemaker-mlflow). The request is a
# sagemaker-mlflow action on the server, which the team's job role has (constructs/mlflow_job_access.py).
PRESIGNED_UPLOAD = {"name": "SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED", "value": "true"}
# The uid a job runs as has no home in the image (HOME would be /): an emptyDir is its home, writable by any uid.
HOME = "/home/job"
# Set by the renderer on every job, with where the value comes from; train_elastic.py reads the first three.
RESERVED_ENV = {
    "CHECKPOINT_DIR": "from checkpoint_dir",
    "GLOBAL_BATCH_SIZE": "from global_batch_size",
    "MICRO_BATCH_SIZE": "from micro_batch_size",
    SIGNAL_COORDINATION["name"]: "always 'distributed': the elastic agent reports scaling events only then",
    MLFLOW_ENV["name"]: f"from the team namespace's ConfigMap {MLFLOW_CONFIG_MAP}",
    PRESIGNED_UPLOAD["name"]: "always 'true': MLflow artifacts go through the tracking server's URLs",
    "HOME": f"always {HOME}, an emptyDir: the job's uid has no home in the image",
}


def namespace(team: str) -> str:
    return f"hyperpod-ns-{team}"


def queue_name(team: str) -> str:
    return f"hyperpod-ns-{team}-localqueue"


def priority_label(priority: str) -> str:
    return f"{priority}-priority"


# Queue label values are at most 63 characters: "hyperpod-ns-" + team + "-localqueue" leaves 40 for the team.
KubeName = Annotated[
    str,
    pattern(
        r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
        "a Kubernetes name: 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit",
    ),
]
TeamName = Annotated[
    str,
    pattern(
        r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?",
        "a team name: 1-40 lowercase letters, digits and '-', starting and ending with a letter or digit",
    ),
]
PriorityName = Annotated[
    str,
    pattern(
        r"[a-z0-9]([-a-z0-9]{0,52}[a-z0-9])?",
        "a priority class name: 1-54 lowercase letters, digits and '-', starting and ending with a letter or digit",
    ),
]
EnvName = Annotated[str, pattern(r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable name such as NCCL_DEBUG")]
CheckpointDir = Annotated[
    str,
    pattern(
        rf"{FSX_MOUNT}(/(?!\.\.?(/|$))[a-zA-Z0-9._-]+)+",
        f"a directory under {FSX_MOUNT}, where the FSx claim {FSX_CLAIM} is mounted",
    ),
]


# ---------------------------------------------------------------------------------------------- models
class ElasticPolicy(Strict):
    """How far the job may scale, in replicas (pods, one per node).

    Set at most one of `replica_increment_step` (sizes min, min + step, ... up to max) and `replica_discrete_values`
    (exactly those sizes). With neither, every size from min to max is allowed and rendered as
    `replicaIncrementStep: 1`, so the manifest states the granularity the batch-size check assumed.
    The ranges below are this platform's guard rails, not the operator's limits.
    """

    min_replicas: int = Field(ge=1)
    max_replicas: int = Field(ge=1, le=512)
    replica_increment_step: int | None = Field(default=None, ge=1)
    replica_discrete_values: list[PositiveInt] | None = Field(default=None, min_length=1)
    # Time the job gets to checkpoint and exit on a scaling event before the operator stops it.
    graceful_shutdown_timeout_seconds: int = Field(default=600, ge=30, le=7200)
    # Delay before scaling up, so short-lived free capacity does not cause a restart.
    scaling_timeout_seconds: int = Field(default=60, ge=0, le=3600)
    # Wait for failed replicas to recover before scaling down instead.
    faulty_scale_down_timeout_seconds: int = Field(default=30, ge=0, le=3600)

    def sizes(self) -> list[int]:
        """Every replica count the job can run at."""
        if self.replica_discrete_values:
            return list(self.replica_discrete_values)
        return list(range(self.min_replicas, self.max_replicas + 1, self.replica_increment_step or 1))


class TrainingJob(Strict):
    name: KubeName
    team: TeamName
    priority: PriorityName
    # Unset: the platform's eks.training_image.
    image: PinnedImage | None = None
    command: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    args: list[str] = []  # noqa: RUF012 - a pydantic field: each job gets its own copy
    env: dict[EnvName, str] = {}  # noqa: RUF012 - a pydantic field: each job gets its own copy
    instance_type: InstanceType
    accelerator: Literal[ACCELERATORS] = "nvidia.com/gpu"  # type: ignore[valid-type]
    accelerators_per_pod: int = Field(ge=1, le=16)
    efa_per_pod: int = Field(default=0, ge=0, le=32)
    nproc_per_node: int = Field(ge=1, le=128)
    # Kept constant across world sizes; train_elastic.py derives gradient accumulation from it.
    global_batch_size: int = Field(ge=1)
    micro_batch_size: int = Field(default=1, ge=1)
    checkpoint_dir: CheckpointDir
    max_retries: int = Field(default=10, ge=0, le=100)
    # Pods run as this non-root user, with the team's group as fsGroup (it owns the team's FSx directory).
    run_as_user: int = Field(default=1000, ge=1, le=4000000)
    # The Studio user (a member of the team) the job runs as: their uid and Studio's gid for them, and their Studio
    # files (own partition, or the shared one) read-write at the path the cluster gives them, instead of the team's
    # directory at /fsx. The team's admission policy refuses pods that run as anyone but a member
    # (manifests/team_identities.py), so without `user` run_as_user must be a member's uid.
    user: PosixName | None = None
    elastic_policy: ElasticPolicy


class JobFile(Strict):
    jobs: list[TrainingJob] = Field(min_length=1)


# ---------------------------------------------------------------------------------------------- semantic rules
_NPROC_FLAG = re.compile(r"--nproc[-_]per[-_]node=(\S+)")


# team -> (the instance type of its quota, the most accelerators of that type it can ever be admitted for):
# platform_config.eks_governance.reachable_accelerators.
Reach = Mapping[str, tuple[str, int | None]]


def job_errors(
    job: TrainingJob,
    *,
    teams: Collection[str],
    priority_classes: Collection[str],
    path: str = "",
    reach: Reach | None = None,
) -> list[str]:
    """Cross-field rules for one job; `path` prefixes every error (e.g. 'jobs[2]'). With `reach`, a job larger than
    its team's quota can ever admit is refused."""
    errors: list[str] = []
    add = errors.append
    p = f"{path}." if path else ""

    if job.team not in teams:
        add(
            f"{p}team: {job.team!r} is not a team in the platform's task governance config; "
            f"allowed: {', '.join(sorted(teams)) or '(none configured)'}"
        )
    if job.priority not in priority_classes:
        add(
            f"{p}priority: {job.priority!r} is not a priority class in the platform's task governance config; "
            f"allowed: {', '.join(sorted(priority_classes)) or '(none configured)'}"
        )

    family = job.instance_type.split(".")[1]
    exposed = "aws.amazon.com/neurondevice" if family.startswith(("trn", "inf")) else "nvidia.com/gpu"
    if job.accelerator != exposed:
        add(f"{p}accelerator: {job.accelerator!r} on {job.instance_type!r}; this instance type exposes {exposed}")

    for key in sorted(set(job.env) & set(RESERVED_ENV)):
        add(f"{p}env.{key}: set by the renderer ({RESERVED_ENV[key]}); remove it here")
    for field in ("command", "args"):
        for i, arg in enumerate(getattr(job, field)):
            flag = _NPROC_FLAG.fullmatch(arg)
            if flag and flag.group(1) != str(job.nproc_per_node):
                add(f"{p}{field}[{i}]: {arg!r} disagrees with nproc_per_node {job.nproc_per_node}; make them equal")

    ep, e = job.elastic_policy, f"{p}elastic_policy"
    elastic_ok = True
    if ep.min_replicas > ep.max_replicas:
        add(
            f"{e}.min_replicas: {ep.min_replicas} is greater than max_replicas {ep.max_replicas}; "
            "min_replicas must be at most max_replicas"
        )
        elastic_ok = False
    step, values = ep.replica_increment_step, ep.replica_discrete_values
    if step is not None and values is not None:
        add(f"{e}: both replica_increment_step and replica_discrete_values are set; set at most one")
        elastic_ok = False
    elif step is not None and elastic_ok and (ep.max_replicas - ep.min_replicas) % step:
        add(
            f"{e}.replica_increment_step: {step} never reaches max_replicas {ep.max_replicas} from min_replicas "
            f"{ep.min_replicas}; use a step that divides {ep.max_replicas - ep.min_replicas}"
        )
        elastic_ok = False
    if values is not None:
        if any(b <= a for a, b in pairwise(values)):
            add(f"{e}.replica_discrete_values: {values} — must be strictly increasing, each size once")
            elastic_ok = False
        outside = [v for v in values if not ep.min_replicas <= v <= ep.max_replicas]
        if outside:
            add(
                f"{e}.replica_discrete_values: {outside} outside min_replicas..max_replicas "
                f"({ep.min_replicas}..{ep.max_replicas})"
            )
            elastic_ok = False

    if elastic_ok and reach is not None and job.team in reach:
        quota_type, most = reach[job.team]
        if job.instance_type != quota_type:
            add(
                f"{p}instance_type: {job.instance_type!r}; team {job.team!r} has quota on {quota_type} only, so "
                "Kueue never admits it elsewhere (eks.task_governance.teams)"
            )
        elif most is not None and ep.max_replicas * job.accelerators_per_pod > most:
            add(
                f"{e}.max_replicas: {ep.max_replicas} pod(s) × {job.accelerators_per_pod} {job.accelerator} = "
                f"{ep.max_replicas * job.accelerators_per_pod}; team {job.team!r} can be admitted for at most {most} "
                f"on {quota_type} (guarantee plus what it may borrow), so that size never runs; allowed: "
                f"max_replicas up to {most // job.accelerators_per_pod}"
            )

    if elastic_ok:
        per_replica = job.nproc_per_node * job.micro_batch_size
        bad = [n for n in ep.sizes() if job.global_batch_size % (n * per_replica)]
        if bad:
            add(
                f"{p}global_batch_size: {job.global_batch_size} is not divisible by replicas × nproc_per_node × "
                f"micro_batch_size at {', '.join(map(str, bad))} replica(s) (at {bad[0]}: {bad[0]} × "
                f"{job.nproc_per_node} × {job.micro_batch_size} = {bad[0] * per_replica}); every size the job can "
                "scale to must divide it"
            )
    return errors


# ---------------------------------------------------------------------------------------------- rendering
def studio_files_errors(
    job: TrainingJob, studio_files: Mapping[str, Mapping[str, StudioFiles]], path: str = ""
) -> list[str]:
    """`job.user` is a member of the job's team with Studio files, and the checkpoints go into those files.
    `studio_files`: team -> member -> their files (stacks/eks_cluster_stack.team_studio_files)."""
    p = f"{path}." if path else ""
    if job.user is None:
        return []
    members = studio_files.get(job.team, {})
    if job.user not in members:
        return [
            (
                f"{p}user: {job.user!r} is not a member of team {job.team!r} with Studio files; allowed: "
                f"{', '.join(sorted(members)) or '(none: the team has no members)'}"
            )
        ]
    mount = members[job.user].mount_path
    if not job.checkpoint_dir.startswith(mount + "/"):
        return [
            (
                f"{p}checkpoint_dir: {job.checkpoint_dir!r} is outside {mount}, where {job.user}'s Studio files "
                "are mounted; put it under that directory"
            )
        ]
    return []


def render_job(
    job: TrainingJob,
    *,
    teams: Collection[str],
    priority_classes: Collection[str],
    team_gids: Mapping[str, int],
    default_image: str | None = None,
    reach: Reach | None = None,
    studio_files: Mapping[str, Mapping[str, StudioFiles]] | None = None,
) -> dict[str, Any]:
    """The HyperPodPyTorchJob manifest for `job`; raises ConfigError if a cross-field rule fails. `team_gids`
    maps each team to the group that owns its FSx directory (platform_config.eks_governance.team_gid);
    `default_image` (the platform's eks.training_image) is the image of a job that names none; `studio_files`
    (team -> member -> files) is needed for a job with a `user`."""
    errors = job_errors(job, teams=teams, priority_classes=priority_classes, reach=reach)
    studio_files = studio_files or {}
    errors += studio_files_errors(job, studio_files)
    image = job.image or default_image
    if image is None:
        errors.append(
            "image: not set, and the platform config has no eks.training_image; build "
            "examples/finetune/Dockerfile, push it, and give its pinned name in either"
        )
    if errors:
        raise ConfigError(f"job {job.name}", errors)
    ep = job.elastic_policy

    elastic: dict[str, Any] = {"minReplicas": ep.min_replicas, "maxReplicas": ep.max_replicas}
    if ep.replica_discrete_values:
        elastic["replicaDiscreteValues"] = list(ep.replica_discrete_values)
    else:
        elastic["replicaIncrementStep"] = ep.replica_increment_step or 1
    elastic |= {
        "gracefulShutdownTimeoutInSeconds": ep.graceful_shutdown_timeout_seconds,
        "scalingTimeoutInSeconds": ep.scaling_timeout_seconds,
        "faultyScaleDownTimeoutInSeconds": ep.faulty_scale_down_timeout_seconds,
    }

    # Extended resources (accelerators, EFA) must have requests equal to limits.
    resources = {job.accelerator: job.accelerators_per_pod}
    if job.efa_per_pod:
        resources[EFA_RESOURCE] = job.efa_per_pod
    env = [
        {"name": "CHECKPOINT_DIR", "value": job.checkpoint_dir},
        {"name": "GLOBAL_BATCH_SIZE", "value": str(job.global_batch_size)},
        {"name": "MICRO_BATCH_SIZE", "value": str(job.micro_batch_size)},
        dict(SIGNAL_COORDINATION),
        MLFLOW_ENV,
        dict(PRESIGNED_UPLOAD),
        {"name": "HOME", "value": HOME},
    ]
    env += [{"name": k, "value": v} for k, v in sorted(job.env.items())]
    container = (
        {"name": "pytorch", "image": image, "imagePullPolicy": "IfNotPresent", "command": list(job.command)}
        | ({"args": list(job.args)} if job.args else {})
        | {
            "env": env,
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [
                {"name": "fsx", "mountPath": FSX_MOUNT},
                {"name": "datasets", "mountPath": DATASETS_MOUNT, "readOnly": True},
                {"name": "shm", "mountPath": "/dev/shm"},  # noqa: S108 - the pod's own memory volume
                {"name": "agent-config", "mountPath": AGENT_CONFIG_DIR},
                {"name": "home", "mountPath": HOME},
            ],
        }
    )
    gid = team_gids[job.team]
    pod_spec = {
        # The team's service account: EKS Pod Identity gives it the team's job role (MLflow, when the platform has it).
        "serviceAccountName": JOB_SERVICE_ACCOUNT,
        "nodeSelector": {INSTANCE_TYPE_LABEL: job.instance_type},
        # Pod Security "restricted": non-root, no privilege escalation, no capabilities, the runtime's seccomp.
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": job.run_as_user,
            "runAsGroup": gid,
            "fsGroup": gid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "fsx", "persistentVolumeClaim": {"claimName": FSX_CLAIM}},
            {"name": "datasets", "persistentVolumeClaim": {"claimName": DATASETS_CLAIM, "readOnly": True}},
            # The container runtime's default 64 MiB /dev/shm is too small for NCCL and DataLoader workers.
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
            {"name": "agent-config", "emptyDir": {}},
            {"name": "home", "emptyDir": {}},
        ],
    }
    if job.user is not None:
        _run_as_studio_user(pod_spec, studio_files[job.team][job.user])
    # On the job (Kueue admits it by them) and on the pod template (task governance admits pods by them), as AWS's CLI
    # sets them (aws/sagemaker-hyperpod-cli@a00b22d hyperpod-pytorch-job-template/.../v1_1/template.py).
    labels = {QUEUE_LABEL: queue_name(job.team), PRIORITY_LABEL: priority_label(job.priority)}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": job.name, "namespace": namespace(job.team), "labels": dict(labels)},
        "spec": {
            "nprocPerNode": str(job.nproc_per_node),
            "runPolicy": {"cleanPodPolicy": "None", "jobMaxRetryCount": job.max_retries},
            "elasticPolicy": elastic,
            # The job starts at min_replicas; maxReplicas on the replica spec matches the elastic policy's.
            "replicaSpecs": [
                {
                    "name": "worker",
                    "replicas": ep.min_replicas,
                    "maxReplicas": ep.max_replicas,
                    "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
                }
            ],
        },
    }


def _run_as_studio_user(pod_spec: dict[str, Any], files: StudioFiles) -> None:
    """The pod runs as the Studio user (uid, Studio's gid for them; the team's gid stays as fsGroup, a supplementary
    group) and mounts their Studio files where the cluster has them, in place of the team's directory at /fsx
    (mounted there too, it would put the files' mount point inside the team's directory)."""
    pod_spec["securityContext"] |= {"runAsUser": files.uid, "runAsGroup": files.gid}
    for volume in pod_spec["volumes"]:
        if volume["name"] == "fsx":
            volume["persistentVolumeClaim"]["claimName"] = files.claim
    for mount in pod_spec["containers"][0]["volumeMounts"]:
        if mount["name"] == "fsx":
            mount["mountPath"] = files.mount_path


# ---------------------------------------------------------------------------------------------- loading
def _model_at(loc: tuple) -> type[BaseModel]:
    model: type[BaseModel] = JobFile
    for part in loc[:-1]:
        if isinstance(part, str):
            annotation = model.model_fields[part].annotation
            model = next(
                t
                for t in (annotation, *get_args(annotation))
                if get_origin(t) is None and isinstance(t, type) and issubclass(t, BaseModel)
            )
    return model


def _format_error(err: Mapping[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        return f"{path}: unknown key; allowed here: {', '.join(_model_at(err['loc']).model_fields)}"
    return format_pydantic_error(err)


def parse_jobs(
    data: Any,
    source: str = "<jobs>",
    *,
    teams: Collection[str],
    priority_classes: Collection[str],
    reach: Reach | None = None,
) -> list[TrainingJob]:
    if not isinstance(data, dict):
        raise ConfigError(source, [f"<root>: {type(data).__name__} — a job file is a mapping with a 'jobs' list"])
    try:
        jobs = JobFile.model_validate(data).jobs
    except ValidationError as exc:
        raise ConfigError(source, [_format_error(e) for e in exc.errors()]) from None
    errors: list[str] = []
    seen: dict[str, int] = {}
    for i, job in enumerate(jobs):
        errors += job_errors(job, teams=teams, priority_classes=priority_classes, path=f"jobs[{i}]", reach=reach)
        if job.name in seen:
            errors.append(
                f"jobs[{i}].name: {job.name!r} is already used by jobs[{seen[job.name]}]; job names must "
                "be unique in a job file (each manifest is written as <name>.yaml)"
            )
        seen.setdefault(job.name, i)
    if errors:
        raise ConfigError(source, errors)
    return jobs


def load_jobs(
    path: str | Path, *, teams: Collection[str], priority_classes: Collection[str], reach: Reach | None = None
) -> list[TrainingJob]:
    """Read a job file strictly (no YAML-1.1 booleans, no duplicate keys) and validate every job."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=StrictYamlLoader)  # noqa: S506 - strict SafeLoader subclass
    except FileNotFoundError:
        raise ConfigError(str(path), [f"jobs: {str(path)!r} — file not found"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"YAML: {exc}".replace("\n", " ")]) from None
    return parse_jobs(data, str(path), teams=teams, priority_classes=priority_classes, reach=reach)
