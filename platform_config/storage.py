"""`storage:` FSx for Lustre (capacity, throughput, metadata, the S3 data repository, root squash) or the file system
you bring, the data bucket's encryption, and where checkpoints go; with the rules on capacities, metadata IOPS and
the checkpoint directory's export to S3."""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import AfterValidator, Field, StrictBool

from platform_config.fields import AbsolutePath, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig


class LustreMetadata(Strict):
    mode: Literal["AUTOMATIC", "USER_PROVISIONED"] = "AUTOMATIC"
    iops: Optional[int] = None


class DataRepository(Strict):
    file_system_path: AbsolutePath = "/data"
    s3_prefix: Annotated[str, pattern(r"([a-zA-Z0-9!_.*'()-]+/)*", "empty or a key prefix ending in '/'")] = ""
    auto_import: list[Literal["NEW", "CHANGED", "DELETED"]] = ["NEW", "CHANGED", "DELETED"]
    auto_export: list[Literal["NEW", "CHANGED", "DELETED"]] = ["NEW", "CHANGED", "DELETED"]


class ExistingLustre(Strict):
    """Bring-your-own FSx for Lustre in the cluster's VPC. The platform creates no file system, association or
    data bucket; Studio's partitions are written through the file system's existing association to `data_bucket`
    (described by storage.lustre.data_repository), and a security group of the platform's is attached to the file
    system's network interfaces so the cluster and Studio reach it."""
    file_system_id: Annotated[str, pattern(r"fs-[0-9a-f]{8,17}", "a file system ID such as fs-0123456789abcdef0")]
    dns_name: Annotated[str, pattern(r"fs-[0-9a-f]{8,17}\.fsx\.[a-z0-9-]+\.amazonaws\.com(\.cn)?",
                                      "the file system's DNS name, fs-....fsx.<region>.amazonaws.com")]
    mount_name: Annotated[str, pattern(r"[a-z0-9]{8}|fsx", "the file system's LustreConfiguration.MountName")]
    data_bucket: Annotated[str, pattern(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "an S3 bucket name")]


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


def lustre_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append
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
    return errors


def checkpoint_dir(storage: Storage) -> str:
    """storage.checkpoint_dir, or its default inside the S3-linked path."""
    return storage.checkpoint_dir or storage.lustre.data_repository.file_system_path.rstrip("/") + "/checkpoints"


def checkpoint_errors(cfg: PlatformConfig) -> list[str]:
    storage = cfg.storage
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


def root_squash_exempts_cluster_subnets(cfg: PlatformConfig) -> bool:
    """Root squash is set on the platform's own file system only, and on Slurm its nodes' subnets keep root (the
    lifecycle scripts create homes as root). EKS exempts nothing: a pod reaches FSx through its node's Lustre client,
    so exempting nodes would exempt every pod."""
    lustre = cfg.storage.lustre
    return lustre.root_squash.enabled and lustre.existing is None and cfg.orchestrator == "slurm"
