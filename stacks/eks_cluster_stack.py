"""The HyperPod cluster orchestrated by EKS (the control plane and dependency chart are the EKS stack's,
stacks/eks_control_plane_stack.py): late add-ons, FSx for pods, elastic training and task governance (priority
classes, one compute quota per team)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks_v2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct
from constructs.eks_control_plane import Addon
from constructs.hyperpod_cluster import EksOrchestrator, HyperPodCluster
from constructs.fsx_partitions import FsxPartitions
from constructs.metrics_workspace import MetricsWorkspace
from constructs.mlflow_job_access import allow_mlflow_logging, tracking_server_arn
from constructs.lifecycle_scripts import ON_CREATE, LifecycleScripts, lifecycle_bucket_name
from constructs.platform_role_names import upload_role_name
from constructs.nag_acknowledgments import acknowledge
from constructs.schedulable_node import SchedulableNodeWaiter
from constructs.task_governance_provider import TaskGovernanceProvider

from manifests import kubernetes_objects as k8s
from manifests import team_identities
from platform_config import PlatformConfig
from platform_config.eks import addon_tolerations
from platform_config.eks_governance import EKS_TEAM_DIRECTORY_ROOT, TeamQuota, team_gid
from platform_config.facts import ACCELERATORS
from stacks.network_stack import NetworkRefs
from stacks.slurm_cluster_stack import group_specs
from stacks.storage_stack import StorageStack

if TYPE_CHECKING:
    from stacks.eks_control_plane_stack import EksControlPlaneStack

TRAINING_OPERATOR = ("aws-hyperpod", "hp-training-operator-controller-manager")  # namespace, service account
# The HyperPod observability add-on's collector (namespace, service account) and its configuration schema
# (ampWorkspace.prometheusEndpoint/arn) as AWS documents and its own Terraform module passes them:
# docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html and
# aws-samples/awsome-distributed-training@9a3f50891c5c4eac68cc865d986ec4bc0d9439a2
# 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/observability/main.tf.
HYPERPOD_OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"
HYPERPOD_OBSERVABILITY = ("hyperpod-observability", "hyperpod-observability-operator-otel-collector")


def observability_addon_values(workspace: MetricsWorkspace) -> dict:
    """The add-on's configurationValues: where to remote-write. No amgWorkspace: the platform provisions its own
    Grafana dashboards (observability/grafana/) in the observability stack, which deploys after this one."""
    return {"ampWorkspace": {"prometheusEndpoint": workspace.prometheus_endpoint, "arn": workspace.workspace_arn}}
FSX_CSI_CONTROLLER = ("kube-system", "fsx-csi-controller-sa")
KUEUE_CONTROLLER = ("kueue-system", "kueue-controller-manager")  # namespace, deployment (task governance's Kueue)
TEAM_DIRECTORY_ROOT = EKS_TEAM_DIRECTORY_ROOT  # <data repository path>/eks/teams/<team> and .../eks/datasets on FSx
DATASETS_DIRECTORY = "datasets"
# Regions whose CloudFormation has the type (cfn-lint 1.58's registry schemas; tests/test_eks_cluster.py keeps this
# table honest). Elsewhere a custom resource with the same properties calls the SageMaker API instead.
CFN_REGIONS = {
    "AWS::SageMaker::ClusterSchedulerConfig": frozenset({
        "ap-northeast-1", "ap-south-1", "eu-central-1", "eu-north-1", "eu-south-2", "us-east-1", "us-west-1"}),
    "AWS::SageMaker::ComputeQuota": frozenset({
        "ap-south-1", "ap-southeast-1", "ap-southeast-2", "ca-central-1", "eu-central-1", "eu-west-1", "eu-west-2",
        "sa-east-1", "us-east-1", "us-east-2", "us-west-2"}),
}


def governance_resource_type(cfn_type: str, region: str | None) -> str:
    """The native type where CloudFormation has it in `region`, else the equivalent custom resource."""
    if region in CFN_REGIONS[cfn_type]:
        return cfn_type
    return "Custom::" + cfn_type.rsplit("::", 1)[1]


class EksClusterStack(cdk.Stack):
    """HyperPod on the EKS control plane of `eks` (its own stack, created while FSx is), and everything that needs
    the nodes or the file system: the add-ons that run Deployments, FSx for pods, namespaces, governance."""

    def __init__(self, scope: Construct, id_: str, *, config: PlatformConfig, network: NetworkRefs,
                 storage: StorageStack, eks: EksControlPlaneStack, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        self.add_stack_dependency(storage)
        self.add_stack_dependency(eks)
        eks_config = config.eks
        lifecycle_bucket = s3.Bucket.from_bucket_name(self, "LifecycleBucket", lifecycle_bucket_name(config.name))
        self.lifecycle = LifecycleScripts(self, "LifecycleScripts", bucket=lifecycle_bucket,
                                          upload_role_name=upload_role_name(config.name, "cluster"),
                                          prefix=f"hyperpod/{config.name}", parameters=provisioning_parameters(config))
        addons = eks_config.addons
        self.control_plane = plane = eks.control_plane
        self.dependency_chart = eks.dependency_chart
        self.eks_cluster_name = config.name

        groups = [g for g in group_specs(config, network) if g.role == "compute"]
        self.hyperpod = HyperPodCluster(
            self, "HyperPod", cluster_name=config.name, groups=groups,
            orchestrator=EksOrchestrator(cluster_arn=plane.cluster_arn,
                                         node_provisioning_mode=eks_config.node_provisioning_mode,
                                         karpenter=eks_config.autoscaling.enabled),
            vpc_id=network.vpc_id, subnet_ids=[s.subnet_id for s in network.private_subnets],
            default_subnet_id=network.primary_subnet.subnet_id, security_group_id=network.security_group_id,
            lifecycle_bucket=lifecycle_bucket, lifecycle_prefix=self.lifecycle.prefix, on_create=ON_CREATE,
            node_recovery=config.cluster.node_recovery)
        self.hyperpod.node.add_dependency(self.lifecycle.deployment)
        self.hyperpod.node.add_dependency(self.dependency_chart)
        self._allow_eks_nodes(self.hyperpod.execution_role, vpc_id=network.vpc_id)

        self._node_waits(config, network)
        # coredns and cert-manager take tolerations (configurationValues) for the platform's own taints, so they run
        # on any group that is not under deep health checks; the FSx CSI controller tolerates no NoSchedule taint.
        tolerations = addon_tolerations(config)
        plane.addon(Addon("coredns", addons.coredns, {"tolerations": tolerations} if tolerations else None),
                    after=[self.tolerable_node], scope=self)
        plane.addon(Addon("cert-manager", addons.cert_manager, cert_manager_values(tolerations)),
                    after=[self.tolerable_node], scope=self)
        plane.addon(Addon("aws-fsx-csi-driver", addons.fsx_csi_driver), after=[self.untainted_node], scope=self)
        self._fsx_csi_identity()

        team_namespaces = [k8s.team_namespace(t.name) for t in eks_config.task_governance.teams] \
            if eks_config.task_governance.enabled else []
        # Task governance owns the team namespaces: it creates hyperpod-ns-<team> with the team's compute quota
        # (aws/sagemaker-hyperpod-cli@a00b22d examples/end_to_end_walkthrough/00-getting-started/00-setup.md, "This
        # will create the team-specific compute quotas as well as the corresponding Kubernetes namespaces"), so the
        # stack waits for each, labels it, and puts its own objects there; it never creates or deletes one.
        self.namespaces = self._task_governance(config) if eks_config.task_governance.enabled else None
        if self.namespaces is not None:
            # Job rights per team: the team's access entry (Studio stack) carries its Kubernetes group.
            plane.manifest("TeamJobAccess", *[obj for t in eks_config.task_governance.teams for obj in (
                k8s.job_submitter_role(namespace=k8s.team_namespace(t.name), platform=config.name),
                k8s.role_binding(namespace=k8s.team_namespace(t.name), group=k8s.team_group(t.name),
                                 role=k8s.JOB_ROLE, platform=config.name))], after=[self.namespaces], scope=self)
            self._team_jobs(config)
        self._guard_default_namespace(config)
        # No pod of a team's (or the default) namespace reaches the node's instance metadata or other link-local services
        # (manifests/kubernetes_objects.py says how HyperPod nodes serve credentials and why the block is here).
        guarded = ["default", *team_namespaces]
        self.node_credentials_guard = plane.manifest(
            "NodeCredentialsGuard", *[k8s.deny_node_credentials(namespace=n, platform=config.name) for n in guarded],
            after=[self.namespaces] if self.namespaces is not None else [], scope=self)
        if team_namespaces:
            # A team's pods accept connections from its own pods and the platform components that talk to them.
            plane.manifest("TeamIngress", *[k8s.team_ingress(
                namespace=n, platform_namespaces=[TRAINING_OPERATOR[0], HYPERPOD_OBSERVABILITY[0]],
                platform=config.name) for n in team_namespaces], after=[self.namespaces], scope=self)
            self._team_volumes(config, storage)
            self._team_identities(config, storage)

        if eks_config.training_operator:
            self._training_operator(eks_config.addons.training_operator)
        if storage.metrics_workspace is not None:
            self._observability_addon(config, storage.metrics_workspace)

        cdk.CfnOutput(self, "ClusterName", value=config.name)
        cdk.CfnOutput(self, "ClusterArn", value=self.hyperpod.cluster_arn)

    def _team_volumes(self, config: PlatformConfig, storage: StorageStack) -> None:
        """Each team mounts its own directory read-write and the shared datasets directory read-only, never the
        whole file system. The directories are created (owner root, group the team's gid, setgid 2770; datasets
        root 0755) through the data repository, without a shell on any node (constructs/fsx_partitions.py); the
        claims wait for them. Deleting the stack keeps the directories and their data."""
        repo, lustre = config.storage.lustre.data_repository, storage.lustre
        directories = FsxPartitions(self, "TeamDirectories", file_system_id=lustre.file_system_id,
                                    file_system_path=repo.file_system_path, data_bucket_name=storage.data_bucket_name,
                                    s3_prefix=repo.s3_prefix, partition_root=TEAM_DIRECTORY_ROOT)
        created = [directories.partition(self, "DatasetsDirectory", relative_name=DATASETS_DIRECTORY, uid="0",
                                         gid="0", mode="0755")]
        objects = []
        for team in config.eks.task_governance.teams:
            created.append(directories.partition(self, f"TeamDirectory-{team.name}", relative_name=f"teams/{team.name}",
                                                 uid="0", gid=str(team_gid(team)), mode="2770"))
            common = dict(namespace=k8s.team_namespace(team.name), file_system_id=lustre.file_system_id,
                          dns_name=lustre.dns_name, mount_name=lustre.mount_name, platform=config.name,
                          capacity_gib=config.storage.lustre.storage_capacity_gib)
            objects += k8s.fsx_volume(claim=k8s.FSX_CLAIM, directory=directories.path_of(f"teams/{team.name}"),
                                      **common)
            objects += k8s.fsx_volume(claim=k8s.DATASETS_CLAIM, directory=directories.path_of(DATASETS_DIRECTORY),
                                      read_only=True, **common)
        self.control_plane.manifest("FsxVolumes", *objects, after=[self.namespaces, *created], scope=self)

    def _team_identities(self, config: PlatformConfig, storage: StorageStack) -> None:
        """Pods in a team's namespace run only as its members, with its gids (manifests/team_identities.py); with
        Studio, each member's partition (or the shared one) is claimed there, for jobs to mount at the cluster's
        path of it. The claims follow config.shared_fsx: a SharedFSx parameter overridden at deploy time leaves
        them on the synthesized mode."""
        teams = config.eks.task_governance.teams
        namespaces = [k8s.team_namespace(t.name) for t in teams]
        plane = self.control_plane
        admission = team_identities.team_admission(namespaces=namespaces, platform=config.name)
        policies = plane.manifest("TeamIdentityPolicy", *[o for o in admission
                                                          if o["kind"] == "ValidatingAdmissionPolicy"], scope=self)
        bindings = [o for o in admission if o["kind"] == "ValidatingAdmissionPolicyBinding"]
        plane.manifest("TeamIdentityBinding", *bindings, after=[policies, self.namespaces], scope=self)
        objects = []
        for team in teams:
            uids, gids = team_identities.team_ids(config, team)
            objects.append(team_identities.identities(namespace=k8s.team_namespace(team.name), uids=uids, gids=gids,
                                                      members=team_identities.team_members(config, team),
                                                      platform=config.name))
        if config.studio.enabled:
            lustre = storage.lustre
            for team in teams:
                # In shared mode every member has the same claim: one volume per claim.
                claims = {f.claim: f for f in team_identities.team_studio_files(config, team).values()}
                for files in claims.values():
                    objects += k8s.fsx_volume(namespace=k8s.team_namespace(team.name), claim=files.claim,
                                              directory=files.directory, file_system_id=lustre.file_system_id,
                                              dns_name=lustre.dns_name, mount_name=lustre.mount_name,
                                              capacity_gib=config.storage.lustre.storage_capacity_gib,
                                              platform=config.name)
        plane.manifest("TeamIdentities", *objects, after=[self.namespaces], scope=self)

    def _node_waits(self, config: PlatformConfig, network: NetworkRefs) -> None:
        """Add-ons that run Deployments are created once a node exists that their pods can be scheduled on:
        `tolerable_node` (no taint but the platform's own) for coredns and cert-manager, `untainted_node` for the
        add-ons that take no tolerations. CloudFormation would otherwise report them created while DEGRADED."""
        plane = self.control_plane
        self.node_reader_rbac = plane.manifest("NodeReaderRbac", *k8s.node_reader_rbac(platform=config.name),
                                               scope=self)
        waiter = SchedulableNodeWaiter(
            self, "NodeReadiness", cluster=plane.cluster, cluster_name=config.name, vpc_id=network.vpc_id,
            subnets=network.private_subnets, security_group_id=plane.kubectl_group.security_group_id,
            kubernetes_group=k8s.NODE_READER_GROUP)
        after = [self.hyperpod, self.node_reader_rbac]
        self.untainted_node = waiter.wait_for("UntaintedNode", tolerations=[], after=after, scope=self)
        tolerations = addon_tolerations(config)
        self.tolerable_node = waiter.wait_for("TolerableNode", tolerations=tolerations, after=after, scope=self) \
            if tolerations else self.untainted_node

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
            objects += [k8s.mlflow_config_map(namespace=k8s.team_namespace(t.name), tracking_server_arn=server,
                                              platform=config.name) for t in teams]
        self.team_jobs = plane.manifest("TeamJobIdentity", *objects, after=[self.namespaces], scope=self)
        if not mlflow:
            return
        for team in teams:
            namespace = k8s.team_namespace(team.name)
            role = plane.pod_role(self, f"JobRole-{team.name}", f"Jobs of team {team.name}: log to the platform's "
                                  "MLflow tracking server", namespace=namespace, service_account=k8s.JOB_SERVICE_ACCOUNT)
            allow_mlflow_logging(role, tracking_server_arn=server, who=f"Jobs of team {team.name}")
            plane.pod_identity(f"JobIdentity-{team.name}", namespace=namespace, service_account=k8s.JOB_SERVICE_ACCOUNT,
                               role=role, after=plane.addons["eks-pod-identity-agent"], scope=self)

    def _guard_default_namespace(self, config: PlatformConfig) -> None:
        """`default` exists before the stack, so it is patched (and restored on delete), not applied: Pod Security
        `baseline`, and no accelerators, so nothing there takes GPUs outside the team queues."""
        plane = self.control_plane
        eks_v2.KubernetesPatch(self, "DefaultPodSecurity", cluster=plane.cluster, resource_name="namespace/default",
                            apply_patch={"metadata": {"labels": k8s.POD_SECURITY_LABELS}},
                            restore_patch={"metadata": {"labels": dict.fromkeys(k8s.POD_SECURITY_LABELS)}})
        plane.manifest("DefaultNoAccelerators", k8s.zero_accelerator_quota(namespace="default", platform=config.name),
                       scope=self)

    def _fsx_csi_identity(self) -> None:
        namespace, account = FSX_CSI_CONTROLLER
        role = self.control_plane.pod_role(self, "FsxCsiRole", "FSx CSI controller: describe file systems, nothing else",
                                           namespace=namespace, service_account=account)
        # DescribeFileSystems authorizes no resource type (Service Authorization Reference, config/facts/iam_actions.json):
        # a file-system ARN here would match nothing and the call would be denied. It only reads.
        role.add_to_policy(iam.PolicyStatement(
            sid="DescribeFileSystems", actions=["fsx:DescribeFileSystems"], resources=["*"]))
        acknowledge(role, "AwsSolutions-IAM5", "fsx:DescribeFileSystems authorizes no resource type, so it takes only "
                                               "'*'; the role may do nothing else", findings=["Resource::*"])
        self.control_plane.pod_identity("FsxCsiIdentity", namespace=namespace, service_account=account, role=role,
                                        after=self.control_plane.addons["aws-fsx-csi-driver"], scope=self)

    def _allow_eks_nodes(self, role: iam.Role, *, vpc_id: str) -> None:
        """What a HyperPod instance needs as an EKS node beyond the managed instance policy: pull images, and let
        the VPC CNI give pods secondary IPs on the node's interfaces (the actions AWS's HyperPod-on-EKS reference
        execution role grants), scoped to this VPC like the role's other ENI actions.
        HyperPod creates the node's access entry itself (DescribeCluster's EksRoleAccessEntries)."""
        role.add_to_policy(iam.PolicyStatement(
            sid="VpcCniPodAddresses", actions=["ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
                                               "ec2:ModifyNetworkInterfaceAttribute"],
            resources=[self.format_arn(service="ec2", resource="network-interface", resource_name="*")],
            conditions={"ArnEquals": {"ec2:Vpc": self.format_arn(service="ec2", resource="vpc",
                                                                  resource_name=vpc_id)}}))
        repositories = self.format_arn(service="ecr", resource="repository", resource_name="*", account="*")
        role.add_to_policy(iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(
            sid="PullImages", actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage",
                                       "ecr:GetDownloadUrlForLayer"], resources=[repositories]))
        role.add_to_policy(iam.PolicyStatement(sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"],
                                               resources=[self.control_plane.cluster_arn]))
        # The VPC CNI on the node (it runs with the node's role) finds the instance, its type's interface limits and
        # tags, and attaches interfaces to it: the actions AWS's HyperPod-on-EKS reference role adds for the CNI
        # (config/facts/hyperpod_reference_roles.json, awsome-distributed-ai terraform sagemaker_iam_role eks_cni_policy,
        # same resources). The Describe calls support no resource-level permissions.
        instances, interfaces = (self.format_arn(service="ec2", resource=r, resource_name="*")
                                 for r in ("instance", "network-interface"))
        role.add_to_policy(iam.PolicyStatement(
            sid="VpcCniDescribeInstances",
            actions=["ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeTags"], resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(
            sid="VpcCniAttachInterfaces", actions=["ec2:AttachNetworkInterface"], resources=[instances, interfaces]))
        # Both of AWS's EKS reference roles (CloudFormation and Terraform) grant it; read-only, this account's alarms.
        alarms = self.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                                 arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        role.add_to_policy(iam.PolicyStatement(sid="ReadAlarms", actions=["cloudwatch:DescribeAlarms"],
                                               resources=[alarms]))
        acknowledge(role, "AwsSolutions-IAM5",
                    "EKS nodes pull add-on and system images from AWS-owned ECR registries in other accounts (which "
                    "vary by region) as well as the user's; pulls are read-only and limited to this region. The VPC "
                    "CNI attaches interfaces to instances HyperPod creates after this role (their IDs are unknown at "
                    "synth), in this account and region as AWS's reference role scopes it; DescribeAlarms reads this "
                    "account's alarms in this region only",
                    findings=[f"Resource::{repositories}", f"Resource::{instances}", f"Resource::{interfaces}",
                              f"Resource::{alarms}"])

    def _training_operator(self, version: str) -> None:
        plane = self.control_plane
        namespace, account = TRAINING_OPERATOR
        role = plane.pod_role(self, "TrainingOperatorRole", "HyperPod training operator: read this cluster's nodes",
                              namespace=namespace, service_account=account)
        role.add_to_policy(iam.PolicyStatement(
            sid="DescribeClusterNodes", actions=["sagemaker:DescribeClusterNode", "sagemaker:ListClusterNodes"],
            resources=[self.hyperpod.cluster_arn]))
        # It runs on HyperPod nodes and needs cert-manager's webhook certificates. Its pod identity is a standalone
        # association, never the add-on's inline PodIdentityAssociations: v1.2.1-eksbuild.1, EKS's default, rejects
        # those ("Pod Identity feature is not supported for addon version"; awslabs/awsome-distributed-ai@95b939cd
        # .../hyperpod-eks-tf/modules/hyperpod_training_operator/main.tf).
        plane.addon(Addon("amazon-sagemaker-hyperpod-training-operator", version),
                    after=[self.untainted_node, plane.addons["cert-manager"]], scope=self)
        plane.pod_identity("TrainingOperatorIdentity", namespace=namespace, service_account=account, role=role,
                           after=plane.addons["eks-pod-identity-agent"], scope=self)

    def _observability_addon(self, config: PlatformConfig, workspace: MetricsWorkspace) -> None:
        """The HyperPod observability add-on (node, DCGM, EFA and kube-state exporters and an OpenTelemetry collector)
        remote-writing to the platform's Prometheus workspace. Its collector's service account and the rights it needs
        (aps:RemoteWrite on the workspace, CloudWatch Logs on the cluster's log groups) are the ones AWS documents in
        docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html; here the logs are
        narrowed from /aws/sagemaker/Clusters/* to this cluster's."""
        plane = self.control_plane
        namespace, account = HYPERPOD_OBSERVABILITY
        role = plane.pod_role(self, "ObservabilityCollectorRole", "HyperPod observability collector: remote-write "
                              "to this platform's Prometheus workspace", namespace=namespace, service_account=account)
        role.add_to_policy(workspace.remote_write_statement())
        log_group = self.format_arn(service="logs", resource="log-group",
                                    resource_name=f"/aws/sagemaker/Clusters/{config.name}/*",
                                    arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        role.add_to_policy(iam.PolicyStatement(
            sid="ClusterLogs", resources=[log_group, f"{log_group}:log-stream:*"],
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents",
                     "logs:GetLogEvents", "logs:FilterLogEvents", "logs:StartQuery", "logs:StopQuery",
                     "logs:GetQueryResults", "logs:GetLogRecord"]))
        # DescribeLogGroups authorizes only against '*' (service authorization reference, CloudWatch Logs).
        role.add_to_policy(iam.PolicyStatement(sid="FindClusterLogGroup", actions=["logs:DescribeLogGroups"],
                                               resources=["*"]))
        acknowledge(role, "AwsSolutions-IAM5",
                    "the collector writes and queries the HyperPod cluster's log groups, named by HyperPod after the "
                    "cluster ID it assigns (/aws/sagemaker/Clusters/<name>/<id>); logs:DescribeLogGroups has no "
                    "resource-level permission", findings=["Resource::*", f"Resource::{log_group}",
                                                           f"Resource::{log_group}:log-stream:*"])
        association = plane.pod_identity("ObservabilityCollectorIdentity", namespace=namespace,
                                         service_account=account, role=role,
                                         after=plane.addons["eks-pod-identity-agent"], scope=self)
        # Its collectors run on HyperPod nodes and need the pod identity before they first write.
        addon = eks_v2.Addon(self, f"Addon-{HYPERPOD_OBSERVABILITY_ADDON}", cluster=plane.cluster,
                          addon_name=HYPERPOD_OBSERVABILITY_ADDON,
                          addon_version=config.observability.node_metrics.eks_addon_version,
                          configuration_values=observability_addon_values(workspace), preserve_on_delete=False)
        addon.node.add_dependency(self.untainted_node, association, plane.addons["cert-manager"])
        plane.addons[HYPERPOD_OBSERVABILITY_ADDON] = addon

    def _task_governance(self, config: PlatformConfig) -> Construct:
        """The task-governance add-on, then (once Kueue runs) the scheduler policy and each team's compute quota,
        which creates the team's namespace; returns the construct holding each namespace's wait and labels, which
        everything the stack puts in a team namespace depends on."""
        plane = self.control_plane
        governance = config.eks.task_governance
        # Kueue's controller and webhook run on HyperPod nodes; the quotas below need them running. CloudFormation
        # reports an add-on whose pods cannot run as created (DEGRADED), so the stack waits, as AWS's Terraform does
        # before creating quotas, for deployment/kueue-controller-manager in kueue-system to be available
        # (awslabs/awsome-distributed-ai@95b939cd .../hyperpod-eks-tf/modules/task_governance/main.tf
        # wait_for_kueue_webhook): aws_eks_v2's object-value read retries until the field has a value.
        addon = plane.addon(Addon("amazon-sagemaker-hyperpod-taskgovernance", config.eks.addons.task_governance),
                            after=[self.untainted_node], scope=self)
        namespace, deployment = KUEUE_CONTROLLER
        self.kueue_ready = eks_v2.KubernetesObjectValue(
            self, "KueueReady", cluster=plane.cluster, object_type="deployment", object_name=deployment,
            object_namespace=namespace, json_path=".status.availableReplicas", timeout=cdk.Duration.minutes(10))
        self.kueue_ready.node.add_dependency(addon)
        types = {t: governance_resource_type(t, self.region)
                 for t in ("AWS::SageMaker::ClusterSchedulerConfig", "AWS::SageMaker::ComputeQuota")}
        provider = None
        if any(t.startswith("Custom::") for t in types.values()):
            provider = TaskGovernanceProvider(self, "GovernanceProvider", cluster_arn=self.hyperpod.cluster_arn)

        def resource(id_: str, cfn_type: str, properties: dict[str, Any]) -> cdk.CfnResource:
            kind = types[cfn_type]
            if kind.startswith("Custom::"):
                properties = {"ServiceToken": provider.service_token, **properties}
            created = cdk.CfnResource(self, id_, type=kind, properties=properties)
            created.node.add_dependency(self.kueue_ready)
            if not kind.startswith("Custom::"):
                acknowledge(created, "CloudFormation-Validate::F3006", f"{kind} is in this region's CloudFormation registry (cfn-lint's schemas "
                            "validate it), but aws-cdk-lib's bundled schema predates it")
            return created

        self.scheduler_config = resource("SchedulerConfig", "AWS::SageMaker::ClusterSchedulerConfig", {
            "Name": f"{config.name}-policy", "ClusterArn": self.hyperpod.cluster_arn,
            "SchedulerConfig": {"PriorityClasses": [{"Name": c.name, "Weight": c.weight}
                                                    for c in governance.priority_classes],
                                "FairShare": governance.fair_share}})
        quotas = []
        namespaces = Construct(self, "TeamNamespaces")
        labels = {k8s.PLATFORM_LABEL: config.name, **k8s.POD_SECURITY_LABELS}
        for team in governance.teams:
            quota = resource(f"Quota-{team.name}", "AWS::SageMaker::ComputeQuota", compute_quota_properties(
                team, cluster_name=config.name, cluster_arn=self.hyperpod.cluster_arn))
            quota.node.add_dependency(self.scheduler_config)
            quotas.append(quota)
            name = k8s.team_namespace(team.name)
            created = eks_v2.KubernetesObjectValue(
                namespaces, f"Wait-{team.name}", cluster=plane.cluster, object_type="namespace", object_name=name,
                json_path=".metadata.name", timeout=cdk.Duration.minutes(5))
            created.node.add_dependency(quota)
            # Labelled, not applied: Pod Security baseline; restored (labels removed) when the stack goes.
            patch = eks_v2.KubernetesPatch(
                namespaces, f"Labels-{team.name}", cluster=plane.cluster, resource_name=f"namespace/{name}",
                apply_patch={"metadata": {"labels": labels}},
                restore_patch={"metadata": {"labels": dict.fromkeys(labels)}})
            patch.node.add_dependency(created)
        limits = [k8s.resource_quota(namespace=k8s.team_namespace(t.name), resource=ACCELERATORS[t.instance_type][0],
                                     count=borrowable_accelerators(t), platform=config.name, vcpu=t.max_vcpu,
                                     memory_gib=t.max_memory_gib)
                  for t in governance.teams if t.resource_quota]
        limits += [k8s.default_requests(namespace=k8s.team_namespace(t.name), platform=config.name)
                   for t in governance.teams if t.resource_quota and (t.max_vcpu or t.max_memory_gib)]
        if limits:
            plane.manifest("TeamResourceQuotas", *limits, after=[*quotas, namespaces], scope=self)
        return namespaces


def cert_manager_values(tolerations: list[dict]) -> dict | None:
    """cert-manager's controller, webhook and cainjector each take tolerations (the keys AWS's HyperPod Terraform sets:
    awslabs/awsome-distributed-ai@95b939cd .../hyperpod-eks-tf/modules/hyperpod_cluster/cert_manager.tf)."""
    if not tolerations:
        return None
    return {"tolerations": tolerations, "webhook": {"tolerations": tolerations},
            "cainjector": {"tolerations": tolerations}}


def compute_quota_properties(team: TeamQuota, *, cluster_name: str, cluster_arn: str) -> dict[str, Any]:
    resource = {"InstanceType": team.instance_type}
    if team.instance_count is not None:
        resource["Count"] = team.instance_count
    else:
        resource["Accelerators"] = team.accelerators
    sharing: dict[str, Any] = {"Strategy": team.sharing}
    if team.sharing == "LendAndBorrow":
        sharing["BorrowLimit"] = team.borrow_limit_percent
    return {"Name": f"{cluster_name}-{team.name}"[:63], "ClusterArn": cluster_arn,
            "ComputeQuotaTarget": {"TeamName": team.name, "FairShareWeight": team.fair_share_weight},
            "ComputeQuotaConfig": {"ComputeQuotaResources": [resource], "ResourceSharingConfig": sharing,
                                   "PreemptTeamTasks": team.preempt_team_tasks},
            "ActivationState": "Enabled"}


def borrowable_accelerators(team: TeamQuota) -> int:
    """Guaranteed accelerators plus what the team may borrow on top (its borrow limit is a percentage)."""
    per_instance = ACCELERATORS[team.instance_type][1]
    guaranteed = team.accelerators if team.accelerators is not None else team.instance_count * per_instance
    if team.sharing != "LendAndBorrow":
        return guaranteed
    return guaranteed + guaranteed * team.borrow_limit_percent // 100


def provisioning_parameters(config: PlatformConfig) -> dict[str, Any]:
    """The node-side contract read by lifecycle/hyperpod/on_create.sh on EKS nodes (no Slurm, no FSx mount:
    pods mount FSx through the CSI driver)."""
    return {"version": 1, "orchestrator": "eks", "cluster_name": config.name,
            "worker_groups": [{"instance_group_name": g.name} for g in config.group("compute")]}
