"""Storage: FSx for Lustre linked to the S3 data bucket (or a file system you bring), plus the lifecycle-script
bucket. Everything retained."""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct
from constructs.data_repository import DataBucket, DataKey
from constructs.fsx_access_group import LustreAccessGroup
from constructs.fsx_root_squash import FsxRootSquash
from constructs.lifecycle_bucket import LifecycleBucket
from constructs.lustre_file_system import LustreFileSystem
from constructs.secure_bucket import access_log_bucket

from platform_config.observability import NodeMetrics
from platform_config.storage import ExistingLustre, Storage, exported_prefix, private_fsx_roots
from constructs.platform_refs import ExistingLustreRefs, LustreRefs, NetworkRefs

if TYPE_CHECKING:  # opt-in: constructs/metrics_workspace.py (and aws_aps) loads only when node metrics are on
    from constructs.metrics_workspace import MetricsWorkspace


class StorageStack(cdk.Stack):
    lustre: LustreRefs
    data_bucket_name: str | None

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster_name: str,
        storage: Storage,
        network: NetworkRefs,
        studio_partition_root: str | None = None,
        node_metrics: NodeMetrics | None = None,
        root_squash_exempt_subnet_ids: Sequence[str] = (),
        bundle_writer_role_arn: str | None = None,
        **kwargs,
    ) -> None:
        """studio_partition_root: Studio's `studio.partition_root` when Studio is enabled; its prefix in the data
        bucket is then closed to everyone but FSx and the partition handlers. node_metrics: when enabled, the
        Prometheus workspace the nodes write to (constructs/metrics_workspace.py says why it lives here).
        root_squash_exempt_subnet_ids: the subnets whose clients keep root on the platform's file system
        (storage.lustre.root_squash). bundle_writer_role_arn (attach mode): the role that runs `make attach`, which
        uploads the existing controller's Slurm client bundle instead of the platform's controller."""
        super().__init__(scope, id_, **kwargs)
        self.metrics_workspace: MetricsWorkspace | None = None
        if node_metrics is not None and node_metrics.enabled:
            from constructs.metrics_workspace import MetricsWorkspace

            self.metrics_workspace = MetricsWorkspace(
                self, "NodeMetrics", alias=f"{cluster_name}-node-metrics", retention_days=node_metrics.retention_days
            )
            cdk.CfnOutput(self, "NodeMetricsRemoteWriteUrl", value=self.metrics_workspace.remote_write_url)
        self.key = DataKey(self, "DataKey")
        # Server access logs cannot be delivered to an SSE-KMS bucket: that one bucket stays SSE-S3.
        self.access_logs = access_log_bucket(self, "AccessLogsBucket")
        self.lifecycle = LifecycleBucket(
            self, cluster_name=cluster_name, access_logs=self.access_logs, bundle_writer_role_arn=bundle_writer_role_arn
        )
        self.lifecycle_bucket = self.lifecycle.bucket
        lustre = storage.lustre
        repo = lustre.data_repository
        self.mount_path = lustre.mount_path
        # Set for a file system the platform does not own: Studio adds its own rules to this group.
        self.lustre_access_group: ec2.CfnSecurityGroup | None = None
        if lustre.existing:
            self._existing_file_system(lustre.existing, network)
            cdk.CfnOutput(self, "FsxFileSystemId", value=self.lustre.file_system_id)
            cdk.CfnOutput(self, "LifecycleBucketName", value=self.lifecycle_bucket.bucket_name)
            return

        data = DataBucket(
            self,
            cluster_name=cluster_name,
            access_logs=self.access_logs,
            encryption_key=self.key if storage.data_bucket.encryption == "kms" else None,
        )
        self.data_bucket = data.bucket
        self.data_bucket_name = data.bucket_name
        self.lustre = LustreFileSystem(
            self,
            "Lustre",
            subnet_id=network.primary_subnet.subnet_id,
            security_group_id=network.security_group_id,
            key=self.key,
            storage_capacity_gib=lustre.storage_capacity_gib,
            throughput_mib_per_tib=lustre.throughput_mib_per_tib,
            data_compression=lustre.data_compression,
            lustre_version=lustre.lustre_version,
            metadata_mode=lustre.metadata.mode,
            metadata_iops=lustre.metadata.iops,
            data_bucket=self.data_bucket,
            file_system_path=repo.file_system_path,
            s3_prefix=repo.s3_prefix,
            auto_import=list(repo.auto_import),
            auto_export=list(repo.auto_export),
        )
        squash = lustre.root_squash
        self.root_squash = FsxRootSquash(
            self,
            "LustreRootSquash",
            file_system_id=self.lustre.file_system_id,
            squash_to=squash.squash_to if squash.enabled else "0:0",
            no_squash_subnet_ids=list(root_squash_exempt_subnet_ids) if squash.enabled else [],
        )
        studio_prefix = f"{repo.s3_prefix}{studio_partition_root}/" if studio_partition_root is not None else None
        if studio_prefix is not None:
            data.restrict_studio_partitions(prefix=studio_prefix, file_system_id=self.lustre.file_system_id)
        # Every other private directory the association mirrors (users' checkpoints; homes and enroot caches when the
        # whole file system is linked): the same deny, FSx alone exempt.
        private = [
            p
            for p in (exported_prefix(repo, root) for root in private_fsx_roots(storage, studio_partition_root))
            if p is not None and p != studio_prefix
        ]
        if private:
            data.restrict_private_directories(prefixes=private, file_system_id=self.lustre.file_system_id)

        cdk.CfnOutput(self, "FsxFileSystemId", value=self.lustre.file_system_id)
        cdk.CfnOutput(self, "FsxDnsName", value=self.lustre.dns_name)
        cdk.CfnOutput(self, "FsxMountName", value=self.lustre.mount_name)
        cdk.CfnOutput(
            self,
            "DataBucketName",
            value=self.data_bucket.bucket_name,
            description=f"Linked to {lustre.mount_path}{repo.file_system_path} on the cluster",
        )
        cdk.CfnOutput(self, "LifecycleBucketName", value=self.lifecycle_bucket.bucket_name)

    def _existing_file_system(self, existing: ExistingLustre, network: NetworkRefs) -> None:
        """A file system this stack does not own: a group of ours, attached to its network interfaces, lets the
        cluster (and Studio, which adds its rule) reach Lustre."""
        self.lustre = ExistingLustreRefs(
            file_system_id=existing.file_system_id, dns_name=existing.dns_name, mount_name=existing.mount_name
        )
        self.data_bucket_name = existing.data_bucket
        self.lustre_access_group = LustreAccessGroup(
            self,
            "LustreAccessGroup",
            file_system_id=existing.file_system_id,
            vpc_id=network.vpc_id,
            cluster_security_group_id=network.security_group_id,
        )
