"""A VPC for HyperPod whose subnets are pinned to AZ IDs.

Subnets are L1 `CfnSubnet`s because only they take `AvailabilityZoneId`: AZ names map to different
physical zones per account, and capacity (training plans, p5 quota) is granted per AZ ID. The L2 `ec2.Vpc`
would also look up the region's AZs at synth time, which this project never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct
from constructs.default_security_group import RestrictDefaultSecurityGroup
from constructs.pseudo_parameters import ACCOUNT_ID, PARTITION, REGION

INTERFACE_ENDPOINTS = {
    "ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "ssmmessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "ec2messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
    "sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "ecr.api": ec2.InterfaceVpcEndpointAwsService.ECR,
    "ecr.dkr": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "sagemaker.api": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
}


@dataclass(frozen=True)
class PrivateSubnet:
    az_id: str
    subnet_id: str


class HyperPodVpc(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cidr: str,
        az_ids: list[str],
        public_subnet_cidr: str,
        private_subnet_cidrs: list[str],
        restricted_s3_endpoint: bool,
        interface_endpoints: list[str],
        flow_log_retention_days: int | None,
        control_plane_subnets: Sequence[tuple[str, str]] = (),
        studio_subnet_cidr: str | None = None,
    ) -> None:
        super().__init__(scope, id_)
        vpc = ec2.CfnVPC(
            self,
            "Vpc",
            cidr_block=cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=[cdk.CfnTag(key="Name", value=f"{cdk.Stack.of(self).stack_name}-vpc")],
        )
        self.vpc_id = vpc.ref
        self.cidr = cidr
        # Nothing uses the default group; closed, it admits and lets out nothing (constructs/default_security_group).
        self.default_security_group = RestrictDefaultSecurityGroup(
            self, "RestrictDefaultSecurityGroup", security_group_id=vpc.attr_default_security_group
        )

        igw = ec2.CfnInternetGateway(self, "InternetGateway")
        igw_attachment = ec2.CfnVPCGatewayAttachment(
            self, "InternetGatewayAttachment", vpc_id=vpc.ref, internet_gateway_id=igw.ref
        )
        # The public subnet holds only the NAT gateway; nothing launched there gets a public IP by default.
        public = self._subnet("Public", az_ids[0], public_subnet_cidr)
        public_route = ec2.CfnRoute(
            self, "PublicDefaultRoute", route_table_id=public[1], destination_cidr_block="0.0.0.0/0", gateway_id=igw.ref
        )
        public_route.add_resource_dependency(igw_attachment)
        nat_ip = ec2.CfnEIP(self, "NatIp", domain="vpc")
        nat = ec2.CfnNatGateway(self, "NatGateway", subnet_id=public[0], allocation_id=nat_ip.attr_allocation_id)
        nat.add_resource_dependency(igw_attachment)

        self.private_subnets: list[PrivateSubnet] = []
        route_tables: list[str] = []
        for index, (az_id, subnet_cidr) in enumerate(zip(az_ids, private_subnet_cidrs, strict=True), start=1):
            subnet_id, route_table_id = self._subnet(f"Private{index}", az_id, subnet_cidr)
            ec2.CfnRoute(
                self,
                f"Private{index}DefaultRoute",
                route_table_id=route_table_id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat.ref,
            )
            self.private_subnets.append(PrivateSubnet(az_id=az_id, subnet_id=subnet_id))
            route_tables.append(route_table_id)

        # Studio apps: a subnet of their own beside FSx (first AZ), so the cluster's subnets' addresses are only ever
        # cluster nodes' (FSx root squash exempts those addresses). Out through the NAT gateway, like the cluster.
        self.studio_subnet: PrivateSubnet | None = None
        if studio_subnet_cidr:
            subnet_id, route_table_id = self._subnet("Studio", az_ids[0], studio_subnet_cidr)
            ec2.CfnRoute(
                self,
                "StudioDefaultRoute",
                route_table_id=route_table_id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat.ref,
            )
            self.studio_subnet = PrivateSubnet(az_id=az_ids[0], subnet_id=subnet_id)
            route_tables_for_s3 = [route_table_id]
        else:
            route_tables_for_s3 = []

        # EKS control-plane ENIs: small subnets whose route tables hold only the VPC's local route.
        self.control_plane_subnets = [
            PrivateSubnet(az_id=az_id, subnet_id=self._subnet(f"ControlPlane{index}", az_id, subnet_cidr)[0])
            for index, (az_id, subnet_cidr) in enumerate(control_plane_subnets, start=1)
        ]

        # An L2 view of the same VPC, for constructs (endpoints, security groups) that want an IVpc.
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "View",
            vpc_id=vpc.ref,
            vpc_cidr_block=cidr,
            availability_zones=az_ids,
            private_subnet_ids=[s.subnet_id for s in self.private_subnets],
            private_subnet_route_table_ids=route_tables,
        )

        self.s3_endpoint = ec2.GatewayVpcEndpoint(
            self,
            "S3Endpoint",
            vpc=self.vpc,
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=self.vpc.private_subnets)],
        )
        if route_tables_for_s3:  # Studio's subnet is not in the L2 view (interface endpoints stay in the cluster's)
            # jsii types default_child as IConstruct | None; a GatewayVpcEndpoint's is its CfnVPCEndpoint.
            endpoint = cast(ec2.CfnVPCEndpoint, self.s3_endpoint.node.default_child)
            endpoint.route_table_ids = route_tables + route_tables_for_s3
        if restricted_s3_endpoint:
            for statement in restricted_s3_statements():
                self.s3_endpoint.add_to_policy(statement)

        self.interface_endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        if interface_endpoints:
            endpoint_group = ec2.SecurityGroup(
                self,
                "EndpointGroup",
                vpc=self.vpc,
                allow_all_outbound=False,
                description="Interface endpoints: HTTPS from inside the VPC",
            )
            endpoint_group.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), "HTTPS from the VPC")
            for name in interface_endpoints:
                self.interface_endpoints[name] = ec2.InterfaceVpcEndpoint(
                    self,
                    f"Endpoint-{name}",
                    vpc=self.vpc,
                    service=INTERFACE_ENDPOINTS[name],
                    private_dns_enabled=True,
                    subnets=ec2.SubnetSelection(subnets=self.vpc.private_subnets),
                    security_groups=[endpoint_group],
                    open=False,
                )

        self.flow_log_group: logs.LogGroup | None = None
        if flow_log_retention_days:
            log_group = self.flow_log_group = logs.LogGroup(
                self, "FlowLogGroup", removal_policy=cdk.RemovalPolicy.RETAIN
            )
            # RetentionDays is an enum of names in Python; the config holds the number of days.
            cast(logs.CfnLogGroup, log_group.node.default_child).retention_in_days = flow_log_retention_days
            ec2.FlowLog(
                self,
                "FlowLog",
                resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group),
                traffic_type=ec2.FlowLogTrafficType.ALL,
            )

    def _subnet(self, name: str, az_id: str, cidr: str) -> tuple[str, str]:
        subnet = ec2.CfnSubnet(
            self,
            f"{name}Subnet",
            vpc_id=self.vpc_id,
            cidr_block=cidr,
            availability_zone_id=az_id,
            map_public_ip_on_launch=False,
            tags=[cdk.CfnTag(key="Name", value=f"{cdk.Stack.of(self).stack_name}-{name.lower()}")],
        )
        subnet_id, table_id = subnet.ref, ec2.CfnRouteTable(self, f"{name}RouteTable", vpc_id=self.vpc_id).ref
        ec2.CfnSubnetRouteTableAssociation(
            self, f"{name}RouteTableAssociation", subnet_id=subnet_id, route_table_id=table_id
        )
        return subnet_id, table_id


def restricted_s3_statements() -> list[iam.PolicyStatement]:
    """S3 through the gateway endpoint only for this account's buckets and the AWS-owned buckets nodes read.

    HyperPod's own agents reach the service over the cluster's service-side network interface, not this
    endpoint; what nodes fetch through it is the lifecycle bucket and data (this account), container image
    layers (ECR's regional layer bucket) and SSM agent updates (SSM's regional buckets).
    """
    region, partition = REGION, PARTITION
    aws_owned = [
        f"arn:{partition}:s3:::prod-{region}-starport-layer-bucket/*",  # ECR image layers
        f"arn:{partition}:s3:::amazon-ssm-{region}/*",  # SSM agent
        f"arn:{partition}:s3:::aws-ssm-{region}/*",
        f"arn:{partition}:s3:::{region}-birdwatcher-prod/*",
    ]
    return [
        iam.PolicyStatement(
            sid="ThisAccountsBuckets",
            principals=[iam.AnyPrincipal()],
            actions=["s3:*"],
            resources=["*"],
            conditions={"StringEquals": {"aws:ResourceAccount": ACCOUNT_ID}},
        ),
        iam.PolicyStatement(
            sid="AwsOwnedBucketsRead", principals=[iam.AnyPrincipal()], actions=["s3:GetObject"], resources=aws_owned
        ),
    ]
