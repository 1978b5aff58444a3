"""The EKS control plane HyperPod joins: private API endpoint, KMS-encrypted secrets, every control-plane log type
with retention, pinned add-ons, role-scoped access entries, and a kubectl/helm provider inside the VPC."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any, cast
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct
from constructs.hyperpod_vpc import PrivateSubnet
from constructs.lifecycle_scripts import assets_bucket_name
from constructs.nag_acknowledgments import acknowledge

# kubectl supports one minor version of skew either way; each supported Kubernetes version maps to a pinned layer
# (module, class). Only the one a config uses is imported: each layer package is a ~35 MB jsii assembly that the
# jsii kernel loads (unpacks) on import.
KUBECTL_LAYERS = {
    "1.30": ("aws_cdk.lambda_layer_kubectl_v31", "KubectlV31Layer"),
    "1.31": ("aws_cdk.lambda_layer_kubectl_v31", "KubectlV31Layer"),
    "1.32": ("aws_cdk.lambda_layer_kubectl_v33", "KubectlV33Layer"),
    "1.33": ("aws_cdk.lambda_layer_kubectl_v33", "KubectlV33Layer"),
    "1.34": ("aws_cdk.lambda_layer_kubectl_v33", "KubectlV33Layer"),
}


def kubectl_layer(scope: Construct, id_: str, kubernetes_version: str) -> lambda_.ILayerVersion:
    module, name = KUBECTL_LAYERS[kubernetes_version]
    return getattr(importlib.import_module(module), name)(scope, id_)


FSX_CSI_SERVICE_ACCOUNTS = ("fsx-csi-controller-sa", "fsx-csi-node-sa")


@dataclass(frozen=True)
class Addon:
    name: str  # the EKS add-on name, e.g. vpc-cni
    version: str | None  # pinned, e.g. v1.20.1-eksbuild.3; None: EKS's default for the cluster's version
    configuration: Mapping[str, Any] | None = None  # the add-on's configurationValues


class EksControlPlane(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster_name: str,
        kubernetes_version: str,
        authentication_mode: str,
        vpc_id: str,
        control_plane_subnets: Sequence[PrivateSubnet],
        private_subnets: Sequence[PrivateSubnet],
        security_group_id: str,
        public_access_cidrs: Sequence[str] = (),
        log_types: Sequence[str],
        log_retention_days: int,
        addons: Sequence[Addon],
        admin_role_arns: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id_)
        self.cluster_name = cluster_name
        cluster_group = ec2.SecurityGroup.from_security_group_id(self, "ClusterGroup", security_group_id, mutable=False)
        # aws_eks_v2 wants an IVpc; it reads only the subnets passed explicitly below.
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=vpc_id,
            availability_zones=[s.az_id for s in private_subnets],
            private_subnet_ids=[s.subnet_id for s in private_subnets],
        )
        cdk.Annotations.of(vpc).acknowledge_warning(
            "@aws-cdk/aws-ec2:noSubnetRouteTableId",
            "the EKS constructs place ENIs in these subnets and never read their route tables",
        )
        node_subnets = [self._subnet(f"Private{i}", s) for i, s in enumerate(private_subnets)]
        plane_subnets = [self._subnet(f"ControlPlane{i}", s) for i, s in enumerate(control_plane_subnets)]

        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description=f"{cluster_name}: envelope encryption of Kubernetes secrets",
        )
        # EKS writes to this fixed name; creating it first is how the stack sets its retention.
        self.log_group = logs.LogGroup(
            self,
            "ControlPlaneLogs",
            log_group_name=f"/aws/eks/{cluster_name}/cluster",
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        # jsii types default_child as IConstruct | None; a LogGroup's is its CfnLogGroup.
        cast(logs.CfnLogGroup, self.log_group.node.default_child).retention_in_days = log_retention_days

        # The kubectl/helm handler runs in the private subnets and reaches the private API endpoint on 443.
        self.kubectl_group = ec2.SecurityGroup(
            self,
            "KubectlGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description=f"{cluster_name}: kubectl/helm custom-resource handler",
        )
        self.kubectl_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "EKS API, STS and S3 (chart assets) over HTTPS"
        )
        ec2.CfnSecurityGroupIngress(
            self,
            "ApiFromKubectl",
            group_id=security_group_id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            source_security_group_id=self.kubectl_group.security_group_id,
            description="EKS API from the kubectl/helm handler",
        )

        endpoint = (
            eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_access_cidrs)
            if public_access_cidrs
            else eks.EndpointAccess.PRIVATE
        )
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            version=eks.KubernetesVersion.of(kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=plane_subnets)],
            security_group=cluster_group,
            endpoint_access=endpoint,
            secrets_encryption_key=self.secrets_key,
            cluster_logging=[eks.ClusterLoggingTypes[re.sub(r"(?<!^)(?=[A-Z])", "_", t).upper()] for t in log_types],
            bootstrap_cluster_creator_admin_permissions=False,
            default_capacity=0,
            # vpc-cni, kube-proxy and coredns come as managed add-ons below; otherwise EKS first installs its own
            # copies, and creating the add-ons over them can fail with a configuration conflict.
            bootstrap_self_managed_addons=False,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, "KubectlLayer", kubernetes_version),
                private_subnets=node_subnets,
                security_groups=[self.kubectl_group],
            ),
        )
        # The same cluster as the ICluster aws_eks_v2's Kubernetes constructs take: jsii's Python types of Cluster
        # lack ICluster.kubectl_provider_options (the class implements the interface), so mypy needs this one cast.
        self.icluster = cast(eks.ICluster, self.cluster)
        kubectl_provider = self.cluster.kubectl_provider
        if kubectl_provider is None:  # kubectl_provider_options above make one
            raise AssertionError("aws_eks_v2 made no kubectl provider")
        self.kubectl_provider = kubectl_provider
        cfn_cluster = cast(eks.CfnCluster, self.cluster.node.default_child)  # jsii: IConstruct | None
        cfn_cluster.add_property_override("AccessConfig.AuthenticationMode", authentication_mode)
        self._run_kubectl_in(node_subnets)
        cfn_cluster.node.add_dependency(self.log_group)
        self.cluster_arn = self.cluster.cluster_arn

        for arn in admin_role_arns:
            self.cluster.grant_access(
                f"Admin-{arn.rsplit('/', 1)[-1]}",
                arn,
                [
                    eks.AccessPolicy.from_access_policy_name(
                        "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )

        self.addons: dict[str, eks.Addon] = {}
        for addon in addons:
            self.addon(addon)
        self._acknowledge_cluster()

    def addon(self, addon: Addon, *, after: Sequence[Construct] = (), scope: Construct | None = None) -> eks.Addon:
        """A managed add-on, at its pinned version or, unpinned, at the version EKS makes the default for the cluster's
        Kubernetes version (no AddonVersion in the template). One whose pods must be scheduled (a Deployment) goes
        `after` a node it can run on, in the `scope` (another stack) that holds the nodes."""
        created = eks.Addon(
            scope or self,
            f"Addon-{addon.name}",
            cluster=self.icluster,
            addon_name=addon.name,
            addon_version=addon.version,
            preserve_on_delete=False,
            configuration_values=dict(addon.configuration) if addon.configuration else None,
        )
        for dependency in after:
            created.node.add_dependency(dependency)
        self.addons[addon.name] = created
        return created

    def pod_identity(
        self,
        id_: str,
        *,
        namespace: str,
        service_account: str,
        role: iam.IRole,
        after: eks.Addon | None = None,
        scope: Construct | None = None,
    ) -> eks.CfnPodIdentityAssociation:
        association = eks.CfnPodIdentityAssociation(
            scope or self,
            id_,
            cluster_name=self.cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.role_arn,
        )
        if after is not None:
            association.node.add_dependency(after)
        return association

    def pod_role(
        self, scope: Construct, id_: str, description: str, *, namespace: str, service_account: str
    ) -> iam.Role:
        """A role that EKS Pod Identity hands to one service account of this cluster only: Pod Identity sets the
        cluster, namespace and service account as session tags, and the trust policy requires them
        (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html, pod-id-abac.html)."""
        principal = iam.ServicePrincipal("pods.eks.amazonaws.com").with_conditions(
            {
                "StringEquals": {
                    "aws:SourceAccount": cdk.Stack.of(self).account,
                    "aws:RequestTag/eks-cluster-arn": self.cluster_arn,
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": service_account,
                }
            }
        )
        return iam.Role(scope, id_, description=description, assumed_by=principal.with_session_tags())

    def manifest(
        self, id_: str, *objects: Mapping, after: Sequence[Construct] = (), scope: Construct | None = None
    ) -> eks.KubernetesManifest:
        resource = eks.KubernetesManifest(
            scope or self, id_, cluster=self.icluster, manifest=[dict(o) for o in objects], overwrite=True
        )
        if after:
            resource.node.add_dependency(*after)
        return resource

    def helm_chart(
        self,
        scope: Construct,
        id_: str,
        *,
        asset_id: str,
        chart_dir: str,
        release: str,
        namespace: str,
        values: Mapping,
    ) -> eks.HelmChart:
        """A chart from a local directory (a CDK asset `asset_id`), installed without waiting, after every add-on this
        control plane has so far; in `scope` (the stack), where the platform's chart has always been."""
        chart = eks.HelmChart(
            scope,
            id_,
            cluster=self.icluster,
            release=release,
            namespace=namespace,
            chart_asset=s3_assets.Asset(scope, asset_id, path=chart_dir),
            values=dict(values),
            wait=False,
            timeout=cdk.Duration.minutes(15),
        )
        for addon in self.addons.values():
            chart.node.add_dependency(addon)
        stack = cdk.Stack.of(scope)
        acknowledge(
            self.kubectl_provider,
            "AwsSolutions-IAM5",
            "the kubectl/helm handler reads the HyperPod dependency chart asset from the CDK assets bucket; "
            "aws-cdk-lib grants read on that bucket's objects",
            findings=[
                "Action::s3:GetBucket*",
                "Action::s3:GetObject*",
                "Action::s3:List*",
                f"Resource::arn:{stack.partition}:s3:::{assets_bucket_name(stack)}/*",
            ],
        )
        return chart

    def _run_kubectl_in(self, subnets: Sequence[ec2.ISubnet]) -> None:
        """With a private endpoint, aws_eks_v2 puts the kubectl/helm handler and its provider framework in the
        cluster's own subnets whatever `private_subnets` says. The control-plane subnets route only inside the VPC,
        so the handler could reach neither EKS, STS and S3 nor CloudFormation's response URL; the private subnets
        route through the NAT gateway and the S3 gateway endpoint. The API endpoint's ENIs stay reachable on the
        VPC's local route."""
        subnet_ids = [s.subnet_id for s in subnets]
        for child in self.kubectl_provider.node.find_all():
            if isinstance(child, lambda_.CfnFunction):
                child.add_property_override("VpcConfig.SubnetIds", subnet_ids)

    def _subnet(self, id_: str, subnet: PrivateSubnet) -> ec2.ISubnet:
        imported = ec2.Subnet.from_subnet_attributes(
            self, id_, subnet_id=subnet.subnet_id, availability_zone=subnet.az_id
        )
        cdk.Annotations.of(imported).acknowledge_warning(
            "@aws-cdk/aws-ec2:noSubnetRouteTableId",
            "the EKS constructs place ENIs in these subnets and never read their route tables",
        )
        return imported

    def _acknowledge_cluster(self) -> None:
        cdk.Annotations.of(self.cluster).acknowledge_warning(
            "@aws-cdk/aws-eks:clusterMustManuallyTagSubnet",
            "this platform creates no Kubernetes load balancers, so subnets need no internal-elb role tag",
        )
        acknowledge(
            self.cluster.role,
            "AwsSolutions-IAM4",
            "AmazonEKSClusterPolicy is the policy AWS maintains for the EKS control plane's own role",
            findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy"],
        )
        provider = self.kubectl_provider
        basic = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        vpc_access = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
        ecr = "Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"
        handler = provider.node.find_child("Handler")
        # jsii types children as IConstruct: the handler's condition is a CfnElement, its default child a CfnFunction.
        ecr_public = cast(cdk.CfnElement, handler.node.find_child("HasEcrPublic")).logical_id
        acknowledge(
            provider,
            "AwsSolutions-IAM4",
            "aws-cdk-lib's kubectl provider runs in the VPC and logs through the AWS-managed Lambda basic and "
            "VPC-access policies, and reads helm charts from ECR through the ECR read-only policies it "
            "attaches; this project does not shape that role",
            findings=[
                basic,
                vpc_access,
                ecr,
                'Policy::{"Fn::If":["' + ecr_public + '",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},'
                '":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}',
            ],
        )
        acknowledge(
            provider,
            "AwsSolutions-L1",
            "the kubectl provider's runtime is chosen by aws-cdk-lib together with its kubectl layer",
        )
        acknowledge(
            provider,
            "AwsSolutions-IAM5",
            "the Provider framework invokes the kubectl handler by any version ('<arn>:*'), as aws-cdk-lib grants it",
            findings=[f"Resource::{cast(lambda_.CfnFunction, handler.node.default_child).attr_arn}:*"],
        )
