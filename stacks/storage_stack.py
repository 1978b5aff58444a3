"""Storage: FSx for Lustre linked to the S3 data bucket, plus the lifecycle-script bucket. Everything retained."""
from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct
from constructs.lifecycle_scripts import data_bucket_name, lifecycle_bucket_name
from constructs.lustre_file_system import LustreFileSystem
from constructs.secure_bucket import access_log_bucket, secure_bucket

from stacks.config import Storage
from stacks.network_stack import NetworkRefs


class StorageStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, cluster_name: str, storage: Storage, network: NetworkRefs,
                 **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        self.key = kms.Key(self, "DataKey", enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.RETAIN,
                           description="FSx for Lustre and (optionally) the S3 data bucket")
        self.access_logs = access_log_bucket(self, "AccessLogsBucket")
        kms_data = storage.data_bucket.encryption == "kms"
        if kms_data:
            self._allow_fsx_s3_access_role(self.key)
        self.data_bucket = secure_bucket(self, "DataBucket", access_logs=self.access_logs, log_prefix="data/",
                                         encryption_key=self.key if kms_data else None,
                                         bucket_name=data_bucket_name(cluster_name))
        self.lifecycle_bucket = secure_bucket(self, "LifecycleBucket", access_logs=self.access_logs,
                                              log_prefix="lifecycle/", bucket_name=lifecycle_bucket_name(cluster_name))

        lustre = storage.lustre
        repo = lustre.data_repository
        self.lustre = LustreFileSystem(
            self, "Lustre", subnet_id=network.primary_subnet.subnet_id, security_group_id=network.security_group_id,
            key=self.key, storage_capacity_gib=lustre.storage_capacity_gib,
            throughput_mib_per_tib=lustre.throughput_mib_per_tib, data_compression=lustre.data_compression,
            lustre_version=lustre.lustre_version, metadata_mode=lustre.metadata.mode,
            metadata_iops=lustre.metadata.iops, data_bucket=self.data_bucket,
            file_system_path=repo.file_system_path, s3_prefix=repo.s3_prefix,
            auto_import=list(repo.auto_import), auto_export=list(repo.auto_export))
        self.mount_path = lustre.mount_path

        cdk.CfnOutput(self, "FsxFileSystemId", value=self.lustre.file_system_id)
        cdk.CfnOutput(self, "FsxDnsName", value=self.lustre.dns_name)
        cdk.CfnOutput(self, "FsxMountName", value=self.lustre.mount_name)
        cdk.CfnOutput(self, "DataBucketName", value=self.data_bucket.bucket_name,
                      description=f"Linked to {lustre.mount_path}{repo.file_system_path} on the cluster")
        cdk.CfnOutput(self, "LifecycleBucketName", value=self.lifecycle_bucket.bucket_name)

    def _allow_fsx_s3_access_role(self, key: kms.Key) -> None:
        """FSx reads and writes the linked bucket as its per-file-system service-linked role, which IAM cannot
        grant KMS use to before the file system exists; the key policy names the role by path instead."""
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="FsxDataRepositoryServiceLinkedRole",
            principals=[iam.AnyPrincipal()],
            actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            resources=["*"],  # in a key policy, "*" means this key
            conditions={
                "StringEquals": {"aws:PrincipalAccount": cdk.Aws.ACCOUNT_ID,
                                 "kms:ViaService": f"s3.{cdk.Aws.REGION}.amazonaws.com"},
                "ArnLike": {"aws:PrincipalArn": f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/aws-service-role/"
                                                "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"},
            }))
