"""`AWS::SageMaker::Cluster` orchestrated by Slurm (HyperPod's native support) or by an EKS cluster, and the
execution roles its instances use (`ExecutionRole` is a property of each instance group:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-sagemaker-cluster-clusterinstancegroup.html)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct
from constructs.nag_acknowledgments import acknowledge
from constructs.pseudo_parameters import PARTITION, REGION

SLURM_NODE_TYPES = {"controller": "Controller", "login": "Login", "compute": "Compute"}
# The execution roles' EC2 and FSx statements: AWS's reference execution role policy narrowed to the cluster's VPC,
# subnets and security group with the Service Authorization Reference's resource types and condition keys, written by
# tools/execution_role_network_facts.py (its docstring says how) and re-derived by tests/test_instance_role_policy.py.
NETWORK_STATEMENTS = json.loads(
    (Path(__file__).resolve().parent.parent / "config" / "facts" / "execution_role_network.json").read_text()
)["statements"]

# Actions AWS grants HyperPod instances (the managed policy AmazonSageMakerClusterInstanceRolePolicy, or AWS's reference
# execution roles: config/facts/) that the node roles here leave out on purpose, and why.
NOT_GRANTED: dict[str, str] = {
    "sns:Publish": "AWS's multi-head template lets controllers publish fail-over notices to an SNS topic of its own "
    "(headnode_notification.sh); here HyperPod's own cluster events and the platform's alarms reach "
    "the observability stack's topic, and no node publishes to SNS",
}


@dataclass(frozen=True)
class GroupSpec:
    """One instance group, as the cluster construct needs it (the config layer has validated it)."""

    name: str
    role: str  # controller | login | compute
    instance_type: str
    instance_count: int
    threads_per_core: int
    ebs_volume_gib: int
    deep_health_checks: Sequence[str] = ()
    partitions: Sequence[str] = ()
    training_plan_arn: str | None = None
    subnet_id: str | None = None  # set to place the group outside the cluster's default subnet
    kubernetes_labels: dict[str, str] | None = None
    kubernetes_taints: Sequence[tuple[str, str, str]] = ()  # (key, value, effect)


@dataclass(frozen=True)
class NativeLustreMount:
    dns_name: str
    mount_name: str
    mount_path: str


@dataclass(frozen=True)
class ExternalAccountingDatabase:
    """Orchestrator.Slurm.AccountingDatabase: where slurmdbd stores accounting instead of the controller's MariaDB."""

    endpoint: str
    secret_arn: str
    name: str
    port: int


@dataclass(frozen=True)
class SlurmOrchestrator:
    # Managed | Overwrite | Merge; None sends no SlurmConfigStrategy, the only choice in Continuous mode ("continuous
    # provisioning clusters support only the Merge behavior and reject requests that set SlurmConfigStrategy",
    # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-slurm-api-config-migration.html).
    config_strategy: str | None
    node_provisioning_mode: str | None = None  # Continuous, or HyperPod's default when None
    accounting_database: ExternalAccountingDatabase | None = None
    # Security groups the controller group gets besides the cluster's (OverrideVpcConfig of that group only).
    controller_security_group_ids: Sequence[str] = ()
    controller_subnet_id: str | None = None  # the controller's subnet when it has no subnet_id of its own


@dataclass(frozen=True)
class EksOrchestrator:
    cluster_arn: str
    node_provisioning_mode: str = "Continuous"
    karpenter: bool = False  # HyperPod-managed Karpenter autoscaling


class HyperPodCluster(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster_name: str,
        groups: Sequence[GroupSpec],
        orchestrator: SlurmOrchestrator | EksOrchestrator,
        vpc_id: str,
        subnet_ids: Sequence[str],
        default_subnet_id: str,
        security_group_id: str,
        lifecycle_bucket: s3.IBucket,
        lifecycle_prefix: str,
        node_recovery: str,
        on_create: str | None = None,
        on_init_complete: str | None = None,
        native_lustre: NativeLustreMount | None = None,
        artifact_s3_uris: Sequence[str] = (),
        execution_role_name: str | None = None,
        separate_controller_role: bool = False,
    ) -> None:
        """separate_controller_role (Slurm): the controller group runs as `execution_role` (named
        `execution_role_name`), every other group as `worker_role`, which has the same node permissions and nothing
        the stack adds to the controller's (what Studio trusts: the login secret, the auth/jwt signing key). Without
        it every group runs as `execution_role` (EKS)."""
        super().__init__(scope, id_)
        if (
            isinstance(orchestrator, SlurmOrchestrator)
            and orchestrator.node_provisioning_mode == "Continuous"
            and orchestrator.config_strategy is not None
        ):
            raise ValueError(
                f"SlurmConfigStrategy {orchestrator.config_strategy!r} with NodeProvisioningMode "
                "Continuous: HyperPod rejects a strategy on continuous clusters (Merge is the only one)"
            )
        if (on_create is None) == (on_init_complete is None):
            raise ValueError(
                "give exactly one lifecycle entry point: on_create (EKS) or on_init_complete (Slurm); "
                "HyperPod treats them as mutually exclusive"
            )
        self.execution_role = self._execution_role(
            cluster_name=cluster_name,
            vpc_id=vpc_id,
            subnet_ids=subnet_ids,
            security_group_id=security_group_id,
            bucket=lifecycle_bucket,
            prefix=lifecycle_prefix,
            role_name=execution_role_name,
        )
        # A generated name: nothing outside this stack names the workers' role.
        self.worker_role = (
            self._execution_role(
                cluster_name=cluster_name,
                vpc_id=vpc_id,
                subnet_ids=subnet_ids,
                security_group_id=security_group_id,
                bucket=lifecycle_bucket,
                prefix=lifecycle_prefix,
                role_name=None,
                id_="WorkerRole",
                description="HyperPod login and compute instances: CloudWatch, ENIs in the cluster subnets, lifecycle "
                "scripts; nothing Studio trusts",
            )
            if separate_controller_role
            else self.execution_role
        )
        self.controller_role = self.execution_role
        self.node_roles = [self.execution_role] + ([self.worker_role] if separate_controller_role else [])
        for role in self.node_roles if artifact_s3_uris else ():
            # Exact objects (no wildcard): the container-runtime packages on_create.sh downloads and verifies.
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadContainerRuntimeArtifacts",
                    actions=["s3:GetObject"],
                    resources=[f"arn:{PARTITION}:s3:::{uri.removeprefix('s3://')}" for uri in artifact_s3_uris],
                )
            )
        source_s3_uri = f"s3://{lifecycle_bucket.bucket_name}/{lifecycle_prefix}/"
        storage_extra = []
        if native_lustre:
            storage_extra.append(
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    fsx_lustre_config=sagemaker.CfnCluster.ClusterFsxLustreConfigProperty(
                        dns_name=native_lustre.dns_name,
                        mount_name=native_lustre.mount_name,
                        mount_path=native_lustre.mount_path,
                    )
                )
            )

        instance_groups = [
            sagemaker.CfnCluster.ClusterInstanceGroupProperty(
                instance_group_name=g.name,
                instance_type=g.instance_type,
                instance_count=g.instance_count,
                execution_role=(self.controller_role if g.role == "controller" else self.worker_role).role_arn,
                threads_per_core=g.threads_per_core,
                life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                    source_s3_uri=source_s3_uri, on_create=on_create, on_init_complete=on_init_complete
                ),
                instance_storage_configs=[
                    sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                        ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                            volume_size_in_gb=g.ebs_volume_gib
                        )
                    )
                ]
                + storage_extra,
                on_start_deep_health_checks=list(g.deep_health_checks) or None,
                training_plan_arn=g.training_plan_arn,
                override_vpc_config=self._override_vpc_config(g, orchestrator, security_group_id),
                **self._orchestration_of(g, orchestrator),
            )
            for g in groups
        ]
        eks = orchestrator if isinstance(orchestrator, EksOrchestrator) else None
        slurm = orchestrator if isinstance(orchestrator, SlurmOrchestrator) else None
        external_db = slurm.accounting_database if slurm else None
        self.cluster_role = self._karpenter_role() if eks and eks.karpenter else None
        self.cluster = sagemaker.CfnCluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            instance_groups=instance_groups,
            node_recovery=node_recovery,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=orchestrator.cluster_arn)
            )
            if isinstance(orchestrator, EksOrchestrator)
            else sagemaker.CfnCluster.OrchestratorProperty(
                slurm=sagemaker.CfnCluster.ClusterOrchestratorSlurmConfigProperty(
                    slurm_config_strategy=orchestrator.config_strategy,
                    accounting_database=sagemaker.CfnCluster.ClusterAccountingDatabaseProperty(
                        endpoint=external_db.endpoint,
                        secret_arn=external_db.secret_arn,
                        name=external_db.name,
                        port=external_db.port,
                    )
                    if external_db
                    else None,
                )
            ),
            node_provisioning_mode=orchestrator.node_provisioning_mode,
            auto_scaling=sagemaker.CfnCluster.ClusterAutoScalingConfigProperty(
                mode="Enable", auto_scaler_type="Karpenter"
            )
            if self.cluster_role
            else None,
            cluster_role=self.cluster_role.role_arn if self.cluster_role else None,
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[security_group_id], subnets=[default_subnet_id]
            ),
        )
        self.cluster_name = cluster_name
        self.cluster_arn = self.cluster.attr_cluster_arn
        # arn:<partition>:sagemaker:<region>:<account>:cluster/<cluster-id>
        self.cluster_id = cdk.Fn.select(1, cdk.Fn.split("/", self.cluster.attr_cluster_arn))

    def grant_controller_publish_login(self, *, login_secret_arn: str, bucket: s3.IBucket, client_prefix: str) -> None:
        """The controller's OnInitComplete hook (lifecycle/hyperpod/publish_slurm_login.sh) publishes the Slurm
        login (version, address, slurm.conf, munge key) to the login secret, and its own Slurm client for Studio to
        `client_prefix` of the lifecycle bucket: the one prefix the cluster may write (the bucket policy,
        constructs/lifecycle_bucket.py, refuses it everything else)."""
        self.controller_role.add_to_policy(
            iam.PolicyStatement(
                sid="PublishSlurmLoginSecret",
                actions=[
                    "secretsmanager:PutSecretValue",
                    "secretsmanager:GetSecretValue",
                    "secretsmanager:DescribeSecret",
                ],
                resources=[login_secret_arn],
            )
        )
        bundles = bucket.arn_for_objects(f"{client_prefix}/*")
        self.controller_role.add_to_policy(
            iam.PolicyStatement(sid="PublishSlurmClientBundle", actions=["s3:PutObject"], resources=[bundles])
        )
        acknowledge(
            self.controller_role,
            "AwsSolutions-IAM5",
            "the controller uploads its Slurm client bundle under a name that carries the build's sha256, "
            f"unknown at synth; the wildcard is the lifecycle bucket's {client_prefix}/ prefix only",
            findings=[f"Resource::{bundles}"],
        )

    def grant_controller_interface_group(self, security_group_id: str) -> None:
        """The controller's network interface carries its own security group too (CreateInterfacesInClusterSubnets
        names the cluster's group only)."""
        self.controller_role.add_to_policy(
            iam.PolicyStatement(
                sid="CreateControllerInterfaceWithItsGroup",
                actions=["ec2:CreateNetworkInterface"],
                resources=[
                    cdk.Stack.of(self).format_arn(
                        service="ec2", resource="security-group", resource_name=security_group_id
                    )
                ],
            )
        )

    def grant_nodes_read_secret(self, *, secret_arn: str, kms_key_arn: str | None, sid: str) -> None:
        """Every node role (the worker role has no other secret access) may read exactly this secret, and decrypt
        with its key (`kms_key_arn`, when it is a customer key) only through Secrets Manager: statements
        Read<sid> and Decrypt<sid>."""
        for role in self.node_roles:
            role.add_to_policy(
                iam.PolicyStatement(sid=f"Read{sid}", actions=["secretsmanager:GetSecretValue"], resources=[secret_arn])
            )
            if kms_key_arn:
                role.add_to_policy(
                    iam.PolicyStatement(
                        sid=f"Decrypt{sid}",
                        actions=["kms:Decrypt"],
                        resources=[kms_key_arn],
                        conditions={
                            "StringEquals": {
                                "kms:ViaService": f"secretsmanager.{kms_key_arn.split(':')[3]}.amazonaws.com"
                            }
                        },
                    )
                )

    def grant_eks_node(self, *, vpc_id: str, eks_cluster_arn: str) -> None:
        """What a HyperPod instance needs as an EKS node beyond the managed instance policy: pull images, and let
        the VPC CNI give pods secondary IPs on the node's interfaces (the actions AWS's HyperPod-on-EKS reference
        execution role grants), scoped to this VPC like the role's other ENI actions.
        HyperPod creates the node's access entry itself (DescribeCluster's EksRoleAccessEntries)."""
        role, stack = self.execution_role, cdk.Stack.of(self)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcCniPodAddresses",
                actions=[
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:UnassignPrivateIpAddresses",
                    "ec2:ModifyNetworkInterfaceAttribute",
                ],
                resources=[stack.format_arn(service="ec2", resource="network-interface", resource_name="*")],
                conditions={
                    "ArnEquals": {"ec2:Vpc": stack.format_arn(service="ec2", resource="vpc", resource_name=vpc_id)}
                },
            )
        )
        repositories = stack.format_arn(service="ecr", resource="repository", resource_name="*", account="*")
        role.add_to_policy(iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PullImages",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=[repositories],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"], resources=[eks_cluster_arn]
            )
        )
        # The VPC CNI on the node (it runs with the node's role) finds the instance, its type's interface limits and
        # tags, and attaches interfaces to it: the actions AWS's HyperPod-on-EKS reference role adds for the CNI
        # (config/facts/hyperpod_reference_roles.json, awsome-distributed-ai terraform sagemaker_iam_role
        # eks_cni_policy, same resources). The Describe calls support no resource-level permissions.
        instances, interfaces = (
            stack.format_arn(service="ec2", resource=r, resource_name="*") for r in ("instance", "network-interface")
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcCniDescribeInstances",
                actions=["ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeTags"],
                resources=["*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcCniAttachInterfaces", actions=["ec2:AttachNetworkInterface"], resources=[instances, interfaces]
            )
        )
        # Both of AWS's EKS reference roles (CloudFormation and Terraform) grant it; read-only, this account's alarms.
        alarms = stack.format_arn(
            service="cloudwatch", resource="alarm", resource_name="*", arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="ReadAlarms", actions=["cloudwatch:DescribeAlarms"], resources=[alarms])
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "EKS nodes pull add-on and system images from AWS-owned ECR registries in other accounts (which "
            "vary by region) as well as the user's; pulls are read-only and limited to this region. The VPC "
            "CNI attaches interfaces to instances HyperPod creates after this role (their IDs are unknown at "
            "synth), in this account and region as AWS's reference role scopes it; DescribeAlarms reads this "
            "account's alarms in this region only",
            findings=[
                f"Resource::{repositories}",
                f"Resource::{instances}",
                f"Resource::{interfaces}",
                f"Resource::{alarms}",
            ],
        )

    def controller_shell_command(self, group: str) -> str:
        """Session Manager targets HyperPod nodes as sagemaker-cluster:<cluster-id>_<group>-<instance-id>."""
        lookup = (
            f"aws sagemaker list-cluster-nodes --region {REGION} --cluster-name {self.cluster_name} "
            f"--instance-group-name-contains {group} --query 'ClusterNodeSummaries[0].InstanceId' "
            "--output text"
        )
        return (
            f"INSTANCE_ID=$({lookup}) && aws ssm start-session --region {REGION} "
            f"--target sagemaker-cluster:{self.cluster_id}_{group}-$INSTANCE_ID"
        )

    @staticmethod
    def _network_statement(
        statement: dict,
        *,
        vpc_id: str,
        subnet_ids: Sequence[str],
        security_group_id: str,
        partition: str,
        region: str,
        account: str,
    ) -> iam.PolicyStatement:
        """One statement of NETWORK_STATEMENTS with its placeholders filled in: ${SubnetId} gives one ARN per subnet.
        The stack's partition, region and account come from the caller, read once for all the statements."""
        placeholders = (
            ("${Partition}", partition),
            ("${Region}", region),
            ("${Account}", account),
            ("${SecurityGroupId}", security_group_id),
        )

        def filled(text: str) -> str:
            text = text.replace("${VpcArn}", f"arn:${{Partition}}:ec2:${{Region}}:${{Account}}:vpc/{vpc_id}")
            for name, value in placeholders:
                text = text.replace(name, value)
            return text

        resource = statement["resource"]
        resources = (
            [filled(resource.replace("${SubnetId}", s)) for s in subnet_ids]
            if "${SubnetId}" in resource
            else [filled(resource)]
        )
        conditions = {
            op: {key: filled(value) for key, value in keys.items()}
            for op, keys in statement.get("condition", {}).items()
        }
        return iam.PolicyStatement(
            sid=statement["sid"], actions=statement["actions"], resources=resources, conditions=conditions or None
        )

    @staticmethod
    def _override_vpc_config(
        group: GroupSpec, orchestrator: SlurmOrchestrator | EksOrchestrator, security_group_id: str
    ) -> sagemaker.CfnCluster.VpcConfigProperty | None:
        extra = (
            list(orchestrator.controller_security_group_ids)
            if isinstance(orchestrator, SlurmOrchestrator) and group.role == "controller"
            else []
        )
        subnet = group.subnet_id or (
            orchestrator.controller_subnet_id if extra and isinstance(orchestrator, SlurmOrchestrator) else None
        )
        if extra and subnet is None:
            raise ValueError("controller_security_group_ids needs controller_subnet_id: OverrideVpcConfig names both")
        if subnet is None:
            return None
        return sagemaker.CfnCluster.VpcConfigProperty(security_group_ids=[security_group_id, *extra], subnets=[subnet])

    @staticmethod
    def _orchestration_of(group: GroupSpec, orchestrator: SlurmOrchestrator | EksOrchestrator) -> dict:
        if isinstance(orchestrator, SlurmOrchestrator):
            return {
                "slurm_config": sagemaker.CfnCluster.ClusterSlurmConfigProperty(
                    node_type=SLURM_NODE_TYPES[group.role], partition_names=list(group.partitions) or None
                )
            }
        if not (group.kubernetes_labels or group.kubernetes_taints):
            return {}
        return {
            "kubernetes_config": sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
                labels=group.kubernetes_labels or None,
                taints=[
                    sagemaker.CfnCluster.ClusterKubernetesTaintProperty(key=k, value=v or None, effect=e)
                    for k, v, e in group.kubernetes_taints
                ]
                or None,
            )
        }

    def _karpenter_role(self) -> iam.Role:
        """The role HyperPod assumes to add and remove nodes when its managed Karpenter asks for capacity."""
        clusters = cdk.Stack.of(self).format_arn(service="sagemaker", resource="cluster", resource_name="*")
        # The cluster's ARN holds an ID assigned at creation, after this role: trust is bounded to this account's
        # HyperPod clusters in this region (confused-deputy conditions).
        principal = iam.ServicePrincipal("hyperpod.sagemaker.amazonaws.com").with_conditions(
            {"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}, "ArnLike": {"aws:SourceArn": clusters}}
        )
        role = iam.Role(
            self,
            "AutoscalingRole",
            assumed_by=principal,
            description="HyperPod-managed Karpenter: add and remove cluster nodes in this account",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ScaleClusterNodes",
                actions=["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
                resources=[clusters],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "the cluster's ARN holds an ID SageMaker assigns at creation, and creating the cluster needs this "
            "role first; the wildcard is limited to clusters in this account and region",
            findings=[f"Resource::{clusters}"],
        )
        return role

    def _execution_role(
        self,
        *,
        cluster_name: str,
        vpc_id: str,
        subnet_ids: Sequence[str],
        security_group_id: str,
        bucket: s3.IBucket,
        prefix: str,
        role_name: str | None,
        id_: str = "ExecutionRole",
        description: str = "HyperPod cluster instances: CloudWatch, ENIs in the cluster subnets, lifecycle scripts",
    ) -> iam.Role:
        stack = cdk.Stack.of(self)

        def ec2_arn(resource: str) -> str:
            return stack.format_arn(service="ec2", resource=resource)

        role = iam.Role(
            self,
            id_,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            role_name=role_name,
            description=description,
        )
        # What AmazonSageMakerClusterInstanceRolePolicy grants, narrowed, without its read on every sagemaker-*
        # bucket in the account (the lifecycle prefix is read below), and what AWS's reference execution roles add.
        # Both are committed facts (config/facts/cluster_instance_role_policy.json, hyperpod_reference_roles.json,
        # tools/instance_role_facts.py); tests/test_instance_role_policy.py compares these roles with them action by
        # action, and NOT_GRANTED says why an action is left out.
        # HyperPod writes node logs to /aws/sagemaker/Clusters/<cluster-name>/<cluster-id>; the ID is assigned at
        # creation, so the name is the narrowest prefix (the trailing "/" keeps out "<cluster-name>-other").
        log_group = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"/aws/sagemaker/Clusters/{cluster_name}/*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="CreateClusterLogGroup", actions=["logs:CreateLogGroup"], resources=[log_group])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PublishClusterLogStreams",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[f"{log_group}:log-stream:*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PublishClusterMetrics",  # PutMetricData has no resource type; the namespace is its only scope
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="SessionManagerChannels",  # ssmmessages actions support no resource-level permissions
                actions=[
                    "ssmmessages:CreateControlChannel",
                    "ssmmessages:CreateDataChannel",
                    "ssmmessages:OpenControlChannel",
                    "ssmmessages:OpenDataChannel",
                ],
                resources=["*"],
            )
        )
        partition, region, account = stack.partition, stack.region, stack.account
        for statement in NETWORK_STATEMENTS:
            role.add_to_policy(
                self._network_statement(
                    statement,
                    vpc_id=vpc_id,
                    subnet_ids=subnet_ids,
                    security_group_id=security_group_id,
                    partition=partition,
                    region=region,
                    account=account,
                )
            )
        lifecycle_objects = bucket.arn_for_objects(f"{prefix}/*")
        role.add_to_policy(
            iam.PolicyStatement(sid="ReadOwnLifecycleScripts", actions=["s3:GetObject"], resources=[lifecycle_objects])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListOwnLifecycleScripts",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}},
            )
        )

        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "ec2:Describe*, fsx:DescribeFileSystems, cloudwatch:PutMetricData (bounded by its namespace "
            "condition) and the Session Manager ssmmessages channels support no resource-level permissions; "
            "network interface IDs do "
            "not exist until HyperPod creates them, so ENI actions are bounded by the cluster VPC and subnets "
            "instead; ec2:DetachNetworkInterface also authorizes the instance, which is HyperPod's (in the "
            "service's account, with no ec2:Vpc key), while its interface half stays in the cluster VPC; log "
            "groups and streams are this cluster's (its ID is assigned at creation); the object "
            "wildcard is this cluster's own lifecycle-script prefix",
            findings=[
                "Resource::*",
                f"Resource::{ec2_arn('network-interface/*')}",
                f"Resource::arn:{partition}:ec2:{region}:*:instance/*",
                f"Resource::{lifecycle_objects}",
                f"Resource::{log_group}",
                f"Resource::{log_group}:log-stream:*",
            ],
        )
        return role
