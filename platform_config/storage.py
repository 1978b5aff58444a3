"""`storage:` FSx for Lustre (capacity, throughput, metadata, the S3 data repository, root squash) or the file system
you bring, the data bucket's encryption, and where checkpoints go; with the rules on capacities, metadata IOPS and
the checkpoint directory's export to S3."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool

from platform_config.fields import AbsolutePath, Check, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig


class LustreMetadata(Strict):
    """The file system's metadata performance."""

    mode: Literal["AUTOMATIC", "USER_PROVISIONED"] = Field(
        "AUTOMATIC", description="AUTOMATIC: FSx scales metadata IOPS with capacity; USER_PROVISIONED needs iops."
    )
    iops: int | None = Field(
        None,
        description="Provisioned metadata IOPS, with mode USER_PROVISIONED only: 1500, 3000, 6000 or a multiple "
        "of 12000 up to 192000.",
    )


class DataRepository(Strict):
    """The data repository association that links the file system to the data bucket."""

    file_system_path: AbsolutePath = Field(
        "/data",
        description="Where the S3 data appears under the mount (create-only: the association is replaced "
        "when it changes).",
    )
    s3_prefix: Annotated[str, pattern(r"([a-zA-Z0-9!_.*'()-]+/)*", "empty or a key prefix ending in '/'")] = Field(
        "", description="Key prefix in the data bucket the association links, empty or ending in '/'."
    )
    auto_import: list[Literal["NEW", "CHANGED", "DELETED"]] = Field(
        ["NEW", "CHANGED", "DELETED"], description="S3 events imported to the file system automatically."
    )
    auto_export: list[Literal["NEW", "CHANGED", "DELETED"]] = Field(
        ["NEW", "CHANGED", "DELETED"],
        description="File system changes exported to S3 automatically. With DELETED, "
        "deleting a file on FSx deletes it in S3 too.",
    )


class ExistingLustre(Strict):
    """Bring-your-own FSx for Lustre in the cluster's VPC. The platform creates no file system, association or
    data bucket; Studio's partitions are written through the file system's existing association to `data_bucket`
    (described by storage.lustre.data_repository), and a security group of the platform's is attached to the file
    system's network interfaces so the cluster and Studio reach it. Without `data_bucket` the file system needs no
    S3 link at all (docs/attach.md, "Partitions without S3")."""

    file_system_id: Annotated[str, pattern(r"fs-[0-9a-f]{8,17}", "a file system ID such as fs-0123456789abcdef0")] = (
        Field(description="The file system's ID.")
    )
    dns_name: Annotated[
        str,
        pattern(
            r"fs-[0-9a-f]{8,17}\.fsx\.[a-z0-9-]+\.amazonaws\.com(\.cn)?",
            "the file system's DNS name, fs-....fsx.<region>.amazonaws.com",
        ),
    ] = Field(description="The file system's DNS name.")
    mount_name: Annotated[str, pattern(r"[a-z0-9]{8}|fsx", "the file system's LustreConfiguration.MountName")] = Field(
        description="The file system's mount name (LustreConfiguration.MountName)."
    )
    data_bucket: Annotated[str, pattern(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "an S3 bucket name")] | None = Field(
        None,
        description="The bucket the file system's data repository association links at storage.lustre."
        "data_repository, through which Studio partitions are created (an S3 directory marker "
        "imported by FSx). Unset (attach mode only, cluster.existing): the file system has no S3 link "
        "(AWS's workshop file systems have none); `make attach` creates the partitions on the file "
        "system through the existing Slurm controller, and data_repository.file_system_path is only "
        "the directory that holds them.",
    )


def _squash_id(value: str) -> str:
    parts = value.split(":")
    if len(parts) != 2 or not all(p.isdigit() and 1 <= int(p) <= 4294967294 for p in parts):
        raise ValueError(
            "must be 'UID:GID', each from 1 to 4294967294 (0 would be root), e.g. '65534:65534' "
            "(nobody:nogroup); to turn root squash off set enabled: false"
        )
    return value


class RootSquash(Strict):
    """FSx root squash on the platform's own file system (set by a custom resource, constructs/fsx_root_squash.py):
    root on a client acts as `squash_to` on the file system, except on the Slurm cluster's own subnets, whose nodes'
    lifecycle scripts create homes and directories as root. Studio and EKS pods are never exempt."""

    enabled: StrictBool = Field(
        True,
        description="Root on a client acts as squash_to on the platform's file system. Slurm: the cluster's "
        "private subnets are exempt; EKS: nothing is. false sets 0:0 (off). Not applied to a file "
        "system you bring (docs/security.md).",
    )
    squash_to: Annotated[str, AfterValidator(Check(_squash_id, "'UID:GID', each from 1 to 4294967294"))] = Field(
        "65534:65534", description="The UID:GID root on a client becomes (65534:65534 is nobody:nogroup)."
    )


class Lustre(Strict):
    """FSx for Lustre (PERSISTENT_2), or the file system you bring (`existing`)."""

    storage_capacity_gib: int = Field(
        1200,
        description="Storage capacity: 1200 or a multiple of 2400 GiB. It can grow in place, never shrink.",
        json_schema_extra={"anyOf": [{"const": 1200}, {"multipleOf": 2400, "minimum": 2400}]},
    )
    throughput_mib_per_tib: Literal[125, 250, 500, 1000] = Field(
        250,
        description="Throughput tier, MB/s per TiB of storage (create-only through CloudFormation; change it in "
        "place with aws fsx update-file-system, docs/deploy.md).",
    )
    data_compression: Literal["LZ4", "NONE"] = Field("LZ4", description="Data compression.")
    lustre_version: Literal["2.15"] = Field("2.15", description="Lustre version.")
    metadata: LustreMetadata = Field(LustreMetadata(), description="Metadata performance.")
    mount_path: AbsolutePath = Field(
        "/fsx",
        description="Where nodes mount the file system: an absolute path, not a system directory. Like every "
        "path key, only '/' and components of letters, digits, '.', '_', '-' (never '.' or "
        "'..'): nodes use it in shell scripts.",
    )
    mount_by: Literal["lifecycle", "native"] = Field(
        "native",
        description="native: HyperPod mounts it through InstanceStorageConfigs.FsxLustreConfig (the "
        "API-driven way) and on_init_complete.sh waits for it; lifecycle: on_init_complete.sh "
        "mounts it and writes fstab.",
    )
    data_repository: DataRepository = Field(DataRepository(), description="The link to the data bucket.")
    existing: ExistingLustre | None = Field(
        None,
        description="Bring your own file system in the cluster's VPC. No FSx, association or data bucket is "
        "created; a security group of the platform's (Lustre from the cluster and Studio) is "
        "attached to the file system's network interfaces by a custom resource and detached on "
        "delete.",
    )
    root_squash: RootSquash = Field(RootSquash(), description="FSx root squash on the platform's own file system.")


class DataBucket(Strict):
    """The S3 bucket the file system's data repository association links."""

    encryption: Literal["s3_managed", "kms"] = Field(
        "kms",
        description="kms: SSE-KMS with the storage stack's customer managed key (its policy admits FSx's "
        "S3-access service-linked role, and this account's principals through S3 for this bucket "
        "only); s3_managed: SSE-S3, an opt-out.",
    )


class Storage(Strict):
    """The file system, the data bucket and where checkpoints go."""

    lustre: Lustre = Field(Lustre(), description="FSx for Lustre.")
    data_bucket: DataBucket = Field(DataBucket(), description="The data bucket.")
    checkpoint_dir: AbsolutePath | None = Field(
        None,
        description="Where jobs write checkpoints, relative to lustre.mount_path; unset: "
        "<data_repository.file_system_path>/checkpoints. It must lie inside "
        "lustre.data_repository.file_system_path (with NEW and CHANGED exported), so the association "
        "exports checkpoints to S3: FSx cannot back up a file system linked to S3, so the export is "
        "what makes them durable. Nodes create it (root's, 0755) with a directory of each user's own "
        "inside (<checkpoint_dir>/<user>, 0700).",
    )
    checkpoint_gib: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Size of one checkpoint of the models you train: the synth summary prints its write and read time.",
    )
    checkpoint_budget_minutes: int = Field(
        default=10,
        ge=1,
        le=1440,
        description="The summary warns when writing one checkpoint at the file system's baseline throughput takes "
        "longer.",
    )


def lustre_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append
    lustre = cfg.storage.lustre
    cap = lustre.storage_capacity_gib
    if not (cap == 1200 or (cap > 0 and cap % 2400 == 0)):
        add(f"storage.lustre.storage_capacity_gib: {cap}; allowed: 1200 or a multiple of 2400")
    md = lustre.metadata
    if md.mode == "USER_PROVISIONED":
        if md.iops is None or not (
            md.iops in (1500, 3000, 6000) or (md.iops % 12000 == 0 and 12000 <= md.iops <= 192000)
        ):
            add(
                f"storage.lustre.metadata.iops: {md.iops!r} with mode USER_PROVISIONED; allowed: 1500, 3000, 6000 "
                "or a multiple of 12000 up to 192000"
            )
    elif md.iops is not None:
        add(f"storage.lustre.metadata.iops: {md.iops} with mode AUTOMATIC; remove it or set mode: USER_PROVISIONED")
    if lustre.mount_path in ("/", "/home", "/opt", "/var", "/tmp", "/usr", "/etc"):  # noqa: S108 - refused paths
        add(f"storage.lustre.mount_path: {lustre.mount_path!r} would hide a system directory; use e.g. /fsx")
    return errors


def checkpoint_dir(storage: Storage) -> str:
    """storage.checkpoint_dir, or its default inside the S3-linked path."""
    return storage.checkpoint_dir or storage.lustre.data_repository.file_system_path.rstrip("/") + "/checkpoints"


# Directories on FSx (paths under the mount) whose every entry is one user's own private directory, made by root on
# the Slurm nodes: homes (create_users.sh, 0750), the enroot layer caches (install_container_runtime.sh and
# enroot_dirs.sh, user-<uid>, 0700); with the checkpoint directory (checkpoint_dir) and Studio's partitions they are
# what private_fsx_roots lists. tests/lifecycle/private_dirs.bats checks the list against what the scripts make.
HOME_ROOT = "/home"
ENROOT_CACHE_ROOT = "/.hyperpod-platform/enroot-cache"


def private_fsx_roots(storage: Storage, studio_partition_root: str | None) -> list[str]:
    """Every FSx directory whose entries are users' private directories (studio_partition_root: Studio's, when
    Studio is on)."""
    roots = [HOME_ROOT, checkpoint_dir(storage).rstrip("/"), ENROOT_CACHE_ROOT]
    if studio_partition_root is not None:
        roots.append(storage.lustre.data_repository.file_system_path.rstrip("/") + "/" + studio_partition_root)
    return roots


def exported_prefix(repo: DataRepository, path: str) -> str | None:
    """The key prefix (ending in '/') of the data bucket that mirrors FSx directory PATH through the data repository
    association, or None when PATH is outside the linked directory."""
    linked = repo.file_system_path.rstrip("/")
    path = path.rstrip("/")
    if not path.startswith(linked + "/"):
        return None
    return repo.s3_prefix + path[len(linked) + 1 :] + "/"


def checkpoint_errors(cfg: PlatformConfig) -> list[str]:
    storage = cfg.storage
    if cfg.cluster.existing is not None:
        return []  # attach mode: the existing cluster's nodes decide where checkpoints go, not this platform
    repo = storage.lustre.data_repository
    linked = repo.file_system_path.rstrip("/")
    ckpt = checkpoint_dir(storage).rstrip("/")
    if ".." in ckpt.split("/") or ckpt == linked or not ckpt.startswith(linked + "/"):
        return [
            (
                f"storage.checkpoint_dir: {storage.checkpoint_dir!r} is not inside "
                f"storage.lustre.data_repository.file_system_path {repo.file_system_path!r}; nothing would export its "
                f"checkpoints to S3. Allowed: a subdirectory of it, e.g. {linked}/checkpoints"
            )
        ]
    if not {"NEW", "CHANGED"} <= set(repo.auto_export):
        return [
            (
                f"storage.lustre.data_repository.auto_export: {list(repo.auto_export)} with storage.checkpoint_dir "
                f"{checkpoint_dir(storage)!r}; checkpoints reach S3 only when NEW and CHANGED are exported"
            )
        ]
    return []


def root_squash_exempts_cluster_subnets(cfg: PlatformConfig) -> bool:
    """Root squash is set on the platform's own file system only, and on Slurm its nodes' subnets keep root (the
    lifecycle scripts create homes as root). EKS exempts nothing: a pod reaches FSx through its node's Lustre client,
    so exempting nodes would exempt every pod."""
    lustre = cfg.storage.lustre
    return lustre.root_squash.enabled and lustre.existing is None and cfg.orchestrator == "slurm"
