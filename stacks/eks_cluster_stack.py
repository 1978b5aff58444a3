"""The HyperPod cluster orchestrated by EKS (the control plane and dependency chart are the EKS stack's,
stacks/eks_control_plane_stack.py): late add-ons, FSx for pods, elastic training and task governance (priority
classes, one compute quota per team)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct
from constructs.eks_control_plane import Addon, EksControlPlane
from constructs.eks_platform_workloads import (
    HYPERPOD_OBSERVABILITY,
    TRAINING_OPERATOR,
    fsx_csi_identity,
    guard_default_namespace,
    observability_addon,
    training_operator,
)
from constructs.fsx_partitions import FsxPartitions
from constructs.hyperpod_cluster import EksOrchestrator, GroupSpec, HyperPodCluster
from constructs.lifecycle_scripts import ON_CREATE, LifecycleScripts, lifecycle_bucket_name, lifecycle_record_name
from constructs.mlflow_job_access import allow_mlflow_logging, tracking_server_arn
from constructs.node_parameters import EksNodeParameters
from constructs.platform_refs import NetworkRefs, StorageRefs
from constructs.platform_role_names import upload_role_name
from constructs.schedulable_node import SchedulableNodeWaiter
from constructs.task_governance import TaskGovernance

from manifests import kubernetes_objects as k8s
from manifests import team_identities
from manifests.node_parameters import eks_node_parameters
from platform_config import PlatformConfig
from platform_config.eks_tolerations import addon_tolerations, cert_manager_values
from platform_config.eks_governance import (
    EKS_TEAM_DIRECTORY_ROOT,
    borrowable_accelerators,
    compute_quota_properties,
    team_gid,
)
from platform_config.facts import ACCELERATORS


class EksClusterStack(cdk.Stack):
    """HyperPod on the EKS control plane of `eks` (its own stack, created while FSx is), and everything that needs
    the nodes or the file system: the add-ons that run Deployments, FSx for pods, namespaces, governance."""

    TEAM_DIRECTORY_ROOT = EKS_TEAM_DIRECTORY_ROOT  # <data repository path>/eks/teams/<team> and .../eks/datasets
    DATASETS_DIRECTORY = "datasets"

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        config: PlatformConfig,
        network: NetworkRefs,
        storage: StorageRefs,
        control_plane: EksControlPlane,
        dependency_chart: Construct,
        groups: Sequence[GroupSpec],
        **kwargs,
    ) -> None:
        """`control_plane` and `dependency_chart`: the EKS stack's (stacks/eks_control_plane_stack.py); `groups`: the
        compute groups as HyperPod creates them (stacks/platform.py group_specs)."""
        super().__init__(scope, id_, **kwargs)
        eks_config = config.eks
        lifecycle_bucket = s3.Bucket.from_bucket_name(self, "LifecycleBucket", lifecycle_bucket_name(config.name))
        self.lifecycle = LifecycleScripts(
            self,
            "LifecycleScripts",
            bucket=lifecycle_bucket,
            upload_role_name=upload_role_name(config.name, "cluster"),
            prefix=f"hyperpod/{config.name}",
            parameters=EksNodeParameters.model_validate(eks_node_parameters(config)),
            record_name=lifecycle_record_name(config.name),
        )
        addons = eks_config.addons
        self.control_plane = plane = control_plane
        self.dependency_chart = dependency_chart
        self.eks_cluster_name = config.name

        self.hyperpod = HyperPodCluster(
            self,
            "HyperPod",
            cluster_name=config.name,
            groups=groups,
            orchestrator=EksOrchestrator(
                cluster_arn=plane.cluster_arn,
                node_provisioning_mode=eks_config.node_provisioning_mode,
                karpenter=eks_config.autoscaling.enabled,
            ),
            vpc_id=network.vpc_id,
            subnet_ids=[s.subnet_id for s in network.private_subnets],
            default_subnet_id=network.primary_subnet.subnet_id,
            security_group_id=network.security_group_id,
            lifecycle_bucket=lifecycle_bucket,
            lifecycle_prefix=self.lifecycle.prefix,
            on_create=ON_CREATE,
            node_recovery=config.cluster.node_recovery,
        )
        self.hyperpod.node.add_dependency(self.lifecycle.deployment)
        self.hyperpod.node.add_dependency(self.dependency_chart)
        for role in self.hyperpod.node_roles:  # every node checks what it runs against the deploy's record
            self.lifecycle.grant_read_record(role)
        self.hyperpod.grant_eks_node(vpc_id=network.vpc_id, eks_cluster_arn=plane.cluster_arn)

        self._node_waits(config, network)
        # coredns and cert-manager take tolerations (configurationValues) for the platform's own taints, so they run
        # on any group that is not under deep health checks; the FSx CSI controller tolerates no NoSchedule taint.
        tolerations = addon_tolerations(config)
        plane.addon(
            Addon("coredns", addons.coredns, {"tolerations": tolerations} if tolerations else None),
            after=[self.tolerable_node],
            scope=self,
        )
        plane.addon(
            Addon("cert-manager", addons.cert_manager, cert_manager_values(tolerations)),
            after=[self.tolerable_node],
            scope=self,
        )
        plane.addon(Addon("aws-fsx-csi-driver", addons.fsx_csi_driver), after=[self.untainted_node], scope=self)
        fsx_csi_identity(self, plane)

        team_namespaces = (
            [k8s.team_namespace(t.name) for t in eks_config.task_governance.teams]
            if eks_config.task_governance.enabled
            else []
        )
        # Task governance owns the team namespaces: it creates hyperpod-ns-<team> with the team's compute quota
        # (aws/sagemaker-hyperpod-cli@a00b22d examples/end_to_end_walkthrough/00-getting-started/00-setup.md, "This
        # will create the team-specific compute quotas as well as the corresponding Kubernetes namespaces"), so the
        # stack waits for each, labels it, and puts its own objects there; it never creates or deletes one.
        self.namespaces = self._task_governance(config) if eks_config.task_governance.enabled else None
        if self.namespaces is not None:
            # Job rights per team: the team's access entry (Studio stack) carries its Kubernetes group.
            plane.manifest(
                "TeamJobAccess",
                *[
                    obj
                    for t in eks_config.task_governance.teams
                    for obj in (
                        k8s.job_submitter_role(namespace=k8s.team_namespace(t.name), platform=config.name),
                        k8s.role_binding(
                            namespace=k8s.team_namespace(t.name),
                            group=k8s.team_group(t.name),
                            role=k8s.JOB_ROLE,
                            platform=config.name,
                        ),
                    )
                ],
                after=[self.namespaces],
                scope=self,
            )
            self._team_jobs(config)
        guard_default_namespace(
            self,
            plane,
            pod_security_labels=k8s.POD_SECURITY_LABELS,
            zero_accelerator_quota=k8s.zero_accelerator_quota(namespace="default", platform=config.name),
        )
        # No pod of a team's (or the default) namespace reaches the node's instance metadata or other link-local services
        # (manifests/kubernetes_objects.py says how HyperPod nodes serve credentials and why the block is here).
        guarded = ["default", *team_namespaces]
        self.node_credentials_guard = plane.manifest(
            "NodeCredentialsGuard",
            *[k8s.deny_node_credentials(namespace=n, platform=config.name) for n in guarded],
            after=[self.namespaces] if self.namespaces is not None else [],
            scope=self,
        )
        if team_namespaces:
            # A team's pods accept connections from its own pods and the platform components that talk to them.
            plane.manifest(
                "TeamIngress",
                *[
                    k8s.team_ingress(
                        namespace=n,
                        platform_namespaces=[TRAINING_OPERATOR[0], HYPERPOD_OBSERVABILITY[0]],
                        platform=config.name,
                    )
                    for n in team_namespaces
                ],
                after=[self.team_namespaces],
                scope=self,
            )
            self._team_volumes(config, storage)
            self._team_identities(config, storage)

        if eks_config.training_operator:
            training_operator(
                self,
                plane,
                version=eks_config.addons.training_operator,
                cluster_arn=self.hyperpod.cluster_arn,
                after=[self.untainted_node],
            )
        if storage.metrics_workspace is not None:
            observability_addon(
                self,
                plane,
                workspace=storage.metrics_workspace,
                cluster_name=config.name,
                addon_version=config.observability.node_metrics.eks_addon_version,
                after=self.untainted_node,
            )

        cdk.CfnOutput(self, "ClusterName", value=config.name)
        cdk.CfnOutput(self, "ClusterArn", value=self.hyperpod.cluster_arn)

    def _team_volumes(self, config: PlatformConfig, storage: StorageRefs) -> None:
        """Each team mounts its own directory read-write and the shared datasets directory read-only, never the
        whole file system. The directories are created (owner root, group the team's gid, setgid 2770; datasets
        root 0755) through the data repository, without a shell on any node (constructs/fsx_partitions.py); the
        claims wait for them. Deleting the stack keeps the directories and their data."""
        repo, lustre = config.storage.lustre.data_repository, storage.lustre
        # platform_config/eks_governance.py refuses teams on a file system without its S3 link (data_bucket).
        assert storage.data_bucket_name is not None
        directories = FsxPartitions(
            self,
            "TeamDirectories",
            file_system_id=lustre.file_system_id,
            file_system_path=repo.file_system_path,
            data_bucket_name=storage.data_bucket_name,
            s3_prefix=repo.s3_prefix,
            partition_root=self.TEAM_DIRECTORY_ROOT,
        )
        created = [
            directories.partition(
                self, "DatasetsDirectory", relative_name=self.DATASETS_DIRECTORY, uid="0", gid="0", mode="0755"
            )
        ]
        objects = []
        for team in config.eks.task_governance.teams:
            created.append(
                directories.partition(
                    self,
                    f"TeamDirectory-{team.name}",
                    relative_name=f"teams/{team.name}",
                    uid="0",
                    gid=str(team_gid(team)),
                    mode="2770",
                )
            )
            volume = functools.partial(
                k8s.fsx_volume,
                namespace=k8s.team_namespace(team.name),
                file_system_id=lustre.file_system_id,
                dns_name=lustre.dns_name,
                mount_name=lustre.mount_name,
                platform=config.name,
                capacity_gib=config.storage.lustre.storage_capacity_gib,
            )
            objects += volume(claim=k8s.FSX_CLAIM, directory=directories.path_of(f"teams/{team.name}"))
            objects += volume(
                claim=k8s.DATASETS_CLAIM, directory=directories.path_of(self.DATASETS_DIRECTORY), read_only=True
            )
        self.control_plane.manifest("FsxVolumes", *objects, after=[self.team_namespaces, *created], scope=self)

    def _team_identities(self, config: PlatformConfig, storage: StorageRefs) -> None:
        """Pods in a team's namespace run only as its members, with its gids (manifests/team_identities.py); with
        Studio, each member's partition (or the shared one) is claimed there, for jobs to mount at the cluster's
        path of it. The claims follow config.shared_fsx: a SharedFSx parameter overridden at deploy time leaves
        them on the synthesized mode."""
        teams = config.eks.task_governance.teams
        namespaces = [k8s.team_namespace(t.name) for t in teams]
        plane = self.control_plane
        admission = team_identities.team_admission(namespaces=namespaces, platform=config.name)
        policies = plane.manifest(
            "TeamIdentityPolicy", *[o for o in admission if o["kind"] == "ValidatingAdmissionPolicy"], scope=self
        )
        bindings = [o for o in admission if o["kind"] == "ValidatingAdmissionPolicyBinding"]
        plane.manifest("TeamIdentityBinding", *bindings, after=[policies, self.team_namespaces], scope=self)
        objects = []
        for team in teams:
            uids, gids = team_identities.team_ids(config, team)
            objects.append(
                team_identities.identities(
                    namespace=k8s.team_namespace(team.name),
                    uids=uids,
                    gids=gids,
                    members=team_identities.team_members(config, team),
                    platform=config.name,
                )
            )
        if config.studio.enabled:
            lustre = storage.lustre
            for team in teams:
                # In shared mode every member has the same claim: one volume per claim.
                claims = {f.claim: f for f in team_identities.team_studio_files(config, team).values()}
                for files in claims.values():
                    objects += k8s.fsx_volume(
                        namespace=k8s.team_namespace(team.name),
                        claim=files.claim,
                        directory=files.directory,
                        file_system_id=lustre.file_system_id,
                        dns_name=lustre.dns_name,
                        mount_name=lustre.mount_name,
                        capacity_gib=config.storage.lustre.storage_capacity_gib,
                        platform=config.name,
                    )
        plane.manifest("TeamIdentities", *objects, after=[self.team_namespaces], scope=self)

    @property
    def team_namespaces(self) -> Construct:
        """What waits for task governance's team namespaces (teams exist only with task governance on)."""
        if self.namespaces is None:
            raise ValueError("team objects need eks.task_governance.enabled: task governance creates the namespaces")
        return self.namespaces

    def _node_waits(self, config: PlatformConfig, network: NetworkRefs) -> None:
        """Add-ons that run Deployments are created once a node exists that their pods can be scheduled on:
        `tolerable_node` (no taint but the platform's own) for coredns and cert-manager, `untainted_node` for the
        add-ons that take no tolerations. CloudFormation would otherwise report them created while DEGRADED."""
        plane = self.control_plane
        self.node_reader_rbac = plane.manifest(
            "NodeReaderRbac", *k8s.node_reader_rbac(platform=config.name), scope=self
        )
        waiter = SchedulableNodeWaiter(
            self,
            "NodeReadiness",
            cluster=plane.icluster,
            cluster_name=config.name,
            vpc_id=network.vpc_id,
            subnets=network.private_subnets,
            security_group_id=plane.kubectl_group.security_group_id,
            kubernetes_group=k8s.NODE_READER_GROUP,
        )
        after = [self.hyperpod, self.node_reader_rbac]
        self.untainted_node = waiter.wait_for("UntaintedNode", tolerations=[], after=after, scope=self)
        tolerations = addon_tolerations(config)
        self.tolerable_node = (
            waiter.wait_for("TolerableNode", tolerations=tolerations, after=after, scope=self)
            if tolerations
            else self.untainted_node
        )

    def _team_jobs(self, config: PlatformConfig) -> None:
        """Each team's jobs run as the service account `training-job` of its namespace (manifests/training_jobs.py).
        With MLflow, EKS Pod Identity gives that service account a role of the team's own, allowed to log to the
        platform's tracking server only, and a ConfigMap tells the jobs the server's ARN (MLFLOW_TRACKING_URI)."""
        plane = self.control_plane
        teams = config.eks.task_governance.teams
        objects = [k8s.job_service_account(namespace=k8s.team_namespace(t.name), platform=config.name) for t in teams]
        mlflow = config.studio.enabled and config.studio.mlflow.enabled
        if mlflow:
            server = tracking_server_arn(self, config.name)
            objects += [
                k8s.mlflow_config_map(
                    namespace=k8s.team_namespace(t.name), tracking_server_arn=server, platform=config.name
                )
                for t in teams
            ]
        self.team_jobs = plane.manifest("TeamJobIdentity", *objects, after=[self.team_namespaces], scope=self)
        if not mlflow:
            return
        for team in teams:
            namespace = k8s.team_namespace(team.name)
            role = plane.pod_role(
                self,
                f"JobRole-{team.name}",
                f"Jobs of team {team.name}: log to the platform's MLflow tracking server",
                namespace=namespace,
                service_account=k8s.JOB_SERVICE_ACCOUNT,
            )
            allow_mlflow_logging(role, tracking_server_arn=server, who=f"Jobs of team {team.name}")
            plane.pod_identity(
                f"JobIdentity-{team.name}",
                namespace=namespace,
                service_account=k8s.JOB_SERVICE_ACCOUNT,
                role=role,
                after=plane.addons["eks-pod-identity-agent"],
                scope=self,
            )

    def _task_governance(self, config: PlatformConfig) -> Construct:
        """The task-governance add-on, scheduler policy and compute quotas (constructs/task_governance.py); returns
        the construct holding each team namespace's wait and labels, which everything the stack puts in a team
        namespace depends on."""
        plane = self.control_plane
        governance = config.eks.task_governance
        cluster_arn = self.hyperpod.cluster_arn
        tasks = TaskGovernance(
            self,
            plane=plane,
            cluster_arn=cluster_arn,
            addon_version=config.eks.addons.task_governance,
            after=[self.untainted_node],
            scheduler_config={
                "Name": f"{config.name}-policy",
                "ClusterArn": cluster_arn,
                "SchedulerConfig": {
                    "PriorityClasses": [{"Name": c.name, "Weight": c.weight} for c in governance.priority_classes],
                    "FairShare": governance.fair_share,
                },
            },
            quotas={
                t.name: compute_quota_properties(t, cluster_name=config.name, cluster_arn=cluster_arn)
                for t in governance.teams
            },
            team_namespaces={t.name: k8s.team_namespace(t.name) for t in governance.teams},
            namespace_labels={k8s.PLATFORM_LABEL: config.name, **k8s.POD_SECURITY_LABELS},
        )
        self.kueue_ready, self.scheduler_config = tasks.kueue_ready, tasks.scheduler_config
        limits = [
            k8s.resource_quota(
                namespace=k8s.team_namespace(t.name),
                resource=ACCELERATORS[t.instance_type][0],
                count=borrowable_accelerators(t),
                platform=config.name,
                vcpu=t.max_vcpu,
                memory_gib=t.max_memory_gib,
            )
            for t in governance.teams
            if t.resource_quota
        ]
        limits += [
            k8s.default_requests(namespace=k8s.team_namespace(t.name), platform=config.name)
            for t in governance.teams
            if t.resource_quota and (t.max_vcpu or t.max_memory_gib)
        ]
        if limits:
            plane.manifest("TeamResourceQuotas", *limits, after=[*tasks.quotas, tasks.namespaces], scope=self)
        return tasks.namespaces
