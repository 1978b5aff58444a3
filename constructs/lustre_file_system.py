"""FSx for Lustre (PERSISTENT_2) linked to an S3 prefix by a data repository association."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


class LustreFileSystem(Construct):
    """The file system is retained on stack delete and on replacement: it holds users' working data."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        subnet_id: str,
        security_group_id: str,
        key: kms.IKey,
        storage_capacity_gib: int,
        throughput_mib_per_tib: int,
        data_compression: str,
        lustre_version: str,
        metadata_mode: str,
        metadata_iops: int | None,
        data_bucket: s3.IBucket,
        file_system_path: str,
        s3_prefix: str,
        auto_import: list[str],
        auto_export: list[str],
    ) -> None:
        super().__init__(scope, id_)
        metadata = fsx.CfnFileSystem.MetadataConfigurationProperty(mode=metadata_mode, iops=metadata_iops)
        self.file_system = fsx.CfnFileSystem(
            self,
            "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version=lustre_version,
            storage_type="SSD",
            storage_capacity=storage_capacity_gib,
            subnet_ids=[subnet_id],
            security_group_ids=[security_group_id],
            kms_key_id=key.key_id,
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type="PERSISTENT_2",
                per_unit_storage_throughput=throughput_mib_per_tib,
                data_compression_type=data_compression,
                metadata_configuration=metadata,
                copy_tags_to_backups=True,
            ),
        )
        self.file_system.apply_removal_policy(cdk.RemovalPolicy.RETAIN)

        # Deleting an association never deletes file data (DeleteDataInFileSystem defaults to false).
        self.data_repository = fsx.CfnDataRepositoryAssociation(
            self,
            "DataRepository",
            file_system_id=self.file_system.ref,
            file_system_path=file_system_path,
            data_repository_path=f"s3://{data_bucket.bucket_name}/{s3_prefix}",
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(events=auto_import)
                if auto_import
                else None,
                auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(events=auto_export)
                if auto_export
                else None,
            ),
        )

        self.file_system_id = self.file_system.ref
        self.dns_name = self.file_system.attr_dns_name
        self.mount_name = self.file_system.attr_lustre_mount_name
