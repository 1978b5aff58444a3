"""Studio: a VpcOnly domain whose JupyterLab and Code Editor spaces are the cluster's login nodes, with the
cluster's FSx mounted as one shared partition or one private partition per user (`SharedFSx`)."""

from __future__ import annotations

from collections.abc import Mapping

from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from constructs.fsx_partitions import FsxPartitions
from constructs.lifecycle_scripts import SLURM_CLIENT_PREFIX, lifecycle_bucket_name
from constructs.mlflow_job_access import tracking_server_name
from constructs.nested_template import NestedTemplate, top_level_logical_id
from constructs.platform_refs import NetworkRefs, StorageRefs
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn
from constructs.platform_role_names import (
    PARTITION_HANDLERS,
    partition_handler_role_name,
    slurm_jwt_key_secret_name,
    slurm_token_issuer_role_name,
    slurm_token_secret_prefix,
    studio_execution_role_name,
    studio_user_role_path,
    upload_role_name,
)
from constructs.slurm_token_issuer import SlurmTokenIssuer
from constructs.studio_domain import StudioDomain, studio_key
from constructs.studio_execution_role import StudioExecutionRole
from constructs.studio_lifecycle_configs import EKS_ENTRY_POINT, SLURM_ENTRY_POINT, StudioLifecycleConfigs
from constructs.studio_mlflow import StudioMlflow
from constructs.studio_security_group import EKS_API_PORTS, SLURM_PORTS, StudioSecurityGroup
from constructs.studio_tools import StudioToolArtifacts

from platform_config import PlatformConfig
from platform_config.budgets import department_tags
from platform_config.facts import RESERVED_USER_NAMES, RESERVED_USER_PREFIXES
from platform_config.login_access import slurm_auth
from platform_config.users import User


class StudioStack(cdk.Stack):
    """Needs the network, storage and (Slurm) the login secret, not the cluster: it is created while the HyperPod
    cluster is. What it needs from the cluster is known from the config (names, the EKS cluster's ARN) or found
    by tag (the HyperPod cluster's ARN holds a generated id); EKS access entries for its roles are the EKS access
    stack's."""

    USERS_PER_NESTED_STACK = 150  # two resources each: a profile and its partition, well under 500 per template
    # Per-user mode on Slurm adds a token secret, its resource policy and an execution role per user: five resources.
    USERS_PER_NESTED_STACK_WITH_TOKENS = 90
    SHARED_PARTITION = "shared"

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        config: PlatformConfig,
        network: NetworkRefs,
        storage: StorageRefs,
        slurm_login_secret: secretsmanager.ISecret | None = None,
        tools: StudioToolArtifacts | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, id_, **kwargs)
        studio = config.studio
        self.platform_name = config.name
        self.slurm_login_secret = slurm_login_secret
        # Attach mode: the cluster is named in the config, not found by this platform's tag.
        existing = config.cluster.existing
        self.attached_cluster_arn = existing.arn if existing else None
        self.eks_cluster_name = (existing.eks_cluster_name if existing else None) or config.name
        self.shared_fsx = cdk.CfnParameter(
            self,
            "SharedFSx",
            type="String",
            allowed_values=["True", "False"],
            default="True" if config.shared_fsx else "False",
            description="True: every user mounts one shared FSx partition; False: each user gets a private one",
        )
        self.is_shared = cdk.CfnCondition(
            self, "IsSharedFSx", expression=cdk.Fn.condition_equals(self.shared_fsx.value_as_string, "True")
        )
        self.key = studio_key(self)

        on_eks = config.orchestrator == "eks"
        auth = None if on_eks else slurm_auth(config)  # the cluster stack decides it from the same config
        # Lustre lives in the cluster's group when the platform owns the file system, else in the access group
        # the storage stack attached to the file system you brought.
        lustre_access_group = storage.lustre_access_group
        self.security_group = StudioSecurityGroup(
            self,
            "StudioAppsGroup",
            vpc_id=network.vpc_id,
            cluster_security_group_id=network.security_group_id,
            lustre_security_group_id=lustre_access_group.attr_group_id
            if lustre_access_group
            else network.security_group_id,
            scheduler="EksApi" if on_eks else "Slurm",
            scheduler_ports=EKS_API_PORTS if on_eks else SLURM_PORTS,
        )

        def app_role(id_: str, description: str, role_name: str | None = None) -> StudioExecutionRole:
            return StudioExecutionRole(
                self,
                id_,
                description=description,
                role_name=role_name,
                platform_name=config.name,
                attached_cluster_arn=self.attached_cluster_arn,
                eks_cluster_name=self.eks_cluster_name if on_eks else None,
                slurm_login_secret_arn=None if on_eks else self.slurm_login_secret_arn,
            )

        # Named: the Slurm login secret's key and resource policies name it before it exists.
        self.execution_role = app_role("ExecutionRole", "Studio apps", studio_execution_role_name(config.name))
        # On EKS each member of a task-governance team runs as a role of their own, whose access entry gives them their
        # own Kubernetes username (stacks/eks_access_stack.py): admission holds their jobs to their own uid.
        self.member_roles = (
            {
                m: (t.name, app_role(f"MemberRole-{m}", f"Studio apps of {m}, team {t.name}"))
                for t in config.eks.task_governance.teams
                for m in t.members
            }
            if on_eks
            else {}
        )
        self.app_roles = [self.execution_role, *(role for _, role in self.member_roles.values())]
        tracking_server_arn = None
        if studio.mlflow.enabled:
            mlflow = StudioMlflow(
                self,
                tracking_server_name=tracking_server_name(config.name),
                size=studio.mlflow.size,
                mlflow_version=studio.mlflow.mlflow_version,
                encryption_key=self.key,
            )
            tracking_server_arn = mlflow.server_arn
            for role in self.app_roles:
                role.grant_mlflow(tracking_server_arn)

        repo = config.storage.lustre.data_repository
        # Partitions through the file system's S3 link (a marker FSx imports), or, on a file system without one,
        # created on the file system by `make attach` (cli/attach.py): the profiles then mount the known path.
        self.partitions: FsxPartitions | None = None
        shared_partition = None
        if storage.data_bucket_name is not None:
            self.partitions = FsxPartitions(
                self,
                "Partitions",
                file_system_id=storage.lustre.file_system_id,
                file_system_path=repo.file_system_path,
                data_bucket_name=storage.data_bucket_name,
                s3_prefix=repo.s3_prefix,
                partition_root=studio.partition_root,
                role_names={h: partition_handler_role_name(config.name, h) for h in PARTITION_HANDLERS},
            )
            shared_partition = self.partitions.partition(
                self,
                "SharedPartition",
                relative_name=self.SHARED_PARTITION,
                uid="0",
                gid=str(studio.shared_gid),
                mode="2775",
                condition=self.is_shared,
            )
        self.partition_parent = f"{repo.file_system_path.rstrip('/')}/{studio.partition_root}"
        shared_path = (
            FsxPartitions.path_attribute(shared_partition)
            if shared_partition is not None
            else f"{self.partition_parent}/{self.SHARED_PARTITION}"
        )

        lifecycle_bucket = s3.Bucket.from_bucket_name(self, "LifecycleBucket", lifecycle_bucket_name(config.name))
        # One path everywhere (lifecycle/studio/fsx_paths.sh): the space links the cluster's path of its partition.
        fsx_paths = {
            "FSX_FILE_SYSTEM_ID": storage.lustre.file_system_id,
            "FSX_CLUSTER_MOUNT_PATH": config.storage.lustre.mount_path,
            "FSX_PARTITION_PARENT": self.partition_parent,
            "FSX_SHARED_MODE": self.shared_fsx.value_as_string,
        }
        # hyp and jq (both orchestrators) and eksctl (EKS, when switched on), checked by build_platform.
        bundle, eksctl = (tools.bundle, tools.eksctl) if tools else (None, None)
        if on_eks:
            from constructs.studio_eks_tools import studio_eks_tools  # EKS only: kubectl/helm from the layer package
            from manifests.kubernetes_objects import studio_kube_settings

            eks_tools = studio_eks_tools(config.eks.kubernetes_version)
            eks_settings = studio_kube_settings(
                {t.name: t.members for t in config.eks.task_governance.teams}, mlflow=studio.mlflow.enabled
            )
            lifecycle = StudioLifecycleConfigs(
                self,
                "LifecycleConfigs",
                name=config.name,
                bucket=lifecycle_bucket,
                entry_point=EKS_ENTRY_POINT,
                upload_role_name=upload_role_name(config.name, "studio"),
                environment={
                    "EKS_CLUSTER_NAME": self.eks_cluster_name,
                    **eks_tools.environment,
                    **eks_settings,
                    **fsx_paths,
                },
                extra_dirs=[eks_tools.directory],
                tools=bundle,
                eksctl=eksctl,
            )
        else:
            lifecycle = StudioLifecycleConfigs(
                self,
                "LifecycleConfigs",
                name=config.name,
                bucket=lifecycle_bucket,
                entry_point=SLURM_ENTRY_POINT,
                upload_role_name=upload_role_name(config.name, "studio"),
                tools=bundle,
                environment={
                    "SLURM_LOGIN_SECRET_ARN": self.slurm_login_secret_arn,
                    **({"SLURM_TOKEN_SECRET_PREFIX": slurm_token_secret_prefix(config.name)} if auth == "jwt" else {}),
                    **fsx_paths,
                },
            )
        for role in self.app_roles:
            role.grant_read_prefix(
                lifecycle_bucket,
                lifecycle.scripts.prefix,
                sid="StudioScripts",
                reason="Studio apps copy this platform's own Studio scripts from their prefix of the lifecycle bucket",
            )
            if lifecycle.tools:
                role.grant_read_prefix(
                    lifecycle_bucket,
                    lifecycle.tools.prefix,
                    sid="StudioTools",
                    reason="Studio apps copy the platform's tools bundle (hyp wheels, jq, eksctl; "
                    "each file sha256-checked in the space) from its prefix of the "
                    "lifecycle bucket",
                )
        if not on_eks:
            for role in self.app_roles:
                role.grant_slurm_client_bundle(lifecycle_bucket, SLURM_CLIENT_PREFIX)
        shared_space_user = next((u for u in config.users if u.name == studio.shared_space_user), None)
        self.domain = StudioDomain(
            self,
            "Domain",
            domain_name=f"{config.name}-studio",
            vpc_id=network.vpc_id,
            subnet_id=network.studio_subnet_id,
            key=self.key,
            execution_role_arn=self.execution_role.role_arn,
            security_group_id=self.security_group.attr_group_id,
            jupyter_lab_arn=lifecycle.jupyter_lab_arn,
            code_editor_arn=lifecycle.code_editor_arn,
            idle_timeout_minutes=studio.idle_timeout_minutes,
            is_shared=self.is_shared,
            file_system_id=storage.lustre.file_system_id,
            shared_path=shared_path,
            shared_gid=studio.shared_gid,
            shared_space_uid=shared_space_user.uid if shared_space_user else None,
            tag_propagation=config.cluster.budget is not None,
        )
        domain_arn_prefix = self.format_arn(
            service="sagemaker", resource="user-profile", resource_name=self.domain.attr_domain_id
        )
        if self.partitions is not None:  # without an S3 link, `make attach --profiles` makes later profiles' partitions
            # jsii's Python types of CfnCondition lack ICfnConditionExpression, which the class implements.
            is_shared = cast(cdk.ICfnConditionExpression, self.is_shared)
            self.is_per_user = cdk.CfnCondition(self, "IsPerUserFSx", expression=cdk.Fn.condition_not(is_shared))
            self.partitions.watch_profiles(
                domain_id=self.domain.attr_domain_id,
                domain_arn_prefix=domain_arn_prefix,
                condition=self.is_per_user,
                reserved_uids={u.uid: u.name for u in config.users},
            )

        # Per-user mode on Slurm: each profile runs as its own role and gets its own Slurm token; no munge key.
        self.token_issuer = self.user_policy = None
        if auth == "jwt":
            self.token_issuer = SlurmTokenIssuer(
                self,
                "SlurmTokenIssuer",
                role_name=slurm_token_issuer_role_name(config.name),
                key_secret_name=slurm_jwt_key_secret_name(config.name),
                secret_prefix=slurm_token_secret_prefix(config.name),
                reserved_users=list(RESERVED_USER_NAMES),
                reserved_prefixes=list(RESERVED_USER_PREFIXES),
            )
            # What every per-user execution role gets: exactly the shared role's statements, the same document.
            self.user_policy = self.execution_role.user_policy(self, "StudioUserPolicy")
        per_stack = self.USERS_PER_NESTED_STACK_WITH_TOKENS if self.token_issuer else self.USERS_PER_NESTED_STACK
        self.user_stacks = [
            StudioUsers(
                self,
                f"Users{index + 1}",
                config=config,
                users=config.users[start : start + per_stack],
                team_roles={m: role.role_arn for m, (_, role) in self.member_roles.items()},
                domain_id=self.domain.attr_domain_id,
                partitions=self.partitions,
                partition_parent=self.partition_parent,
                file_system_id=storage.lustre.file_system_id,
                shared_fsx=self.shared_fsx.value_as_string,
                token_issuer=self.token_issuer,
                user_policy=self.user_policy,
            )
            for index, start in enumerate(range(0, len(config.users), per_stack))
        ]

        cdk.CfnOutput(self, "DomainId", value=self.domain.attr_domain_id)
        cdk.CfnOutput(self, "DomainUrl", value=self.domain.attr_url)
        cdk.CfnOutput(self, "StudioSecurityGroupId", value=self.security_group.attr_group_id)
        cdk.CfnOutput(self, "SharedFSxMode", value=self.shared_fsx.value_as_string)
        if tracking_server_arn:
            cdk.CfnOutput(self, "MlflowTrackingServerArn", value=tracking_server_arn)

    @property
    def slurm_login_secret_arn(self) -> str:
        """The Slurm login secret's ARN; on Slurm, build_platform passes the secret."""
        if self.slurm_login_secret is None:
            raise ValueError("the Studio stack of a Slurm platform needs slurm_login_secret")
        return self.slurm_login_secret.secret_arn


class StudioUsers(cdk.NestedStack):
    """Up to USERS_PER_NESTED_STACK user profiles, each with its POSIX identity and, in per-user mode, its partition."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        config: PlatformConfig,
        users: list[User],
        domain_id: str,
        partitions: FsxPartitions | None,
        partition_parent: str,
        file_system_id: str,
        shared_fsx: str,
        team_roles: Mapping[str, str] = {},
        token_issuer: SlurmTokenIssuer | None = None,
        user_policy: iam.ManagedPolicy | None = None,
    ) -> None:
        super().__init__(
            scope,
            id_,
            parameters={"SharedFSx": shared_fsx},
            description=f"Studio user profiles {users[0].name} .. {users[-1].name}",
        )
        # One template for all of them, included in one call (constructs/nested_template.py): through jsii, a thousand
        # users' resources cost seconds of kernel round trips. Same logical ids and properties as when they were
        # CfnResources; shared values become parameters on first use, in the order CDK met them then.
        template = NestedTemplate(self)
        resources: dict[str, dict] = {}
        departments = department_tags(config)
        user_roles: Mapping[str, object] = {}
        if token_issuer is not None:
            if user_policy is None:
                raise ValueError("per-user Slurm tokens need user_policy: each user's role carries it")
            token_resources, user_roles = token_issuer.users(
                self,
                template,
                users=[u.name for u in users],
                role_path=studio_user_role_path(config.name),
                policy_arn=user_policy.managed_policy_arn,
                deploy_role_arn=cloudformation_execution_role_arn(self),
            )
            resources.update(token_resources)
        partition_ids = []
        for user in users:
            partition_id = top_level_logical_id(f"Partition-{user.name}")
            # Without an S3 link there is no partition resource: `make attach` creates the directory on the file
            # system and the profile mounts its known path.
            partition_path: object = f"{partition_parent}/{user.name}"
            if partitions is not None:
                resources[partition_id] = partitions.partition_template(
                    template,
                    relative_name=user.name,
                    uid=str(user.uid),
                    gid=str(user.group_id),
                    mode="0700",
                    condition="IsPerUserFSx",
                )
                partition_ids.append(partition_id)
                partition_path = {"Fn::GetAtt": [partition_id, "Path"]}
            profile = {
                "Type": "AWS::SageMaker::UserProfile",
                "Properties": {
                    "DomainId": template.value(domain_id),
                    "UserProfileName": user.name,
                    "UserSettings": {
                        "CustomPosixUserConfig": {
                            "Uid": user.uid,
                            "Gid": {"Fn::If": ["IsSharedFSx", config.studio.shared_gid, user.group_id]},
                        },
                        # The partition's attribute: the profile (and its mount) exists only once the directory does.
                        "CustomFileSystemConfigs": {
                            "Fn::If": [
                                "IsPerUserFSx",
                                [
                                    {
                                        "FSxLustreFileSystemConfig": {
                                            "FileSystemId": template.value(file_system_id),
                                            "FileSystemPath": partition_path,
                                        }
                                    }
                                ],
                                {"Ref": "AWS::NoValue"},
                            ]
                        },
                        **({"ExecutionRole": template.value(team_roles[user.name])} if user.name in team_roles else {}),
                        **({"ExecutionRole": user_roles[user.name]} if user.name in user_roles else {}),
                    },
                    # The department's cost allocation tag (cluster.budget.department_tag_key): the domain propagates it
                    # to the user's spaces and apps, which the department's budget counts.
                    **(
                        {"Tags": [{"Key": departments[user.name][0], "Value": departments[user.name][1]}]}
                        if user.name in departments
                        else {}
                    ),
                },
            }
            resources[top_level_logical_id(f"Profile-{user.name}")] = profile
        # Not 150 imports at once: a few lanes, each partition after the one MAX_IMPORTS_IN_FLIGHT before it.
        FsxPartitions.chain_template(resources, partition_ids)
        template.include(
            {
                "Parameters": {"SharedFSx": {"Type": "String", "AllowedValues": ["True", "False"]}},
                "Conditions": {
                    "IsSharedFSx": {"Fn::Equals": [{"Ref": "SharedFSx"}, "True"]},
                    "IsPerUserFSx": {"Fn::Not": [{"Condition": "IsSharedFSx"}]},
                },
                "Resources": resources,
            },
            dehydrated=[i for i in resources if i not in partition_ids],
        )
