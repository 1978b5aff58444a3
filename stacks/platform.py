"""Composes the platform's stacks from one validated config. app.py and the tests both call this."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk.aws_logs import CfnLogGroup
from aws_cdk import aws_stepfunctions as sfn
from constructs.log_encryption import LogGroupEncryption
from constructs.log_retention import LogRetention

from constructs.studio_tools import StudioToolArtifacts
from platform_config import ConfigError, PlatformConfig
from platform_config.storage import root_squash_exempts_cluster_subnets
from platform_config.day2 import SNAPSHOT_METADATA_KEY, snapshot
from constructs.hyperpod_cluster import GroupSpec
from constructs.hyperpod_vpc import PrivateSubnet
from constructs.platform_refs import NetworkRefs
from constructs.studio_execution_role import PLATFORM_TAG
from platform_config.login_access import slurm_auth
from platform_config.network import Network
from stacks.network_stack import NetworkStack
from stacks.observability_stack import ObservabilityStack
from stacks.storage_stack import StorageStack
from stacks.studio_stack import StudioStack, StudioUsers

if TYPE_CHECKING:  # the EKS path's modules (and its kubectl layer) are imported only for an EKS config
    from stacks.eks_access_stack import EksAccessStack
    from stacks.eks_cluster_stack import EksClusterStack
    from stacks.eks_control_plane_stack import EksControlPlaneStack
    from stacks.slurm_cluster_stack import SlurmClusterStack
    from stacks.slurm_login_stack import SlurmLoginStack


@dataclass
class Platform:
    """Each stack depends only on what it consumes (tests/test_stack_graph.py reads the assembly):
    Slurm: network -> storage -> cluster; slurm-login (no inputs) -> cluster, studio; storage -> studio.
    EKS:   network -> eks (control plane, add-ons, chart) and storage side by side -> cluster;
           storage -> studio; eks + studio -> eks-access.
    Both:  every stack with functions to alarm on (storage, eks, cluster, studio) -> observability.
    Attach mode (cluster.existing): storage (lifecycle bucket, the Lustre access group on the existing file system),
           slurm-login (Slurm), studio, eks-access (EKS): no network, cluster, EKS or observability stack."""

    network: NetworkRefs
    network_stack: NetworkStack | None
    storage: StorageStack
    cluster: SlurmClusterStack | EksClusterStack | None
    studio: StudioStack | None
    slurm_login: SlurmLoginStack | None = None
    eks: EksControlPlaneStack | None = None
    eks_access: EksAccessStack | None = None
    observability: ObservabilityStack | None = None

    @property
    def stacks(self) -> list[cdk.Stack]:
        return [
            s
            for s in (
                self.network_stack,
                self.storage,
                self.slurm_login,
                self.eks,
                self.cluster,
                self.studio,
                self.eks_access,
                self.observability,
            )
            if s is not None
        ]


def studio_tool_artifacts(config: PlatformConfig) -> StudioToolArtifacts:
    """The built hyp/jq bundle and the eksctl tarball the config asks for, checked against their pins; a missing,
    stale or altered one is a ConfigError naming the key and what to run."""
    from constructs.studio_tools import StudioToolsError, eksctl_artifact, studio_tools_bundle

    key = "studio.tools"
    try:
        bundle = studio_tools_bundle() if config.studio.tools.hyp_and_jq else None
        key = "studio.tools.eksctl"
        eksctl = eksctl_artifact() if config.studio.tools.eksctl else None
    except StudioToolsError as error:
        raise ConfigError(key, [str(error)]) from None
    return StudioToolArtifacts(bundle=bundle, eksctl=eksctl)


def existing_network_refs(network: Network) -> NetworkRefs:
    ex = network.existing
    if ex is None:
        raise ValueError("existing_network_refs: the config has no network.existing")
    return NetworkRefs(
        vpc_id=ex.vpc_id,
        security_group_id=ex.security_group_id,
        private_subnets=tuple(PrivateSubnet(az_id=s.az_id, subnet_id=s.id) for s in ex.private_subnets),
        control_plane_subnets=tuple(PrivateSubnet(az_id=s.az_id, subnet_id=s.id) for s in ex.control_plane_subnets),
        studio_subnet=PrivateSubnet(az_id=ex.studio_subnet.az_id, subnet_id=ex.studio_subnet.id)
        if ex.studio_subnet
        else None,
    )


def group_specs(config: PlatformConfig, network: NetworkRefs) -> list[GroupSpec]:
    """The config's instance groups as the cluster stacks hand them to HyperPod (EKS keeps the compute groups)."""
    return [
        GroupSpec(
            name=g.name,
            role=g.role,
            instance_type=g.instance_type,
            instance_count=g.instance_count,
            threads_per_core=g.threads_per_core,
            ebs_volume_gib=g.ebs_volume_gib,
            deep_health_checks=tuple(g.deep_health_checks),
            partitions=tuple(g.partitions),
            training_plan_arn=g.training_plan_arn,
            subnet_id=network.subnet_in(g.az_id) if g.az_id else None,
            kubernetes_labels=dict(g.kubernetes_labels) or None,
            kubernetes_taints=tuple((t.key, t.value, t.effect) for t in g.kubernetes_taints),
        )
        for g in config.cluster.instance_groups
    ]


def build_platform(app: cdk.App, config: PlatformConfig, *, allow_chart_stand_in: bool = False) -> Platform:
    """Raises ConfigError, before any stack exists, when something the config points at on disk is missing or is
    not what is pinned. `allow_chart_stand_in` (tests only) accepts a stand-in dependency chart; the cluster
    stack's template then fails CloudFormation validation."""
    on_eks = config.orchestrator == "eks"
    existing = config.cluster.existing
    if on_eks and existing is None:
        from platform_config.chart_pin import chart_directory

        chart_directory(config, allow_stand_in=allow_chart_stand_in)
    studio_tools = studio_tool_artifacts(config) if config.studio.enabled else None
    env = cdk.Environment(account=config.deployment.account, region=config.deployment.region)
    name = config.name
    network_stack = None
    if config.network.existing:
        network = existing_network_refs(config.network)
    else:
        network_stack = NetworkStack(
            app,
            f"{name}-network",
            network=config.network,
            env=env,
            control_plane_subnets=config.eks.control_plane_subnets if config.orchestrator == "eks" else (),
            description=f"HyperPod platform {name}: VPC, EFA security group, endpoints",
        )
        network = network_stack.refs
    storage = StorageStack(
        app,
        f"{name}-storage",
        cluster_name=name,
        storage=config.storage,
        network=network,
        env=env,
        studio_partition_root=config.studio.partition_root if config.studio.enabled else None,
        node_metrics=config.observability.node_metrics,
        root_squash_exempt_subnet_ids=[s.subnet_id for s in network.private_subnets]
        if root_squash_exempts_cluster_subnets(config)
        else [],
        bundle_writer_role_arn=existing.attach_role_arn if existing else None,
        description=f"HyperPod platform {name}: FSx for Lustre, data and lifecycle buckets (retained on delete)",
    )
    slurm_login: SlurmLoginStack | None = None
    eks: EksControlPlaneStack | None = None
    eks_access: EksAccessStack | None = None
    cluster: SlurmClusterStack | EksClusterStack | None = None
    kind = "EKS" if on_eks else "Slurm"
    if existing is not None:
        if not on_eks:
            from stacks.slurm_login_stack import SlurmLoginStack

            slurm_login = SlurmLoginStack(
                app,
                f"{name}-slurm-login",
                cluster_name=name,
                studio_reads=True,
                per_user_roles_read=slurm_auth(config) == "jwt",
                attach_role_arn=existing.attach_role_arn,
                env=env,
                description=f"HyperPod platform {name}: Slurm login secret of the existing "
                f"cluster {existing.name} (written by make attach, read by "
                "Studio)",
            )
    elif on_eks:
        from stacks.eks_cluster_stack import EksClusterStack
        from stacks.eks_control_plane_stack import EksControlPlaneStack

        eks = EksControlPlaneStack(
            app,
            f"{name}-eks",
            config=config,
            network=network,
            env=env,
            allow_chart_stand_in=allow_chart_stand_in,
            description=f"HyperPod platform {name}: EKS control plane, node add-ons and the HyperPod dependency chart",
        )
        cluster = EksClusterStack(
            app,
            f"{name}-cluster",
            config=config,
            network=network,
            storage=storage,
            control_plane=eks.control_plane,
            dependency_chart=eks.dependency_chart,
            groups=[g for g in group_specs(config, network) if g.role == "compute"],
            env=env,
            description=f"HyperPod platform {name}: SageMaker HyperPod cluster ({kind})",
        )
        cluster.add_stack_dependency(storage)
        cluster.add_stack_dependency(eks)
    else:
        from stacks.slurm_cluster_stack import SlurmClusterStack
        from stacks.slurm_login_stack import SlurmLoginStack

        slurm_login = SlurmLoginStack(
            app,
            f"{name}-slurm-login",
            cluster_name=name,
            studio_reads=config.studio.enabled,
            per_user_roles_read=slurm_auth(config) == "jwt",
            env=env,
            description=f"HyperPod platform {name}: Slurm login secret (written by the controller, read by Studio)",
        )
        cluster = SlurmClusterStack(
            app,
            f"{name}-cluster",
            config=config,
            network=network,
            storage=storage,
            groups=group_specs(config, network),
            slurm_login_secret=slurm_login.secret,
            env=env,
            description=f"HyperPod platform {name}: SageMaker HyperPod cluster ({kind})",
        )
        cluster.add_stack_dependency(storage)
    studio = None
    if config.studio.enabled:
        studio = StudioStack(
            app,
            f"{name}-studio",
            config=config,
            network=network,
            storage=storage,
            slurm_login_secret=slurm_login.secret if slurm_login else None,
            tools=studio_tools,
            env=env,
            description=f"HyperPod platform {name}: SageMaker Studio domain as login nodes, "
            "shared or per-user FSx partitions",
        )
        # FSx partitions and the domain's file system configs need the file system.
        studio.add_stack_dependency(storage)
        if on_eks:
            from stacks.eks_access_stack import EksAccessStack

            if eks is not None:
                eks_cluster_name = eks.control_plane.cluster.cluster_name
            else:  # attach mode: the attach rules require cluster.existing.eks_cluster_name on EKS
                assert existing is not None and existing.eks_cluster_name is not None
                eks_cluster_name = existing.eks_cluster_name
            eks_access = EksAccessStack(
                app,
                f"{name}-eks-access",
                eks_cluster_name=eks_cluster_name,
                studio_role=studio.execution_role,
                member_roles=studio.member_roles,
                env=env,
                description=f"HyperPod platform {name}: EKS access entries of the Studio roles",
            )
    observability = (
        None
        if cluster is None
        else ObservabilityStack(
            app,
            f"{name}-observability",
            config=config,
            storage=storage,
            cluster=cluster,
            cluster_id=cluster.hyperpod.cluster_id,
            watched=[s for s in (storage, cluster, studio, eks) if s is not None],
            dead_letter_queue=studio.partitions.dead_letters
            if studio is not None and studio.partitions is not None
            else None,
            env=env,
            description=f"HyperPod platform {name}: alarms, HyperPod events, dashboard",
        )
    )
    platform = Platform(
        network=network,
        network_stack=network_stack,
        storage=storage,
        cluster=cluster,
        studio=studio,
        slurm_login=slurm_login,
        eks=eks,
        eks_access=eks_access,
        observability=observability,
    )
    # Flow logs and the EKS control plane keep the retention of their own keys.
    # jsii types default_child as IConstruct | None; a LogGroup's is its CfnLogGroup.
    own_retention = [cast(CfnLogGroup, eks.control_plane.log_group.node.default_child)] if eks is not None else []
    if network_stack is not None and network_stack.vpc.flow_log_group is not None:
        own_retention.append(cast(CfnLogGroup, network_stack.vpc.flow_log_group.node.default_child))
    retention = LogRetention(config.observability.log_retention_days, keep=own_retention)
    encryption = LogGroupEncryption()  # every stack's log groups, the network stack's flow logs included
    for stack in platform.stacks:
        # Nothing adds constructs after this point (app.py only adds the cdk-nag plugin), so one walk now does what
        # aspects would do at synth, without their cost: an aspect is a call from the jsii kernel back into Python
        # for every node it visits (556 round trips for the default config), `find_all` is one call per subtree.
        # The user nested stacks hold only profiles and partitions (no function, no log group): left out, and
        # only then is the walk one per child (a Studio stack of many users), otherwise one per stack.
        user_stacks = stack.user_stacks if isinstance(stack, StudioStack) else []
        if user_stacks:
            nodes = [n for c in stack.node.children if not isinstance(c, StudioUsers) for n in c.node.find_all()]
        else:
            nodes = stack.node.find_all()
        # Every node walked is of this stack unless the walk reached into a nested stack.
        own_stack = None if any(isinstance(n, cdk.Stack) and n is not stack for n in nodes) else stack
        for node in nodes:
            RedundantRoleDependency.visit(node)
            encryption.visit(node, own_stack)
            retention.visit(node, own_stack)
        # Only where tags update in place: a create-only Tags property would turn a new tag into a replacement.
        cdk.Tags.of(stack).add(PLATFORM_TAG, name, exclude_resource_types=list(TAGS_CREATE_ONLY))
        for key, value in config.tags.items():
            cdk.Tags.of(stack).add(key, value, exclude_resource_types=list(TAGS_CREATE_ONLY))
    # The deployed storage stack remembers what can never change in place; cli/replacement_guard.py compares.
    storage.template_options.metadata = {SNAPSHOT_METADATA_KEY: snapshot(config)}
    for held in (storage, slurm_login, eks, cluster, studio, eks_access if existing is not None else None):
        if held is not None:  # hold the file system, buckets, keys, secret, EKS and HyperPod clusters, domain, profiles
            held.termination_protection = True
    return platform


# Resource types whose CloudFormation schema lists Tags as create-only (tests/test_day2.py re-checks every type
# the platform emits against cfn-lint's copy of the schemas).
TAGS_CREATE_ONLY = ("AWS::SageMaker::StudioLifecycleConfig",)


class RedundantRoleDependency:
    """aws-cdk-lib gives every Lambda function and state machine a DependsOn on its role that the role's GetAtt
    already implies; cfn-lint reports that as W3005. Silence exactly that check on exactly those resources."""

    @staticmethod
    def visit(node) -> None:
        if isinstance(node, (lambda_.CfnFunction, sfn.CfnStateMachine)):
            node.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})


def add_security_checks(app: cdk.App) -> None:
    """cdk-nag AwsSolutions on every stack; an unacknowledged finding makes synth fail. cdk-nag is imported here,
    where it is used: loading its jsii assembly costs ~0.5 s of CPU a process, which a process that builds the
    platform without synthesizing it (or stops at a config error first) does not pay."""
    from cdk_nag import AwsSolutionsChecks

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
