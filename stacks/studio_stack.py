"""Studio: a VpcOnly domain whose JupyterLab and Code Editor spaces are the cluster's login nodes, with the
cluster's FSx mounted as one shared partition or one private partition per user (`SharedFSx`)."""
from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn
from constructs.fsx_partitions import FsxPartitions
from constructs.lustre_ports import LUSTRE_PORTS
from constructs.lifecycle_scripts import SLURM_CLIENT_PREFIX, lifecycle_bucket_name
from constructs.mlflow_job_access import tracking_server_name
from constructs.nested_template import NestedTemplate, top_level_logical_id
from constructs.platform_role_names import (PARTITION_HANDLERS, partition_handler_role_name,
                                           slurm_jwt_key_secret_name, slurm_token_issuer_role_name,
                                           slurm_token_secret_prefix, studio_execution_role_name,
                                           studio_user_role_path, upload_role_name)
from constructs.slurm_token_issuer import SlurmTokenIssuer
from constructs.nag_acknowledgments import acknowledge
from constructs.secure_bucket import access_log_bucket, secure_bucket
from constructs.studio_lifecycle_configs import EKS_ENTRY_POINT, SLURM_ENTRY_POINT, StudioLifecycleConfigs
from constructs.studio_tools import StudioToolArtifacts

from platform_config import PlatformConfig
from platform_config.budgets import department_tags
from platform_config.facts import RESERVED_USER_NAMES, RESERVED_USER_PREFIXES
from platform_config.users import User
from stacks.network_stack import NetworkRefs
from stacks.storage_stack import StorageStack

USERS_PER_NESTED_STACK = 150  # two resources each: a profile and its partition, well under 500 per template
# Per-user mode on Slurm adds a token secret, its resource policy and an execution role per user: five resources.
USERS_PER_NESTED_STACK_WITH_TOKENS = 90
SLURM_PORTS = ((6817, 6817), (6819, 6819))  # slurmctld, slurmdbd (sacct)
EKS_API_PORTS = ((443, 443),)
SHARED_PARTITION = "shared"


# Every resource of the platform carries this tag (stacks/platform.py); Studio finds its HyperPod cluster by it.
PLATFORM_TAG = "hyperpod-platform"


class StudioStack(cdk.Stack):
    """Needs the network, storage and (Slurm) the login secret, not the cluster: it is created while the HyperPod
    cluster is. What it needs from the cluster is known from the config (names, the EKS cluster's ARN) or found
    by tag (the HyperPod cluster's ARN holds a generated id); EKS access entries for its roles are the EKS access
    stack's."""

    def __init__(self, scope: Construct, id_: str, *, config: PlatformConfig, network: NetworkRefs,
                 storage: StorageStack, slurm_login_secret: secretsmanager.ISecret | None = None,
                 tools: StudioToolArtifacts | None = None, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        studio = config.studio
        self.platform_name = config.name
        self.slurm_login_secret = slurm_login_secret
        # Attach mode: the cluster is named in the config, not found by this platform's tag.
        existing = config.cluster.existing
        self.attached_cluster_arn = existing.arn if existing else None
        self.eks_cluster_name = (existing.eks_cluster_name if existing else None) or config.name
        self._mlflow_enabled = studio.mlflow.enabled
        self.shared_fsx = cdk.CfnParameter(
            self, "SharedFSx", type="String", allowed_values=["True", "False"],
            default="True" if config.shared_fsx else "False",
            description="True: every user mounts one shared FSx partition; False: each user gets a private one")
        self.is_shared = cdk.CfnCondition(self, "IsSharedFSx",
                                          expression=cdk.Fn.condition_equals(self.shared_fsx.value_as_string, "True"))
        self.key = kms.Key(self, "StudioKey", enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.RETAIN,
                           description="Studio domain home volumes and MLflow artifacts")

        on_eks = config.orchestrator == "eks"
        auth = None  # how Studio users authenticate to Slurm; the cluster stack decides it from the same config
        if not on_eks:
            from stacks.slurm_cluster_stack import slurm_auth  # no reference to the cluster stack: a pure function
            auth = slurm_auth(config)
        self.security_group = self._studio_security_group(network, on_eks=on_eks,
                                                          lustre_access_group=storage.lustre_access_group)
        # Named: the Slurm login secret's key and resource policies name it before it exists.
        self.execution_role = self._execution_role(on_eks=on_eks, role_name=studio_execution_role_name(config.name))
        # On EKS each member of a task-governance team runs as a role of their own, whose access entry gives them their
        # own Kubernetes username (stacks/eks_access_stack.py): admission holds their jobs to their own uid.
        self.member_roles = {m: (t.name, self._execution_role(on_eks=on_eks, id_=f"MemberRole-{m}",
                                                              description=f"Studio apps of {m}, team {t.name}"))
                             for t in config.eks.task_governance.teams for m in t.members} if on_eks else {}
        self.app_roles = [self.execution_role, *(role for _, role in self.member_roles.values())]
        tracking_server_arn = self._mlflow(config) if studio.mlflow.enabled else None

        repo = config.storage.lustre.data_repository
        # Partitions through the file system's S3 link (a marker FSx imports), or, on a file system without one,
        # created on the file system by `make attach` (cli/attach.py): the profiles then mount the known path.
        self.partitions: FsxPartitions | None = None
        shared_partition = None
        if storage.data_bucket_name is not None:
            self.partitions = FsxPartitions(
                self, "Partitions", file_system_id=storage.lustre.file_system_id,
                file_system_path=repo.file_system_path, data_bucket_name=storage.data_bucket_name,
                s3_prefix=repo.s3_prefix, partition_root=studio.partition_root,
                role_names={h: partition_handler_role_name(config.name, h) for h in PARTITION_HANDLERS})
            shared_partition = self.partitions.partition(self, "SharedPartition", relative_name=SHARED_PARTITION,
                                                         uid="0", gid=str(studio.shared_gid), mode="2775",
                                                         condition=self.is_shared)
        self.partition_parent = f"{repo.file_system_path.rstrip('/')}/{studio.partition_root}"
        shared_path = (FsxPartitions.path_attribute(shared_partition) if shared_partition is not None
                       else f"{self.partition_parent}/{SHARED_PARTITION}")

        lifecycle_bucket = s3.Bucket.from_bucket_name(self, "LifecycleBucket", lifecycle_bucket_name(config.name))
        # One path everywhere (lifecycle/studio/fsx_paths.sh): the space links the cluster's path of its partition.
        fsx_paths = {"FSX_FILE_SYSTEM_ID": storage.lustre.file_system_id,
                     "FSX_CLUSTER_MOUNT_PATH": config.storage.lustre.mount_path,
                     "FSX_PARTITION_PARENT": self.partition_parent,
                     "FSX_SHARED_MODE": self.shared_fsx.value_as_string}
        # hyp and jq (both orchestrators) and eksctl (EKS, when switched on), checked by build_platform.
        tools, eksctl = (tools.bundle, tools.eksctl) if tools else (None, None)
        if on_eks:
            from constructs.studio_eks_tools import studio_eks_tools  # EKS only: kubectl/helm from the layer package
            from manifests.kubernetes_objects import studio_kube_settings
            eks_tools = studio_eks_tools(config.eks.kubernetes_version)
            eks_settings = studio_kube_settings({t.name: t.members for t in config.eks.task_governance.teams},
                                                mlflow=studio.mlflow.enabled)
            lifecycle = StudioLifecycleConfigs(
                self, "LifecycleConfigs", name=config.name, bucket=lifecycle_bucket, entry_point=EKS_ENTRY_POINT,
                upload_role_name=upload_role_name(config.name, "studio"),
                environment={"EKS_CLUSTER_NAME": self.eks_cluster_name, **eks_tools.environment, **eks_settings, **fsx_paths},
                extra_dirs=[eks_tools.directory], tools=tools, eksctl=eksctl)
        else:
            lifecycle = StudioLifecycleConfigs(
                self, "LifecycleConfigs", name=config.name, bucket=lifecycle_bucket, entry_point=SLURM_ENTRY_POINT,
                upload_role_name=upload_role_name(config.name, "studio"), tools=tools,
                environment={"SLURM_LOGIN_SECRET_ARN": slurm_login_secret.secret_arn,
                             **({"SLURM_TOKEN_SECRET_PREFIX": slurm_token_secret_prefix(config.name)}
                                if auth == "jwt" else {}), **fsx_paths})
        for role in self.app_roles:
            role.add_to_policy(iam.PolicyStatement(
                sid="ReadStudioScripts", actions=["s3:GetObject"],
                resources=[lifecycle_bucket.arn_for_objects(f"{lifecycle.scripts.prefix}/*")]))
            role.add_to_policy(iam.PolicyStatement(
                sid="ListStudioScripts", actions=["s3:ListBucket"], resources=[lifecycle_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{lifecycle.scripts.prefix}/*"]}}))
            acknowledge(role, "AwsSolutions-IAM5",
                        "Studio apps copy this platform's own Studio scripts from their prefix of the lifecycle bucket",
                        findings=[f"Resource::{lifecycle_bucket.arn_for_objects(f'{lifecycle.scripts.prefix}/*')}"])
            if lifecycle.tools:
                tools_objects = lifecycle_bucket.arn_for_objects(f"{lifecycle.tools.prefix}/*")
                role.add_to_policy(iam.PolicyStatement(
                    sid="ReadStudioTools", actions=["s3:GetObject"], resources=[tools_objects]))
                role.add_to_policy(iam.PolicyStatement(
                    sid="ListStudioTools", actions=["s3:ListBucket"], resources=[lifecycle_bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{lifecycle.tools.prefix}/*"]}}))
                acknowledge(role, "AwsSolutions-IAM5",
                            "Studio apps copy the platform's tools bundle (hyp wheels, jq, eksctl; each file "
                            "sha256-checked in the space) from its prefix of the lifecycle bucket",
                            findings=[f"Resource::{tools_objects}"])
        if not on_eks:
            # The controller's own Slurm client (lifecycle/hyperpod/build_slurm_client_bundle.sh), whose sha256 the
            # login secret carries: its name holds that sha256, unknown at synth, so the prefix is the narrowest ARN.
            bundles = lifecycle_bucket.arn_for_objects(f"{SLURM_CLIENT_PREFIX}/*")
            for role in self.app_roles:
                role.add_to_policy(iam.PolicyStatement(
                    sid="ReadSlurmClientBundle", actions=["s3:GetObject"], resources=[bundles]))
                acknowledge(role, "AwsSolutions-IAM5",
                            "Studio login nodes download the Slurm controller's client bundle, named by its sha256 "
                            f"(unknown at synth), from the lifecycle bucket's {SLURM_CLIENT_PREFIX}/ prefix only",
                            findings=[f"Resource::{bundles}"])
        idle = sagemaker.CfnDomain.AppLifecycleManagementProperty(idle_settings=sagemaker.CfnDomain.IdleSettingsProperty(
            lifecycle_management="ENABLED", idle_timeout_in_minutes=studio.idle_timeout_minutes,
            min_idle_timeout_in_minutes=60, max_idle_timeout_in_minutes=max(studio.idle_timeout_minutes, 60) * 4))
        self.domain = sagemaker.CfnDomain(
            self, "Domain", domain_name=f"{config.name}-studio", auth_mode="IAM",
            app_network_access_type="VpcOnly", vpc_id=network.vpc_id,
            # Its own subnet (network.studio_subnet_cidr): the cluster's subnets keep root on FSx, Studio's do not.
            subnet_ids=[network.studio_subnet_id], kms_key_id=self.key.key_arn,
            default_user_settings=sagemaker.CfnDomain.UserSettingsProperty(
                execution_role=self.execution_role.role_arn, security_groups=[self.security_group.attr_group_id],
                studio_web_portal="ENABLED",
                jupyter_lab_app_settings=sagemaker.CfnDomain.JupyterLabAppSettingsProperty(
                    default_resource_spec=sagemaker.CfnDomain.ResourceSpecProperty(
                        lifecycle_config_arn=lifecycle.jupyter_lab_arn),
                    lifecycle_config_arns=[lifecycle.jupyter_lab_arn], app_lifecycle_management=idle),
                code_editor_app_settings=sagemaker.CfnDomain.CodeEditorAppSettingsProperty(
                    default_resource_spec=sagemaker.CfnDomain.ResourceSpecProperty(
                        lifecycle_config_arn=lifecycle.code_editor_arn),
                    lifecycle_config_arns=[lifecycle.code_editor_arn],
                    app_lifecycle_management=sagemaker.CfnDomain.AppLifecycleManagementProperty(
                        idle_settings=sagemaker.CfnDomain.IdleSettingsProperty(
                            lifecycle_management="ENABLED", idle_timeout_in_minutes=studio.idle_timeout_minutes))),
                custom_file_system_configs=cdk.Fn.condition_if(
                    self.is_shared.logical_id,
                    # The attribute, not the literal path: the domain waits until the directory exists.
                    [{"FSxLustreFileSystemConfig": {"FileSystemId": storage.lustre.file_system_id,
                                                    "FileSystemPath": shared_path}}],
                    cdk.Aws.NO_VALUE)),
            # Shared spaces: the JupyterLab lifecycle config (DefaultSpaceSettings has no Code Editor settings) and, in
            # shared mode with studio.shared_space_user, that user's uid with the shared gid and the shared partition.
            default_space_settings=sagemaker.CfnDomain.DefaultSpaceSettingsProperty(
                execution_role=self.execution_role.role_arn, security_groups=[self.security_group.attr_group_id],
                jupyter_lab_app_settings=sagemaker.CfnDomain.JupyterLabAppSettingsProperty(
                    default_resource_spec=sagemaker.CfnDomain.ResourceSpecProperty(
                        lifecycle_config_arn=lifecycle.jupyter_lab_arn),
                    lifecycle_config_arns=[lifecycle.jupyter_lab_arn]),
                **self._shared_space_storage(config, storage, shared_path)),
            # With budgets, profiles carry their department's tag; propagation passes it (and the platform's) on to
            # the spaces and apps they create (the resource schema: "tags added to Domain, User Profile and Space
            # entity is propagated to all SageMaker resources").
            tag_propagation="ENABLED" if config.cluster.budget is not None else None)
        # Deleting the domain keeps its home EFS volume: DeleteDomain's RetentionPolicy defaults to Retain, and
        # CloudFormation exposes no way to ask otherwise.
        domain_arn_prefix = self.format_arn(service="sagemaker", resource="user-profile",
                                            resource_name=self.domain.attr_domain_id)
        if self.partitions is not None:  # without an S3 link, `make attach --profiles` makes later profiles' partitions
            self.is_per_user = cdk.CfnCondition(self, "IsPerUserFSx", expression=cdk.Fn.condition_not(self.is_shared))
            self.partitions.watch_profiles(domain_id=self.domain.attr_domain_id, domain_arn_prefix=domain_arn_prefix,
                                           condition=self.is_per_user,
                                           reserved_uids={u.uid: u.name for u in config.users})

        # Per-user mode on Slurm: each profile runs as its own role and gets its own Slurm token; no munge key.
        self.token_issuer = self.user_policy = None
        if auth == "jwt":
            self.token_issuer, self.user_policy = self._per_user_identities(config)
        per_stack = USERS_PER_NESTED_STACK_WITH_TOKENS if self.token_issuer else USERS_PER_NESTED_STACK
        self.user_stacks = [
            StudioUsers(self, f"Users{index + 1}", config=config, users=config.users[start:start + per_stack],
                        team_roles={m: role.role_arn for m, (_, role) in self.member_roles.items()},
                        domain_id=self.domain.attr_domain_id, partitions=self.partitions,
                        partition_parent=self.partition_parent,
                        file_system_id=storage.lustre.file_system_id, shared_fsx=self.shared_fsx.value_as_string,
                        token_issuer=self.token_issuer, user_policy=self.user_policy)
            for index, start in enumerate(range(0, len(config.users), per_stack))]

        cdk.CfnOutput(self, "DomainId", value=self.domain.attr_domain_id)
        cdk.CfnOutput(self, "DomainUrl", value=self.domain.attr_url)
        cdk.CfnOutput(self, "StudioSecurityGroupId", value=self.security_group.attr_group_id)
        cdk.CfnOutput(self, "SharedFSxMode", value=self.shared_fsx.value_as_string)
        if tracking_server_arn:
            cdk.CfnOutput(self, "MlflowTrackingServerArn", value=tracking_server_arn)

    def _shared_space_storage(self, config: PlatformConfig, storage: StorageStack, shared_path: object) -> dict:
        user = next((u for u in config.users if u.name == config.studio.shared_space_user), None)
        if user is None:
            return {}
        shared = self.is_shared.logical_id
        return {"custom_posix_user_config": cdk.Fn.condition_if(
                    shared, {"Uid": user.uid, "Gid": config.studio.shared_gid}, cdk.Aws.NO_VALUE),
                "custom_file_system_configs": cdk.Fn.condition_if(
                    shared, [{"FSxLustreFileSystemConfig": {
                        "FileSystemId": storage.lustre.file_system_id,
                        "FileSystemPath": shared_path}}], cdk.Aws.NO_VALUE)}

    def _per_user_identities(self, config: PlatformConfig) -> tuple[SlurmTokenIssuer, iam.ManagedPolicy]:
        """The token issuer, and the managed policy every per-user execution role gets: exactly the shared execution
        role's statements (cluster, login secret, scripts, logs, MLflow), the same document."""
        issuer = SlurmTokenIssuer(self, "SlurmTokenIssuer", role_name=slurm_token_issuer_role_name(config.name),
                                  key_secret_name=slurm_jwt_key_secret_name(config.name),
                                  secret_prefix=slurm_token_secret_prefix(config.name),
                                  reserved_users=list(RESERVED_USER_NAMES),
                                  reserved_prefixes=list(RESERVED_USER_PREFIXES))
        shared = self.execution_role.node.find_child("DefaultPolicy")
        policy = iam.ManagedPolicy(self, "StudioUserPolicy", document=shared.document,
                                   description="Studio apps in per-user mode: what the shared execution role may do")
        findings = [f for f in self._execution_role_findings() if f]
        acknowledge(policy, "AwsSolutions-IAM5",
                    "the shared Studio app permissions, for each user's own role: Studio log streams under "
                    "/aws/sagemaker/studio, this platform's Studio scripts and tools bundle, read-only on the HyperPod "
                    "clusters tagged "
                    "as this platform's, this stack's MLflow server, and AWS's policy for a user's own Studio spaces "
                    "(List/Describe on '*', spaces and apps of this domain and the caller's own profile)",
                    findings=findings)
        return issuer, policy

    def _execution_role_findings(self) -> list[str]:
        """The wildcard findings cdk-nag reports on the shared execution role's statements (acknowledged there)."""
        lifecycle = self.node.find_child("LifecycleConfigs")
        lifecycle_prefix = lifecycle.node.find_child("Scripts").prefix
        tools = lifecycle.node.try_find_child("Tools")
        bucket = s3.Bucket.from_bucket_name(self, "LifecycleBucketRef", lifecycle_bucket_name(self.platform_name))
        studio_logs = self.format_arn(service="logs", resource="log-group", resource_name="/aws/sagemaker/studio:*",
                                      arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        mlflow = ["Action::sagemaker-mlflow:*"] if self._mlflow_enabled else []
        clusters = ([] if self.attached_cluster_arn else  # tag-conditioned
                    [f"Resource::{self.format_arn(service='sagemaker', resource='cluster', resource_name='*')}"])
        bundles = [f"Resource::{bucket.arn_for_objects(f'{SLURM_CLIENT_PREFIX}/*')}"] if self.slurm_login_secret else []
        tool_objects = [f"Resource::{bucket.arn_for_objects(f'{tools.prefix}/*')}"] if tools else []
        return [f"Resource::{studio_logs}", f"Resource::{bucket.arn_for_objects(f'{lifecycle_prefix}/*')}",
                *tool_objects, *clusters, *mlflow, *bundles, "Resource::*",
                *(f"Resource::{r}" for r in own_spaces_wildcards(self))]

    def _studio_security_group(self, network: NetworkRefs, *, on_eks: bool,
                               lustre_access_group: ec2.CfnSecurityGroup | None) -> ec2.CfnSecurityGroup:
        """Studio apps: NFS and app traffic within the group (required for VpcOnly), HTTPS out, and the cluster's
        Lustre and Slurm (or EKS API) ports, opened on both sides declaratively."""
        group = ec2.CfnSecurityGroup(self, "StudioAppsGroup", vpc_id=network.vpc_id,
                                     group_description="SageMaker Studio apps: domain EFS, Lustre, Slurm, HTTPS out")
        group_id = group.attr_group_id
        for name, (low, high) in {"Nfs": (2049, 2049), "Apps": (8192, 65535)}.items():
            ec2.CfnSecurityGroupIngress(self, f"StudioSelf{name}In", group_id=group_id, ip_protocol="tcp",
                                        from_port=low, to_port=high, source_security_group_id=group_id,
                                        description=f"Studio {name.lower()} traffic within the group")
            ec2.CfnSecurityGroupEgress(self, f"StudioSelf{name}Out", group_id=group_id, ip_protocol="tcp",
                                       from_port=low, to_port=high, destination_security_group_id=group_id,
                                       description=f"Studio {name.lower()} traffic within the group")
        ec2.CfnSecurityGroupEgress(self, "StudioHttpsOut", group_id=group_id, ip_protocol="tcp", from_port=443,
                                   to_port=443, cidr_ip="0.0.0.0/0", description="HTTPS to AWS APIs and package mirrors")
        # Lustre lives in the cluster's group when the platform owns the file system, else in the access group
        # the storage stack attached to the file system you brought.
        lustre_group = lustre_access_group.attr_group_id if lustre_access_group else network.security_group_id
        scheduler = ("EksApi", EKS_API_PORTS) if on_eks else ("Slurm", SLURM_PORTS)
        for label, ports, target in (("Lustre", LUSTRE_PORTS, lustre_group),
                                     (*scheduler, network.security_group_id)):
            for low, high in ports:
                ec2.CfnSecurityGroupEgress(self, f"StudioTo{label}{low}", group_id=group_id, ip_protocol="tcp",
                                           from_port=low, to_port=high, destination_security_group_id=target,
                                           description=f"{label} on the cluster from Studio apps")
                ec2.CfnSecurityGroupIngress(self, f"ClusterFrom{label}{low}", group_id=target,
                                            ip_protocol="tcp", from_port=low, to_port=high,
                                            source_security_group_id=group_id,
                                            description=f"{label} from Studio apps")
        # Lustre servers also open connections to their clients: FSx asks that clients allow inbound from the file
        # system's group on 988 and 1018-1023, and that the file system's group may reach them
        # (https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html). The same rules
        # for the platform's file system (cluster group) and one you bring (access group).
        for low, high in LUSTRE_PORTS:
            ec2.CfnSecurityGroupIngress(self, f"StudioFromLustre{low}", group_id=group_id, ip_protocol="tcp",
                                        from_port=low, to_port=high, source_security_group_id=lustre_group,
                                        description="Lustre from the file system's servers to Studio apps")
            ec2.CfnSecurityGroupEgress(self, f"LustreToStudio{low}", group_id=lustre_group, ip_protocol="tcp",
                                       from_port=low, to_port=high, destination_security_group_id=group_id,
                                       description="Lustre servers to Studio apps")
        return group

    def _execution_role(self, *, on_eks: bool, id_: str = "ExecutionRole", description: str = "Studio apps",
                        role_name: str | None = None) -> iam.Role:
        role = iam.Role(self, id_, assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"), role_name=role_name,
                        description=f"{description}: read the cluster and reach its scheduler (Slurm or EKS), use MLflow")
        # A HyperPod cluster's ARN ends in an id SageMaker generates, so it is not known before the cluster exists
        # (and this stack does not wait for it): the statement names this platform's clusters by their tag. Both
        # actions accept the cluster resource type with aws:ResourceTag
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html).
        # What AWS's own Studio + HyperPod template grants for Studio's HyperPod pages (config/facts/
        # studio_access_policy.json), scoped to this platform's clusters.
        if self.attached_cluster_arn:  # attach mode: the one existing cluster, by the ARN the config names
            role.add_to_policy(iam.PolicyStatement(
                sid="DescribeCluster", actions=list(HYPERPOD_PAGE_ACTIONS), resources=[self.attached_cluster_arn]))
        else:
            clusters = self.format_arn(service="sagemaker", resource="cluster", resource_name="*")
            role.add_to_policy(iam.PolicyStatement(
                sid="DescribeCluster", actions=list(HYPERPOD_PAGE_ACTIONS), resources=[clusters],
                conditions={"StringEquals": {f"aws:ResourceTag/{PLATFORM_TAG}": self.platform_name}}))
            acknowledge(role, "AwsSolutions-IAM5",
                        f"read-only on the HyperPod clusters tagged {PLATFORM_TAG}={self.platform_name} (this "
                        "platform's); the cluster's ARN holds an id generated at creation, after this stack",
                        findings=[f"Resource::{clusters}"])
        # The HyperPod page lists clusters first; ListClusters authorizes no resource type (config/facts/iam_actions.json).
        role.add_to_policy(iam.PolicyStatement(sid="ListClusters", actions=["sagemaker:ListClusters"], resources=["*"]))
        for statement in own_spaces_statements(self):
            role.add_to_policy(statement)
        acknowledge(role, "AwsSolutions-IAM5",
                    "sagemaker:ListClusters and the List/Describe actions of AWS's policy for a user's own spaces "
                    "authorize no resource type or any of the domain's; creating, updating and deleting spaces and "
                    "apps is limited to this domain and to the caller's own profile ('Give your users access to "
                    "spaces', config/facts/studio_access_policy.json); tagging only what Studio creates",
                    findings=["Resource::*", *(f"Resource::{r}" for r in own_spaces_wildcards(self))])
        if on_eks:
            # eks:AccessKubernetesApi: AWS services (Studio's HyperPod task pages) read the cluster's Kubernetes objects
            # as this role ("Grant AWS services write access to Kubernetes APIs", EKS user guide,
            # https://docs.aws.amazon.com/eks/latest/userguide/mutate-workloads.html: reads need it, writes also
            # eks:MutateViaKubernetesApi, not granted). What they see is what the role's access entry allows.
            role.add_to_policy(iam.PolicyStatement(
                sid="DescribeEksCluster", actions=["eks:DescribeCluster", "eks:AccessKubernetesApi"],
                resources=[self.format_arn(service="eks", resource="cluster", resource_name=self.eks_cluster_name)]))
        else:
            role.add_to_policy(iam.PolicyStatement(
                sid="ReadSlurmLoginSecret", actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[self.slurm_login_secret.secret_arn]))
        studio_logs = self.format_arn(service="logs", resource="log-group", resource_name="/aws/sagemaker/studio:*",
                                      arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
        role.add_to_policy(iam.PolicyStatement(
            sid="LifecycleConfigLogs", actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[studio_logs]))
        acknowledge(role, "AwsSolutions-IAM5",
                    "Studio writes app and lifecycle-config logs to streams it names per app under the "
                    "/aws/sagemaker/studio log group", findings=[f"Resource::{studio_logs}"])
        return role

    def _mlflow(self, config: PlatformConfig) -> str:
        logs_bucket = access_log_bucket(self, "MlflowAccessLogs")
        artifacts = secure_bucket(self, "MlflowArtifacts", access_logs=logs_bucket, log_prefix="mlflow/",
                                  encryption_key=self.key)
        server_role = iam.Role(self, "MlflowServerRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                               description="MLflow tracking server: its artifact bucket only")
        artifacts.grant_read_write(server_role)
        server = sagemaker.CfnMlflowTrackingServer(
            self, "Mlflow", tracking_server_name=tracking_server_name(config.name), role_arn=server_role.role_arn,
            artifact_store_uri=f"s3://{artifacts.bucket_name}/artifacts", tracking_server_size=config.studio.mlflow.size,
            mlflow_version=config.studio.mlflow.mlflow_version, automatic_model_registration=False)
        # The server checks its bucket access at creation: wait for the role's policy, not just the role.
        server.node.add_dependency(server_role.node.find_child("DefaultPolicy"))
        for role in self.app_roles:
            role.add_to_policy(iam.PolicyStatement(
                sid="UseMlflow", actions=["sagemaker-mlflow:*", "sagemaker:DescribeMlflowTrackingServer",
                                          "sagemaker:CreatePresignedMlflowTrackingServerUrl"],
                resources=[server.attr_tracking_server_arn]))
            acknowledge(role, "AwsSolutions-IAM5",
                        "the MLflow data-plane actions (experiments, runs, metrics, models) are granted on this "
                        "stack's one tracking server only", findings=["Action::sagemaker-mlflow:*"])
        acknowledge(server_role, "AwsSolutions-IAM5",
                    "the MLflow server reads and writes run artifacts anywhere in its own artifact bucket",
                    findings=["Action::s3:GetObject*", "Action::s3:GetBucket*", "Action::s3:List*",
                              "Action::s3:DeleteObject*", "Action::s3:Abort*", "Action::kms:ReEncrypt*",
                              "Action::kms:GenerateDataKey*", f"Resource::{artifacts.arn_for_objects('*')}"])
        return server.attr_tracking_server_arn


class StudioUsers(cdk.NestedStack):
    """Up to USERS_PER_NESTED_STACK user profiles, each with its POSIX identity and, in per-user mode, its partition."""

    def __init__(self, scope: Construct, id_: str, *, config: PlatformConfig, users: list[User], domain_id: str,
                 partitions: FsxPartitions | None, partition_parent: str, file_system_id: str, shared_fsx: str,
                 team_roles: Mapping[str, str] = {},
                 token_issuer: SlurmTokenIssuer | None = None, user_policy: iam.ManagedPolicy | None = None) -> None:
        super().__init__(scope, id_, parameters={"SharedFSx": shared_fsx},
                         description=f"Studio user profiles {users[0].name} .. {users[-1].name}")
        # One template for all of them, included in one call (constructs/nested_template.py): through jsii, a thousand
        # users' resources cost seconds of kernel round trips. Same logical ids and properties as when they were
        # CfnResources; shared values become parameters on first use, in the order CDK met them then.
        template = NestedTemplate(self)
        resources: dict[str, dict] = {}
        departments = department_tags(config)
        user_roles: Mapping[str, object] = {}
        if token_issuer is not None:
            token_resources, user_roles = token_issuer.users(
                self, template, users=[u.name for u in users], role_path=studio_user_role_path(config.name),
                policy_arn=user_policy.managed_policy_arn, deploy_role_arn=cloudformation_execution_role_arn(self))
            resources.update(token_resources)
        partition_ids = []
        for user in users:
            partition_id = top_level_logical_id(f"Partition-{user.name}")
            # Without an S3 link there is no partition resource: `make attach` creates the directory on the file
            # system and the profile mounts its known path.
            partition_path: object = f"{partition_parent}/{user.name}"
            if partitions is not None:
                resources[partition_id] = partitions.partition_template(
                    template, relative_name=user.name, uid=str(user.uid), gid=str(user.group_id), mode="0700",
                    condition="IsPerUserFSx")
                partition_ids.append(partition_id)
                partition_path = {"Fn::GetAtt": [partition_id, "Path"]}
            profile = {"Type": "AWS::SageMaker::UserProfile", "Properties": {
                "DomainId": template.value(domain_id), "UserProfileName": user.name,
                "UserSettings": {
                    "CustomPosixUserConfig": {
                        "Uid": user.uid, "Gid": {"Fn::If": ["IsSharedFSx", config.studio.shared_gid, user.group_id]}},
                    # The partition's attribute: the profile (and its mount) exists only once the directory does.
                    "CustomFileSystemConfigs": {"Fn::If": ["IsPerUserFSx", [{"FSxLustreFileSystemConfig": {
                        "FileSystemId": template.value(file_system_id),
                        "FileSystemPath": partition_path}}], {"Ref": "AWS::NoValue"}]},
                    **({"ExecutionRole": template.value(team_roles[user.name])} if user.name in team_roles else {}),
                    **({"ExecutionRole": user_roles[user.name]} if user.name in user_roles else {}),
                },
                # The department's cost allocation tag (cluster.budget.department_tag_key): the domain propagates it
                # to the user's spaces and apps, which the department's budget counts.
                **({"Tags": [{"Key": departments[user.name][0], "Value": departments[user.name][1]}]}
                   if user.name in departments else {})}}
            resources[top_level_logical_id(f"Profile-{user.name}")] = profile
        # Not 150 imports at once: a few lanes, each partition after the one MAX_IMPORTS_IN_FLIGHT before it.
        FsxPartitions.chain_template(resources, partition_ids)
        template.include({
            "Parameters": {"SharedFSx": {"Type": "String", "AllowedValues": ["True", "False"]}},
            "Conditions": {"IsSharedFSx": {"Fn::Equals": [{"Ref": "SharedFSx"}, "True"]},
                           "IsPerUserFSx": {"Fn::Not": [{"Condition": "IsSharedFSx"}]}},
            "Resources": resources}, dehydrated=[i for i in resources if i not in partition_ids])


# Studio's HyperPod pages: what AWS's Studio + HyperPod template grants its Studio role (config/facts/
# studio_access_policy.json, "hyperpod_pages"), on this platform's clusters only.
HYPERPOD_PAGE_ACTIONS = ("sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode", "sagemaker:ListClusterNodes")
# AWS's policy variables for the caller's own domain and profile, resolved by SageMaker on each request.
DOMAIN_ID, PROFILE_NAME = "${sagemaker:DomainId}", "${sagemaker:UserProfileName}"


def own_spaces_statements(scope: Construct) -> list[iam.PolicyStatement]:
    """AWS's policy for a user's own spaces ("Give your users access to spaces", config/facts/studio_access_policy.json)
    with this stack's region and account. One change: apps of spaces without an owner (shared spaces) in this domain
    only (the page: in any domain of the account)."""
    stack = cdk.Stack.of(scope)

    def arn(resource: str, name: str) -> str:
        return stack.format_arn(service="sagemaker", resource=resource, resource_name=name)

    own_profile = arn("user-profile", f"{DOMAIN_ID}/{PROFILE_NAME}")
    spaces = ["sagemaker:CreateSpace", "sagemaker:UpdateSpace", "sagemaker:DeleteSpace"]
    apps = ["sagemaker:CreateApp", "sagemaker:DeleteApp"]
    return [
        iam.PolicyStatement(sid="SharedSpaceApps", actions=apps, resources=[arn("app", f"{DOMAIN_ID}/*")],
                            conditions={"Null": {"sagemaker:OwnerUserProfileArn": "true"}}),
        iam.PolicyStatement(sid="SMStudioCreatePresignedDomainUrlForUserProfile",
                            actions=["sagemaker:CreatePresignedDomainUrl"], resources=[own_profile]),
        iam.PolicyStatement(sid="SMStudioAppPermissionsListAndDescribe", actions=[
            "sagemaker:ListApps", "sagemaker:ListDomains", "sagemaker:ListUserProfiles", "sagemaker:ListSpaces",
            "sagemaker:DescribeApp", "sagemaker:DescribeDomain", "sagemaker:DescribeUserProfile",
            "sagemaker:DescribeSpace"], resources=["*"]),
        iam.PolicyStatement(sid="SMStudioAppPermissionsTagOnCreate", actions=["sagemaker:AddTags"],
                            resources=[arn("*", "*")], conditions={"Null": {"sagemaker:TaggingAction": "false"}}),
        iam.PolicyStatement(sid="SMStudioRestrictSharedSpacesWithoutOwners", actions=spaces,
                            resources=[arn("space", f"{DOMAIN_ID}/*")],
                            conditions={"Null": {"sagemaker:OwnerUserProfileArn": "true"}}),
        iam.PolicyStatement(sid="SMStudioRestrictSpacesToOwnerUserProfile", actions=spaces,
                            resources=[arn("space", f"{DOMAIN_ID}/*")],
                            conditions={"ArnLike": {"sagemaker:OwnerUserProfileArn": own_profile},
                                        "StringEquals": {"sagemaker:SpaceSharingType": ["Private", "Shared"]}}),
        iam.PolicyStatement(sid="SMStudioRestrictCreatePrivateSpaceAppsToOwnerUserProfile", actions=apps,
                            resources=[arn("app", f"{DOMAIN_ID}/*")],
                            conditions={"ArnLike": {"sagemaker:OwnerUserProfileArn": own_profile},
                                        "StringEquals": {"sagemaker:SpaceSharingType": ["Private"]}}),
    ]


def own_spaces_wildcards(scope: Construct) -> list[str]:
    """The wildcard resources of own_spaces_statements, as cdk-nag reports them (a policy variable as <name>)."""
    stack = cdk.Stack.of(scope)
    domain = DOMAIN_ID.replace("${", "<").replace("}", ">")
    return [stack.format_arn(service="sagemaker", resource=r, resource_name=n)
            for r, n in (("app", f"{domain}/*"), ("*", "*"), ("space", f"{domain}/*"))]

