"""Composes the platform's stacks from one validated config. app.py and the tests both call this."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from cdk_nag import AwsSolutionsChecks
from constructs.log_retention import LogRetention

from stacks.config import PlatformConfig
from stacks.config_day2 import SNAPSHOT_METADATA_KEY, snapshot
from stacks.eks_cluster_stack import EksClusterStack, chart_directory
from stacks.network_stack import NetworkRefs, NetworkStack
from stacks.observability_stack import ObservabilityStack
from stacks.slurm_cluster_stack import SlurmClusterStack
from stacks.storage_stack import StorageStack
from stacks.studio_stack import StudioStack


@dataclass
class Platform:
    network: NetworkRefs
    network_stack: Optional[NetworkStack]
    storage: StorageStack
    cluster: SlurmClusterStack | EksClusterStack
    studio: Optional[StudioStack]
    observability: Optional[ObservabilityStack] = None

    @property
    def stacks(self) -> list[cdk.Stack]:
        return [s for s in (self.network_stack, self.storage, self.cluster, self.studio, self.observability)
                if s is not None]


def build_platform(app: cdk.App, config: PlatformConfig, *, allow_chart_stand_in: bool = False) -> Platform:
    """Raises ConfigError, before any stack exists, when something the config points at on disk is missing or is
    not what is pinned. `allow_chart_stand_in` (tests only) accepts a stand-in dependency chart; the cluster
    stack's template then fails CloudFormation validation."""
    if config.orchestrator == "eks":
        chart_directory(config, allow_stand_in=allow_chart_stand_in)
    env = cdk.Environment(account=config.deployment.account, region=config.deployment.region)
    name = config.name
    network_stack = None
    if config.network.existing:
        network = NetworkRefs.existing(config.network)
    else:
        network_stack = NetworkStack(app, f"{name}-network", network=config.network, env=env,
                                     control_plane_subnets=config.eks.control_plane_subnets
                                     if config.orchestrator == "eks" else (),
                                     description=f"HyperPod platform {name}: VPC, EFA security group, endpoints")
        network = network_stack.refs
    storage = StorageStack(app, f"{name}-storage", cluster_name=name, storage=config.storage, network=network, env=env,
                           studio_partition_root=config.studio.partition_root if config.studio.enabled else None,
                           description=f"HyperPod platform {name}: FSx for Lustre, data and lifecycle buckets "
                                       "(retained on delete)")
    cluster_stack = EksClusterStack if config.orchestrator == "eks" else SlurmClusterStack
    stand_in = {"allow_chart_stand_in": allow_chart_stand_in} if config.orchestrator == "eks" else {}
    cluster = cluster_stack(app, f"{name}-cluster", config=config, network=network, storage=storage, env=env,
                            **stand_in,
                            description=f"HyperPod platform {name}: SageMaker HyperPod cluster "
                                        f"({'EKS' if config.orchestrator == 'eks' else 'Slurm'})")
    studio = None
    if config.studio.enabled:
        studio = StudioStack(app, f"{name}-studio", config=config, network=network, storage=storage, cluster=cluster,
                             env=env, description=f"HyperPod platform {name}: SageMaker Studio domain as login nodes, "
                                                  "shared or per-user FSx partitions")
    observability = ObservabilityStack(app, f"{name}-observability", config=config, storage=storage, cluster=cluster,
                                       studio=studio, env=env,
                                       description=f"HyperPod platform {name}: alarms, HyperPod events, dashboard")
    platform = Platform(network=network, network_stack=network_stack, storage=storage, cluster=cluster, studio=studio,
                        observability=observability)
    # Flow logs and the EKS control plane keep the retention of their own keys.
    own_retention = [cluster.control_plane.log_group.node.default_child] if isinstance(cluster, EksClusterStack) else []
    for stack in platform.stacks:
        cdk.Aspects.of(stack).add(RedundantRoleDependency())
        if stack is not network_stack:
            cdk.Aspects.of(stack).add(LogRetention(config.observability.log_retention_days, keep=own_retention))
        # Only where tags update in place: a create-only Tags property would turn a new tag into a replacement.
        cdk.Tags.of(stack).add("hyperpod-platform", name, exclude_resource_types=list(TAGS_CREATE_ONLY))
        for key, value in config.tags.items():
            cdk.Tags.of(stack).add(key, value, exclude_resource_types=list(TAGS_CREATE_ONLY))
    # The deployed storage stack remembers what can never change in place; tools/replacement_guard.py compares.
    storage.template_options.metadata = {SNAPSHOT_METADATA_KEY: snapshot(config)}
    for stack in (storage, cluster, studio):
        if stack is not None:  # hold the file system, buckets, keys, cluster, secret, domain and profiles
            stack.termination_protection = True
    return platform


# Resource types whose CloudFormation schema lists Tags as create-only (tests/test_day2.py re-checks every type
# the platform emits against cfn-lint's copy of the schemas).
TAGS_CREATE_ONLY = ("AWS::SageMaker::StudioLifecycleConfig",)


@jsii.implements(cdk.IAspect)
class RedundantRoleDependency:
    """aws-cdk-lib gives every Lambda function and state machine a DependsOn on its role that the role's GetAtt
    already implies; cfn-lint reports that as W3005. Silence exactly that check on exactly those resources."""

    def visit(self, node) -> None:
        if isinstance(node, (lambda_.CfnFunction, sfn.CfnStateMachine)):
            node.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})


def add_security_checks(app: cdk.App) -> None:
    """cdk-nag AwsSolutions on every stack; an unacknowledged finding makes synth fail."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
