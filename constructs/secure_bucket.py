"""S3 buckets with the platform's baseline: encrypted, versioned, TLS-only, private, logged, retained."""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


def access_log_bucket(scope: Construct, id_: str) -> s3.Bucket:
    """Target for server access logs. S3 log delivery requires SSE-S3 here, and logging a log bucket loops."""
    return s3.Bucket(scope, id_, encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True, versioned=True,
                     block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                     object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                     removal_policy=cdk.RemovalPolicy.RETAIN,
                     lifecycle_rules=[s3.LifecycleRule(id="ExpireOldAccessLogs", expiration=cdk.Duration.days(365),
                                                       noncurrent_version_expiration=cdk.Duration.days(30))])


def secure_bucket(scope: Construct, id_: str, *, access_logs: s3.IBucket, log_prefix: str,
                  encryption_key: Optional[kms.IKey] = None, bucket_name: Optional[str] = None) -> s3.Bucket:
    return s3.Bucket(
        scope, id_, bucket_name=bucket_name,
        encryption=s3.BucketEncryption.KMS if encryption_key else s3.BucketEncryption.S3_MANAGED,
        encryption_key=encryption_key, bucket_key_enabled=bool(encryption_key),
        enforce_ssl=True, versioned=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=access_logs, server_access_logs_prefix=log_prefix,
        removal_policy=cdk.RemovalPolicy.RETAIN)
