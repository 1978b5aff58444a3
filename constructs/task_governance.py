"""SageMaker HyperPod task governance on an EKS-orchestrated cluster: the add-on, then (once Kueue runs) the cluster's
scheduler policy and each team's compute quota, which creates the team's namespace, and each namespace's wait and
labels. CloudFormation's types where the region's registry has them, else a custom resource with the same
properties (constructs/task_governance_provider.py)."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks_v2
from constructs import Construct

from constructs.eks_control_plane import Addon, EksControlPlane
from constructs.nag_acknowledgments import acknowledge
from constructs.task_governance_provider import TaskGovernanceProvider

KUEUE_CONTROLLER = ("kueue-system", "kueue-controller-manager")  # namespace, deployment (task governance's Kueue)
# Regions whose CloudFormation has the type (cfn-lint 1.58's registry schemas; tests/test_eks_cluster.py keeps this
# table honest). Elsewhere a custom resource with the same properties calls the SageMaker API instead.
CFN_REGIONS = {
    "AWS::SageMaker::ClusterSchedulerConfig": frozenset(
        {"ap-northeast-1", "ap-south-1", "eu-central-1", "eu-north-1", "eu-south-2", "us-east-1", "us-west-1"}
    ),
    "AWS::SageMaker::ComputeQuota": frozenset(
        {
            "ap-south-1",
            "ap-southeast-1",
            "ap-southeast-2",
            "ca-central-1",
            "eu-central-1",
            "eu-west-1",
            "eu-west-2",
            "sa-east-1",
            "us-east-1",
            "us-east-2",
            "us-west-2",
        }
    ),
}


def governance_resource_type(cfn_type: str, region: str | None) -> str:
    """The native type where CloudFormation has it in `region`, else the equivalent custom resource."""
    if region in CFN_REGIONS[cfn_type]:
        return cfn_type
    return "Custom::" + cfn_type.rsplit("::", 1)[1]


class TaskGovernance:
    """Created in `scope` (the cluster stack), where its resources have always been: their logical ids are those of
    deployed stacks. `namespaces` holds each team namespace's wait and labels; everything the stack puts in a team
    namespace depends on it."""

    def __init__(
        self,
        scope: cdk.Stack,
        *,
        plane: EksControlPlane,
        cluster_arn: str,
        addon_version: str | None,
        after: Sequence[Construct],
        scheduler_config: Mapping[str, Any],
        quotas: Mapping[str, Mapping[str, Any]],
        team_namespaces: Mapping[str, str],
        namespace_labels: Mapping[str, str],
    ) -> None:
        """`scheduler_config`: the ClusterSchedulerConfig's properties; `quotas`: team -> its ComputeQuota's
        properties; `team_namespaces`: team -> the namespace its quota creates."""
        # Kueue's controller and webhook run on HyperPod nodes; the quotas below need them running. CloudFormation
        # reports an add-on whose pods cannot run as created (DEGRADED), so the stack waits, as AWS's Terraform does
        # before creating quotas, for deployment/kueue-controller-manager in kueue-system to be available
        # (awslabs/awsome-distributed-ai@95b939cd .../hyperpod-eks-tf/modules/task_governance/main.tf
        # wait_for_kueue_webhook): aws_eks_v2's object-value read retries until the field has a value.
        addon = plane.addon(Addon("amazon-sagemaker-hyperpod-taskgovernance", addon_version), after=after, scope=scope)
        namespace, deployment = KUEUE_CONTROLLER
        self.kueue_ready = eks_v2.KubernetesObjectValue(
            scope,
            "KueueReady",
            cluster=plane.icluster,
            object_type="deployment",
            object_name=deployment,
            object_namespace=namespace,
            json_path=".status.availableReplicas",
            timeout=cdk.Duration.minutes(10),
        )
        self.kueue_ready.node.add_dependency(addon)
        types = {
            t: governance_resource_type(t, scope.region)
            for t in ("AWS::SageMaker::ClusterSchedulerConfig", "AWS::SageMaker::ComputeQuota")
        }
        provider = None
        if any(t.startswith("Custom::") for t in types.values()):
            provider = TaskGovernanceProvider(scope, "GovernanceProvider", cluster_arn=cluster_arn)

        def resource(id_: str, cfn_type: str, properties: Mapping[str, Any]) -> cdk.CfnResource:
            kind = types[cfn_type]
            if kind.startswith("Custom::"):
                assert provider is not None  # made above whenever a type is a Custom:: one
                properties = {"ServiceToken": provider.service_token, **properties}
            created = cdk.CfnResource(scope, id_, type=kind, properties=dict(properties))
            created.node.add_dependency(self.kueue_ready)
            if not kind.startswith("Custom::"):
                acknowledge(
                    created,
                    "CloudFormation-Validate::F3006",
                    f"{kind} is in this region's CloudFormation "
                    "registry (cfn-lint's schemas validate it), but aws-cdk-lib's bundled schema predates it",
                )
            return created

        self.scheduler_config = resource("SchedulerConfig", "AWS::SageMaker::ClusterSchedulerConfig", scheduler_config)
        self.quotas = []
        self.namespaces = Construct(scope, "TeamNamespaces")
        for team, properties in quotas.items():
            quota = resource(f"Quota-{team}", "AWS::SageMaker::ComputeQuota", properties)
            quota.node.add_dependency(self.scheduler_config)
            self.quotas.append(quota)
            name = team_namespaces[team]
            created = eks_v2.KubernetesObjectValue(
                self.namespaces,
                f"Wait-{team}",
                cluster=plane.icluster,
                object_type="namespace",
                object_name=name,
                json_path=".metadata.name",
                timeout=cdk.Duration.minutes(5),
            )
            created.node.add_dependency(quota)
            # Labelled, not applied: Pod Security baseline; restored (labels removed) when the stack goes.
            patch = eks_v2.KubernetesPatch(
                self.namespaces,
                f"Labels-{team}",
                cluster=plane.icluster,
                resource_name=f"namespace/{name}",
                apply_patch={"metadata": {"labels": dict(namespace_labels)}},
                restore_patch={"metadata": {"labels": dict.fromkeys(namespace_labels)}},
            )
            patch.node.add_dependency(created)
