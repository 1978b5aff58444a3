"""Network: a new VPC pinned to AZ IDs with the EFA security group, or references to an existing one."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from constructs import Construct
from constructs.efa_security_group import EfaSecurityGroup
from constructs.hyperpod_vpc import HyperPodVpc
from constructs.platform_refs import NetworkRefs

from platform_config.eks import ControlPlaneSubnet
from platform_config.network import Network


class NetworkStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        network: Network,
        control_plane_subnets: Sequence[ControlPlaneSubnet] = (),
        **kwargs,
    ) -> None:
        super().__init__(scope, id_, **kwargs)
        self.vpc = HyperPodVpc(
            self,
            "Vpc",
            cidr=network.vpc_cidr,
            az_ids=list(network.az_ids),
            public_subnet_cidr=network.public_subnet_cidr,
            private_subnet_cidrs=list(network.private_subnet_cidrs),
            restricted_s3_endpoint=network.s3_endpoint_policy == "restricted",
            interface_endpoints=list(network.interface_endpoints),
            flow_log_retention_days=network.flow_logs.retention_days if network.flow_logs.enabled else None,
            control_plane_subnets=[(s.az_id, s.cidr) for s in control_plane_subnets],
            studio_subnet_cidr=network.studio_subnet_cidr,
        )
        self.efa = EfaSecurityGroup(
            self, "EfaSecurityGroup", vpc=self.vpc.vpc, allow_http_egress=network.allow_http_egress
        )
        self.refs = NetworkRefs(
            vpc_id=self.vpc.vpc_id,
            private_subnets=tuple(self.vpc.private_subnets),
            security_group_id=self.efa.security_group.security_group_id,
            control_plane_subnets=tuple(self.vpc.control_plane_subnets),
            studio_subnet=self.vpc.studio_subnet,
        )

        cdk.CfnOutput(self, "VpcId", value=self.refs.vpc_id)
        cdk.CfnOutput(
            self, "PrivateSubnetIds", value=cdk.Fn.join(",", [s.subnet_id for s in self.refs.private_subnets])
        )
        cdk.CfnOutput(
            self,
            "SecurityGroupId",
            value=self.refs.security_group_id,
            description="EFA security group shared by HyperPod nodes and FSx for Lustre",
        )
