"""The EKS control plane HyperPod joins, with what must be there before nodes: the DaemonSet add-ons (VPC CNI,
kube-proxy, Pod Identity agent) and the HyperPod dependency chart. It needs only the network, so it is created
while FSx for Lustre is (the storage stack); the HyperPod cluster stack follows both."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct
from constructs.eks_control_plane import Addon, EksControlPlane
from constructs.platform_refs import NetworkRefs

from manifests.hyperpod_dependency_chart import chart_values, dependency_chart_values
from platform_config import PlatformConfig
from platform_config.chart_pin import chart_directory, chart_is_pinned


class EksControlPlaneStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        config: PlatformConfig,
        network: NetworkRefs,
        allow_chart_stand_in: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(scope, id_, **kwargs)
        eks_config = config.eks
        chart_dir = chart_directory(config, allow_stand_in=allow_chart_stand_in)
        if not chart_is_pinned(chart_dir):
            # A template built around a test stand-in chart fails CloudFormation's validation before anything is
            # created: a stand-in can never be deployed by mistake (nor can the cluster stack, which depends on it).
            # The assertion holds for no bootstrap version (a number); unlike a constant, cfn-lint cannot fold it.
            cdk.CfnRule(
                self,
                "PinnedDependencyChart",
                assertions=[
                    cdk.CfnRuleAssertion(
                        assert_=cdk.Fn.condition_contains(["stand-in chart"], cdk.Fn.ref("BootstrapVersion")),
                        assert_description=f"synthesized with a test stand-in for the HyperPod dependency chart ({chart_dir}); "
                        "run `make hyperpod-chart` and synthesize again",
                    )
                ],
            )

        addons = eks_config.addons
        # Only DaemonSet add-ons come before the nodes: a DaemonSet with no nodes is complete, and nodes need the
        # CNI and kube-proxy to become Ready. Add-ons that run Deployments wait for pods, so they follow HyperPod
        # (in the cluster stack).
        self.control_plane = EksControlPlane(
            self,
            "Eks",
            cluster_name=config.name,
            kubernetes_version=eks_config.kubernetes_version,
            authentication_mode=eks_config.authentication_mode,
            vpc_id=network.vpc_id,
            control_plane_subnets=network.control_plane_subnets,
            private_subnets=network.private_subnets,
            security_group_id=network.security_group_id,
            public_access_cidrs=eks_config.endpoint.public_access_cidrs,
            log_types=eks_config.log_types,
            log_retention_days=eks_config.log_retention_days,
            admin_role_arns=eks_config.admin_role_arns,
            # enableNetworkPolicy: the VPC CNI's network policy controller and node agent, which enforce the
            # NetworkPolicies the cluster stack applies (manifests/kubernetes_objects.py deny_node_credentials). The key
            # and its string value as aws/amazon-vpc-cni-k8s@01c4ad5a charts/aws-vpc-cni/README.md and
            # https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html give them.
            addons=[
                Addon("vpc-cni", addons.vpc_cni, {"enableNetworkPolicy": "true"}),
                Addon("kube-proxy", addons.kube_proxy),
                Addon("eks-pod-identity-agent", addons.pod_identity_agent),
            ],
        )
        plane = self.control_plane

        # No waiting: before HyperPod nodes exist none of the chart's pods can schedule (AWS's own templates install
        # this chart without waiting too). Its device plugins and health agent must be there when nodes join.
        self.dependency_chart = plane.helm_chart(
            self,
            "HyperPodDependencies",
            asset_id="HyperPodDependencyChart",
            chart_dir=str(chart_dir),
            release="hyperpod-dependencies",
            namespace="kube-system",
            values=dependency_chart_values(config, region=self.region, chart_values=chart_values(chart_dir)),
        )

        cdk.CfnOutput(self, "EksClusterName", value=config.name)
        cdk.CfnOutput(self, "EksClusterArn", value=plane.cluster_arn)
        cdk.CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --region {self.region} --name {config.name}",
            description="Adds the EKS cluster to ~/.kube/config (your role needs an access entry)",
        )
