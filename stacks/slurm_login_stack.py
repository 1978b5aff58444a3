"""The Slurm login secret and its KMS key, on their own: the cluster's controller writes the secret
(lifecycle/hyperpod/publish_slurm_login.sh) and Studio reads it. The stack needs nothing from the others, so both
the cluster and Studio stacks can start as soon as their other inputs exist, and neither waits for the other.
Writer and reader are named by their fixed role names (constructs/platform_role_names.py): a reference to the
cluster stack's role would make this stack wait for the cluster that waits for it."""
from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn
from constructs.nag_acknowledgments import acknowledge
from constructs.platform_role_names import (cluster_execution_role_name, slurm_jwt_key_secret_name,
                                           slurm_token_issuer_role_name, studio_execution_role_name,
                                           studio_user_role_path)


class SlurmLoginStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, cluster_name: str, studio_reads: bool,
                 per_user_roles_read: bool = False, attach_role_arn: str | None = None, **kwargs) -> None:
        """attach_role_arn (attach mode, cluster.existing): the role that runs `make attach` writes the secret instead
        of the platform's controller, and (per-user mode) the auth/jwt signing key secret lives here, since attach
        mode has no cluster stack."""
        super().__init__(scope, id_, **kwargs)
        self.attach_role_arn = attach_role_arn
        # The controller's OnInitComplete hook publishes the Slurm version, its address, slurm.conf and the munge key
        # here; the key and resource policies below name who may use it.
        self.key = kms.Key(self, "SlurmLoginKey", enable_key_rotation=True,
                           description=f"{cluster_name}: encrypts the Slurm login secret (munge key, slurm.conf)")
        self.secret = secretsmanager.Secret(
            self, "SlurmLoginSecret", description=f"{cluster_name}: what a Studio login node needs to reach Slurm",
            encryption_key=self.key)
        acknowledge(self.secret, "AwsSolutions-SMG4",
                    "the value is the cluster's munge key and slurm.conf, written by the controller at creation; it "
                    "changes when the cluster is re-created, not on a rotation schedule")
        self._restrict(cluster_name=cluster_name, studio_reads=studio_reads, per_user_roles_read=per_user_roles_read)
        cdk.CfnOutput(self, "SlurmLoginSecretArn", value=self.secret.secret_arn,
                      description="Written by the Slurm controller at creation (attach mode: by `make attach`), read "
                                  "by Studio's login nodes")
        self.jwt_key_secret = None
        if attach_role_arn is not None and per_user_roles_read:
            self._attach_jwt_key_secret(cluster_name, attach_role_arn)

    def _attach_jwt_key_secret(self, cluster_name: str, attach_role_arn: str) -> None:
        """Attach mode, per-user: the existing controller's auth/jwt signing key, which `make attach` copies here
        once the cluster's admin has turned auth/jwt on; only the token issuer reads it (the build mode's cluster
        stack holds the same secret with the controller as writer)."""
        key = kms.Key(self, "SlurmJwtKeyKey", enable_key_rotation=True,
                      description=f"{cluster_name}: encrypts the Slurm auth/jwt signing key secret")
        self.jwt_key_secret = secretsmanager.Secret(
            self, "SlurmJwtKeySecret", encryption_key=key, secret_name=slurm_jwt_key_secret_name(cluster_name),
            description=f"{cluster_name}: Slurm auth/jwt HS256 key (make attach writes, token issuer reads)")
        acknowledge(self.jwt_key_secret, "AwsSolutions-SMG4",
                    "the value is the existing controller's auth/jwt signing key; Secrets Manager rotation cannot "
                    "change the key slurmctld holds")
        issuer_role = role_arn(slurm_token_issuer_role_name(cluster_name))
        self.jwt_key_secret.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheAttachStepWrites", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret"], resources=["*"],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": [attach_role_arn, *self._deploy_roles()]}}))
        self.jwt_key_secret.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheTokenIssuerReads", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["secretsmanager:GetSecretValue"], resources=["*"],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": issuer_role}}))
        via_secrets_manager = {"kms:ViaService": f"secretsmanager.{cdk.Aws.REGION}.amazonaws.com",
                               "kms:CallerAccount": cdk.Aws.ACCOUNT_ID}
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="AttachStepEncryptsTheJwtKey", principals=[iam.AnyPrincipal()],
            actions=["kms:Encrypt", "kms:GenerateDataKey"], resources=["*"],
            conditions={"StringEquals": via_secrets_manager, "ArnEquals": {"aws:PrincipalArn": attach_role_arn}}))
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="TokenIssuerDecryptsTheJwtKey", principals=[iam.AnyPrincipal()], actions=["kms:Decrypt"],
            resources=["*"],
            conditions={"StringEquals": via_secrets_manager, "ArnEquals": {"aws:PrincipalArn": issuer_role}}))

    def _restrict(self, *, cluster_name: str, studio_reads: bool, per_user_roles_read: bool) -> None:
        """Writers: the controller group's execution role (login and compute groups run as another role that is
        named nowhere here). Readers: that role, the Studio execution role and, in per-user mode (auth/jwt), every Studio
        profile's own role under its fixed IAM path (stacks/studio_stack.py creates them in nested stacks). Resource policies deny everyone else, whatever
        their IAM policies say; key administration stays with the account (the key's default statement). Both
        roles are created after this stack, so every statement names them in a condition on aws:PrincipalArn:
        KMS refuses a key policy whose principal does not exist yet."""
        # Attach mode: the role that runs `make attach` stands where the platform's controller role stands.
        cluster_role = self.attach_role_arn or role_arn(cluster_execution_role_name(cluster_name))
        studio_role = role_arn(studio_execution_role_name(cluster_name))
        readers = [cluster_role] + ([studio_role] if studio_reads else [])
        if studio_reads and per_user_roles_read:  # aws:PrincipalArn of a role carries its path
            readers.append(role_arn(f"{studio_user_role_path(cluster_name).lstrip('/')}*"))
        self.secret.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheClusterWrites", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret"], resources=["*"],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": [cluster_role, *self._deploy_roles()]}}))
        self.secret.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheClusterAndStudioRead", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["secretsmanager:GetSecretValue"], resources=["*"],
            conditions={"ArnNotLike": {"aws:PrincipalArn": readers}}))
        via_secrets_manager = {"kms:ViaService": f"secretsmanager.{cdk.Aws.REGION}.amazonaws.com",
                               "kms:CallerAccount": cdk.Aws.ACCOUNT_ID}
        # In a key policy "*" means this key.
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="ClusterEncryptsAndDecryptsTheLoginSecret", principals=[iam.AnyPrincipal()],
            actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], resources=["*"],
            conditions={"StringEquals": via_secrets_manager, "ArnEquals": {"aws:PrincipalArn": cluster_role}}))
        if studio_reads:
            self.key.add_to_resource_policy(iam.PolicyStatement(
                sid="StudioDecryptsTheLoginSecret", principals=[iam.AnyPrincipal()],
                actions=["kms:Decrypt"], resources=["*"],
                conditions={"StringEquals": via_secrets_manager, "ArnLike": {"aws:PrincipalArn": readers[1:]}}))

    def _deploy_roles(self) -> list[str]:
        """CloudFormation updates the secret's description through CDK's deploy roles."""
        return [cloudformation_execution_role_arn(self)]


def role_arn(name: str) -> str:
    return f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/{name}"
