"""The S3 side of the platform's FSx for Lustre file system: the data key (FSx and, optionally, the linked bucket) and
the data bucket, with the bucket-policy denies that keep everyone but FSx (and the Studio partition handlers) away
from the objects that mirror private directories."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from constructs.lifecycle_scripts import data_bucket_name
from constructs.platform_role_names import PARTITION_HANDLERS, partition_handler_role_name, role_arn
from constructs.s3_object_actions import OBJECT_ACTIONS
from constructs.secure_bucket import allow_account_through_s3, secure_bucket
from constructs.pseudo_parameters import ACCOUNT_ID, PARTITION, REGION


def fsx_s3_access_role_arn(file_system_id: str) -> str:
    """The service-linked role FSx reads and writes a linked bucket as, per file system
    (https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-service-linked-roles.html; path as in
    https://docs.aws.amazon.com/aws-managed-policy/latest/reference/FSxDeleteServiceLinkedRoleAccess.html)."""
    return (
        f"arn:{PARTITION}:iam::{ACCOUNT_ID}:role/aws-service-role/"
        f"s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_{file_system_id}"
    )


class DataKey(kms.Key):
    """Encrypts FSx for Lustre and, with `storage.data_bucket.encryption: kms`, the data bucket. Retained."""

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(
            scope,
            id_,
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description="FSx for Lustre and (optionally) the S3 data bucket",
        )

    def allow_linked_bucket(self, bucket_name: str) -> None:
        """Lets FSx's data-repository role and the account's principals use the key through S3 for the bucket named
        `bucket_name`. FSx's per-file-system service-linked role cannot be granted KMS use in IAM before the file
        system exists; the key policy names the role by path instead."""
        self.add_to_resource_policy(
            iam.PolicyStatement(
                sid="FsxDataRepositoryServiceLinkedRole",
                principals=[iam.AnyPrincipal()],
                actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={
                    "StringEquals": {
                        "aws:PrincipalAccount": ACCOUNT_ID,
                        "kms:ViaService": f"s3.{REGION}.amazonaws.com",
                    },
                    "ArnLike": {"aws:PrincipalArn": fsx_s3_access_role_arn("*")},
                },
            )
        )
        allow_account_through_s3(self, bucket_name)


class DataBucket:
    """The bucket FSx links to ("DataBucket"), created in `scope` (the storage stack), where it has always been: its
    logical id is that of deployed stacks. Retained."""

    def __init__(
        self, scope: Construct, *, cluster_name: str, access_logs: s3.IBucket, encryption_key: DataKey | None
    ) -> None:
        """`encryption_key`: SSE-KMS under the data key, which then lets the bucket's readers use it through S3;
        None: SSE-S3."""
        self.bucket_name = data_bucket_name(cluster_name)
        self.cluster_name = cluster_name
        if encryption_key is not None:
            encryption_key.allow_linked_bucket(self.bucket_name)
        self.bucket = secure_bucket(
            scope,
            "DataBucket",
            access_logs=access_logs,
            log_prefix="data/",
            encryption_key=encryption_key,
            bucket_name=self.bucket_name,
        )

    def restrict_studio_partitions(self, *, prefix: str, file_system_id: str) -> None:
        """The objects behind the Studio partitions (the DRA's prefix + partition root, constructs/fsx_partitions.py)
        carry FSx POSIX metadata (owner, mode): whoever writes them there decides who owns a directory on import, and
        whoever reads them reads users' exported files. Only FSx (its service-linked role for `file_system_id`) and
        the partition handlers may, whatever else IAM grants. The handlers live in the Studio stack: fixed role names
        (constructs/platform_role_names.py)."""
        allowed = [fsx_s3_access_role_arn(file_system_id)] + [
            role_arn(partition_handler_role_name(self.cluster_name, handler)) for handler in PARTITION_HANDLERS
        ]
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyFsxAndPartitionHandlersTouchStudioPartitions",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(OBJECT_ACTIONS),
                resources=[self.bucket.arn_for_objects(f"{prefix}*")],
                conditions={"ArnNotLike": {"aws:PrincipalArn": allowed}},
            )
        )

    def restrict_private_directories(self, *, prefixes: Sequence[str], file_system_id: str) -> None:
        """Objects mirroring users' private FSx directories (0700 checkpoints, homes): whoever reads them reads a
        user's private files, whoever writes them plants a file (a pickle checkpoint) that FSx imports into the
        user's directory with the owner the object's metadata names. Only FSx, as for the Studio partitions."""
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyFsxTouchesPrivateDirectories",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(OBJECT_ACTIONS),
                resources=[self.bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes],
                conditions={"ArnNotLike": {"aws:PrincipalArn": [fsx_s3_access_role_arn(file_system_id)]}},
            )
        )
