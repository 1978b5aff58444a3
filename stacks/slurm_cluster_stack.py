"""The HyperPod cluster orchestrated by Slurm, and the lifecycle scripts its nodes run."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct
from constructs.hyperpod_cluster import GroupSpec, HyperPodCluster, NativeLustreMount, SlurmOrchestrator
from constructs.lifecycle_scripts import ON_INIT_COMPLETE, PARAMETERS_FILE, LifecycleScripts, lifecycle_bucket_name
from constructs.platform_role_names import cluster_execution_role_name, upload_role_name

from stacks.config import PlatformConfig, checkpoint_dir
from stacks.network_stack import NetworkRefs
from stacks.storage_stack import StorageStack

if TYPE_CHECKING:
    from aws_cdk import aws_secretsmanager as secretsmanager


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
        # Every node's users sync (lifecycle/hyperpod/sync_users.sh) polls this object for later user changes.
        parameters_s3_uri = f"s3://{lifecycle_bucket.bucket_name}/{prefix}/{PARAMETERS_FILE}"
        self.lifecycle = LifecycleScripts(self, "LifecycleScripts", bucket=lifecycle_bucket, prefix=prefix,
                                          upload_role_name=upload_role_name(config.name, "cluster"),
                                          parameters=provisioning_parameters(config, storage,
                                                                             self.slurm_login_secret.secret_arn,
                                                                             parameters_s3_uri=parameters_s3_uri))
        native = config.storage.lustre.mount_by == "native"
        self.hyperpod = HyperPodCluster(
            self, "HyperPod", cluster_name=config.name, groups=group_specs(config, network),
            orchestrator=SlurmOrchestrator(config_strategy=config.cluster.slurm_config_strategy),
            vpc_id=network.vpc_id, subnet_ids=[s.subnet_id for s in network.private_subnets],
            default_subnet_id=network.primary_subnet.subnet_id, security_group_id=network.security_group_id,
            # Extended mode: HyperPod configures Slurm (API-driven SlurmConfig) and FSx first, then runs our script.
            lifecycle_bucket=lifecycle_bucket, lifecycle_prefix=self.lifecycle.prefix, on_init_complete=ON_INIT_COMPLETE,
            node_recovery=config.cluster.node_recovery,
            native_lustre=NativeLustreMount(dns_name=storage.lustre.dns_name, mount_name=storage.lustre.mount_name,
                                            mount_path=storage.mount_path) if native else None,
            artifact_s3_uris=[a.s3_uri for a in config.cluster.container_runtime.artifacts]
            if config.cluster.container_runtime.enabled else (),
            execution_role_name=cluster_execution_role_name(config.name))
        self.hyperpod.execution_role.add_to_policy(iam.PolicyStatement(
            sid="PublishSlurmLoginSecret",
            actions=["secretsmanager:PutSecretValue", "secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            resources=[self.slurm_login_secret.secret_arn]))
        # Nodes run on_create.sh from the bucket at creation: the scripts must be there first.
        self.hyperpod.cluster.node.add_dependency(self.lifecycle.deployment)

        controller = config.group("controller")[0].name
        cdk.CfnOutput(self, "ClusterName", value=config.name)
        cdk.CfnOutput(self, "ClusterArn", value=self.hyperpod.cluster_arn)
        cdk.CfnOutput(self, "LifecycleScriptsUri", value=self.lifecycle.source_s3_uri)
        cdk.CfnOutput(self, "ControllerShellCommand", value=controller_shell_command(
            cluster_name=config.name, cluster_id=self.hyperpod.cluster_id, group=controller),
            description="Opens a Session Manager shell on the Slurm controller (needs the session-manager-plugin)")


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


def provisioning_parameters(config: PlatformConfig, storage: StorageStack,
                            slurm_login_secret_arn: str | None = None, *,
                            parameters_s3_uri: str | None = None) -> dict[str, Any]:
    """The node-side contract read by lifecycle/hyperpod/on_init_complete.sh (see lifecycle/hyperpod/README.md)."""
    logins = config.group("login")
    lustre = config.storage.lustre
    runtime = config.cluster.container_runtime
    return {
        "version": 1,
        "cluster_name": config.name,
        "controller_group": config.group("controller")[0].name,
        "login_group": logins[0].name if logins else None,
        "worker_groups": [{"instance_group_name": g.name, "partition_name": (g.partitions or [g.name])[0]}
                          for g in config.group("compute")],
        "fsx": {"mount": lustre.mount_by == "lifecycle", "dns_name": storage.lustre.dns_name,
                "mount_name": storage.lustre.mount_name, "mount_path": lustre.mount_path,
                "checkpoint_dir": checkpoint_dir(config.storage)},
        "users": [{"name": u.name, "uid": u.uid, "gid": u.group_id, "sudo": u.sudo} for u in config.users],
        "slurm": {"auto_resume": config.cluster.slurm_auto_resume, "login_secret_arn": slurm_login_secret_arn},
        "users_sync": {"parameters_s3_uri": parameters_s3_uri},
        "shared_group": {"name": "studio-shared", "gid": config.studio.shared_gid} if config.studio.enabled else None,
        "container_runtime": {"enabled": runtime.enabled, "ubuntu_release": runtime.ubuntu_release,
                              "docker_apt_version": runtime.docker_apt_version,
                              "artifacts": [a.model_dump() for a in runtime.artifacts]},
    }
