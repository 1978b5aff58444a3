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
from constructs.nag_acknowledgments import acknowledge
from constructs.platform_role_names import (cluster_execution_role_name, studio_execution_role_name,
                                           studio_user_role_path)


class SlurmLoginStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, cluster_name: str, studio_reads: bool,
                 per_user_roles_read: bool = False, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
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
                      description="Written by the Slurm controller at creation, read by Studio's login nodes")

    def _restrict(self, *, cluster_name: str, studio_reads: bool, per_user_roles_read: bool) -> None:
        """Writers: the controller group's execution role (login and compute groups run as another role that is
        named nowhere here). Readers: that role, the Studio execution role and, in per-user mode (auth/jwt), every Studio
        profile's own role under its fixed IAM path (stacks/studio_stack.py creates them in nested stacks). Resource policies deny everyone else, whatever
        their IAM policies say; key administration stays with the account (the key's default statement). Both
        roles are created after this stack, so every statement names them in a condition on aws:PrincipalArn:
        KMS refuses a key policy whose principal does not exist yet."""
        cluster_role = role_arn(cluster_execution_role_name(cluster_name))
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
        qualifier = (self.node.try_get_context("@aws-cdk/core:bootstrapQualifier")
                     or cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER)
        return [role_arn(f"cdk-{qualifier}-cfn-exec-role-{cdk.Aws.ACCOUNT_ID}-{cdk.Aws.REGION}")]


def role_arn(name: str) -> str:
    return f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/{name}"
