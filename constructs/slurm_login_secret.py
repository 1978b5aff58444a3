"""The Slurm login secret and its KMS key: the cluster's controller writes the secret
(lifecycle/hyperpod/publish_slurm_login.sh: the Slurm version, its address, slurm.conf and the munge key) and Studio
reads it. Writer and readers are named by their fixed role names (constructs/platform_role_names.py)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from constructs.nag_acknowledgments import acknowledge
from constructs.pseudo_parameters import ACCOUNT_ID, REGION


class SlurmLoginSecret:
    """Created in `scope` (the stack), where they have always been: their logical ids are those of deployed
    stacks."""

    def __init__(self, scope: Construct, *, cluster_name: str) -> None:
        self.key = kms.Key(
            scope,
            "SlurmLoginKey",
            enable_key_rotation=True,
            description=f"{cluster_name}: encrypts the Slurm login secret (munge key, slurm.conf)",
        )
        self.secret = secretsmanager.Secret(
            scope,
            "SlurmLoginSecret",
            description=f"{cluster_name}: what a Studio login node needs to reach Slurm",
            encryption_key=self.key,
        )
        acknowledge(
            self.secret,
            "AwsSolutions-SMG4",
            "the value is the cluster's munge key and slurm.conf, written by the controller at creation; it "
            "changes when the cluster is re-created, not on a rotation schedule",
        )

    def restrict(self, *, writer_role_arn: str, reader_role_arns: Sequence[str], deploy_role_arn: str) -> None:
        """Only `writer_role_arn` (and CloudFormation, through CDK's deploy role, for the description) writes; only
        the writer and `reader_role_arns` (patterns: a role path ending in *) read, whatever their IAM policies say;
        key administration stays with the account (the key's default statement). The roles are created after this
        secret, so every statement names them in a condition on aws:PrincipalArn: KMS refuses a key policy whose
        principal does not exist yet."""
        readers = [writer_role_arn, *reader_role_arns]
        self.secret.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheClusterWrites",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret"],
                resources=["*"],
                conditions={"ArnNotEquals": {"aws:PrincipalArn": [writer_role_arn, deploy_role_arn]}},
            )
        )
        self.secret.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheClusterAndStudioRead",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["secretsmanager:GetSecretValue"],
                resources=["*"],
                conditions={"ArnNotLike": {"aws:PrincipalArn": readers}},
            )
        )
        via_secrets_manager = {
            "kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com",
            "kms:CallerAccount": ACCOUNT_ID,
        }
        # In a key policy "*" means this key.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ClusterEncryptsAndDecryptsTheLoginSecret",
                principals=[iam.AnyPrincipal()],
                actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],
                conditions={"StringEquals": via_secrets_manager, "ArnEquals": {"aws:PrincipalArn": writer_role_arn}},
            )
        )
        if reader_role_arns:
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="StudioDecryptsTheLoginSecret",
                    principals=[iam.AnyPrincipal()],
                    actions=["kms:Decrypt"],
                    resources=["*"],
                    conditions={
                        "StringEquals": via_secrets_manager,
                        "ArnLike": {"aws:PrincipalArn": list(reader_role_arns)},
                    },
                )
            )
