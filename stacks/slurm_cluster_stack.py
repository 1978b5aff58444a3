"""The HyperPod cluster orchestrated by Slurm, and the lifecycle scripts its nodes run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from constructs.hyperpod_cluster import (
    ExternalAccountingDatabase,
    GroupSpec,
    HyperPodCluster,
    NativeLustreMount,
    SlurmOrchestrator,
)
from constructs.lifecycle_scripts import (
    ON_INIT_COMPLETE,
    PARAMETERS_FILE,
    SLURM_CLIENT_PREFIX,
    LifecycleScripts,
    lifecycle_bucket_name,
    lifecycle_record_name,
)
from constructs.login_load_balancer import LoginLoadBalancer
from constructs.mlflow_job_access import tracking_server_arn
from constructs.node_parameters import SlurmNodeParameters
from constructs.platform_refs import NetworkRefs, StorageRefs
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn
from constructs.platform_role_names import (
    cluster_execution_role_name,
    slurm_job_role_name,
    slurm_jwt_key_secret_name,
    role_arn,
    slurm_token_issuer_role_name,
    upload_role_name,
)
from constructs.session_run_as import SessionRunAsDocument
from constructs.slurm_job_role import SlurmJobRole
from constructs.slurm_jwt_key import SlurmJwtKeySecret
from constructs.pseudo_parameters import REGION

from manifests.node_parameters import (
    DIRECTORY_CA_FILE,
    artifact_s3_uris,
    job_credentials_enabled,
    slurm_node_parameters,
)
from platform_config import PlatformConfig
from platform_config.directory import ca_certificate_bytes
from platform_config.login_access import login_load_balancer, session_run_as, slurm_auth

if TYPE_CHECKING:  # annotations only; accounting_database.py (and aws_rds) loads only when the config asks
    from aws_cdk import aws_ec2 as ec2

    from constructs.accounting_database import AccountingDatabase


class SlurmClusterStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        config: PlatformConfig,
        network: NetworkRefs,
        storage: StorageRefs,
        groups: Sequence[GroupSpec],
        slurm_login_secret: secretsmanager.ISecret,
        **kwargs,
    ) -> None:
        """`groups`: the config's instance groups as HyperPod creates them (stacks/platform.py group_specs)."""
        super().__init__(scope, id_, **kwargs)
        # Addressed by its deterministic name: a cross-stack token here would leak into IAM wildcards.
        lifecycle_bucket = s3.Bucket.from_bucket_name(self, "LifecycleBucket", lifecycle_bucket_name(config.name))
        prefix = f"hyperpod/{config.name}"
        # The controller's OnInitComplete hook (lifecycle/hyperpod/publish_slurm_login.sh) publishes the Slurm
        # version, its address, slurm.conf and the munge key to this secret (stacks/slurm_login_stack.py, whose key
        # and resource policies name this cluster's execution role by its fixed name), which Studio reads.
        self.slurm_login_secret = slurm_login_secret
        # Per-user mode: Studio users authenticate with their own auth/jwt token; the controller writes the signing key
        # here and only the Studio stack's token issuer may read it (configure_slurm_auth.sh, lambda/slurm_tokens).
        self.slurm_auth = slurm_auth(config)
        self.jwt_key = None
        if self.slurm_auth == "jwt":
            self.jwt_key = SlurmJwtKeySecret(
                self, cluster_name=config.name, secret_name=slurm_jwt_key_secret_name(config.name)
            )
        # observability.node_metrics: every node's collector remote-writes to the storage stack's workspace
        # (https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/api/v1/remote_write).
        self.node_metrics_remote_write_url: str | None = (
            storage.metrics_workspace.remote_write_url if storage.metrics_workspace is not None else None
        )
        job_role_arn = role_arn(slurm_job_role_name(config.name))
        self.node_parameters = SlurmNodeParameters.model_validate(
            slurm_node_parameters(
                config,
                lustre=storage.lustre,
                region=REGION,
                slurm_login_secret_arn=self.slurm_login_secret.secret_arn,
                jwt_key_secret_arn=self.jwt_key.secret_arn if self.jwt_key else None,
                # Every node's users sync (lifecycle/hyperpod/sync_users.sh) polls this object for later user changes.
                parameters_s3_uri=f"s3://{lifecycle_bucket.bucket_name}/{prefix}/{PARAMETERS_FILE}",
                client_bundle_s3_prefix=f"s3://{lifecycle_bucket_name(config.name)}/{SLURM_CLIENT_PREFIX}/",
                node_metrics_remote_write_url=self.node_metrics_remote_write_url,
                job_role_arn=job_role_arn,
            )
        )
        # configure_sssd.sh checks the CA's sha256 against the parameters before sssd trusts it.
        directory_ca = (
            [s3deploy.Source.data(DIRECTORY_CA_FILE, ca_certificate_bytes(config).decode())]
            if config.cluster.directory.enabled
            else []
        )
        self.lifecycle = LifecycleScripts(
            self,
            "LifecycleScripts",
            bucket=lifecycle_bucket,
            prefix=prefix,
            upload_role_name=upload_role_name(config.name, "cluster"),
            parameters=self.node_parameters,
            extra_sources=directory_ca,
            record_name=lifecycle_record_name(config.name),
        )
        native = config.storage.lustre.mount_by == "native"
        self.accounting_database: AccountingDatabase | None = None
        self.controller_security_group: ec2.SecurityGroup | None = None
        if config.cluster.accounting.database == "managed":
            self._accounting_database(config, network)
        self.hyperpod = HyperPodCluster(
            self,
            "HyperPod",
            cluster_name=config.name,
            groups=groups,
            orchestrator=SlurmOrchestrator(
                config_strategy=config.cluster.slurm_config_strategy_sent(),
                node_provisioning_mode=config.cluster.node_provisioning_mode_sent(),
                accounting_database=ExternalAccountingDatabase(
                    endpoint=self.accounting_database.endpoint,
                    secret_arn=self.accounting_database.secret_arn,
                    name=self.accounting_database.schema,
                    port=self.accounting_database.port,
                )
                if self.accounting_database
                else None,
                controller_security_group_ids=[self.controller_security_group.security_group_id]
                if self.controller_security_group
                else (),
                controller_subnet_id=network.primary_subnet.subnet_id,
            ),
            vpc_id=network.vpc_id,
            subnet_ids=[s.subnet_id for s in network.private_subnets],
            default_subnet_id=network.primary_subnet.subnet_id,
            security_group_id=network.security_group_id,
            # Extended mode: HyperPod configures Slurm (API-driven SlurmConfig) and FSx first, then runs our script.
            lifecycle_bucket=lifecycle_bucket,
            lifecycle_prefix=self.lifecycle.prefix,
            on_init_complete=ON_INIT_COMPLETE,
            node_recovery=config.cluster.node_recovery,
            native_lustre=NativeLustreMount(
                dns_name=storage.lustre.dns_name, mount_name=storage.lustre.mount_name, mount_path=storage.mount_path
            )
            if native
            else None,
            artifact_s3_uris=artifact_s3_uris(config),
            # Only the controller writes what Studio trusts: it runs as its own role (the fixed name the login secret
            # and its key name as writer); login and compute groups run as a worker role that has no secret access.
            execution_role_name=cluster_execution_role_name(config.name),
            separate_controller_role=True,
        )
        for role in self.hyperpod.node_roles:  # every node checks what it runs against the deploy's record
            self.lifecycle.grant_read_record(role)
        self.hyperpod.grant_controller_publish_login(
            login_secret_arn=self.slurm_login_secret.secret_arn,
            bucket=lifecycle_bucket,
            client_prefix=SLURM_CLIENT_PREFIX,
        )
        if self.accounting_database is not None:
            self.accounting_database.grant_read_secret(self.hyperpod.controller_role)
            self.hyperpod.grant_controller_interface_group(self.controller_security_group.security_group_id)
        if self.jwt_key is not None:
            self.jwt_key.grant_write(self.hyperpod.controller_role)
            self.jwt_key.restrict(
                writer_role_arn=self.hyperpod.controller_role.role_arn,
                deploy_role_arn=cloudformation_execution_role_arn(self),
                reader_role_arn=role_arn(slurm_token_issuer_role_name(config.name)),
            )
        directory = config.cluster.directory
        if directory.enabled:  # sssd binds with this password on every node
            # platform_config/directory.py's rules refuse an enabled directory without its bind password's secret.
            assert directory.bind_password_secret_arn is not None
            self.hyperpod.grant_nodes_read_secret(
                secret_arn=directory.bind_password_secret_arn,
                kms_key_arn=directory.bind_password_kms_key_arn,
                sid="DirectoryBindPassword",
            )
        if storage.metrics_workspace is not None:  # every node's agent writes its own metrics
            storage.metrics_workspace.grant_remote_write(*self.hyperpod.node_roles)
        if job_credentials_enabled(config):
            # Jobs run on the login and compute nodes as their users, who get no instance credentials (block_imds.sh):
            # the nodes' job credential broker gives a job's processes this role's; the controller runs no jobs.
            self.slurm_job_role = SlurmJobRole(
                self,
                "SlurmJobRole",
                node_role=self.hyperpod.worker_role,
                role_name=slurm_job_role_name(config.name),
                tracking_server_arn=tracking_server_arn(self, config.name),
            )
        # Nodes run on_create.sh from the bucket at creation: the scripts must be there first.
        self.hyperpod.cluster.node.add_dependency(self.lifecycle.deployment)

        controller = config.group("controller")[0].name
        cdk.CfnOutput(self, "ClusterName", value=config.name)
        cdk.CfnOutput(self, "ClusterArn", value=self.hyperpod.cluster_arn)
        cdk.CfnOutput(self, "LifecycleScriptsUri", value=self.lifecycle.source_s3_uri)
        cdk.CfnOutput(
            self,
            "ControllerShellCommand",
            value=self.hyperpod.controller_shell_command(controller),
            description="Opens a Session Manager shell on the Slurm controller (needs the session-manager-plugin)",
        )
        self._login_access(config, network)

    def _accounting_database(self, config: PlatformConfig, network: NetworkRefs) -> None:
        """`cluster.accounting.database: managed`: the controller gets a security group of its own (OverrideVpcConfig
        of its group), the only source the database admits."""
        db = config.cluster.accounting.managed_database
        # opt-in: aws_rds loads only when used
        from constructs.accounting_database import AccountingDatabase, controller_security_group

        self.controller_security_group = group = controller_security_group(
            self, cluster_name=config.name, vpc_id=network.vpc_id
        )
        self.accounting_database = database = AccountingDatabase(
            self,
            "AccountingDatabase",
            cluster_name=config.name,
            vpc_id=network.vpc_id,
            subnet_ids=[s.subnet_id for s in network.private_subnets],
            controller_security_group=group,
            instance_class=db.instance_class,
            allocated_storage_gib=db.allocated_storage_gib,
            multi_az=db.multi_az,
            backup_retention_days=db.backup_retention_days,
            require_tls=db.require_tls,
        )
        cdk.CfnOutput(
            self,
            "AccountingDatabaseEndpoint",
            value=database.endpoint,
            description="The RDS for MySQL instance slurmdbd stores Slurm accounting in",
        )

    def _login_access(self, config: PlatformConfig, network: NetworkRefs) -> None:
        """SSH through an internal load balancer that follows the login nodes, and Session Manager as oneself."""
        access = config.cluster.login_access
        self.login_load_balancer = self.session_document = None
        if login_load_balancer(config):
            login = config.group("login")[0]
            by_az = {s.az_id: s.subnet_id for s in reversed(network.private_subnets)}  # one subnet per AZ, the first
            self.login_load_balancer = LoginLoadBalancer(
                self,
                "LoginLoadBalancer",
                cluster_name=config.name,
                cluster=self.hyperpod.cluster,
                cluster_arn=self.hyperpod.cluster_arn,
                login_group=login.name,
                login_count=login.instance_count,
                vpc_id=network.vpc_id,
                subnet_ids=list(dict.fromkeys(by_az[s.az_id] for s in network.private_subnets)),
                cluster_security_group_id=network.security_group_id,
                allowed_cidrs=list(access.ssh_allowed_cidrs) or [config.network.vpc_cidr],
            )
            cdk.CfnOutput(
                self,
                "LoginSshEndpoint",
                value=self.login_load_balancer.dns_name,
                description="ssh <user>@<this name>: the login nodes behind an internal load balancer",
            )
        if session_run_as(config):
            self.session_document = SessionRunAsDocument(
                self, "SessionRunAs", cluster_name=config.name, default_user=access.run_as_default_user
            )
            cdk.CfnOutput(
                self,
                "SessionDocumentName",
                value=self.session_document.name,
                description="aws ssm start-session --document-name <this> ...: a shell as the user in "
                "your IAM principal's SSMSessionRunAs tag",
            )
