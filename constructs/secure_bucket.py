"""S3 buckets with the platform's baseline: encrypted (SSE-KMS with a customer managed key wherever S3 allows it),
versioned, TLS-only, private, logged, retained."""

from __future__ import annotations


import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


def access_log_bucket(scope: Construct, id_: str) -> s3.Bucket:
    """Target for server access logs. S3 log delivery requires SSE-S3 here, and logging a log bucket loops."""
    return s3.Bucket(
        scope,
        id_,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        versioned=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        removal_policy=cdk.RemovalPolicy.RETAIN,
        lifecycle_rules=[
            s3.LifecycleRule(
                id="ExpireOldAccessLogs",
                expiration=cdk.Duration.days(365),
                noncurrent_version_expiration=cdk.Duration.days(30),
            )
        ],
    )


def secure_bucket(
    scope: Construct,
    id_: str,
    *,
    access_logs: s3.IBucket,
    log_prefix: str,
    encryption_key: kms.IKey | None = None,
    bucket_name: str | None = None,
) -> s3.Bucket:
    return s3.Bucket(
        scope,
        id_,
        bucket_name=bucket_name,
        encryption=s3.BucketEncryption.KMS if encryption_key else s3.BucketEncryption.S3_MANAGED,
        encryption_key=encryption_key,
        bucket_key_enabled=bool(encryption_key),
        enforce_ssl=True,
        versioned=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=log_prefix,
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )


def allow_account_through_s3(key: kms.Key, bucket_name: str) -> None:
    """Lets this account's principals use `key` only as S3 does for objects of the bucket named `bucket_name`: through
    S3 (kms:ViaService) and with that bucket's encryption context (`aws:s3:arn` is the bucket's ARN with an S3 Bucket
    Key, the object's without: https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html). Who may
    read or write an object then stays what the bucket policy and IAM say, as with SSE-S3 (the AWS managed aws/s3 key
    has the same shape of policy), while the key itself is the customer's: rotation, disabling, CloudTrail. The bucket
    is named by its deterministic name: its ARN attribute would make the key and the bucket depend on each other."""
    stack = cdk.Stack.of(key)
    bucket_arn = f"arn:{stack.partition}:s3:::{bucket_name}"
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AccountUsesKeyThroughS3ForThisBucket",
            principals=[iam.AnyPrincipal()],
            actions=["kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt", "kms:ReEncrypt*", "kms:DescribeKey"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions={
                "StringEquals": {
                    "kms:CallerAccount": stack.account,
                    "kms:ViaService": f"s3.{stack.region}.amazonaws.com",
                },
                "ArnLike": {"kms:EncryptionContext:aws:s3:arn": [bucket_arn, f"{bucket_arn}/*"]},
            },
        )
    )
