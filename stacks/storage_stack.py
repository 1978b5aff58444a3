"""Storage: FSx for Lustre linked to the S3 data bucket (or a file system you bring), plus the lifecycle-script
bucket. Everything retained."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn, deploy_role_arn
from constructs.fsx_access_group import FsxAccessGroup
from constructs.fsx_root_squash import FsxRootSquash
from constructs.lifecycle_scripts import SLURM_CLIENT_PREFIX, data_bucket_name, lifecycle_bucket_name
from constructs.platform_role_names import (
    PARTITION_HANDLERS,
    cluster_execution_role_name,
    partition_handler_role_name,
    upload_role_name,
)
from constructs.lustre_file_system import LustreFileSystem
from constructs.lustre_ports import LUSTRE_PORTS
from constructs.secure_bucket import access_log_bucket, allow_account_through_s3, secure_bucket

from platform_config.observability import NodeMetrics
from platform_config.storage import ExistingLustre, Storage, exported_prefix, private_fsx_roots
from constructs.platform_refs import NetworkRefs

if TYPE_CHECKING:  # opt-in: constructs/metrics_workspace.py (and aws_aps) loads only when node metrics are on
    from constructs.metrics_workspace import MetricsWorkspace

# Every S3 action on the object resource type: read, write or delete an object, any version of it, its ACL, tags,
# attributes, retention, annotations, replicas, multipart parts. Prefix patterns, so actions S3 adds under the same
# names are covered too. tests/test_storage.py checks the list against the Service Authorization Reference data
# cfn-lint bundles (cfnlint/data/AdditionalSpecs/Policies.json, s3 actions whose resources include `object`).
OBJECT_ACTIONS = (
    "s3:GetObject*",
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:ListObject*",
    "s3:Replicate*",
    "s3:RestoreObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:BypassGovernanceRetention",
    "s3:InitiateReplication",
    "s3:ObjectOwnerOverrideToBucketOwner",
    "s3:UpdateObjectEncryption",
)


# Every S3 action that creates, replaces or removes an object or what S3 keeps of it (a version, a replica, its ACL,
# tags, retention): OBJECT_ACTIONS without the reads.
OBJECT_WRITE_ACTIONS = (
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:Replicate*",
    "s3:RestoreObject",
    "s3:AbortMultipartUpload",
    "s3:BypassGovernanceRetention",
    "s3:InitiateReplication",
    "s3:ObjectOwnerOverrideToBucketOwner",
    "s3:UpdateObjectEncryption",
)


def cdk_deploy_role_arns(stack: cdk.Stack) -> list[str]:
    """The CDK bootstrap's CloudFormation execution role and deploy role of this account and region."""
    return [cloudformation_execution_role_arn(stack), deploy_role_arn(stack)]


@dataclass(frozen=True)
class ExistingLustreRefs:
    file_system_id: str
    dns_name: str
    mount_name: str


class StorageStack(cdk.Stack):
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
        self.key = kms.Key(
            self,
            "DataKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description="FSx for Lustre and (optionally) the S3 data bucket",
        )
        # Server access logs cannot be delivered to an SSE-KMS bucket: that one bucket stays SSE-S3.
        self.access_logs = access_log_bucket(self, "AccessLogsBucket")
        # The scripts every node runs as root and Studio fetches: SSE-KMS under a key of their own, usable through S3
        # for this bucket only (readers and writers are whoever the bucket policy and IAM let through).
        self.lifecycle_key = kms.Key(
            self,
            "LifecycleKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description=f"{cluster_name}: the lifecycle-script bucket",
        )
        allow_account_through_s3(self.lifecycle_key, lifecycle_bucket_name(cluster_name))
        self.lifecycle_bucket = secure_bucket(
            self,
            "LifecycleBucket",
            access_logs=self.access_logs,
            log_prefix="lifecycle/",
            bucket_name=lifecycle_bucket_name(cluster_name),
            encryption_key=self.lifecycle_key,
        )
        self._only_deployments_write(self.lifecycle_bucket, cluster_name, bundle_writer_role_arn)
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

        kms_data = storage.data_bucket.encryption == "kms"
        if kms_data:
            self._allow_fsx_s3_access_role(self.key)
            allow_account_through_s3(self.key, data_bucket_name(cluster_name))
        self.data_bucket = secure_bucket(
            self,
            "DataBucket",
            access_logs=self.access_logs,
            log_prefix="data/",
            encryption_key=self.key if kms_data else None,
            bucket_name=data_bucket_name(cluster_name),
        )
        self.data_bucket_name = data_bucket_name(cluster_name)
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
        if studio_partition_root is not None:
            self._only_fsx_and_handlers_touch_partitions(cluster_name, f"{repo.s3_prefix}{studio_partition_root}/")
        # Every other private directory the association mirrors (users' checkpoints; homes and enroot caches when the
        # whole file system is linked): the same deny, FSx alone exempt.
        studio_prefix = f"{repo.s3_prefix}{studio_partition_root}/" if studio_partition_root is not None else None
        private = [
            p
            for p in (exported_prefix(repo, root) for root in private_fsx_roots(storage, studio_partition_root))
            if p is not None and p != studio_prefix
        ]
        if private:
            self._only_fsx_touches_private_directories(private)

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
        """A file system this stack does not own: a group of ours, attached to its network interfaces by a custom
        resource (and detached on delete), lets the cluster (and Studio, which adds its rule) reach Lustre."""
        self.lustre = ExistingLustreRefs(
            file_system_id=existing.file_system_id, dns_name=existing.dns_name, mount_name=existing.mount_name
        )
        self.data_bucket_name = existing.data_bucket
        group = ec2.CfnSecurityGroup(
            self,
            "LustreAccessGroup",
            vpc_id=network.vpc_id,
            group_description="Attached to the ENIs of the existing FSx for Lustre file system: "
            "Lustre from the cluster and Studio",
        )
        for low, high in LUSTRE_PORTS:
            ec2.CfnSecurityGroupIngress(
                self,
                f"LustreFromCluster{low}",
                group_id=group.attr_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                source_security_group_id=network.security_group_id,
                description="Lustre from the cluster's nodes",
            )
            ec2.CfnSecurityGroupEgress(
                self,
                f"LustreToCluster{low}",
                group_id=group.attr_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                destination_security_group_id=network.security_group_id,
                description="Lustre servers to the cluster's clients",
            )
        self.lustre_access_group = group
        FsxAccessGroup(
            self,
            "LustreAccess",
            file_system_id=existing.file_system_id,
            security_group_id=group.attr_group_id,
            vpc_id=network.vpc_id,
        )

    def _only_deployments_write(self, bucket: s3.Bucket, cluster_name: str, bundle_writer: str | None) -> None:
        """Every node runs what this bucket holds as root: only CloudFormation's CDK deploy roles and the platform's
        own upload functions (fixed names, constructs/platform_role_names.py), each named exactly (ArnNotEquals: a
        role an account principal names like cdk-<qualifier>-x-role-... is none of them), may change it, with any
        object write (a replica, an ACL or a version included), whatever else IAM grants. One prefix is the
        exception: the Slurm controller uploads its client bundle under slurm-client/, which only the cluster's
        execution role may write; nothing there runs unless its sha256 matches the one the cluster wrote to the Slurm
        login secret (lifecycle/studio/slurm_login_node.sh checks before unpacking)."""
        role = f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/"
        writers = cdk_deploy_role_arns(self) + [
            role + upload_role_name(cluster_name, kind) for kind in ("cluster", "studio")
        ]
        writes = list(OBJECT_WRITE_ACTIONS)
        bundles = bucket.arn_for_objects(f"{SLURM_CLIENT_PREFIX}/*")
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyDeploymentsWriteLifecycleScripts",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=writes,
                not_resources=[bundles],
                conditions={"ArnNotEquals": {"aws:PrincipalArn": writers}},
            )
        )
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheClusterWritesSlurmClientBundles",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=writes,
                resources=[bundles],
                conditions={
                    "ArnNotEquals": {
                        "aws:PrincipalArn": [
                            *cdk_deploy_role_arns(self),
                            bundle_writer or role + cluster_execution_role_name(cluster_name),
                        ]
                    }
                },
            )
        )

    def _only_fsx_and_handlers_touch_partitions(self, cluster_name: str, prefix: str) -> None:
        """The objects behind the Studio partitions (the DRA's prefix + partition root, constructs/fsx_partitions.py)
        carry FSx POSIX metadata (owner, mode): whoever writes them there decides who owns a directory on import, and
        whoever reads them reads users' exported files. Only FSx and the partition handlers may, whatever else IAM
        grants. FSx reads and writes a linked bucket as the file system's service-linked role
        `aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_<file-system-id>`
        (https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-service-linked-roles.html; path as in
        https://docs.aws.amazon.com/aws-managed-policy/latest/reference/FSxDeleteServiceLinkedRoleAccess.html).
        The handlers live in the Studio stack: fixed role names (constructs/platform_role_names.py)."""
        role = f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/"
        allowed = [
            (
                f"{role}aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
                f"AWSServiceRoleForFSxS3Access_{self.lustre.file_system_id}"
            )
        ] + [role + partition_handler_role_name(cluster_name, handler) for handler in PARTITION_HANDLERS]
        self.data_bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyFsxAndPartitionHandlersTouchStudioPartitions",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(OBJECT_ACTIONS),
                resources=[self.data_bucket.arn_for_objects(f"{prefix}*")],
                conditions={"ArnNotLike": {"aws:PrincipalArn": allowed}},
            )
        )

    def _only_fsx_touches_private_directories(self, prefixes: list[str]) -> None:
        """Objects mirroring users' private FSx directories (0700 checkpoints, homes): whoever reads them reads a
        user's private files, whoever writes them plants a file (a pickle checkpoint) that FSx imports into the
        user's directory with the owner the object's metadata names. Only FSx, as for the Studio partitions."""
        fsx = (
            f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/aws-service-role/"
            f"s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_{self.lustre.file_system_id}"
        )
        self.data_bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyFsxTouchesPrivateDirectories",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(OBJECT_ACTIONS),
                resources=[self.data_bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes],
                conditions={"ArnNotLike": {"aws:PrincipalArn": [fsx]}},
            )
        )

    def _allow_fsx_s3_access_role(self, key: kms.Key) -> None:
        """FSx reads and writes the linked bucket as its per-file-system service-linked role, which IAM cannot
        grant KMS use to before the file system exists; the key policy names the role by path instead."""
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="FsxDataRepositoryServiceLinkedRole",
                principals=[iam.AnyPrincipal()],
                actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={
                    "StringEquals": {
                        "aws:PrincipalAccount": cdk.Aws.ACCOUNT_ID,
                        "kms:ViaService": f"s3.{cdk.Aws.REGION}.amazonaws.com",
                    },
                    "ArnLike": {
                        "aws:PrincipalArn": f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/aws-service-role/"
                        "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
                    },
                },
            )
        )
