"""The HyperPod cluster orchestrated by Slurm, and the lifecycle scripts its nodes run."""
from __future__ import annotations

import hashlib
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn
from constructs.hyperpod_cluster import (ExternalAccountingDatabase, GroupSpec, HyperPodCluster, NativeLustreMount,
                                         SlurmOrchestrator)
from constructs.lifecycle_scripts import (ON_INIT_COMPLETE, PARAMETERS_FILE, SLURM_CLIENT_PREFIX, LifecycleScripts,
                                         lifecycle_bucket_name)
from constructs.login_load_balancer import LoginLoadBalancer
from constructs.mlflow_job_access import tracking_server_arn
from constructs.nag_acknowledgments import acknowledge
from constructs.session_run_as import SessionRunAsDocument
from constructs.slurm_job_role import SlurmJobRole
from constructs.platform_role_names import (cluster_execution_role_name, slurm_job_role_name,
                                           slurm_jwt_key_secret_name, slurm_token_issuer_role_name, upload_role_name)

from platform_config import PlatformConfig
from platform_config.directory import ca_certificate_bytes
from platform_config.login_access import login_load_balancer, session_run_as
from platform_config.storage import checkpoint_dir
from platform_config.studio import SHARED_GROUP_NAME
from stacks.network_stack import NetworkRefs
from platform_config.accounting_plan import accounting_parameters, worker_groups
from stacks.storage_stack import StorageStack

class SlurmClusterStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, config: PlatformConfig, network: NetworkRefs,
                 storage: StorageStack, slurm_login_secret: secretsmanager.ISecret, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        self.add_stack_dependency(storage)
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
        self.jwt_key = self.jwt_key_secret = None
        if self.slurm_auth == "jwt":
            self.jwt_key = kms.Key(self, "SlurmJwtKeyKey", enable_key_rotation=True,
                                   description=f"{config.name}: encrypts the Slurm auth/jwt signing key secret")
            self.jwt_key_secret = secretsmanager.Secret(
                self, "SlurmJwtKeySecret", encryption_key=self.jwt_key,
                # Named: the Studio stack's token issuer addresses it by name, not by a reference to this stack.
                secret_name=slurm_jwt_key_secret_name(config.name),
                description=f"{config.name}: Slurm auth/jwt HS256 key (controller writes, token issuer reads)")
            acknowledge(self.jwt_key_secret, "AwsSolutions-SMG4",
                        "the value is the controller's auth/jwt signing key, made on the controller at creation; "
                        "Secrets Manager rotation cannot change the key slurmctld holds")
        # observability.node_metrics: every node's collector remote-writes to the storage stack's workspace
        # (https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/api/v1/remote_write).
        self.node_metrics_remote_write_url: str | None = (
            storage.metrics_workspace.remote_write_url if storage.metrics_workspace is not None else None)
        # Every node's users sync (lifecycle/hyperpod/sync_users.sh) polls this object for later user changes.
        parameters_s3_uri = f"s3://{lifecycle_bucket.bucket_name}/{prefix}/{PARAMETERS_FILE}"
        self.lifecycle = LifecycleScripts(self, "LifecycleScripts", bucket=lifecycle_bucket, prefix=prefix,
                                          upload_role_name=upload_role_name(config.name, "cluster"),
                                          parameters=provisioning_parameters(
                                              config, storage, self.slurm_login_secret.secret_arn,
                                              self.jwt_key_secret.secret_arn if self.jwt_key_secret else None,
                                              parameters_s3_uri=parameters_s3_uri,
                                              node_metrics_remote_write_url=self.node_metrics_remote_write_url),
                                          extra_sources=directory_sources(config))
        native = config.storage.lustre.mount_by == "native"
        self._accounting_database(config, network)
        self.hyperpod = HyperPodCluster(
            self, "HyperPod", cluster_name=config.name, groups=group_specs(config, network),
            orchestrator=SlurmOrchestrator(
                config_strategy=config.cluster.slurm_config_strategy_sent(),
                node_provisioning_mode=config.cluster.node_provisioning_mode_sent(),
                accounting_database=ExternalAccountingDatabase(
                    endpoint=self.accounting_database.endpoint, secret_arn=self.accounting_database.secret_arn,
                    name=self.accounting_database.schema, port=self.accounting_database.port)
                if self.accounting_database else None,
                controller_security_group_ids=[self.controller_security_group.security_group_id]
                if self.controller_security_group else (),
                controller_subnet_id=network.primary_subnet.subnet_id),
            vpc_id=network.vpc_id, subnet_ids=[s.subnet_id for s in network.private_subnets],
            default_subnet_id=network.primary_subnet.subnet_id, security_group_id=network.security_group_id,
            # Extended mode: HyperPod configures Slurm (API-driven SlurmConfig) and FSx first, then runs our script.
            lifecycle_bucket=lifecycle_bucket, lifecycle_prefix=self.lifecycle.prefix, on_init_complete=ON_INIT_COMPLETE,
            node_recovery=config.cluster.node_recovery,
            native_lustre=NativeLustreMount(dns_name=storage.lustre.dns_name, mount_name=storage.lustre.mount_name,
                                            mount_path=storage.mount_path) if native else None,
            artifact_s3_uris=artifact_s3_uris(config),
            # Only the controller writes what Studio trusts: it runs as its own role (the fixed name the login secret
            # and its key name as writer); login and compute groups run as a worker role that has no secret access.
            execution_role_name=cluster_execution_role_name(config.name), separate_controller_role=True)
        self.hyperpod.controller_role.add_to_policy(iam.PolicyStatement(
            sid="PublishSlurmLoginSecret",
            actions=["secretsmanager:PutSecretValue", "secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            resources=[self.slurm_login_secret.secret_arn]))
        # Its own Slurm client, for Studio (publish_slurm_login.sh): the one prefix of the lifecycle bucket the cluster
        # may write (the bucket policy, stacks/storage_stack.py, refuses it everything else).
        bundles = lifecycle_bucket.arn_for_objects(f"{SLURM_CLIENT_PREFIX}/*")
        self.hyperpod.controller_role.add_to_policy(iam.PolicyStatement(
            sid="PublishSlurmClientBundle", actions=["s3:PutObject"], resources=[bundles]))
        acknowledge(self.hyperpod.controller_role, "AwsSolutions-IAM5",
                    "the controller uploads its Slurm client bundle under a name that carries the build's sha256, "
                    f"unknown at synth; the wildcard is the lifecycle bucket's {SLURM_CLIENT_PREFIX}/ prefix only",
                    findings=[f"Resource::{bundles}"])
        if self.accounting_database is not None:
            self.accounting_database.grant_read_secret(self.hyperpod.controller_role)
            # The controller's network interface carries its own security group too (CreateInterfacesInClusterSubnets
            # names the cluster's group only).
            self.hyperpod.controller_role.add_to_policy(iam.PolicyStatement(
                sid="CreateControllerInterfaceWithItsGroup", actions=["ec2:CreateNetworkInterface"],
                resources=[self.format_arn(service="ec2", resource="security-group",
                                           resource_name=self.controller_security_group.security_group_id)]))
        if self.jwt_key_secret is not None:
            self.hyperpod.controller_role.add_to_policy(iam.PolicyStatement(
                sid="WriteSlurmJwtKey", actions=["secretsmanager:PutSecretValue"],
                resources=[self.jwt_key_secret.secret_arn]))
            self._restrict_jwt_key_secret(config)
        self._grant_directory_bind_password(config)
        if storage.metrics_workspace is not None:
            for role in self.hyperpod.node_roles:  # every node's agent writes its own metrics
                role.add_to_policy(storage.metrics_workspace.remote_write_statement())
        if job_credentials_enabled(config):
            # Jobs run on the login and compute nodes as their users, who get no instance credentials (block_imds.sh):
            # the nodes' job credential broker gives a job's processes this role's; the controller runs no jobs.
            self.slurm_job_role = SlurmJobRole(self, "SlurmJobRole", node_role=self.hyperpod.worker_role,
                                               role_name=slurm_job_role_name(config.name),
                                               tracking_server_arn=tracking_server_arn(self, config.name))
        # Nodes run on_create.sh from the bucket at creation: the scripts must be there first.
        self.hyperpod.cluster.node.add_dependency(self.lifecycle.deployment)

        controller = config.group("controller")[0].name
        cdk.CfnOutput(self, "ClusterName", value=config.name)
        cdk.CfnOutput(self, "ClusterArn", value=self.hyperpod.cluster_arn)
        cdk.CfnOutput(self, "LifecycleScriptsUri", value=self.lifecycle.source_s3_uri)
        cdk.CfnOutput(self, "ControllerShellCommand", value=controller_shell_command(
            cluster_name=config.name, cluster_id=self.hyperpod.cluster_id, group=controller),
            description="Opens a Session Manager shell on the Slurm controller (needs the session-manager-plugin)")
        self._login_access(config, network)

    def _accounting_database(self, config: PlatformConfig, network: NetworkRefs) -> None:
        """`cluster.accounting.database: managed`: the controller gets a security group of its own (OverrideVpcConfig
        of its group), the only source the database admits."""
        self.accounting_database = self.controller_security_group = None
        if config.cluster.accounting.database != "managed":
            return
        db = config.cluster.accounting.managed_database
        vpc = ec2.Vpc.from_vpc_attributes(self, "ControllerVpc", vpc_id=network.vpc_id, availability_zones=["unused"])
        self.controller_security_group = ec2.SecurityGroup(
            self, "ControllerSecurityGroup", vpc=vpc, allow_all_outbound=False,
            description=f"{config.name} Slurm controller: the one source the accounting database admits")
        from constructs.accounting_database import AccountingDatabase  # opt-in: aws_rds loads only when used
        self.accounting_database = AccountingDatabase(
            self, "AccountingDatabase", cluster_name=config.name, vpc_id=network.vpc_id,
            subnet_ids=[s.subnet_id for s in network.private_subnets],
            controller_security_group=self.controller_security_group, instance_class=db.instance_class,
            allocated_storage_gib=db.allocated_storage_gib, multi_az=db.multi_az,
            backup_retention_days=db.backup_retention_days, require_tls=db.require_tls)
        cdk.CfnOutput(self, "AccountingDatabaseEndpoint", value=self.accounting_database.endpoint,
                      description="The RDS for MySQL instance slurmdbd stores Slurm accounting in")

    def _login_access(self, config: PlatformConfig, network: NetworkRefs) -> None:
        """SSH through an internal load balancer that follows the login nodes, and Session Manager as oneself."""
        access = config.cluster.login_access
        self.login_load_balancer = self.session_document = None
        if login_load_balancer(config):
            login = config.group("login")[0]
            by_az = {s.az_id: s.subnet_id for s in reversed(network.private_subnets)}  # one subnet per AZ, the first
            self.login_load_balancer = LoginLoadBalancer(
                self, "LoginLoadBalancer", cluster_name=config.name, cluster=self.hyperpod.cluster,
                cluster_arn=self.hyperpod.cluster_arn, login_group=login.name, login_count=login.instance_count,
                vpc_id=network.vpc_id, subnet_ids=list(dict.fromkeys(by_az[s.az_id] for s in network.private_subnets)),
                cluster_security_group_id=network.security_group_id,
                allowed_cidrs=list(access.ssh_allowed_cidrs) or [config.network.vpc_cidr])
            cdk.CfnOutput(self, "LoginSshEndpoint", value=self.login_load_balancer.dns_name,
                          description="ssh <user>@<this name>: the login nodes behind an internal load balancer")
        if session_run_as(config):
            self.session_document = SessionRunAsDocument(self, "SessionRunAs", cluster_name=config.name,
                                                         default_user=access.run_as_default_user)
            cdk.CfnOutput(self, "SessionDocumentName", value=self.session_document.name,
                          description="aws ssm start-session --document-name <this> ...: a shell as the user in "
                                      "your IAM principal's SSMSessionRunAs tag")

    def _restrict_jwt_key_secret(self, config: PlatformConfig) -> None:
        """The signing key lets its holder act as any cluster user through slurmctld: the cluster's role may only
        write it (the controller's hook does; login and compute nodes run as the worker role), the token issuer only
        read it; nobody else either, whatever their IAM policies say. Key administration stays with the account (the
        key's default statement)."""
        cluster_role = self.hyperpod.controller_role.role_arn
        issuer_role = (f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/"
                       f"{slurm_token_issuer_role_name(config.name)}")
        secret = self.jwt_key_secret
        secret.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheControllerWrites", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret"], resources=["*"],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": [cluster_role, *self._deploy_roles()]}}))
        secret.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheTokenIssuerReads", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["secretsmanager:GetSecretValue"], resources=["*"],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": issuer_role}}))
        via_secrets_manager = {"kms:ViaService": f"secretsmanager.{cdk.Aws.REGION}.amazonaws.com",
                               "kms:CallerAccount": cdk.Aws.ACCOUNT_ID}
        self.jwt_key.add_to_resource_policy(iam.PolicyStatement(
            sid="ClusterEncryptsTheJwtKey", principals=[iam.ArnPrincipal(cluster_role)],
            actions=["kms:Encrypt", "kms:GenerateDataKey"], resources=["*"],
            conditions={"StringEquals": via_secrets_manager}))
        self.jwt_key.add_to_resource_policy(iam.PolicyStatement(
            sid="TokenIssuerDecryptsTheJwtKey", principals=[iam.AnyPrincipal()], actions=["kms:Decrypt"],
            resources=["*"],
            conditions={"StringEquals": via_secrets_manager, "ArnEquals": {"aws:PrincipalArn": issuer_role}}))

    def _grant_directory_bind_password(self, config: PlatformConfig) -> None:
        """cluster.directory: sssd binds with this password on every node, so every node role (the worker role has no
        other secret access) may read exactly that one secret, and decrypt with its key only through Secrets
        Manager."""
        directory = config.cluster.directory
        if not directory.enabled:
            return
        for role in self.hyperpod.node_roles:
            role.add_to_policy(iam.PolicyStatement(
                sid="ReadDirectoryBindPassword", actions=["secretsmanager:GetSecretValue"],
                resources=[directory.bind_password_secret_arn]))
            if directory.bind_password_kms_key_arn:
                role.add_to_policy(iam.PolicyStatement(
                    sid="DecryptDirectoryBindPassword", actions=["kms:Decrypt"],
                    resources=[directory.bind_password_kms_key_arn],
                    conditions={"StringEquals": {
                        "kms:ViaService": f"secretsmanager.{directory.bind_password_kms_key_arn.split(':')[3]}"
                                          ".amazonaws.com"}}))

    def _deploy_roles(self) -> list[str]:
        """CloudFormation updates the secret's description through CDK's deploy roles."""
        return [cloudformation_execution_role_arn(self)]


def controller_shell_command(*, cluster_name: str, cluster_id: str, group: str) -> str:
    """Session Manager targets HyperPod nodes as sagemaker-cluster:<cluster-id>_<group>-<instance-id>."""
    lookup = (f"aws sagemaker list-cluster-nodes --region {cdk.Aws.REGION} --cluster-name {cluster_name} "
              f"--instance-group-name-contains {group} --query 'ClusterNodeSummaries[0].InstanceId' --output text")
    return (f"INSTANCE_ID=$({lookup}) && aws ssm start-session --region {cdk.Aws.REGION} "
            f"--target sagemaker-cluster:{cluster_id}_{group}-$INSTANCE_ID")


def group_specs(config: PlatformConfig, network: NetworkRefs) -> list[GroupSpec]:
    return [GroupSpec(name=g.name, role=g.role, instance_type=g.instance_type, instance_count=g.instance_count,
                      threads_per_core=g.threads_per_core, ebs_volume_gib=g.ebs_volume_gib,
                      deep_health_checks=tuple(g.deep_health_checks), partitions=tuple(g.partitions),
                      training_plan_arn=g.training_plan_arn,
                      subnet_id=network.subnet_in(g.az_id) if g.az_id else None,
                      kubernetes_labels=dict(g.kubernetes_labels) or None,
                      kubernetes_taints=tuple((t.key, t.value, t.effect) for t in g.kubernetes_taints))
            for g in config.cluster.instance_groups]


def artifact_s3_uris(config: PlatformConfig) -> list[str]:
    """Every package a node downloads from the operator's mirror (the node role reads exactly these objects)."""
    runtime, metrics = config.cluster.container_runtime, config.observability.node_metrics
    directory = config.cluster.directory
    return ([a.s3_uri for a in runtime.artifacts] if runtime.enabled else []) + \
        ([a.s3_uri for a in metrics.artifacts] if metrics.enabled else []) + \
        ([a.s3_uri for a in directory.artifacts] if directory.enabled else []) + \
        ([a.s3_uri for a in config.cluster.pam_slurm_adopt_artifacts] if config.cluster.pam_slurm_adopt else [])


# Beside the scripts in the lifecycle prefix (HyperPod copies the prefix to every node); configure_sssd.sh checks its
# sha256 against the parameters before sssd trusts it.
DIRECTORY_CA_FILE = "directory/ca.pem"


def directory_sources(config: PlatformConfig) -> list[s3deploy.ISource]:
    if not config.cluster.directory.enabled:
        return []
    return [s3deploy.Source.data(DIRECTORY_CA_FILE, ca_certificate_bytes(config).decode())]


def directory_parameters(config: PlatformConfig) -> dict[str, Any] | None:
    """What lifecycle/hyperpod/configure_sssd.sh reads; None when the directory is off. Never the password: nodes read
    it from the secret at start."""
    directory = config.cluster.directory
    if not directory.enabled:
        return None
    return {"uris": list(directory.uris), "start_tls": directory.start_tls, "search_base": directory.search_base,
            "bind_dn": directory.bind_dn, "bind_password_secret_arn": directory.bind_password_secret_arn,
            "region": directory.bind_password_secret_arn.split(":")[3], "ldap_schema": directory.ldap_schema,
            "access_groups": list(directory.access_groups), "admin_groups": list(directory.admin_groups),
            "ca_certificate": {"file": DIRECTORY_CA_FILE,
                               "sha256": hashlib.sha256(ca_certificate_bytes(config)).hexdigest()},
            "artifacts": [a.model_dump() for a in directory.artifacts]}


def node_metrics_parameters(config: PlatformConfig, remote_write_url: str | None) -> dict[str, Any] | None:
    """What lifecycle/hyperpod/install_node_metrics.sh reads; None (nothing installed) when node metrics are off."""
    metrics = config.observability.node_metrics
    if not metrics.enabled:
        return None
    if not remote_write_url:
        raise ValueError("observability.node_metrics.enabled is true but the Slurm cluster stack got no "
                         "node_metrics_remote_write_url (the Amazon Managed Service for Prometheus workspace)")
    return {"remote_write_url": remote_write_url, "region": cdk.Aws.REGION,
            "scrape_interval_seconds": metrics.scrape_interval_seconds,
            "artifacts": [a.model_dump() for a in metrics.artifacts]}


def slurm_auth(config: PlatformConfig) -> str:
    """How Studio users authenticate to slurmctld, fixed at synth from the config: `jwt` (their own token, no munge
    key in Studio) when Studio partitions are per user (`shared_fsx: false`), else `munge` (the cluster's key).
    The Studio stack's SharedFSx parameter only switches partitions; it does not change this (docs/security.md)."""
    return "jwt" if config.orchestrator == "slurm" and config.studio.enabled and not config.shared_fsx else "munge"


def provisioning_parameters(config: PlatformConfig, storage: StorageStack,
                            slurm_login_secret_arn: str | None = None,
                            jwt_key_secret_arn: str | None = None, *,
                            parameters_s3_uri: str | None = None,
                            node_metrics_remote_write_url: str | None = None) -> dict[str, Any]:
    """The node-side contract read by lifecycle/hyperpod/on_init_complete.sh (see lifecycle/hyperpod/README.md)."""
    logins = config.group("login")
    lustre = config.storage.lustre
    runtime = config.cluster.container_runtime
    return {
        "version": 1,
        "cluster_name": config.name,
        "controller_group": config.group("controller")[0].name,
        "login_group": logins[0].name if logins else None,
        "worker_groups": worker_groups(config),
        "fsx": {"mount": lustre.mount_by == "lifecycle", "dns_name": storage.lustre.dns_name,
                "mount_name": storage.lustre.mount_name, "mount_path": lustre.mount_path,
                "checkpoint_dir": checkpoint_dir(config.storage)},
        "users": [{"name": u.name, "uid": u.uid, "gid": u.group_id, "sudo": u.sudo} for u in config.users],
        "slurm": {"auto_resume": config.cluster.slurm_auto_resume, "login_secret_arn": slurm_login_secret_arn,
                  "auth": slurm_auth(config), "jwt_key_secret_arn": jwt_key_secret_arn,
                  "pam_slurm_adopt": config.cluster.pam_slurm_adopt,
                  "controller_ssh": config.cluster.controller_ssh,
                  # The controller uploads its Slurm client bundle here for Studio (publish_slurm_login.sh).
                  "client_bundle_s3_prefix": f"s3://{lifecycle_bucket_name(config.name)}/{SLURM_CLIENT_PREFIX}/"
                  if slurm_login_secret_arn else None},
        "users_sync": {"parameters_s3_uri": parameters_s3_uri},
        "shared_group": {"name": SHARED_GROUP_NAME, "gid": config.studio.shared_gid} if config.studio.enabled else None,
        "container_runtime": {"enabled": runtime.enabled, "ubuntu_release": runtime.ubuntu_release,
                              "docker_apt_version": runtime.docker_apt_version,
                              "artifacts": [a.model_dump() for a in runtime.artifacts]},
        "accounting": accounting_parameters(config),
        "node_metrics": node_metrics_parameters(config, node_metrics_remote_write_url),
        "directory": directory_parameters(config),
        # configure_pam_adopt.sh installs these on a compute node without pam_slurm_adopt.so
        "pam_slurm_adopt": {"artifacts": [a.model_dump() for a in config.cluster.pam_slurm_adopt_artifacts]},
        # lifecycle/hyperpod/install_job_credentials.sh: the role the job credential broker gives jobs credentials of.
        "job_credentials": {"role_arn": f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role/"
                                        f"{slurm_job_role_name(config.name)}", "region": cdk.Aws.REGION}
        if job_credentials_enabled(config) else None,
    }


def job_credentials_enabled(config: PlatformConfig) -> bool:
    """Jobs get AWS credentials (of the Slurm job role) when there is something for them to reach: MLflow."""
    return config.studio.enabled and config.studio.mlflow.enabled
