"""The lifecycle-script bucket: the scripts every node runs as root and Studio fetches, under a KMS key of their own,
writable only by the deployments that put them there."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from constructs.cdk_bootstrap_roles import cdk_deploy_role_arns
from constructs.lifecycle_scripts import SLURM_CLIENT_PREFIX, lifecycle_bucket_name
from constructs.platform_role_names import cluster_execution_role_name, role_arn, upload_role_name
from constructs.s3_object_actions import OBJECT_WRITE_ACTIONS
from constructs.secure_bucket import allow_account_through_s3, secure_bucket


class LifecycleBucket:
    """The key ("LifecycleKey") and the bucket ("LifecycleBucket") are created in `scope` (the storage stack), where
    they have always been: their logical ids are those of deployed stacks."""

    def __init__(
        self,
        scope: Construct,
        *,
        cluster_name: str,
        access_logs: s3.IBucket,
        bundle_writer_role_arn: str | None = None,
    ) -> None:
        """`bundle_writer_role_arn` (attach mode): the role that runs `make attach`, which uploads the existing
        controller's Slurm client bundle instead of the platform's controller."""
        # SSE-KMS under a key of their own, usable through S3 for this bucket only (readers and writers are whoever
        # the bucket policy and IAM let through).
        self.key = kms.Key(
            scope,
            "LifecycleKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description=f"{cluster_name}: the lifecycle-script bucket",
        )
        allow_account_through_s3(self.key, lifecycle_bucket_name(cluster_name))
        self.bucket = secure_bucket(
            scope,
            "LifecycleBucket",
            access_logs=access_logs,
            log_prefix="lifecycle/",
            bucket_name=lifecycle_bucket_name(cluster_name),
            encryption_key=self.key,
        )
        self._only_deployments_write(cluster_name, bundle_writer_role_arn)

    def _only_deployments_write(self, cluster_name: str, bundle_writer: str | None) -> None:
        """Every node runs what this bucket holds as root: only CloudFormation's CDK deploy roles and the platform's
        own upload functions (fixed names, constructs/platform_role_names.py), each named exactly (ArnNotEquals: a
        role an account principal names like cdk-<qualifier>-x-role-... is none of them), may change it, with any
        object write (a replica, an ACL or a version included), whatever else IAM grants. One prefix is the
        exception: the Slurm controller uploads its client bundle under slurm-client/, which only the cluster's
        execution role may write; nothing there runs unless its sha256 matches the one the cluster wrote to the Slurm
        login secret (lifecycle/studio/slurm_login_node.sh checks before unpacking)."""
        bucket = self.bucket
        deploy_roles = cdk_deploy_role_arns(bucket)
        writers = deploy_roles + [role_arn(upload_role_name(cluster_name, kind)) for kind in ("cluster", "studio")]
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
                            *deploy_roles,
                            bundle_writer or role_arn(cluster_execution_role_name(cluster_name)),
                        ]
                    }
                },
            )
        )
