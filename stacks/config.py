"""The platform's one configuration model.

Three layers, as in aws-parallelcluster: YAML is parsed strictly (no YAML-1.1 `yes`/`no` booleans, no
duplicate keys), pydantic checks shapes and ranges, and `semantic_errors` checks cross-field rules.
Every problem is reported at once as `path: value — what is allowed`. Nothing here calls AWS.
"""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError

DEFAULT_CONFIG_PATH = "config/default.yaml"

# Top-level keys that `cdk synth -c key=value` may override; `-c config=PATH` picks the file.
CONTEXT_OVERRIDES = ("orchestrator", "shared_fsx")
AVAILABLE_ORCHESTRATORS = ("slurm",)  # "eks" is accepted by the schema and arrives with the EKS issue.

LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                      2922, 3288, 3653)
INTERFACE_ENDPOINT_SERVICES = ("ssm", "ssmmessages", "ec2messages", "sts", "logs", "ecr.api", "ecr.dkr",
                               "sagemaker.api")
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
# Deep health checks exercise accelerators; HyperPod rejects them on CPU-only instance families.
ACCELERATED_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6", "g5", "g6", "g6e", "trn1", "trn1n", "trn2", "inf2")


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


def _cidr(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError("must be an IPv4 CIDR block with no host bits set, e.g. 10.0.0.0/16") from None
    if network.version != 4:
        raise ValueError("must be an IPv4 CIDR block, e.g. 10.0.0.0/16")
    return value


ClusterName = Annotated[str, _pattern(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
                                      "1-63 letters, digits and hyphens, starting and ending with a letter or digit")]
GroupName = Annotated[str, _pattern(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
                                    "1-63 letters, digits and hyphens, starting and ending with a letter or digit")]
InstanceType = Annotated[str, _pattern(r"ml\.[a-z][a-z0-9-]*\.[a-z0-9]+",
                                       "a SageMaker instance type such as ml.g5.8xlarge")]
AzId = Annotated[str, _pattern(r"[a-z]{2,}[0-9]+-az[0-9]{1,2}", "an AZ ID such as use1-az4 (not an AZ name)")]
Cidr = Annotated[str, AfterValidator(_cidr)]
PartitionName = Annotated[str, _pattern(r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}",
                                        "a Slurm partition name: letters, digits, '-' and '_', at most 64")]
PosixName = Annotated[str, _pattern(r"[a-z_][a-z0-9_-]{0,31}", "a POSIX user name: lowercase, at most 32 characters")]
Sha256 = Annotated[str, _pattern(r"[0-9a-f]{64}", "a SHA-256 digest: 64 lowercase hex characters")]
TrainingPlanArn = Annotated[str, _pattern(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[a-zA-Z0-9-]+",
                                          "a SageMaker training plan ARN")]
AbsolutePath = Annotated[str, _pattern(r"/[a-zA-Z0-9._/-]*", "an absolute path such as /fsx")]


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


class Network(Strict):
    vpc_cidr: Cidr = "10.0.0.0/16"
    az_ids: list[AzId] = Field(default=["usw2-az2"], min_length=1, max_length=6)
    public_subnet_cidr: Cidr = "10.0.0.0/24"
    private_subnet_cidrs: list[Cidr] = Field(default=["10.0.64.0/18"], min_length=1, max_length=6)
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


class Lustre(Strict):
    storage_capacity_gib: int = 1200
    throughput_mib_per_tib: Literal[125, 250, 500, 1000] = 250
    data_compression: Literal["LZ4", "NONE"] = "LZ4"
    lustre_version: Literal["2.15"] = "2.15"
    metadata: LustreMetadata = LustreMetadata()
    mount_path: AbsolutePath = "/fsx"
    # "lifecycle": on_create.sh mounts it; "native": HyperPod mounts it through InstanceStorageConfigs.
    mount_by: Literal["lifecycle", "native"] = "lifecycle"
    data_repository: DataRepository = DataRepository()


class DataBucket(Strict):
    encryption: Literal["s3_managed", "kms"] = "s3_managed"


class Storage(Strict):
    lustre: Lustre = Lustre()
    data_bucket: DataBucket = DataBucket()


# ---------------------------------------------------------------------------------------------- cluster
class InstanceGroup(Strict):
    name: GroupName
    role: Literal["controller", "login", "compute"]
    instance_type: InstanceType
    instance_count: int = Field(ge=0)
    threads_per_core: Literal[1, 2] = 1
    ebs_volume_gib: int = Field(default=500, ge=1, le=16384)
    deep_health_checks: list[Literal[DEEP_HEALTH_CHECKS]] = []  # type: ignore[valid-type]
    training_plan_arn: Optional[TrainingPlanArn] = None
    az_id: Optional[AzId] = None
    partitions: list[PartitionName] = []


class Artifact(Strict):
    """A Debian package mirrored to the operator's S3; on_create.sh verifies the digest before installing."""
    name: Annotated[str, _pattern(r"[a-z0-9][a-z0-9._+-]*", "lowercase letters, digits, '.', '_', '+', '-'")]
    s3_uri: Annotated[str, _pattern(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(\S+/)?[a-z0-9][a-z0-9.+-]*_[^_/\s]+_[a-z0-9]+\.deb",
                                    "an s3:// URI of a Debian package named package_version_arch.deb")]
    sha256: Sha256


class ContainerRuntime(Strict):
    enabled: StrictBool = False
    docker_apt_version: str = ""
    artifacts: list[Artifact] = []


class Cluster(Strict):
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    slurm_config_strategy: Literal["Managed", "Overwrite", "Merge"] = "Managed"
    slurm_auto_resume: StrictBool = True
    container_runtime: ContainerRuntime = ContainerRuntime()
    instance_groups: list[InstanceGroup] = Field(default_factory=lambda: [
        InstanceGroup(name="controller-machine", role="controller", instance_type="ml.m5.xlarge", instance_count=1),
        InstanceGroup(name="login-group", role="login", instance_type="ml.m5.xlarge", instance_count=1),
        InstanceGroup(name="worker-group-1", role="compute", instance_type="ml.g5.8xlarge", instance_count=1,
                      deep_health_checks=["InstanceStress", "InstanceConnectivity"], partitions=["gpu"]),
    ], min_length=1)


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
    partition_root: Annotated[str, _pattern(r"[a-zA-Z0-9._-]+", "a single directory name such as studio")] = "studio"
    # Group owning the shared partition; every user's primary group in shared mode is this one in Studio.
    shared_gid: int = Field(default=2000, ge=1001, le=4000000)
    mlflow: Mlflow = Mlflow()


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
    users: list[User] = []

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

    if cfg.orchestrator not in AVAILABLE_ORCHESTRATORS:
        add(f"orchestrator: {cfg.orchestrator!r} is not available yet (the EKS orchestrator arrives in a later "
            f"release); allowed: {', '.join(AVAILABLE_ORCHESTRATORS)}")

    groups = cfg.cluster.instance_groups
    seen: dict[str, int] = {}
    for i, g in enumerate(groups):
        path = f"cluster.instance_groups[{i}]"
        if g.name.lower() in seen:
            add(f"{path}.name: {g.name!r} is already used by cluster.instance_groups[{seen[g.name.lower()]}]; "
                "instance group names must be unique (case-insensitive)")
        seen.setdefault(g.name.lower(), i)
        if g.deep_health_checks and g.instance_type.split(".")[1] not in ACCELERATED_FAMILIES:
            add(f"{path}.deep_health_checks: {g.deep_health_checks} on {g.instance_type!r}; deep health checks "
                f"run only on accelerated instance families ({', '.join(ACCELERATED_FAMILIES)})")
        if g.role != "compute" and g.partitions:
            add(f"{path}.partitions: {g.partitions} on a {g.role} group; only compute groups belong to partitions")
        if g.role == "controller" and g.instance_count != 1:
            add(f"{path}.instance_count: {g.instance_count} for the controller group; allowed: 1")
        if g.az_id is not None:
            azs = _az_ids(cfg)
            if g.az_id not in azs:
                add(f"{path}.az_id: {g.az_id!r} has no private subnet; allowed: {', '.join(azs)}")

    controllers = [i for i, g in enumerate(groups) if g.role == "controller"]
    if len(controllers) != 1:
        add(f"cluster.instance_groups: {len(controllers)} groups with role 'controller'; exactly one is required")
    logins = [i for i, g in enumerate(groups) if g.role == "login"]
    if len(logins) > 1:
        add(f"cluster.instance_groups: {len(logins)} groups with role 'login' (indexes {logins}); at most one is allowed")

    runtime = cfg.cluster.container_runtime
    if runtime.enabled and not runtime.docker_apt_version:
        add("cluster.container_runtime.docker_apt_version: '' with the container runtime enabled; pin the docker.io "
            "package version, e.g. '24.0.7-0ubuntu2~22.04.1'")

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

    errors.extend(_network_errors(cfg))

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
    return errors


def _az_ids(cfg: PlatformConfig) -> list[str]:
    existing = cfg.network.existing
    return [s.az_id for s in existing.private_subnets] if existing else list(cfg.network.az_ids)


def _network_errors(cfg: PlatformConfig) -> list[str]:
    net = cfg.network
    errors: list[str] = []
    region = cfg.deployment.region
    for i, az in enumerate(_az_ids(cfg)):
        path = f"network.existing.private_subnets[{i}].az_id" if net.existing else f"network.az_ids[{i}]"
        if region and not az.startswith(_region_prefix(region) + "-"):
            errors.append(f"{path}: {az!r} is not in region {region}; AZ IDs there start with "
                          f"'{_region_prefix(region)}-'")
    if len(set(_az_ids(cfg))) != len(_az_ids(cfg)):
        errors.append(f"network.az_ids: {_az_ids(cfg)} repeats an AZ ID; list each at most once")
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


_StrictYamlLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}
_StrictYamlLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
    keys = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in keys:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        keys.add(key)
    return loader.construct_mapping(node)


_StrictYamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


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
    path = ""
    for part in err["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
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
        data = yaml.load(path.read_text(), Loader=_StrictYamlLoader)  # noqa: S506 - strict SafeLoader subclass
    except FileNotFoundError:
        raise ConfigError(str(path), [f"config: {str(path)!r} — file not found"]) from None
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
