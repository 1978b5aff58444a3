"""The Slurm login secret and its KMS key, on their own: the cluster's controller writes the secret
(lifecycle/hyperpod/publish_slurm_login.sh) and Studio reads it. The stack needs nothing from the others, so both
the cluster and Studio stacks can start as soon as their other inputs exist, and neither waits for the other.
Writer and reader are named by their fixed role names (constructs/platform_role_names.py): a reference to the
cluster stack's role would make this stack wait for the cluster that waits for it."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn
from constructs.platform_role_names import (
    cluster_execution_role_name,
    role_arn,
    slurm_jwt_key_secret_name,
    slurm_token_issuer_role_name,
    studio_execution_role_name,
    studio_user_role_path,
)
from constructs.slurm_jwt_key import SlurmJwtKeySecret
from constructs.slurm_login_secret import SlurmLoginSecret


class SlurmLoginStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster_name: str,
        studio_reads: bool,
        per_user_roles_read: bool = False,
        attach_role_arn: str | None = None,
        **kwargs,
    ) -> None:
        """attach_role_arn (attach mode, cluster.existing): the role that runs `make attach` writes the secret instead
        of the platform's controller, and (per-user mode) the auth/jwt signing key secret lives here, since attach
        mode has no cluster stack."""
        super().__init__(scope, id_, **kwargs)
        self.attach_role_arn = attach_role_arn
        login = SlurmLoginSecret(self, cluster_name=cluster_name)
        self.key, self.secret = login.key, login.secret
        # Writers: the controller group's execution role (login and compute groups run as another role that is named
        # nowhere here); attach mode: the role that runs `make attach` stands where the controller's role stands.
        # Readers: that role, the Studio execution role and, in per-user mode (auth/jwt), every Studio profile's own
        # role under its fixed IAM path (stacks/studio_stack.py creates them in nested stacks).
        readers = [role_arn(studio_execution_role_name(cluster_name))] if studio_reads else []
        if studio_reads and per_user_roles_read:  # aws:PrincipalArn of a role carries its path
            readers.append(role_arn(f"{studio_user_role_path(cluster_name).lstrip('/')}*"))
        login.restrict(
            writer_role_arn=attach_role_arn or role_arn(cluster_execution_role_name(cluster_name)),
            reader_role_arns=readers,
            deploy_role_arn=cloudformation_execution_role_arn(self),
        )
        cdk.CfnOutput(
            self,
            "SlurmLoginSecretArn",
            value=self.secret.secret_arn,
            description="Written by the Slurm controller at creation (attach mode: by `make attach`), read "
            "by Studio's login nodes",
        )
        self.jwt_key_secret = None
        if attach_role_arn is not None and per_user_roles_read:
            # Attach mode, per-user: the existing controller's auth/jwt signing key, which `make attach` copies here
            # once the cluster's admin has turned auth/jwt on; only the token issuer reads it (the build mode's
            # cluster stack holds the same secret with the controller as writer).
            jwt_key = SlurmJwtKeySecret(
                self, cluster_name=cluster_name, secret_name=slurm_jwt_key_secret_name(cluster_name), attach=True
            )
            jwt_key.restrict_to_attach_step(
                attach_role_arn=attach_role_arn,
                deploy_role_arn=cloudformation_execution_role_arn(self),
                reader_role_arn=role_arn(slurm_token_issuer_role_name(cluster_name)),
            )
            self.jwt_key_secret = jwt_key.secret
