"""The platform's one configuration model.

Three layers, as in aws-parallelcluster: YAML is parsed strictly (no YAML-1.1 `yes`/`no` booleans, no
duplicate keys), pydantic checks shapes and ranges, and `semantic_errors` checks cross-field rules.
Every problem is reported at once as `path: value — what is allowed`. Nothing here calls AWS.
"""
from __future__ import annotations

import ipaddress
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError, WithJsonSchema

DEFAULT_CONFIG_PATH = "config/default.yaml"

# Top-level keys that `cdk synth -c key=value` may override; `-c config=PATH` picks the file.
CONTEXT_OVERRIDES = ("orchestrator", "shared_fsx")
KUBERNETES_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34")  # what HyperPod supports on EKS
EKS_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")

LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                      2922, 3288, 3653)
INTERFACE_ENDPOINT_SERVICES = ("ssm", "ssmmessages", "ec2messages", "sts", "logs", "ecr.api", "ecr.dkr",
                               "sagemaker.api")
# The two types AWS documents for Slurm clusters (sagemaker-hyperpod-resiliency-slurm-deep-health-checks); the API
# enum also has MultiNodeTrainingValidation (tests/test_api_constraints.py keeps this in step with botocore).
# The EKS stack's team directories live under this directory of the data repository (stacks/eks_cluster_stack.py);
# Studio's partition root must differ: the data bucket closes Studio's prefix to everyone but its own handlers.
EKS_TEAM_DIRECTORY_ROOT = "eks"
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")


class ConfigError(Exception):
    """Invalid configuration; `errors` holds one human-readable line per problem."""

    def __init__(self, source: str, errors: list[str]):
        self.source = source
        self.errors = errors
        super().__init__(f"{len(errors)} configuration error(s) in {source}:\n" +
                         "\n".join(f"  - {e}" for e in errors))


# ---------------------------------------------------------------------------------------------- field checks
def _pattern(regex: str, allowed: str):
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {allowed}")
        return value
    return AfterValidator(check)


def _api_string(regex: str, max_length: int, allowed: str) -> tuple:
    """A string the SageMaker API constrains: our message, and the API's pattern and length in the JSON Schema
    (tests/test_api_constraints.py compares both with botocore's service model)."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value) or len(value) > max_length:
            raise ValueError(f"must be {allowed}")
        return value
    return (AfterValidator(check),
            WithJsonSchema({"type": "string", "pattern": f"^{regex}$", "minLength": 1, "maxLength": max_length}))


def _cidr(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError("must be an IPv4 CIDR block with no host bits set, e.g. 10.0.0.0/16") from None
    if network.version != 4:
        raise ValueError("must be an IPv4 CIDR block, e.g. 10.0.0.0/16")
    return value


# Patterns and lengths of the SageMaker CreateCluster API (botocore's service model: ClusterName,
# ClusterInstanceGroupName, ClusterPartitionName).
_HYPHENATED = r"[a-zA-Z0-9](-*[a-zA-Z0-9])*"
ClusterName = Annotated[str, *_api_string(_HYPHENATED, 63, "1-63 letters, digits and hyphens, starting and ending "
                                                           "with a letter or digit")]
GroupName = Annotated[str, *_api_string(_HYPHENATED, 63, "1-63 letters, digits and hyphens, starting and ending "
                                                         "with a letter or digit")]
InstanceType = Annotated[str, _pattern(r"ml\.[a-z][a-z0-9-]*\.[a-z0-9]+",
                                       "a SageMaker instance type such as ml.g5.8xlarge")]
AzId = Annotated[str, _pattern(r"[a-z]{2,}[0-9]+-az[0-9]{1,2}", "an AZ ID such as use1-az4 (not an AZ name)")]
Cidr = Annotated[str, AfterValidator(_cidr)]
PartitionName = Annotated[str, *_api_string(_HYPHENATED, 1024, "a partition name HyperPod accepts: letters, digits "
                                                                "and hyphens, starting and ending with a letter or "
                                                                "digit (no '_')")]
PosixName = Annotated[str, _pattern(r"[a-z_][a-z0-9_-]{0,31}", "a POSIX user name: lowercase, at most 32 characters")]
Sha256 = Annotated[str, _pattern(r"[0-9a-f]{64}", "a SHA-256 digest: 64 lowercase hex characters")]
TrainingPlanArn = Annotated[str, _pattern(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[a-zA-Z0-9-]+",
                                          "a SageMaker training plan ARN")]
# Paths that reach a shell on the nodes (mount_fsx.sh, create_users.sh: homes under the mount path) and FSx paths of
# Studio's partitions: '/' and components of letters, digits, '.', '_' and '-', never '.' or '..' (which would leave
# the path they name), so no quoting, globbing or command substitution can hide in them.
_PATH_COMPONENT = r"(?!\.\.?(/|$))[A-Za-z0-9._-]+"
_PATH_ALLOWED = ("an absolute path such as /fsx: '/' and components of letters, digits, '.', '_' and '-' (no spaces, "
                 "quotes, '$', ';', '`', '*' or other shell characters; no '.' or '..' component)")
AbsolutePath = Annotated[str, _pattern(rf"/|(/{_PATH_COMPONENT})+/?", _PATH_ALLOWED)]
AddonVersion = Annotated[str, _pattern(r"v\d+\.\d+\.\d+-eksbuild\.\d+", "an EKS add-on version such as v1.20.1-eksbuild.3")]
# Team and priority-class names become Kubernetes names (hyperpod-ns-<team>, <class>-priority).
GovernanceName = Annotated[str, _pattern(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?",
                                         "1-40 lowercase letters, digits and '-', starting and ending alphanumeric")]
LabelKey = Annotated[str, _pattern(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?",
                                   "a Kubernetes label key such as team or example.com/pool")]
LabelValue = Annotated[str, _pattern(r"([a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?)?",
                                     "a Kubernetes label value: at most 63 letters, digits, '-', '_', '.'")]
RoleArn = Annotated[str, _pattern(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+", "an IAM role ARN")]


def _resource_id(prefix: str):
    return _pattern(rf"{prefix}-[0-9a-f]{{8,17}}", f"an ID such as {prefix}-0123456789abcdef0")


SubnetId = Annotated[str, _resource_id("subnet")]
VpcId = Annotated[str, _resource_id("vpc")]
SecurityGroupId = Annotated[str, _resource_id("sg")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------------------------- network
class FlowLogs(Strict):
    enabled: StrictBool = True
    retention_days: Literal[LOG_RETENTION_DAYS] = 90  # type: ignore[valid-type]


class ExistingSubnet(Strict):
    id: SubnetId
    az_id: AzId


class ExistingNetwork(Strict):
    """Bring-your-own VPC: the security group must already allow all traffic to and from itself."""
    vpc_id: VpcId
    private_subnets: list[ExistingSubnet] = Field(min_length=1)
    security_group_id: SecurityGroupId
    # EKS only: subnets in at least two AZs for the control plane's network interfaces.
    control_plane_subnets: list[ExistingSubnet] = []
    # Studio's own subnet (VpcOnly domain). Required with root squash on a Slurm platform that owns its file system:
    # the cluster's subnets keep root on FSx, so Studio must not share them.
    studio_subnet: Optional[ExistingSubnet] = None


class Network(Strict):
    vpc_cidr: Cidr = "10.0.0.0/16"
    az_ids: list[AzId] = Field(default=["usw2-az2"], min_length=1, max_length=6)
    public_subnet_cidr: Cidr = "10.0.0.0/24"
    private_subnet_cidrs: list[Cidr] = Field(default=["10.0.64.0/18"], min_length=1, max_length=6)
    # A subnet of Studio's own (in the first AZ, beside FSx), so its addresses are not the cluster's: the cluster's
    # subnets keep root on FSx (storage.lustre.root_squash). null: Studio shares the first private subnet (refused
    # while root squash exempts the cluster's subnets).
    studio_subnet_cidr: Optional[Cidr] = "10.0.4.0/22"
    s3_endpoint_policy: Literal["open", "restricted"] = "open"
    interface_endpoints: list[Literal[INTERFACE_ENDPOINT_SERVICES]] = []  # type: ignore[valid-type]
    flow_logs: FlowLogs = FlowLogs()
    # HyperPod's Ubuntu images read apt mirrors over plain HTTP; turn off where a proxy or mirror serves HTTPS.
    allow_http_egress: StrictBool = True
    existing: Optional[ExistingNetwork] = None


# ---------------------------------------------------------------------------------------------- storage
class LustreMetadata(Strict):
    mode: Literal["AUTOMATIC", "USER_PROVISIONED"] = "AUTOMATIC"
    iops: Optional[int] = None


class DataRepository(Strict):
    file_system_path: AbsolutePath = "/data"
    s3_prefix: Annotated[str, _pattern(r"([a-zA-Z0-9!_.*'()-]+/)*", "empty or a key prefix ending in '/'")] = ""
    auto_import: list[Literal["NEW", "CHANGED", "DELETED"]] = ["NEW", "CHANGED", "DELETED"]
    auto_export: list[Literal["NEW", "CHANGED", "DELETED"]] = ["NEW", "CHANGED", "DELETED"]


class ExistingLustre(Strict):
    """Bring-your-own FSx for Lustre in the cluster's VPC. The platform creates no file system, association or
    data bucket; Studio's partitions are written through the file system's existing association to `data_bucket`
    (described by storage.lustre.data_repository), and a security group of the platform's is attached to the file
    system's network interfaces so the cluster and Studio reach it."""
    file_system_id: Annotated[str, _pattern(r"fs-[0-9a-f]{8,17}", "a file system ID such as fs-0123456789abcdef0")]
    dns_name: Annotated[str, _pattern(r"fs-[0-9a-f]{8,17}\.fsx\.[a-z0-9-]+\.amazonaws\.com(\.cn)?",
                                      "the file system's DNS name, fs-....fsx.<region>.amazonaws.com")]
    mount_name: Annotated[str, _pattern(r"[a-z0-9]{8}|fsx", "the file system's LustreConfiguration.MountName")]
    data_bucket: Annotated[str, _pattern(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "an S3 bucket name")]


def _squash_id(value: str) -> str:
    parts = value.split(":")
    if len(parts) != 2 or not all(p.isdigit() and 1 <= int(p) <= 4294967294 for p in parts):
        raise ValueError("must be 'UID:GID', each from 1 to 4294967294 (0 would be root), e.g. '65534:65534' "
                         "(nobody:nogroup); to turn root squash off set enabled: false")
    return value


class RootSquash(Strict):
    """FSx root squash on the platform's own file system (set by a custom resource, constructs/fsx_root_squash.py):
    root on a client acts as `squash_to` on the file system, except on the Slurm cluster's own subnets, whose nodes'
    lifecycle scripts create homes and directories as root. Studio and EKS pods are never exempt."""
    enabled: StrictBool = True
    squash_to: Annotated[str, AfterValidator(_squash_id)] = "65534:65534"


class Lustre(Strict):
    storage_capacity_gib: int = 1200
    throughput_mib_per_tib: Literal[125, 250, 500, 1000] = 250
    data_compression: Literal["LZ4", "NONE"] = "LZ4"
    lustre_version: Literal["2.15"] = "2.15"
    metadata: LustreMetadata = LustreMetadata()
    mount_path: AbsolutePath = "/fsx"
    # "native": HyperPod mounts it through InstanceStorageConfigs (the API-driven way; the lifecycle script waits for
    # it); "lifecycle": on_init_complete.sh mounts it and records it in fstab.
    mount_by: Literal["lifecycle", "native"] = "native"
    data_repository: DataRepository = DataRepository()
    existing: Optional[ExistingLustre] = None
    root_squash: RootSquash = RootSquash()


class DataBucket(Strict):
    # kms: SSE-KMS with the storage stack's customer managed key (the default); s3_managed: SSE-S3, opt-out only.
    encryption: Literal["s3_managed", "kms"] = "kms"


class Storage(Strict):
    lustre: Lustre = Lustre()
    data_bucket: DataBucket = DataBucket()
    # Where jobs write checkpoints, relative to lustre.mount_path; default <data_repository.file_system_path>/checkpoints.
    # It must lie inside lustre.data_repository.file_system_path so the association exports checkpoints to S3 (FSx
    # cannot back up a file system linked to S3, so the export is what makes them durable). Nodes create it 1777.
    checkpoint_dir: Optional[AbsolutePath] = None
    # Size of one checkpoint of the models you train, for the synth summary's write and read time (optional).
    checkpoint_gib: Optional[int] = Field(default=None, ge=1, le=1_000_000)
    # The summary warns when writing one checkpoint at the file system's baseline throughput takes longer.
    checkpoint_budget_minutes: int = Field(default=10, ge=1, le=1440)


# ---------------------------------------------------------------------------------------------- cluster
class Taint(Strict):
    key: LabelKey
    value: LabelValue = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class InstanceGroup(Strict):
    name: GroupName
    role: Literal["controller", "login", "compute"]
    instance_type: InstanceType
    instance_count: int = Field(ge=0, le=6758)
    threads_per_core: Literal[1, 2] = 1
    ebs_volume_gib: int = Field(default=500, ge=1, le=16384)
    deep_health_checks: list[Literal[DEEP_HEALTH_CHECKS]] = Field(default=[], max_length=3)  # type: ignore[valid-type]
    training_plan_arn: Optional[TrainingPlanArn] = None
    az_id: Optional[AzId] = None
    # Slurm only: HyperPod's SlurmConfig.PartitionNames, exactly one name for a compute group.
    partitions: list[PartitionName] = Field(default=[], max_length=1)
    kubernetes_labels: dict[LabelKey, LabelValue] = {}  # EKS only
    kubernetes_taints: list[Taint] = []  # EKS only


class Artifact(Strict):
    """A Debian package mirrored to the operator's S3; on_create.sh verifies the digest before installing."""
    name: Annotated[str, _pattern(r"[a-z0-9][a-z0-9._+-]*", "lowercase letters, digits, '.', '_', '+', '-'")]
    # Nodes pass it to `aws s3 cp`: key characters are limited to what package paths use, none a shell's.
    s3_uri: Annotated[str, _pattern(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([A-Za-z0-9._+~-]+/)*"
                                    r"[a-z0-9][a-z0-9.+-]*_[A-Za-z0-9.+~-]+_[a-z0-9]+\.deb",
                                    "an s3:// URI of a Debian package named package_version_arch.deb (key of "
                                    "letters, digits and . _ + ~ - /)")]
    sha256: Sha256


class ContainerRuntime(Strict):
    """Docker, enroot and pyxis for Slurm jobs. HyperPod sets them up in OnInitComplete mode and the platform keeps
    them; docker.io at docker_apt_version and the artifacts are installed only on a node that lacks them."""
    enabled: StrictBool = False
    # The Ubuntu release the pinned packages were built for; a node on another release installs none of them.
    ubuntu_release: Literal["22.04", "24.04"] = "22.04"
    # Debian version syntax ([epoch:]upstream[-revision]: letters, digits and . + ~ -; Debian Policy 5.6.12): nodes
    # run `apt-get install docker.io=<this>`.
    docker_apt_version: Annotated[str, _pattern(r"(([0-9]+:)?[0-9][A-Za-z0-9.+~-]*)?",
                                                "empty or a Debian package version such as 24.0.7-0ubuntu2~22.04.1")] = ""
    artifacts: list[Artifact] = []


# ---------------------------------------------------------------------------------------------- slurm accounting
Email = Annotated[str, _pattern(r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address such as hpc-admins@example.edu")]
# Slurm lowercases account and QoS names (sacctmgr(1)); keep them plain so they are the same in every tool.
SlurmName = Annotated[str, _pattern(r"[a-z][a-z0-9_-]{0,29}", "1-30 lowercase letters, digits, '_' and '-', "
                                                              "starting with a letter")]
# Passed to sacctmgr as one argument (Description=...): no commas, quotes or '=' that it could split on.
SlurmDescription = Annotated[str, _pattern(r"[A-Za-z0-9 .:()/_-]{0,100}", "at most 100 letters, digits, spaces and "
                                                                          ".:()/_-")]
# Slurm creates QoS `normal` itself and gives it to every association that names no other.
SLURM_DEFAULT_QOS = "normal"
# The account lifecycle/hyperpod/lib/accounting.py gives every user no department lists (USERS_ACCOUNT there).
PLATFORM_USERS_ACCOUNT = "hyperpod-users"


class Tres(Strict):
    """Trackable resources of a limit (sacctmgr TRES strings: cpu=N,node=N,gres/gpu=N). Unset means no limit."""
    cpu: Optional[int] = Field(default=None, ge=1)
    node: Optional[int] = Field(default=None, ge=1)
    gpu: Optional[int] = Field(default=None, ge=1)

    def sacctmgr(self) -> str:
        parts = [("cpu", self.cpu), ("node", self.node), ("gres/gpu", self.gpu)]
        return ",".join(f"{k}={v}" for k, v in parts if v is not None)


class Qos(Strict):
    """A Slurm QoS: what one user may hold at once, what all its jobs together may hold, and its priority."""
    name: SlurmName
    description: SlurmDescription = ""
    priority: int = Field(default=0, ge=0, le=1_000_000)
    max_tres_per_user: Tres = Tres()
    grp_tres: Tres = Tres()
    max_wall_minutes: Optional[int] = Field(default=None, ge=1, le=525600)
    max_jobs_per_user: Optional[int] = Field(default=None, ge=1, le=100000)


class Department(Strict):
    """A Slurm account: its users' associations, who coordinates it, its fair share and the QoS it may use."""
    name: SlurmName
    description: SlurmDescription = ""
    # Relative share of the cluster (sacctmgr Fairshare): 30 and 10 give a 3:1 split when both are busy.
    fairshare: int = Field(default=1, ge=1, le=1_000_000)
    # QoS the department's users may ask for (`--qos`); default: the department's default_qos only.
    qos: list[SlurmName] = []
    default_qos: SlurmName = SLURM_DEFAULT_QOS
    # Names from `users`. The first department listing a user is that user's default account.
    users: list[PosixName] = []
    # Users of this department who may manage its associations and limits (sacctmgr coordinators).
    coordinators: list[PosixName] = []
    # AWS Budgets: a monthly cost budget over what carries the tag `<cluster.budget.department_tag_key>=<name>`
    # (stacks/config.py department_tags); thresholds and recipients from cluster.budget, plus budget_emails.
    monthly_budget_usd: Optional[int] = Field(default=None, ge=1, le=100_000_000)
    budget_emails: list[Email] = Field(default=[], max_length=10)

    @property
    def allowed_qos(self) -> list[str]:
        return list(self.qos) or [self.default_qos]


class PriorityWeights(Strict):
    """priority/multifactor weights (slurm.conf PriorityWeight*); HyperPod owns slurm.conf, see the README."""
    fairshare: int = Field(default=10000, ge=0, le=4294967295)
    qos: int = Field(default=1000, ge=0, le=4294967295)
    age: int = Field(default=1000, ge=0, le=4294967295)
    job_size: int = Field(default=0, ge=0, le=4294967295)


# Where slurmdbd stores accounting (lifecycle/hyperpod/README.md, "Slurm accounting"): `hyperpod`, HyperPod's own MariaDB
# on the controller; `managed`, an RDS for MySQL instance the cluster stack creates (constructs/accounting_database.py)
# and attaches through Orchestrator.Slurm.AccountingDatabase.
ACCOUNTING_DATABASES = ("hyperpod", "managed")
# HyperPod developer guide pages the Slurm rules below rest on.
SLURM_MIGRATION_PAGE = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
                        "sagemaker-hyperpod-slurm-api-config-migration.html")
EXTERNAL_ACCOUNTING_PAGE = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
                            "sagemaker-hyperpod-external-accounting-db-slurm.html")
MULTIHEAD_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-multihead.html"
# Burstable Graviton classes RDS for MySQL offers; slurmdbd's load is a few writes per job.
DbInstanceClass = Annotated[str, _pattern(r"db\.(t4g|m7g|r7g|m6g|r6g)\.(micro|small|medium|large|xlarge|2xlarge)",
                                          "an RDS Graviton instance class such as db.t4g.small (db.t4g, m6g, m7g, "
                                          "r6g or r7g, micro to 2xlarge)")]


class ManagedAccountingDatabase(Strict):
    """The RDS for MySQL instance of `database: managed`."""
    instance_class: DbInstanceClass = "db.t4g.small"
    allocated_storage_gib: int = Field(default=20, ge=20, le=1000)
    # A standby in a second AZ: RDS fails over on a host or AZ failure (about a minute) instead of replacing the host.
    multi_az: StrictBool = False
    backup_retention_days: int = Field(default=7, ge=1, le=35)
    # require_secure_transport=1 in the instance's parameter group: the database refuses any connection without TLS.
    # HyperPod's slurmdbd must then connect with TLS (MySQL's client library prefers TLS when the server offers it);
    # turn off only if slurmdbd's log shows "Connections using insecure transport are prohibited" (README, Security).
    require_tls: StrictBool = True


class Accounting(Strict):
    """Slurm accounting on HyperPod's slurmdbd: departments become accounts, with users' associations, coordinators,
    QoS and fair share, applied by lifecycle/hyperpod/apply_accounting.sh. `database` picks where slurmdbd stores it."""
    enabled: StrictBool = False
    database: Literal[ACCOUNTING_DATABASES] = "hyperpod"  # type: ignore[valid-type]
    managed_database: ManagedAccountingDatabase = ManagedAccountingDatabase()
    qos: list[Qos] = []
    departments: list[Department] = []
    priority_weights: PriorityWeights = PriorityWeights()


# Cost allocation tag keys: letters, digits, spaces and _.:/=+-@, at most 128 characters, not starting with aws:
# (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html).
TagKey = Annotated[str, _pattern(r"(?!aws:)[\w .:/=+@-]{1,128}", "a tag key: at most 128 letters, digits, spaces and "
                                                                 "_.:/=+-@, not starting with aws:")]
# Budgets allows up to 5 notifications per budget (https://docs.aws.amazon.com/cost-management/latest/userguide/
# budgets-managing-costs.html, "You can set up to five notifications for each budget") and 10 e-mail subscribers each.
MAX_BUDGET_NOTIFICATIONS = 5


class ClusterBudget(Strict):
    """AWS Budgets for the cluster (everything tagged hyperpod-platform=<name>) and, through departments'
    monthly_budget_usd, per department. Alerts at thresholds (percent of the limit, actual spend) go to the
    platform's alarm topic (observability.subscriptions) and to `emails`."""
    monthly_limit_usd: int = Field(ge=1, le=100_000_000)
    thresholds_percent: list[int] = Field(default=[80, 100], min_length=1, max_length=MAX_BUDGET_NOTIFICATIONS)
    emails: list[Email] = Field(default=[], max_length=10)
    notify_topic: StrictBool = True
    # The cost allocation tag that names a department on department-owned resources (department budgets filter on it).
    department_tag_key: TagKey = "department"


class LoginAccess(Strict):
    """How people reach the login group: an internal Network Load Balancer for SSH whose targets follow HyperPod's
    login nodes (constructs/login_load_balancer.py), and a Session Manager document that runs sessions as the
    person's own POSIX user (SSMSessionRunAs principal tag) instead of ssm-user."""
    # Only with a login group of at least one instance; ignored otherwise.
    load_balancer: StrictBool = True
    # Who may reach port 22 of the load balancer; default: the VPC's CIDR (network.vpc_cidr). Required with
    # network.existing (the platform cannot know that VPC's CIDR without calling AWS).
    ssh_allowed_cidrs: list[Cidr] = Field(default=[], max_length=50)
    run_as: StrictBool = True
    # The user of a session whose IAM principal has no SSMSessionRunAs tag. `nobody` has no login shell, so such a
    # session fails to start: only tagged people get in, each as themselves.
    run_as_default_user: PosixName = "nobody"


# ---------------------------------------------------------------------------------------------- directory (SSSD)
REPO_ROOT = Path(__file__).resolve().parent.parent
DIRECTORY_SCHEMAS = ("rfc2307", "rfc2307bis", "ad")
# sssd-ldap(5) ldap_uri: a host name or address, an optional port; nothing else (no path, filter or extensions).
LdapUri = Annotated[str, _pattern(r"ldaps?://[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?/?",
                                  "an ldaps://host[:port] or ldap://host[:port] URI (no path or filter)")]
# An RFC 4514 distinguished name of attribute=value pairs; values without the characters that need escaping (and
# that would end a line of sssd.conf), so what the config says is what sssd sends.
DistinguishedName = Annotated[str, _pattern(r"[A-Za-z][A-Za-z0-9-]*=[^,=+\\\"<>;#\n\r]+"
                                            r"(, ?[A-Za-z][A-Za-z0-9-]*=[^,=+\\\"<>;#\n\r]+)*",
                                            "a distinguished name such as dc=example,dc=com or "
                                            "cn=sssd-bind,ou=services,dc=example,dc=com (attribute=value pairs "
                                            "separated by commas; values without , = + \\ \" < > ; #)")]
# The full ARN, with Secrets Manager's six-character suffix: the node role is granted exactly this resource, and IAM
# compares secret ARNs literally (a partial ARN would match no secret).
SecretArn = Annotated[str, _pattern(r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+"
                                    r"-[A-Za-z0-9]{6}", "a complete Secrets Manager secret ARN, including the "
                                    "six-character suffix (arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf)")]
KmsKeyArn = Annotated[str, _pattern(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/(mrk-[0-9a-f]{32}|[0-9a-f-]{36})",
                                    "a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>)")]
# Used in sssd.conf lists (comma-separated) and sudoers (%group, spaces escaped): no commas, quotes or '%'.
DirectoryGroup = Annotated[str, _pattern(r"[A-Za-z0-9_]([A-Za-z0-9_. -]{0,62}[A-Za-z0-9_])?",
                                         "a directory group name: at most 64 letters, digits, '_', '.', '-' and "
                                         "inner spaces")]
RepoPath = Annotated[str, _pattern(r"[A-Za-z0-9_][A-Za-z0-9._/-]*\.(pem|crt)",
                                   "a .pem or .crt path relative to the repository root, such as config/directory-ca.pem")]


class Directory(Strict):
    """Slurm only, opt-in: people from an LDAP directory or Active Directory on every node through SSSD
    (lifecycle/hyperpod/configure_sssd.sh). Only encrypted connections: ldaps://, or ldap:// with start_tls."""
    enabled: StrictBool = False
    uris: list[LdapUri] = Field(default=[], max_length=10)
    start_tls: StrictBool = False
    search_base: Optional[DistinguishedName] = None
    bind_dn: Optional[DistinguishedName] = None
    # SecretString is the bind password itself. Every node reads it at start (GetSecretValue on exactly this ARN).
    bind_password_secret_arn: Optional[SecretArn] = None
    # Only when the secret is encrypted with a customer managed key: kms:Decrypt on it, through Secrets Manager only.
    bind_password_kms_key_arn: Optional[KmsKeyArn] = None
    # The CA that signed the directory servers' certificates (PEM), shipped with the lifecycle scripts.
    ca_certificate: Optional[RepoPath] = None
    # sssd-ldap(5) ldap_schema (named so, not `schema`, which pydantic models reserve): rfc2307 (memberUid),
    # rfc2307bis (member DNs, nested groups), ad (Active Directory with POSIX attributes: uidNumber, gidNumber).
    ldap_schema: Literal[DIRECTORY_SCHEMAS] = "rfc2307"  # type: ignore[valid-type]
    # Directory groups whose members may log in (sssd's simple access provider); everyone else is refused at PAM's
    # account stage. Required: a directory is usually far larger than the cluster's audience.
    access_groups: list[DirectoryGroup] = Field(default=[], max_length=50)
    # Directory groups whose members get `sudo` on every node (/etc/sudoers.d/91-hyperpod-directory).
    admin_groups: list[DirectoryGroup] = Field(default=[], max_length=50)
    # sssd and its PAM/NSS modules from the operator's S3 mirror when the AMI lacks them (names from
    # DIRECTORY_ARTIFACTS); empty: the node must already have sssd, or configure_sssd.sh stops.
    artifacts: list[Artifact] = []


class Cluster(Strict):
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    # Slurm only: Orchestrator.Slurm.SlurmConfigStrategy. Unset sends Managed, except with node_provisioning_mode
    # Continuous, where nothing is sent: continuous clusters "support only the Merge behavior and reject requests that set
    # SlurmConfigStrategy" (SLURM_MIGRATION_PAGE), so setting it there is refused.
    slurm_config_strategy: Optional[Literal["Managed", "Overwrite", "Merge"]] = None
    slurm_auto_resume: StrictBool = True
    container_runtime: ContainerRuntime = ContainerRuntime()
    accounting: Accounting = Accounting()
    login_access: LoginAccess = LoginAccess()
    budget: Optional[ClusterBudget] = None
    # Slurm only: compute nodes admit SSH only from users with a job on the node (pam_slurm_adopt, which adopts the
    # session into that job) and from `users` with `sudo: true`; the controller adds PrologFlags=Contain.
    pam_slurm_adopt: StrictBool = False
    # Slurm only: directory users and groups through SSSD.
    directory: Directory = Directory()
    # Slurm only (EKS has eks.node_provisioning_mode): unset keeps HyperPod's default provisioning; `Continuous` is
    # what an external accounting database (accounting.database: managed) requires.
    node_provisioning_mode: Optional[Literal["Continuous"]] = None
    instance_groups: list[InstanceGroup] = Field(default_factory=lambda: [
        InstanceGroup(name="controller-machine", role="controller", instance_type="ml.m5.xlarge", instance_count=1),
        InstanceGroup(name="login-group", role="login", instance_type="ml.m5.xlarge", instance_count=1),
        InstanceGroup(name="worker-group-1", role="compute", instance_type="ml.g5.8xlarge", instance_count=1,
                      deep_health_checks=["InstanceStress", "InstanceConnectivity"], partitions=["gpu"]),
    ], min_length=1)

    def slurm_config_strategy_sent(self) -> Optional[str]:
        """What Orchestrator.Slurm.SlurmConfigStrategy carries: nothing on a continuous cluster, else the setting
        (Managed when unset)."""
        if self.node_provisioning_mode == "Continuous":
            return None
        return self.slurm_config_strategy or "Managed"


class User(Strict):
    """A person on the cluster and in Studio; Studio's POSIX identities need uid >= 10000 and gid >= 1001."""
    name: PosixName
    uid: int = Field(ge=10000, le=4000000)
    gid: Optional[int] = Field(default=None, ge=1001, le=4000000)
    sudo: StrictBool = False

    @property
    def group_id(self) -> int:
        return self.gid if self.gid is not None else self.uid


class Mlflow(Strict):
    enabled: StrictBool = False
    size: Literal["Small", "Medium", "Large"] = "Small"
    mlflow_version: Annotated[str, _pattern(r"\d+\.\d+(\.\d+)?", "an MLflow version such as 2.16")] = "2.16"


class Studio(Strict):
    """The SageMaker Studio domain whose JupyterLab and Code Editor spaces act as login nodes."""
    enabled: StrictBool = True
    idle_timeout_minutes: int = Field(default=120, ge=60, le=525600)
    partition_root: Annotated[str, _pattern(r"(?!\.\.?$)[a-zA-Z0-9._-]+", "a single directory name such as studio "
                                                                       "(letters, digits, '.', '_', '-'; not '.' "
                                                                       "or '..')")] = "studio"
    # Group owning the shared partition; every user's primary group in shared mode is this one in Studio.
    shared_gid: int = Field(default=2000, ge=1001, le=4000000)
    mlflow: Mlflow = Mlflow()


# ---------------------------------------------------------------------------------------------- eks
class ControlPlaneSubnet(Strict):
    az_id: AzId
    cidr: Cidr


class EksEndpoint(Strict):
    """The API server is reached privately from the VPC; a public endpoint needs an explicit allow-list."""
    public: StrictBool = False
    public_access_cidrs: list[Cidr] = []


# Where each pin and its supported Kubernetes versions come from. AWS publishes per-version tables for some
# add-ons only; the authoritative list for one region is `aws eks describe-addon-versions --addon-name <name>
# --kubernetes-version <v>` (it needs AWS credentials, so nothing here calls it).
HYPERPOD_EKS_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html"
# "SageMaker HyperPod supports Kubernetes versions 1.28, 1.29, 1.30, 1.31, 1.32, and 1.33" (the page above).
HYPERPOD_KUBERNETES = frozenset({"1.28", "1.29", "1.30", "1.31", "1.32", "1.33"})
HYPERPOD_CLI = "aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea"


@dataclass(frozen=True)
class AddonSupport:
    kubernetes: frozenset[str]  # Kubernetes minor versions this add-on version is known to run on
    source: str


# (config key, add-on version) -> what is known about it. A pin that is not listed is refused: add it here with
# its source. Where AWS publishes no per-version table, the add-on is bounded by HyperPod's own range, and the
# source says so.
ADDON_SUPPORT: dict[tuple[str, str], AddonSupport] = {
    ("coredns", "v1.12.4-eksbuild.1"): AddonSupport(
        frozenset({"1.33", "1.34"}),
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html (latest version per Kubernetes version)"),
    ("coredns", "v1.11.4-eksbuild.24"): AddonSupport(
        frozenset({"1.29", "1.30", "1.31", "1.32"}),
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html (latest version per Kubernetes version)"),
    ("training_operator", "v1.2.0-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES,
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator.html (supported Kubernetes "
        "1.28-1.33); elastic training from v1.2: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html"),
    ("fsx_csi_driver", "v1.6.0-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES, f"the version AWS installs on HyperPod clusters ({HYPERPOD_CLI} helm_chart/"
        "HyperPodHelmChart/charts/inference-operator/migration/helm_to_addon.sh); bounded by " + HYPERPOD_EKS_DOC),
    ("cert_manager", "v1.18.2-eksbuild.2"): AddonSupport(
        HYPERPOD_KUBERNETES, f"the version AWS installs on HyperPod clusters ({HYPERPOD_CLI} helm_chart/"
        "HyperPodHelmChart/charts/inference-operator/migration/helm_to_addon.sh), cert-manager v1.18.2 as in the "
        "dependency chart's Chart.yaml; bounded by " + HYPERPOD_EKS_DOC),
    ("vpc_cni", "v1.20.4-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES, "no per-version table published for v1.20; bounded by " + HYPERPOD_EKS_DOC),
    ("pod_identity_agent", "v1.3.10-eksbuild.3"): AddonSupport(
        HYPERPOD_KUBERNETES, "no per-version table published; bounded by " + HYPERPOD_EKS_DOC),
    ("task_governance", "v1.6.0-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES, "no per-version table published; bounded by " + HYPERPOD_EKS_DOC),
}
# kube-proxy's minor version is the cluster's own (checked in eks_errors), within HyperPod's range.
ELASTIC_TRAINING_OPERATOR = (1, 2)


class EksAddons(Strict):
    """Pinned EKS add-on versions for the default Kubernetes version; ADDON_SUPPORT says where each comes from and
    which Kubernetes versions it runs on."""
    vpc_cni: AddonVersion = "v1.20.4-eksbuild.1"
    kube_proxy: AddonVersion = "v1.33.10-eksbuild.13"
    coredns: AddonVersion = "v1.12.4-eksbuild.1"
    pod_identity_agent: AddonVersion = "v1.3.10-eksbuild.3"
    fsx_csi_driver: AddonVersion = "v1.6.0-eksbuild.1"
    cert_manager: AddonVersion = "v1.18.2-eksbuild.2"
    # Elastic training (elasticPolicy in examples/eks/) needs the operator at v1.2 or later.
    training_operator: AddonVersion = "v1.2.0-eksbuild.1"
    task_governance: AddonVersion = "v1.6.0-eksbuild.1"


class HyperPodDependencies(Strict):
    """The HyperPod dependency Helm chart, fetched at build time by `make hyperpod-chart` (not committed)."""
    chart_dir: str = "build/hyperpod-helm-chart"
    health_monitoring_agent: StrictBool = True
    deep_health_check: StrictBool = True
    job_auto_restart: StrictBool = True
    nvidia_device_plugin: StrictBool = True
    neuron_device_plugin: StrictBool = False
    efa_device_plugin: StrictBool = True
    training_operators: StrictBool = True
    mpi_operator: StrictBool = True
    hyperpod_patching: StrictBool = True


class PriorityClass(Strict):
    name: GovernanceName
    weight: int = Field(ge=0, le=100)


class TeamQuota(Strict):
    """A team's guaranteed compute, what it lends and borrows, and whether it preempts lower-priority work."""
    name: GovernanceName
    instance_type: InstanceType
    instance_count: Optional[int] = Field(default=None, ge=0)
    accelerators: Optional[int] = Field(default=None, ge=0)
    sharing: Literal["LendAndBorrow", "Lend", "DontLend"] = "LendAndBorrow"
    borrow_limit_percent: int = Field(default=50, ge=0, le=10000)
    preempt_team_tasks: Literal["LowerPriority", "Never"] = "LowerPriority"
    fair_share_weight: int = Field(default=0, ge=0, le=100)
    resource_quota: StrictBool = True
    # Studio users (names from `users`) whose profiles run as this team's role: they may submit jobs in the
    # team's namespace only.
    members: list[str] = []
    # The POSIX group owning the team's FSx directory; its pods run with it as fsGroup. Default: derived from the
    # name (stable when teams are reordered), see team_gid.
    gid: Optional[int] = Field(default=None, ge=1001, le=4000000)
    # CPU and memory the team's namespace may request in total. Required with eks.autoscaling: Karpenter adds
    # nodes for pending pods, so without a cap a runaway job provisions instances.
    max_vcpu: Optional[int] = Field(default=None, ge=1)
    max_memory_gib: Optional[int] = Field(default=None, ge=1)


def team_gid(team: TeamQuota) -> int:
    return team.gid if team.gid is not None else 1_000_000 + zlib.crc32(team.name.encode()) % 1_000_000


def _default_priority_classes() -> list[PriorityClass]:
    return [PriorityClass(name="inference", weight=90), PriorityClass(name="training", weight=70),
            PriorityClass(name="experimentation", weight=30)]


class TaskGovernance(Strict):
    enabled: StrictBool = True
    fair_share: Literal["Enabled", "Disabled"] = "Enabled"
    priority_classes: list[PriorityClass] = Field(default_factory=_default_priority_classes, max_length=10)
    teams: list[TeamQuota] = []


class Autoscaling(Strict):
    """HyperPod-managed Karpenter: instance groups scale with pending pods."""
    enabled: StrictBool = False


class Eks(Strict):
    kubernetes_version: Literal[KUBERNETES_VERSIONS] = "1.33"  # type: ignore[valid-type]
    authentication_mode: Literal["API", "API_AND_CONFIG_MAP"] = "API"
    endpoint: EksEndpoint = EksEndpoint()
    # The control plane's ENIs live in small dedicated subnets in at least two AZs (new VPC only).
    control_plane_subnets: list[ControlPlaneSubnet] = Field(default_factory=lambda: [
        ControlPlaneSubnet(az_id="usw2-az1", cidr="10.0.1.0/28"),
        ControlPlaneSubnet(az_id="usw2-az2", cidr="10.0.1.16/28")], max_length=6)
    log_types: list[Literal[EKS_LOG_TYPES]] = list(EKS_LOG_TYPES)  # type: ignore[valid-type]
    log_retention_days: Literal[LOG_RETENTION_DAYS] = 90  # type: ignore[valid-type]
    admin_role_arns: list[RoleArn] = []
    addons: EksAddons = EksAddons()
    hyperpod_dependencies: HyperPodDependencies = HyperPodDependencies()
    node_provisioning_mode: Literal["Continuous"] = "Continuous"
    autoscaling: Autoscaling = Autoscaling()
    training_operator: StrictBool = True
    task_governance: TaskGovernance = TaskGovernance()


# ---------------------------------------------------------------------------------------------- observability
# What an SNS subscription endpoint must look like for each protocol the platform offers.
SUBSCRIPTION_ENDPOINTS = {
    "email": (r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address such as ops@example.com"),
    "https": (r"https://[^\s/]+(/\S*)?", "an https:// URL"),
    "sms": (r"\+[1-9]\d{7,14}", "a phone number in E.164 form such as +14155550100"),
    "sqs": (r"arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[\w-]{1,80}(\.fifo)?", "an SQS queue ARN"),
    "lambda": (r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[\w-]{1,64}(:[\w$-]+)?", "a Lambda function ARN"),
}


class AlarmSubscription(Strict):
    protocol: Literal[tuple(SUBSCRIPTION_ENDPOINTS)]  # type: ignore[valid-type]
    endpoint: Annotated[str, Field(min_length=1, max_length=2048)]


# What lifecycle/hyperpod/install_node_metrics.sh installs from observability.node_metrics.artifacts, by artifact name,
# and on which nodes. Prometheus runs in agent mode (`--enable-feature=agent`), which Prometheus 2.32.0 introduced
# (https://prometheus.io/blog/2021/11/16/agent/); Ubuntu 22.04's own `prometheus` (2.31.2) predates it.
NODE_METRICS_ARTIFACTS = {"prometheus-node-exporter": "every node", "prometheus": "every node",
                          "dcgm-exporter": "compute nodes with an NVIDIA GPU"}
NODE_METRICS_REQUIRED = ("prometheus-node-exporter", "prometheus")
PROMETHEUS_AGENT_MIN_VERSION = (2, 32)


class NodeMetrics(Strict):
    """Opt-in metrics from the nodes, remote-written to an Amazon Managed Service for Prometheus workspace the storage
    stack creates (constructs/metrics_workspace.py). Slurm nodes run the lifecycle exporters and a Prometheus agent
    (SigV4) installed from the operator's S3 mirror, checksum-verified; EKS clusters run the HyperPod observability
    add-on."""
    enabled: StrictBool = False
    # Days AMP keeps samples (AWS::APS::Workspace WorkspaceConfiguration.RetentionPeriodInDays; AMP's default is 150).
    retention_days: int = Field(default=150, ge=1, le=1095)
    # Slurm only.
    scrape_interval_seconds: int = Field(default=30, ge=10, le=300)
    artifacts: list[Artifact] = []
    # EKS only: the add-on amazon-sagemaker-hyperpod-observability; v1.0.5-eksbuild.1 is the version AWS names as
    # adding the restricted-instance-group toleration (docs.aws.amazon.com/sagemaker/latest/dg/
    # hyperpod-observability-addon-troubleshooting.html). Check `aws eks describe-addon-versions` before raising it.
    eks_addon_version: AddonVersion = "v1.0.5-eksbuild.1"


SsoGroupId = Annotated[str, _pattern(r"([0-9a-f]{10}-)?[A-Fa-f0-9]{8}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-"
                                     r"[A-Fa-f0-9]{12}", "an IAM Identity Center group ID such as "
                                     "9067c5ed5d-0b3a8c3e-7f39-4b2e-9b2f-0123456789ab")]


class GrafanaSaml(Strict):
    idp_metadata_url: Annotated[str, _pattern(r"https://\S{1,2040}", "an https:// URL of the IdP's SAML metadata")]
    role_attribute: Annotated[str, Field(min_length=1, max_length=256)] = "role"
    admin_role_values: list[Annotated[str, Field(min_length=1, max_length=256)]] = []


class Grafana(Strict):
    """Opt-in Amazon Managed Grafana workspace with the platform's data sources and dashboards
    (observability/grafana/*.json, provisioned by lambda/grafana_provisioning)."""
    enabled: StrictBool = False
    authentication_provider: Literal["AWS_SSO", "SAML"] = "AWS_SSO"
    # CUSTOMER_MANAGED only: the platform's own role may read exactly its AMP workspace (and CloudWatch); a
    # SERVICE_MANAGED workspace gets the AWS-managed data-source policies instead.
    permission_type: Literal["CUSTOMER_MANAGED"] = "CUSTOMER_MANAGED"
    # IAM Identity Center groups given Grafana's Viewer role (the Studio users) and Admin role (AWS_SSO only).
    viewer_group_ids: list[SsoGroupId] = []
    admin_group_ids: list[SsoGroupId] = []
    saml: Optional[GrafanaSaml] = None


class Observability(Strict):
    """Always on: one encrypted SNS topic for alarms and HyperPod events, a dashboard, log retention."""
    subscriptions: list[AlarmSubscription] = []
    # Every log group the platform creates (Lambda handlers, providers) and HyperPod's own cluster log group;
    # network.flow_logs.retention_days and eks.log_retention_days keep governing theirs.
    log_retention_days: Literal[LOG_RETENTION_DAYS] = 90  # type: ignore[valid-type]
    fsx_free_capacity_percent: int = Field(default=10, ge=1, le=90)  # alarm below this share of free space
    fsx_throughput_percent: int = Field(default=80, ge=10, le=100)  # of the file system's baseline throughput
    fsx_throughput_minutes: int = Field(default=30, ge=5, le=1440)  # ... sustained this long
    # Alarm when the oldest change waiting for automatic export to S3 is older than this.
    export_backlog_minutes: int = Field(default=60, ge=5, le=1440)
    node_metrics: NodeMetrics = NodeMetrics()  # opt-in
    grafana: Grafana = Grafana()  # opt-in


class Deployment(Strict):
    account: Optional[Annotated[str, _pattern(r"\d{12}", "a 12-digit AWS account ID")]] = None
    region: Optional[Annotated[str, _pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "a region such as us-west-2")]] = "us-west-2"


class PlatformConfig(Strict):
    """Everything a deployment needs. Defaults deploy a small but real Slurm cluster."""
    name: ClusterName = "ml-cluster"
    orchestrator: Literal["slurm", "eks"] = "slurm"
    shared_fsx: StrictBool = True
    deployment: Deployment = Deployment()
    tags: dict[Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(max_length=256)]] = {}
    network: Network = Network()
    storage: Storage = Storage()
    cluster: Cluster = Cluster()
    studio: Studio = Studio()
    eks: Eks = Eks()
    users: list[User] = []
    observability: Observability = Observability()

    def group(self, role: str) -> list[InstanceGroup]:
        return [g for g in self.cluster.instance_groups if g.role == role]


# ---------------------------------------------------------------------------------------------- semantic rules
STUDIO_PROFILE_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_DIRECTION_CODES = {"northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}


def _region_prefix(region: str) -> str:
    """us-east-1 -> use1, ap-northeast-2 -> apne2, us-gov-west-1 -> usgw1 (the AZ ID naming scheme)."""
    country, *middle, number = region.split("-")
    return country + "".join(_DIRECTION_CODES.get(word, word[0]) for word in middle) + number


def semantic_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append

    groups = cfg.cluster.instance_groups
    seen: dict[str, int] = {}
    for i, g in enumerate(groups):
        path = f"cluster.instance_groups[{i}]"
        if g.name.lower() in seen:
            add(f"{path}.name: {g.name!r} is already used by cluster.instance_groups[{seen[g.name.lower()]}]; "
                "instance group names must be unique (case-insensitive)")
        seen.setdefault(g.name.lower(), i)
        if g.deep_health_checks and g.instance_type not in ACCELERATORS:
            # AWS lists each deep health check as for GPU or Trainium instances
            # (sagemaker-hyperpod-eks-resiliency-deep-health-checks); HyperPod rejects them on CPU-only types.
            add(f"{path}.deep_health_checks: {g.deep_health_checks} on {g.instance_type!r}; deep health checks "
                "run only on instance types with NVIDIA GPUs or Trainium devices (config/facts/accelerators.json)")
        if g.role != "compute" and g.partitions:
            add(f"{path}.partitions: {g.partitions} on a {g.role} group; only compute groups belong to partitions")
        if cfg.orchestrator == "slurm" and g.role == "compute" and not g.partitions:
            add(f"{path}.partitions: [] on a compute group; HyperPod's API-driven Slurm configuration needs exactly "
                f"one partition name per compute group, e.g. [{g.name}]")
        if g.role == "controller":
            errors.extend(_controller_count_errors(cfg, path, g.instance_count))
        if g.az_id is not None:
            azs = _az_ids(cfg)
            if g.az_id not in azs:
                add(f"{path}.az_id: {g.az_id!r} has no private subnet; allowed: {', '.join(azs)}")

    if cfg.orchestrator == "slurm":
        controllers = [i for i, g in enumerate(groups) if g.role == "controller"]
        if len(controllers) != 1:
            add(f"cluster.instance_groups: {len(controllers)} groups with role 'controller'; exactly one is required")
        logins = [i for i, g in enumerate(groups) if g.role == "login"]
        if len(logins) > 1:
            add(f"cluster.instance_groups: {len(logins)} groups with role 'login' (indexes {logins}); at most one "
                "is allowed")
    else:
        errors.extend(eks_errors(cfg))

    strategy = cfg.cluster.slurm_config_strategy
    if cfg.orchestrator == "slurm" and cfg.cluster.node_provisioning_mode == "Continuous" and strategy is not None:
        add(f"cluster.slurm_config_strategy: {strategy!r} with cluster.node_provisioning_mode: Continuous; allowed: "
            "unset (continuous provisioning clusters support only the Merge behavior and reject requests that set "
            f"SlurmConfigStrategy: {SLURM_MIGRATION_PAGE})")

    runtime = cfg.cluster.container_runtime
    if runtime.enabled and not runtime.docker_apt_version:
        add("cluster.container_runtime.docker_apt_version: '' with the container runtime enabled; pin the docker.io "
            "package version, e.g. '24.0.7-0ubuntu2~22.04.1'")
    built_for = re.search(r"ubuntu[0-9.]*~(\d\d\.\d\d)", runtime.docker_apt_version)
    if built_for and built_for.group(1) != runtime.ubuntu_release:
        add(f"cluster.container_runtime.docker_apt_version: {runtime.docker_apt_version!r} is a build for Ubuntu "
            f"{built_for.group(1)}, but cluster.container_runtime.ubuntu_release is {runtime.ubuntu_release!r}; pin a "
            "version built for that release")

    lustre = cfg.storage.lustre
    cap = lustre.storage_capacity_gib
    if not (cap == 1200 or (cap > 0 and cap % 2400 == 0)):
        add(f"storage.lustre.storage_capacity_gib: {cap}; allowed: 1200 or a multiple of 2400")
    md = lustre.metadata
    if md.mode == "USER_PROVISIONED":
        if md.iops is None or not (md.iops in (1500, 3000, 6000) or (md.iops % 12000 == 0 and 12000 <= md.iops <= 192000)):
            add(f"storage.lustre.metadata.iops: {md.iops!r} with mode USER_PROVISIONED; allowed: 1500, 3000, 6000 "
                "or a multiple of 12000 up to 192000")
    elif md.iops is not None:
        add(f"storage.lustre.metadata.iops: {md.iops} with mode AUTOMATIC; remove it or set mode: USER_PROVISIONED")
    if lustre.mount_path in ("/", "/home", "/opt", "/var", "/tmp", "/usr", "/etc"):
        add(f"storage.lustre.mount_path: {lustre.mount_path!r} would hide a system directory; use e.g. /fsx")
    errors.extend(_checkpoint_errors(cfg.storage))

    errors.extend(_network_errors(cfg))
    errors.extend(_duplicate_errors(cfg))
    errors.extend(_observability_errors(cfg.observability))
    errors.extend(_node_metrics_errors(cfg))
    errors.extend(_accounting_errors(cfg))
    errors.extend(_login_access_errors(cfg))
    errors.extend(_budget_errors(cfg))
    errors.extend(_directory_errors(cfg))
    if cfg.cluster.pam_slurm_adopt and cfg.orchestrator != "slurm":
        add(f"cluster.pam_slurm_adopt: true with orchestrator {cfg.orchestrator!r}; it is a Slurm PAM module, "
            "allowed only with orchestrator slurm")
    if cfg.cluster.pam_slurm_adopt and cfg.cluster.directory.enabled:
        for i, group in enumerate(cfg.cluster.directory.admin_groups):
            if " " in group:  # pam_access(8) lists users and (groups) separated by spaces
                add(f"cluster.directory.admin_groups[{i}]: {group!r} with cluster.pam_slurm_adopt: true; compute "
                    "nodes let admin groups past pam_slurm_adopt through pam_access, whose lists cannot hold a "
                    "space. Allowed: a group name without spaces")

    names: dict[str, int] = {}
    uids: dict[int, int] = {}
    for i, u in enumerate(cfg.users):
        if u.name in names:
            add(f"users[{i}].name: {u.name!r} is already used by users[{names[u.name]}]; user names must be unique")
        if u.uid in uids:
            add(f"users[{i}].uid: {u.uid} is already used by users[{uids[u.uid]}]; uids must be unique")
        names.setdefault(u.name, i)
        uids.setdefault(u.uid, i)
        if cfg.studio.enabled and not STUDIO_PROFILE_NAME.fullmatch(u.name):
            add(f"users[{i}].name: {u.name!r} cannot be a Studio user profile name; with studio.enabled use "
                "letters, digits and hyphens only")
    errors.extend(_identity_errors(cfg))
    errors.extend(_per_user_mode_errors(cfg))
    return errors


# Account and group names no config user may take (the node image's, Slurm's, HyperPod's, Studio's), with where each
# comes from: tools/reserved_users.py writes the file. The Slurm token issuer gets the same list
# (constructs/slurm_token_issuer.py passes it in its environment), so config and handler cannot disagree.
RESERVED_USERS_FACTS = REPO_ROOT / "config" / "facts" / "reserved-users.json"


def _reserved_users(path: Path = RESERVED_USERS_FACTS) -> tuple[dict[str, str], dict[str, str]]:
    facts = json.loads(path.read_text())
    return facts["names"], facts["prefixes"]


RESERVED_USER_NAMES, RESERVED_USER_PREFIXES = _reserved_users()
# nobody/nogroup (base-passwd): files that root squash or NFS map to "no one" belong to them.
NOBODY_ID = 65534


def reserved_user(name: str) -> str | None:
    """Why `name` is reserved (its source), or None."""
    if name in RESERVED_USER_NAMES:
        return RESERVED_USER_NAMES[name]
    prefix = next((p for p in RESERVED_USER_PREFIXES if name.startswith(p)), None)
    return f"names starting with {prefix!r}: {RESERVED_USER_PREFIXES[prefix]}" if prefix else None


def _identity_errors(cfg: PlatformConfig) -> list[str]:
    """A config user is an ordinary person: not a system account's name, and not the uid or gid root is squashed to
    on FSx (root in a Studio space acts as that id there, so a user with it would own what Studio root writes, and
    Studio root could write as them)."""
    errors: list[str] = []
    squash = cfg.storage.lustre.root_squash
    squash_uid, squash_gid = (int(v) for v in squash.squash_to.split(":"))
    for i, u in enumerate(cfg.users):
        why = reserved_user(u.name)
        if why:
            errors.append(f"users[{i}].name: {u.name!r} is a reserved system account or group name ({why}); "
                          "allowed: any other POSIX name (the full list: config/facts/reserved-users.json)")
        taken = {NOBODY_ID: "nobody/nogroup"}
        if squash.enabled:
            taken.setdefault(squash_uid, "storage.lustre.root_squash.squash_to (what root in Studio is on FSx)")
        if u.uid in taken:
            errors.append(f"users[{i}].uid: {u.uid} is {taken[u.uid]}; allowed: a uid from 10000 to 4000000 that "
                          "is no system or squash identity")
        gids = {NOBODY_ID: "nobody/nogroup"}
        if squash.enabled:
            gids.setdefault(squash_gid, "storage.lustre.root_squash.squash_to's group")
        if u.gid is not None and u.gid in gids:
            errors.append(f"users[{i}].gid: {u.gid} is {gids[u.gid]}; allowed: a gid from 1001 to 4000000 that is "
                          "no system or squash identity")
    return errors


def _per_user_mode_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    departments = cfg.cluster.accounting.departments
    if cfg.orchestrator == "slurm" and cfg.studio.enabled and cfg.shared_fsx and departments:
        errors.append(f"cluster.accounting.departments: {len(departments)} department(s) with shared_fsx: true; shared "
                      "mode gives every Studio space the cluster's munge key, so any department member is root on the "
                      "compute nodes and can change every department's associations, limits and fair share with "
                      "sacctmgr as root. Allowed: shared_fsx: false (per-user mode: each profile its own Slurm "
                      "token and role), or no departments")
    if cfg.studio.enabled and cfg.studio.mlflow.enabled and not cfg.shared_fsx:
        errors.append("studio.mlflow.enabled: true with shared_fsx: false; SageMaker managed MLflow authorizes per "
                      "tracking server only (the sagemaker-mlflow actions' one resource type is the tracking server, "
                      "their one condition key aws:ResourceTag: Service Authorization Reference, Amazon SageMaker "
                      "with MLflow), so every profile that may use the platform's server reads and deletes every "
                      "other user's experiments, runs and models, which per-user mode promises they cannot. Allowed: "
                      "studio.mlflow.enabled: false in per-user mode, or shared_fsx: true")
    return errors


def _controller_count_errors(cfg: PlatformConfig, path: str, count: int) -> list[str]:
    """One controller, or several (HyperPod multi-head: a primary slurmctld and backups that take over, MULTIHEAD_PAGE)
    with what that needs: Slurm accounting outside the controllers (HyperPod's own MariaDB lives on one controller;
    the external accounting database keeps accounting through a controller's failure, EXTERNAL_ACCOUNTING_PAGE), which
    in turn needs continuous provisioning (_managed_database_errors)."""
    if count == 1 or cfg.orchestrator != "slurm":
        return []
    allowed = "1, or 2 or more with cluster.accounting.database: managed (HyperPod multi-head controllers)"
    if count < 1:
        return [f"{path}.instance_count: {count} for the controller group; allowed: {allowed}"]
    if cfg.cluster.accounting.database != "managed":
        return [f"{path}.instance_count: {count} for the controller group with cluster.accounting.database: "
                f"{cfg.cluster.accounting.database!r}; allowed: {allowed}. Backup controllers take over from the "
                "primary, so Slurm accounting must live outside the controllers (an external database, which HyperPod "
                f"attaches to continuous clusters only: {EXTERNAL_ACCOUNTING_PAGE}; {MULTIHEAD_PAGE})"]
    return []


def _observability_errors(obs: Observability) -> list[str]:
    errors = []
    grafana = obs.grafana
    if grafana.enabled and not obs.node_metrics.enabled:
        errors.append("observability.grafana.enabled: true with observability.node_metrics.enabled: false; the "
                      "Grafana dashboards read the node metrics workspace, enable node_metrics too")
    if grafana.authentication_provider == "SAML":
        if grafana.enabled and grafana.saml is None:
            errors.append("observability.grafana.saml: missing with authentication_provider SAML; set "
                          "saml.idp_metadata_url (and admin_role_values)")
        for key in ("viewer_group_ids", "admin_group_ids"):
            if getattr(grafana, key):
                errors.append(f"observability.grafana.{key}: {getattr(grafana, key)} with authentication_provider "
                              "SAML; IAM Identity Center groups apply to AWS_SSO only (SAML users get Viewer unless "
                              "their role attribute is in saml.admin_role_values)")
    elif grafana.saml is not None:
        errors.append("observability.grafana.saml: set with authentication_provider AWS_SSO; remove it or use SAML")
    for i, sub in enumerate(obs.subscriptions):
        regex, allowed = SUBSCRIPTION_ENDPOINTS[sub.protocol]
        if not re.fullmatch(regex, sub.endpoint):
            errors.append(f"observability.subscriptions[{i}].endpoint: {sub.endpoint!r} — with protocol "
                          f"{sub.protocol!r} it must be {allowed}")
    return errors


def _node_metrics_errors(cfg: PlatformConfig) -> list[str]:
    metrics = cfg.observability.node_metrics
    path = "observability.node_metrics"
    errors: list[str] = []
    for i, artifact in enumerate(metrics.artifacts):
        if artifact.name not in NODE_METRICS_ARTIFACTS:
            errors.append(f"{path}.artifacts[{i}].name: {artifact.name!r}; allowed: "
                          + ", ".join(f"{n} ({where})" for n, where in NODE_METRICS_ARTIFACTS.items()))
        package, version = artifact.s3_uri.rsplit("/", 1)[-1].split("_")[:2]
        if artifact.name in NODE_METRICS_ARTIFACTS and package != artifact.name:
            errors.append(f"{path}.artifacts[{i}].s3_uri: {artifact.s3_uri!r} holds package {package!r}, but the "
                          f"artifact is named {artifact.name!r}; name it after the package it installs")
        if package == "prometheus":
            found = re.match(r"(?:\d+:)?(\d+)\.(\d+)", version)
            if not found or tuple(map(int, found.groups())) < PROMETHEUS_AGENT_MIN_VERSION:
                errors.append(f"{path}.artifacts[{i}].s3_uri: prometheus {version!r} has no agent mode; pin a "
                              "build of Prometheus 2.32 or later (e.g. Ubuntu 24.04's 2.45.3 or Debian 12's 2.42.0)")
    if not metrics.enabled:
        return errors
    if cfg.orchestrator != "slurm":
        if metrics.artifacts:  # EKS nodes get the HyperPod observability add-on, not the lifecycle collectors
            errors.append(f"{path}.artifacts: {len(metrics.artifacts)} artifact(s) with orchestrator "
                          f"{cfg.orchestrator!r}; the lifecycle collectors are for Slurm nodes (EKS clusters get the "
                          "HyperPod observability add-on, eks_addon_version): remove artifacts")
        return errors
    names = {a.name for a in metrics.artifacts}
    for required in NODE_METRICS_REQUIRED:
        if required not in names:
            errors.append(f"{path}.artifacts: no {required!r} artifact with node metrics enabled; list the Debian "
                          f"package mirrored to your S3 bucket as {{name: {required}, s3_uri: "
                          f"s3://<bucket>/<path>/{required}_<version>_<arch>.deb, sha256: <64 hex>}}")
    return errors


def _directory_errors(cfg: PlatformConfig) -> list[str]:
    directory = cfg.cluster.directory
    path = "cluster.directory"
    if not directory.enabled:
        return []
    if cfg.orchestrator != "slurm":
        return [f"{path}.enabled: true with orchestrator {cfg.orchestrator!r}; SSSD on the nodes is for Slurm "
                "clusters only (EKS pods bring their users in their images): set it to false"]
    errors: list[str] = []
    add = errors.append
    if not directory.uris:
        add(f"{path}.uris: [] with the directory enabled; list at least one ldaps://host URI")
    for i, uri in enumerate(directory.uris):
        if uri.startswith("ldap://") and not directory.start_tls:
            add(f"{path}.uris[{i}]: {uri!r} is plaintext LDAP, which would send the bind password and users' "
                "passwords unencrypted; use ldaps://, or set start_tls: true")
        if uri.startswith("ldaps://") and directory.start_tls:
            add(f"{path}.uris[{i}]: {uri!r} with start_tls: true; StartTLS is for ldap:// URIs, ldaps:// is already "
                "encrypted: set start_tls: false or use ldap://")
    for key in ("search_base", "bind_dn", "bind_password_secret_arn", "ca_certificate"):
        if getattr(directory, key) is None:
            add(f"{path}.{key}: missing; required with the directory enabled")
    if not directory.access_groups:
        add(f"{path}.access_groups: [] with the directory enabled; name the directory groups whose members may log "
            "in (everyone else in the directory is refused)")
    arn, key = directory.bind_password_secret_arn, directory.bind_password_kms_key_arn
    if arn and key and arn.split(":")[3] != key.split(":")[3]:
        add(f"{path}.bind_password_kms_key_arn: {key!r} is in region {key.split(':')[3]}, the secret in "
            f"{arn.split(':')[3]}; a secret is encrypted with a key of its own region")
    if directory.ca_certificate is not None:
        problem = ca_certificate_problem(directory.ca_certificate)
        if problem:
            add(f"{path}.ca_certificate: {directory.ca_certificate!r} — {problem}")
    for i, artifact in enumerate(directory.artifacts):
        package = artifact.s3_uri.rsplit("/", 1)[-1].split("_")[0]
        if package != artifact.name:
            add(f"{path}.artifacts[{i}].s3_uri: {artifact.s3_uri!r} holds package {package!r}, but the artifact is "
                f"named {artifact.name!r}; name it after the package it installs")
    users = {u.name: i for i, u in enumerate(cfg.users)}
    for group in sorted(set(directory.access_groups + directory.admin_groups) & set(users)):
        add(f"{path}: group {group!r} is also users[{users[group]}].name; create_users.sh makes a local group of "
            "that name (unless the directory has the user), which would shadow the directory group: rename one")
    return errors


def ca_certificate_problem(relative: str) -> str | None:
    """None when the file (relative to the repository root) holds at least one PEM certificate and nothing else."""
    path = REPO_ROOT / relative
    if not path.resolve().is_relative_to(REPO_ROOT):
        return "must stay inside the repository"
    try:
        text = path.read_text()
    except (FileNotFoundError, IsADirectoryError):
        return f"no such file under {REPO_ROOT}"
    except UnicodeDecodeError:
        return "is not a PEM file (binary content; convert DER with openssl x509 -inform der)"
    blocks = re.findall(r"-----BEGIN ([A-Z0-9 ]+)-----\n[A-Za-z0-9+/=\n]+-----END \1-----", text)
    if not blocks:
        return "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    if any(kind != "CERTIFICATE" for kind in blocks):
        return f"holds a {next(k for k in blocks if k != 'CERTIFICATE')} block; only CA certificates belong here"
    return None


def ca_certificate_bytes(cfg: PlatformConfig) -> bytes:
    return (REPO_ROOT / cfg.cluster.directory.ca_certificate).read_bytes()


def _managed_database_errors(cfg: PlatformConfig) -> list[str]:
    """What `cluster.accounting.database: managed` needs (https://docs.aws.amazon.com/sagemaker/latest/dg/
    sagemaker-hyperpod-external-accounting-db-slurm.html: continuous provisioning; an RDS subnet group needs subnets
    in at least two AZs)."""
    path = "cluster.accounting.database"
    if cfg.cluster.accounting.database != "managed":
        return []
    errors: list[str] = []
    if cfg.orchestrator != "slurm":
        errors.append(f"{path}: 'managed' with orchestrator {cfg.orchestrator!r}; allowed only with orchestrator slurm "
                      "(it is Slurm's accounting database)")
    if not cfg.cluster.accounting.enabled:
        errors.append(f"{path}: 'managed' with cluster.accounting.enabled: false; allowed only with accounting "
                      "enabled (or use database: hyperpod)")
    if cfg.cluster.node_provisioning_mode != "Continuous":
        errors.append(f"cluster.node_provisioning_mode: {cfg.cluster.node_provisioning_mode!r} with {path}: managed; "
                      "allowed: 'Continuous' (HyperPod attaches an external accounting database only to clusters in "
                      "continuous provisioning mode)")
    azs = set(_az_ids(cfg))
    if len(azs) < 2:
        where = "network.existing.private_subnets" if cfg.network.existing else "network.az_ids"
        errors.append(f"{where}: {sorted(azs)} with {path}: managed; allowed: private subnets in at least 2 AZs "
                      "(an RDS DB subnet group must cover two Availability Zones)")
    return errors


def _accounting_errors(cfg: PlatformConfig) -> list[str]:
    acct = cfg.cluster.accounting
    errors: list[str] = []
    add = errors.append
    path = "cluster.accounting"
    if not acct.enabled:
        if acct.departments or acct.qos:
            add(f"{path}.enabled: false with {len(acct.departments)} department(s) and {len(acct.qos)} QoS; enable "
                "accounting or remove them")
        errors.extend(_managed_database_errors(cfg))
        return errors
    if cfg.orchestrator != "slurm":
        add(f"{path}.enabled: true with orchestrator {cfg.orchestrator!r}; Slurm accounting needs orchestrator slurm")
    errors.extend(_managed_database_errors(cfg))

    qos_names: dict[str, int] = {}
    for i, q in enumerate(acct.qos):
        if q.name in qos_names:
            add(f"{path}.qos[{i}].name: {q.name!r} is already used by {path}.qos[{qos_names[q.name]}]; QoS names must "
                "be unique")
        qos_names.setdefault(q.name, i)
    compute = [g for g in cfg.cluster.instance_groups if g.role == "compute"]
    nodes = sum(g.instance_count for g in compute)
    gpus = sum(nvidia_gpus(g.instance_type) * g.instance_count for g in compute)
    for i, q in enumerate(acct.qos):
        for key in ("max_tres_per_user", "grp_tres"):
            tres = getattr(q, key)
            if tres.node is not None and tres.node > nodes:
                add(f"{path}.qos[{i}].{key}.node: {tres.node}; the compute groups have {nodes} node(s) in total, so "
                    "the limit could never bind; allowed: at most " + str(nodes))
            if tres.gpu is not None and gpus == 0:
                types = sorted({g.instance_type for g in compute})
                add(f"{path}.qos[{i}].{key}.gpu: {tres.gpu}; no compute group has NVIDIA GPUs (instance types "
                    f"{', '.join(types) or 'none'}; GPU types and counts in config/facts/accelerators.json), so "
                    "Slurm has no gpu GRES to limit; remove the gpu limit or add a GPU instance group")
            elif tres.gpu is not None and tres.gpu > gpus:
                add(f"{path}.qos[{i}].{key}.gpu: {tres.gpu}; the compute groups have {gpus} NVIDIA GPU(s) in total "
                    f"(counts in config/facts/accelerators.json), so the limit could never bind; allowed: at most {gpus}")
        per_user, group = q.max_tres_per_user, q.grp_tres
        for res in ("cpu", "node", "gpu"):
            mine, theirs = getattr(per_user, res), getattr(group, res)
            if mine is not None and theirs is not None and mine > theirs:
                add(f"{path}.qos[{i}].max_tres_per_user.{res}: {mine} is more than grp_tres.{res} {theirs}, the "
                    "QoS's total; allowed: at most " + str(theirs))

    known_qos = set(qos_names) | {SLURM_DEFAULT_QOS}
    users = {u.name for u in cfg.users}
    departments: dict[str, int] = {}
    for i, d in enumerate(acct.departments):
        dpath = f"{path}.departments[{i}]"
        if d.name in departments:
            add(f"{dpath}.name: {d.name!r} is already used by {path}.departments[{departments[d.name]}]; each "
                "department is one Slurm account, names must be unique")
        elif d.name == "root":
            add(f"{dpath}.name: 'root' is Slurm's own top account; choose another name")
        elif d.name == PLATFORM_USERS_ACCOUNT:
            add(f"{dpath}.name: {PLATFORM_USERS_ACCOUNT!r} is the platform's account for users no department lists; "
                "choose another name")
        departments.setdefault(d.name, i)
        for j, q in enumerate(d.qos):
            if q not in known_qos:
                add(f"{dpath}.qos[{j}]: {q!r} is not a QoS; allowed: {', '.join(sorted(known_qos))} (define it under "
                    f"{path}.qos)")
        if d.default_qos not in known_qos:
            add(f"{dpath}.default_qos: {d.default_qos!r} is not a QoS; allowed: {', '.join(sorted(known_qos))} "
                f"(define it under {path}.qos)")
        elif d.qos and d.default_qos not in d.qos:
            add(f"{dpath}.default_qos: {d.default_qos!r} is not in the department's qos {list(d.qos)}; add it there")
        for j, u in enumerate(d.users):
            if u not in users:
                add(f"{dpath}.users[{j}]: {u!r} is not a user; allowed: {', '.join(sorted(users)) or '(no users)'} "
                    "(Slurm runs jobs as the user's POSIX account, which `users` creates on every node)")
        for j, c in enumerate(d.coordinators):
            if c not in d.users:
                add(f"{dpath}.coordinators[{j}]: {c!r} is not one of the department's users "
                    f"{list(d.users)}; list them in users first")
    return errors


def department_tags(cfg: PlatformConfig) -> dict[str, tuple[str, str]]:
    """user -> (tag key, department) for the cost allocation tag on what is theirs (their Studio profile, whose tags
    the domain propagates to their spaces and apps): the first department listing them, their default account.
    Empty without cluster.budget."""
    if cfg.cluster.budget is None:
        return {}
    key = cfg.cluster.budget.department_tag_key
    tags: dict[str, tuple[str, str]] = {}
    for d in cfg.cluster.accounting.departments:
        for user in d.users:
            tags.setdefault(user, (key, d.name))
    return tags


def login_load_balancer(cfg: PlatformConfig) -> bool:
    """An SSH load balancer in front of the login group: Slurm, a login group with instances, and not turned off."""
    logins = cfg.group("login") if cfg.orchestrator == "slurm" else []
    return bool(logins) and logins[0].instance_count >= 1 and cfg.cluster.login_access.load_balancer


def session_run_as(cfg: PlatformConfig) -> bool:
    return cfg.orchestrator == "slurm" and cfg.cluster.login_access.run_as


def _login_access_errors(cfg: PlatformConfig) -> list[str]:
    access = cfg.cluster.login_access
    errors: list[str] = []
    path = "cluster.login_access"
    for i, cidr in enumerate(access.ssh_allowed_cidrs):
        if ipaddress.ip_network(cidr).prefixlen == 0:
            errors.append(f"{path}.ssh_allowed_cidrs[{i}]: {cidr!r} would let every address that routes into the VPC "
                          "reach the login nodes' SSH; list the networks people connect from, e.g. 10.0.0.0/16")
    if login_load_balancer(cfg) and cfg.network.existing is not None and not access.ssh_allowed_cidrs:
        errors.append(f"{path}.ssh_allowed_cidrs: [] with network.existing; the default is the VPC's CIDR, which the "
                      "platform cannot know for an existing VPC: list the networks people connect from, or set "
                      f"{path}.load_balancer: false")
    if session_run_as(cfg):
        users = sorted(u.name for u in cfg.users)
        if access.run_as_default_user not in ["nobody", *users]:
            errors.append(f"{path}.run_as_default_user: {access.run_as_default_user!r}; Session Manager starts a "
                          "session only as a user that exists on the node: allowed: nobody (untagged principals are "
                          f"refused) or one of users ({', '.join(users) or 'none defined'}); never ssm-user or root")
    return errors


def _budget_errors(cfg: PlatformConfig) -> list[str]:
    budget = cfg.cluster.budget
    errors: list[str] = []
    add = errors.append
    departments = cfg.cluster.accounting.departments
    if budget is None:
        for i, d in enumerate(departments):
            if d.monthly_budget_usd is not None:
                add(f"cluster.accounting.departments[{i}].monthly_budget_usd: {d.monthly_budget_usd} without "
                    "cluster.budget; department budgets take their thresholds and recipients from cluster.budget: "
                    "add it (monthly_limit_usd, thresholds_percent, emails)")
        return errors
    path = "cluster.budget"
    for i, t in enumerate(budget.thresholds_percent):
        if not 1 <= t <= 1000:
            add(f"{path}.thresholds_percent[{i}]: {t}; allowed: 1-1000 (percent of the monthly limit)")
    if not budget.notify_topic and not budget.emails:
        add(f"{path}: notify_topic: false and no emails; a budget alert needs a recipient: set notify_topic: true "
            "(the platform's alarm topic) or list emails")
    for i, d in enumerate(departments):
        if d.budget_emails and d.monthly_budget_usd is None:
            add(f"cluster.accounting.departments[{i}].budget_emails: {list(d.budget_emails)} without "
                "monthly_budget_usd; set the department's monthly budget or remove its budget_emails")
        recipients = len(set(budget.emails) | set(d.budget_emails))
        if d.monthly_budget_usd is not None and recipients > 10:
            add(f"cluster.accounting.departments[{i}].budget_emails: with cluster.budget.emails that is {recipients} "
                "addresses; AWS Budgets allows at most 10 e-mail subscribers per notification")
    return errors


def checkpoint_dir(storage: Storage) -> str:
    """storage.checkpoint_dir, or its default inside the S3-linked path."""
    return storage.checkpoint_dir or storage.lustre.data_repository.file_system_path.rstrip("/") + "/checkpoints"


def _checkpoint_errors(storage: Storage) -> list[str]:
    repo = storage.lustre.data_repository
    linked = repo.file_system_path.rstrip("/")
    ckpt = checkpoint_dir(storage).rstrip("/")
    if ".." in ckpt.split("/") or ckpt == linked or not ckpt.startswith(linked + "/"):
        return [f"storage.checkpoint_dir: {storage.checkpoint_dir!r} is not inside "
                f"storage.lustre.data_repository.file_system_path {repo.file_system_path!r}; nothing would export its "
                f"checkpoints to S3. Allowed: a subdirectory of it, e.g. {linked}/checkpoints"]
    if not {"NEW", "CHANGED"} <= set(repo.auto_export):
        return [f"storage.lustre.data_repository.auto_export: {list(repo.auto_export)} with storage.checkpoint_dir "
                f"{checkpoint_dir(storage)!r}; checkpoints reach S3 only when NEW and CHANGED are exported"]
    return []


# Accelerators per instance (extended resource name, count): team ResourceQuotas on EKS, the GPUs a Slurm compute node
# has as GRES (lifecycle/hyperpod/check_gres.sh compares HyperPod's Gres=gpu:N with this), QoS gpu limits. The counts
# are aws/sagemaker-hyperpod-cli's INSTANCE_RESOURCES at a pinned commit, written to ACCELERATOR_FACTS by
# tools/accelerator_counts.py (repository, commit and path are in the file; Trainium counts are Neuron devices).
# A type not listed counts as no accelerator.
ACCELERATOR_FACTS = REPO_ROOT / "config" / "facts" / "accelerators.json"
_NVIDIA = "nvidia.com/gpu"
_NEURON = "aws.amazon.com/neurondevice"


def _accelerators_from_facts(path: Path = ACCELERATOR_FACTS) -> dict[str, tuple[str, int]]:
    rows = json.loads(path.read_text())["accelerators"]
    unknown = {row["resource"] for row in rows.values()} - {_NVIDIA, _NEURON}
    if unknown:  # nvidia_gpus and the Neuron taint check would silently ignore them
        raise ValueError(f"{path}: extended resources {sorted(unknown)}; this platform knows {_NVIDIA}, {_NEURON}")
    return {instance_type: (row["resource"], row["count"]) for instance_type, row in sorted(rows.items())}


ACCELERATORS: dict[str, tuple[str, int]] = _accelerators_from_facts()


def nvidia_gpus(instance_type: str) -> int:
    """NVIDIA GPUs per instance (0 for other accelerators and unknown types): the GRES count Slurm should show."""
    kind, count = ACCELERATORS.get(instance_type, ("", 0))
    return count if kind == _NVIDIA else 0


def eks_errors(cfg: PlatformConfig) -> list[str]:
    """Rules that apply when `orchestrator: eks`; Slurm-only keys (controller/login groups, partitions) are unused."""
    eks = cfg.eks
    errors: list[str] = []
    add = errors.append
    compute = [g for g in cfg.cluster.instance_groups if g.role == "compute"]
    if not compute:
        add("cluster.instance_groups: no group with role 'compute'; an EKS cluster needs at least one")

    minor = eks.kubernetes_version
    if minor not in HYPERPOD_KUBERNETES:
        add(f"eks.kubernetes_version: {minor!r} is not supported by SageMaker HyperPod on EKS; allowed: "
            f"{', '.join(sorted(HYPERPOD_KUBERNETES, key=lambda v: tuple(map(int, v.split('.')))))} "
            f"({HYPERPOD_EKS_DOC})")
    if not eks.addons.kube_proxy.startswith(f"v{minor}."):
        add(f"eks.addons.kube_proxy: {eks.addons.kube_proxy!r} does not match eks.kubernetes_version {minor!r}; "
            f"use a v{minor}.x-eksbuild.N version")
    errors.extend(_addon_errors(eks))

    endpoint = eks.endpoint
    if endpoint.public and not endpoint.public_access_cidrs:
        add("eks.endpoint.public_access_cidrs: [] with eks.endpoint.public: true; list the CIDR blocks allowed to "
            "reach the public endpoint")
    if not endpoint.public and endpoint.public_access_cidrs:
        add(f"eks.endpoint.public_access_cidrs: {endpoint.public_access_cidrs} with eks.endpoint.public: false; "
            "remove them or set public: true")
    for i, cidr in enumerate(endpoint.public_access_cidrs):
        if ipaddress.ip_network(cidr).prefixlen == 0:
            add(f"eks.endpoint.public_access_cidrs[{i}]: {cidr!r} opens the API server to the internet; allowed: "
                "specific CIDR blocks")

    existing = cfg.network.existing
    if existing:
        path, azs = "network.existing.control_plane_subnets", [s.az_id for s in existing.control_plane_subnets]
    else:
        path, azs = "eks.control_plane_subnets", [s.az_id for s in eks.control_plane_subnets]
    if len(set(azs)) < 2:
        add(f"{path}: {len(set(azs))} distinct AZ ID(s) {sorted(set(azs))}; the EKS control plane needs subnets in "
            "at least two AZs")
    region = cfg.deployment.region
    for i, az in enumerate(azs):
        if region and not az.startswith(_region_prefix(region) + "-"):
            add(f"{path}[{i}].az_id: {az!r} is not in region {region}; AZ IDs there start with "
                f"'{_region_prefix(region)}-'")
    if not existing:
        for i, subnet in enumerate(eks.control_plane_subnets):
            if ipaddress.ip_network(subnet.cidr).prefixlen > 28:
                add(f"eks.control_plane_subnets[{i}].cidr: {subnet.cidr!r}; EKS needs at least a /28 per subnet")

    if eks.hyperpod_dependencies.neuron_device_plugin:
        for i, g in enumerate(cfg.cluster.instance_groups):
            if g.role != "compute" or ACCELERATORS.get(g.instance_type, ("",))[0] != _NEURON:
                continue
            for j, taint in enumerate(g.kubernetes_taints):
                if taint.effect != "PreferNoSchedule" and not any(tolerates(t, taint) for t in NEURON_PLUGIN_TOLERATIONS):
                    add(f"cluster.instance_groups[{i}].kubernetes_taints[{j}]: {taint.key}={taint.value}:"
                        f"{taint.effect} on a Neuron group; the chart's Neuron device plugin does not tolerate it "
                        "(its tolerations are fixed in its template), so the group would advertise no Neuron "
                        "devices; allowed: taints with key aws.amazon.com/neuron, or effect PreferNoSchedule")

    gov = eks.task_governance
    if gov.enabled:
        errors.extend(_governance_errors(gov, compute))
        if cfg.studio.enabled and cfg.studio.partition_root == EKS_TEAM_DIRECTORY_ROOT:
            add(f"studio.partition_root: {cfg.studio.partition_root!r} is where the EKS team directories live; "
                f"allowed: any other directory name (the default is 'studio')")
        users = {u.name for u in cfg.users}
        taken = {cfg.studio.shared_gid: "studio.shared_gid", **{u.group_id: f"the group of user {u.name!r}"
                                                                for u in cfg.users}}
        for i, team in enumerate(gov.teams):
            gid = team_gid(team)
            if gid in taken:
                add(f"eks.task_governance.teams[{i}].gid: {gid} is already {taken[gid]}; give the team a gid of "
                    "its own (it owns the team's FSx directory)")
            taken.setdefault(gid, f"the gid of team {team.name!r}")
        if eks.autoscaling.enabled:
            for i, team in enumerate(gov.teams):
                for key in ("max_vcpu", "max_memory_gib"):
                    if getattr(team, key) is None:
                        add(f"eks.task_governance.teams[{i}].{key}: not set with eks.autoscaling.enabled: true; "
                            "give the team a CPU and memory cap, or nodes are added for whatever it requests")
        member_of: dict[str, str] = {}
        for i, team in enumerate(gov.teams):
            for j, member in enumerate(team.members):
                path = f"eks.task_governance.teams[{i}].members[{j}]"
                if member not in users:
                    add(f"{path}: {member!r} is not a user; allowed: {', '.join(sorted(users)) or '(no users)'}")
                elif member in member_of:
                    add(f"{path}: {member!r} is already a member of team {member_of[member]!r}; a Studio profile "
                        "runs as one team's role")
                member_of.setdefault(member, team.name)
    elif gov.teams:
        add(f"eks.task_governance.teams: {len(gov.teams)} team(s) with task governance disabled; enable it or "
            "remove the teams")
    return errors


# The Neuron device plugin's tolerations are written into its template, not values:
# aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea helm_chart/HyperPodHelmChart/charts/
# neuron-device-plugin/templates/k8s-neuron-device-plugin.yaml (tests compare with the generated chart facts).
NEURON_PLUGIN_TOLERATIONS = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal", "value": "Unschedulable",
     "effect": "NoSchedule"},
)


def tolerates(toleration: dict, taint: Taint) -> bool:
    """Kubernetes' matching rule: an empty key with Exists matches every key, an empty effect every effect."""
    if toleration.get("effect") and toleration["effect"] != taint.effect:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.key
    return toleration.get("key") == taint.key and toleration.get("value", "") == taint.value


def enabled_addons(eks: Eks) -> list[str]:
    """Config keys of the add-ons this configuration installs (kube-proxy is checked on its own)."""
    keys = ["vpc_cni", "coredns", "pod_identity_agent", "fsx_csi_driver", "cert_manager"]
    keys += ["training_operator"] if eks.training_operator else []
    keys += ["task_governance"] if eks.task_governance.enabled else []
    return keys


def _addon_errors(eks: Eks) -> list[str]:
    errors: list[str] = []
    minor = eks.kubernetes_version
    for key in enabled_addons(eks):
        version = getattr(eks.addons, key)
        fact = ADDON_SUPPORT.get((key, version))
        if fact is None:
            known = sorted(v for k, v in ADDON_SUPPORT if k == key)
            errors.append(f"eks.addons.{key}: {version!r} has no recorded Kubernetes support; known: "
                          f"{', '.join(known)} (add a version to ADDON_SUPPORT in stacks/config.py with its source)")
        elif minor not in fact.kubernetes:
            fits = sorted(v for (k, v), f in ADDON_SUPPORT.items() if k == key and minor in f.kubernetes)
            errors.append(f"eks.addons.{key}: {version!r} does not support eks.kubernetes_version {minor!r} (it "
                          f"supports {', '.join(sorted(fact.kubernetes))}; {fact.source}); "
                          + (f"for {minor} use {', '.join(fits)}" if fits else f"no recorded version supports {minor}"))
    operator = re.fullmatch(r"v(\d+)\.(\d+)\..*", eks.addons.training_operator)
    if eks.training_operator and operator and tuple(map(int, operator.groups())) < ELASTIC_TRAINING_OPERATOR:
        errors.append(f"eks.addons.training_operator: {eks.addons.training_operator!r}; elastic training "
                      "(elasticPolicy) needs v1.2 or later "
                      "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html)")
    return errors


def _governance_errors(gov: TaskGovernance, compute: list[InstanceGroup]) -> list[str]:
    errors: list[str] = []
    add = errors.append
    classes = [c.name for c in gov.priority_classes]
    for i, name in enumerate(classes):
        if name in classes[:i]:
            add(f"eks.task_governance.priority_classes[{i}].name: {name!r} is listed twice; names must be unique")
    capacity: dict[str, int] = {}
    for g in compute:
        capacity[g.instance_type] = capacity.get(g.instance_type, 0) + g.instance_count
    guaranteed: dict[str, int] = {}
    names: list[str] = []
    for i, team in enumerate(gov.teams):
        path = f"eks.task_governance.teams[{i}]"
        if team.name in names:
            add(f"{path}.name: {team.name!r} is already used by eks.task_governance.teams[{names.index(team.name)}]; "
                "team names must be unique")
        names.append(team.name)
        if (team.instance_count is None) == (team.accelerators is None):
            add(f"{path}: instance_count={team.instance_count!r}, accelerators={team.accelerators!r}; give exactly "
                "one of them")
        if team.instance_type not in capacity:
            add(f"{path}.instance_type: {team.instance_type!r} is not the type of any compute group; allowed: "
                f"{', '.join(sorted(capacity)) or 'none (add a compute group)'}")
            continue
        per_instance = ACCELERATORS.get(team.instance_type)
        count = team.instance_count
        if count is None and team.accelerators is not None and per_instance:
            count = -(-team.accelerators // per_instance[1])
        guaranteed[team.instance_type] = guaranteed.get(team.instance_type, 0) + (count or 0)
        if team.accelerators is not None and per_instance is None:
            add(f"{path}.accelerators: {team.accelerators} on {team.instance_type!r}, which has no accelerators this "
                "platform knows; use instance_count")
        elif team.accelerators is not None and team.accelerators > per_instance[1] * capacity[team.instance_type]:
            add(f"{path}.accelerators: {team.accelerators}; the cluster has "
                f"{per_instance[1] * capacity[team.instance_type]} on {team.instance_type}")
        if team.resource_quota and per_instance is None:
            add(f"{path}.resource_quota: true on {team.instance_type!r}, whose accelerators are unknown; set "
                f"resource_quota: false or use one of {', '.join(sorted(ACCELERATORS))}")
        if team.sharing != "LendAndBorrow" and team.borrow_limit_percent != 50:
            add(f"{path}.borrow_limit_percent: {team.borrow_limit_percent} with sharing {team.sharing!r}; a borrow "
                "limit applies only to LendAndBorrow")
    for instance_type, count in guaranteed.items():
        if count > capacity[instance_type]:
            add(f"eks.task_governance.teams: {count} guaranteed {instance_type} instance(s) across teams; the "
                f"compute groups have {capacity[instance_type]}")
    return errors


# Lists of records whose identity is a subset of their fields; the API or synth refuses two with the same identity.
_RECORD_KEYS = {
    "cluster.container_runtime.artifacts": ("name",),
    "network.existing.private_subnets": ("id",),
    "network.existing.control_plane_subnets": ("id",),
    "cluster.instance_groups[].kubernetes_taints": ("key", "effect"),  # Kubernetes: one taint per key and effect
    "observability.subscriptions": ("protocol", "endpoint"),
    "observability.node_metrics.artifacts": ("name",),
}
# Checked with their own message elsewhere (instance groups, users, teams, priority classes, AZ IDs).
_DUPLICATES_CHECKED_ELSEWHERE = {"network.az_ids"}


def _duplicate_errors(cfg: PlatformConfig) -> list[str]:
    """No list accepts an entry twice: every list of plain values, and the record lists in _RECORD_KEYS."""
    errors: list[str] = []

    def walk(node: Any, path: str, shape: str) -> None:
        if isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name), f"{path}.{name}" if path else name,
                     f"{shape}.{name}" if shape else name)
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}", f"{shape}.{key}")
        elif isinstance(node, list):
            keys = _RECORD_KEYS.get(shape)
            if node and not isinstance(node[0], BaseModel) and shape not in _DUPLICATES_CHECKED_ELSEWHERE:
                keys = ()
            if keys is not None:
                first: dict[Any, int] = {}
                for i, item in enumerate(node):
                    identity = tuple(getattr(item, k) for k in keys) if keys else item
                    if identity in first:
                        shown = (", ".join(f"{k}={getattr(item, k)!r}" for k in keys) if keys else repr(item))
                        errors.append(f"{path}[{i}]: {shown} repeats {path}[{first[identity]}]; list each at most "
                                      "once")
                    first.setdefault(identity, i)
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]", f"{shape}[]")

    walk(cfg, "", "")
    return errors


def _az_ids(cfg: PlatformConfig) -> list[str]:
    existing = cfg.network.existing
    return [s.az_id for s in existing.private_subnets] if existing else list(cfg.network.az_ids)


def root_squash_exempts_cluster_subnets(cfg: PlatformConfig) -> bool:
    """Root squash is set on the platform's own file system only, and on Slurm its nodes' subnets keep root (the
    lifecycle scripts create homes as root). EKS exempts nothing: a pod reaches FSx through its node's Lustre client,
    so exempting nodes would exempt every pod."""
    lustre = cfg.storage.lustre
    return lustre.root_squash.enabled and lustre.existing is None and cfg.orchestrator == "slurm"


def _network_errors(cfg: PlatformConfig) -> list[str]:
    net = cfg.network
    errors: list[str] = []
    region = cfg.deployment.region
    for i, az in enumerate(_az_ids(cfg)):
        path = f"network.existing.private_subnets[{i}].az_id" if net.existing else f"network.az_ids[{i}]"
        if region and not az.startswith(_region_prefix(region) + "-"):
            errors.append(f"{path}: {az!r} is not in region {region}; AZ IDs there start with "
                          f"'{_region_prefix(region)}-'")
    if net.existing and net.existing.control_plane_subnets and cfg.orchestrator != "eks":
        errors.append("network.existing.control_plane_subnets: set, but only the EKS orchestrator uses them")
    if len(set(_az_ids(cfg))) != len(_az_ids(cfg)):
        errors.append(f"network.az_ids: {_az_ids(cfg)} repeats an AZ ID; list each at most once")
    if root_squash_exempts_cluster_subnets(cfg) and cfg.studio.enabled:
        key = "network.existing.studio_subnet" if net.existing else "network.studio_subnet_cidr"
        if (net.existing.studio_subnet if net.existing else net.studio_subnet_cidr) is None:
            errors.append(f"{key}: not set, but storage.lustre.root_squash exempts the cluster's subnets (their nodes "
                          "keep root on FSx) and Studio would share the first of them; give Studio a subnet of its "
                          "own (e.g. network.studio_subnet_cidr: 10.0.4.0/22) or set "
                          "storage.lustre.root_squash.enabled: false")
    if net.existing and net.existing.studio_subnet:
        studio = net.existing.studio_subnet
        if studio.id in {s.id for s in net.existing.private_subnets}:
            errors.append(f"network.existing.studio_subnet.id: {studio.id!r} is also in network.existing."
                          "private_subnets; Studio needs a subnet the cluster does not use")
        if region and not studio.az_id.startswith(_region_prefix(region) + "-"):
            errors.append(f"network.existing.studio_subnet.az_id: {studio.az_id!r} is not in region {region}")
    if net.existing:
        return errors

    if len(net.private_subnet_cidrs) != len(net.az_ids):
        errors.append(f"network.private_subnet_cidrs: {len(net.private_subnet_cidrs)} CIDR(s) for "
                      f"{len(net.az_ids)} AZ ID(s); give exactly one private subnet CIDR per AZ ID")
    vpc = ipaddress.ip_network(net.vpc_cidr)
    if not 16 <= vpc.prefixlen <= 28:
        errors.append(f"network.vpc_cidr: {net.vpc_cidr!r}; VPC CIDRs must be between /16 and /28")
    subnets = [("network.public_subnet_cidr", net.public_subnet_cidr)] + \
              [(f"network.private_subnet_cidrs[{i}]", c) for i, c in enumerate(net.private_subnet_cidrs)]
    if cfg.orchestrator == "eks":
        subnets += [(f"eks.control_plane_subnets[{i}].cidr", s.cidr) for i, s in enumerate(cfg.eks.control_plane_subnets)]
    if net.studio_subnet_cidr:
        subnets.append(("network.studio_subnet_cidr", net.studio_subnet_cidr))
    for path, cidr in subnets:
        if not ipaddress.ip_network(cidr).subnet_of(vpc):
            errors.append(f"{path}: {cidr!r} is not inside network.vpc_cidr {net.vpc_cidr!r}")
    for a in range(len(subnets)):
        for b in range(a + 1, len(subnets)):
            if ipaddress.ip_network(subnets[a][1]).overlaps(ipaddress.ip_network(subnets[b][1])):
                errors.append(f"{subnets[b][0]}: {subnets[b][1]!r} overlaps {subnets[a][0]} {subnets[a][1]!r}")
    return errors


# ---------------------------------------------------------------------------------------------- loading
class _StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that knows only `true`/`false` as booleans and rejects duplicate keys."""


class _FastStrictYamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same on libyaml's parser when PyYAML has it: a thousand users parse in 0.03 s instead of 0.2 s. Its errors
    do not quote the offending line, so a file it refuses is read again by `_StrictYamlLoader` for the message."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
    keys = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in keys:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        keys.add(key)
    return loader.construct_mapping(node)


for _loader in (_StrictYamlLoader, _FastStrictYamlLoader):
    _loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
    }
    _loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _allowed_keys(loc: tuple) -> list[str]:
    """The field names of the model that holds the key at `loc` (walks lists and Optional[...])."""
    model: Any = PlatformConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        candidates += [a for c in candidates for a in getattr(c, "__args__", ())]
        model = next(c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel))
    return list(model.model_fields)


def _format_pydantic_error(err: dict[str, Any]) -> str:
    loc = list(err["loc"])
    is_key = loc[-1:] == ["[key]"]  # a bad mapping key: report the mapping's path
    if is_key:
        loc = loc[:-2]
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if is_key:
        path += " key"
    kind, message, value = err["type"], err["msg"], err.get("input")
    if kind == "extra_forbidden":
        return f"{path}: unknown key; allowed here: {', '.join(_allowed_keys(err['loc']))}"
    if kind == "missing":
        return f"{path}: missing; this key is required"
    message = message.removeprefix("Value error, ")
    if kind.startswith("bool"):
        message = "must be true or false"
    return f"{path}: {value!r} — {message}"


def parse_config(data: Any, source: str = "<config>") -> PlatformConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [f"<root>: {type(data).__name__} — the configuration must be a mapping of keys"])
    try:
        cfg = PlatformConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_format_pydantic_error(e) for e in exc.errors()]) from None
    errors = semantic_errors(cfg)
    if errors:
        raise ConfigError(source, errors)
    return cfg


def _parse_context_value(key: str, raw: Any) -> Any:
    if key == "shared_fsx" and isinstance(raw, str):
        if raw not in ("true", "false"):
            raise ConfigError("context", [f"shared_fsx: {raw!r} (from -c shared_fsx=...) — must be true or false"])
        return raw == "true"
    return raw


def load_config(path: str | Path = DEFAULT_CONFIG_PATH, overrides: Optional[dict[str, Any]] = None) -> PlatformConfig:
    """Read a YAML file, apply context overrides (which win over the file) and validate."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(str(path), [f"config: {str(path)!r} — file not found"]) from None
    try:
        data = yaml.load(text, Loader=_FastStrictYamlLoader)  # noqa: S506 - strict SafeLoader subclass
    except yaml.YAMLError:
        try:
            data = yaml.load(text, Loader=_StrictYamlLoader)  # noqa: S506 - strict SafeLoader subclass
        except yaml.YAMLError as exc:
            raise ConfigError(str(path), [f"YAML: {exc}".replace("\n", " ")]) from None
    data = dict(data or {}) if isinstance(data, dict) or data is None else data
    for key, raw in (overrides or {}).items():
        if raw is None:
            continue
        if isinstance(data, dict):
            data[key] = _parse_context_value(key, raw)
    return parse_config(data, str(path))


def json_schema() -> dict[str, Any]:
    schema = PlatformConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "HyperPod platform configuration"
    return schema
