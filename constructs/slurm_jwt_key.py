"""Per-user mode: the Slurm auth/jwt signing key's secret and its own KMS key. The controller writes the key there
(configure_slurm_auth.sh); only the Studio stack's token issuer may read it (lambda/slurm_tokens)."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from constructs.nag_acknowledgments import acknowledge
from constructs.pseudo_parameters import ACCOUNT_ID, REGION


class SlurmJwtKeySecret:
    """Created in `scope` (the stack), where they have always been: their logical ids are those of deployed
    stacks."""

    def __init__(self, scope: Construct, *, cluster_name: str, secret_name: str, attach: bool = False) -> None:
        """`attach` (attach mode, cluster.existing): `make attach` copies the existing controller's key here
        (restrict_to_attach_step) instead of the platform's controller writing it (restrict)."""
        self.key = kms.Key(
            scope,
            "SlurmJwtKeyKey",
            enable_key_rotation=True,
            description=f"{cluster_name}: encrypts the Slurm auth/jwt signing key secret",
        )
        writer = "make attach" if attach else "controller"
        self.secret = secretsmanager.Secret(
            scope,
            "SlurmJwtKeySecret",
            encryption_key=self.key,
            # Named: the Studio stack's token issuer addresses it by name, not by a reference to this stack.
            secret_name=secret_name,
            description=f"{cluster_name}: Slurm auth/jwt HS256 key ({writer} writes, token issuer reads)",
        )
        self.secret_arn = self.secret.secret_arn
        acknowledge(
            self.secret,
            "AwsSolutions-SMG4",
            "the value is the existing controller's auth/jwt signing key; Secrets Manager rotation cannot "
            "change the key slurmctld holds"
            if attach
            else "the value is the controller's auth/jwt signing key, made on the controller at creation; "
            "Secrets Manager rotation cannot change the key slurmctld holds",
        )

    def grant_write(self, role: iam.IRole) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteSlurmJwtKey", actions=["secretsmanager:PutSecretValue"], resources=[self.secret_arn]
            )
        )

    def restrict(self, *, writer_role_arn: str, reader_role_arn: str, deploy_role_arn: str) -> None:
        """The signing key lets its holder act as any cluster user through slurmctld: `writer_role_arn` (the
        controller's role; login and compute nodes run as the worker role) may only write it, `reader_role_arn`
        (the token issuer) only read it; nobody else either, whatever their IAM policies say. CloudFormation
        updates the secret's description through CDK's deploy role. Key administration stays with the account (the
        key's default statement)."""
        self._restrict(
            write_sid="OnlyTheControllerWrites",
            encrypt_sid="ClusterEncryptsTheJwtKey",
            writer_role_arn=writer_role_arn,
            # The controller's role exists before this key policy is written: KMS takes it as the principal.
            writer_principals=([iam.ArnPrincipal(writer_role_arn)], {}),
            reader_role_arn=reader_role_arn,
            deploy_role_arn=deploy_role_arn,
        )

    def restrict_to_attach_step(self, *, attach_role_arn: str, reader_role_arn: str, deploy_role_arn: str) -> None:
        """Attach mode: the role that runs `make attach` stands where the controller's role stands in `restrict`."""
        self._restrict(
            write_sid="OnlyTheAttachStepWrites",
            encrypt_sid="AttachStepEncryptsTheJwtKey",
            writer_role_arn=attach_role_arn,
            # The attach role may not exist yet, and KMS refuses a key policy naming a principal that does not:
            # any principal, narrowed by a condition on its ARN.
            writer_principals=([iam.AnyPrincipal()], {"ArnEquals": {"aws:PrincipalArn": attach_role_arn}}),
            reader_role_arn=reader_role_arn,
            deploy_role_arn=deploy_role_arn,
        )

    def _restrict(
        self,
        *,
        write_sid: str,
        encrypt_sid: str,
        writer_role_arn: str,
        writer_principals: tuple[list[iam.IPrincipal], dict],
        reader_role_arn: str,
        deploy_role_arn: str,
    ) -> None:
        self.secret.add_to_resource_policy(
            iam.PolicyStatement(
                sid=write_sid,
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret"],
                resources=["*"],
                conditions={"ArnNotEquals": {"aws:PrincipalArn": [writer_role_arn, deploy_role_arn]}},
            )
        )
        self.secret.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheTokenIssuerReads",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["secretsmanager:GetSecretValue"],
                resources=["*"],
                conditions={"ArnNotEquals": {"aws:PrincipalArn": reader_role_arn}},
            )
        )
        via_secrets_manager = {
            "kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com",
            "kms:CallerAccount": ACCOUNT_ID,
        }
        principals, principal_condition = writer_principals
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=encrypt_sid,
                principals=principals,
                actions=["kms:Encrypt", "kms:GenerateDataKey"],
                resources=["*"],
                conditions={"StringEquals": via_secrets_manager, **principal_condition},
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="TokenIssuerDecryptsTheJwtKey",
                principals=[iam.AnyPrincipal()],
                actions=["kms:Decrypt"],
                resources=["*"],
                conditions={"StringEquals": via_secrets_manager, "ArnEquals": {"aws:PrincipalArn": reader_role_arn}},
            )
        )
