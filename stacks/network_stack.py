"""Network: a new VPC pinned to AZ IDs with the EFA security group, or references to an existing one."""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import aws_cdk as cdk
from constructs import Construct
from constructs.efa_security_group import EfaSecurityGroup
from constructs.hyperpod_vpc import HyperPodVpc, PrivateSubnet

from platform_config.eks import ControlPlaneSubnet
from platform_config.network import Network


@dataclass(frozen=True)
class NetworkRefs:
    """What the other stacks need from the network, whoever created it."""
    vpc_id: str
    private_subnets: tuple[PrivateSubnet, ...]
    security_group_id: str
    control_plane_subnets: tuple[PrivateSubnet, ...] = ()  # EKS only
    studio_subnet: PrivateSubnet | None = None  # Studio's own; None: Studio uses the primary subnet

    @property
    def studio_subnet_id(self) -> str:
        return (self.studio_subnet or self.primary_subnet).subnet_id

    @property
    def primary_subnet(self) -> PrivateSubnet:
        """FSx and the cluster's default placement live here (FSx for Lustre is single-AZ)."""
        return self.private_subnets[0]

    def subnet_in(self, az_id: str) -> str:
        return next(s.subnet_id for s in self.private_subnets if s.az_id == az_id)

    @classmethod
    def existing(cls, network: Network) -> NetworkRefs:
        ex = network.existing
        return cls(vpc_id=ex.vpc_id, security_group_id=ex.security_group_id,
                   private_subnets=tuple(PrivateSubnet(az_id=s.az_id, subnet_id=s.id) for s in ex.private_subnets),
                   control_plane_subnets=tuple(PrivateSubnet(az_id=s.az_id, subnet_id=s.id)
                                               for s in ex.control_plane_subnets),
                   studio_subnet=PrivateSubnet(az_id=ex.studio_subnet.az_id, subnet_id=ex.studio_subnet.id)
                   if ex.studio_subnet else None)


class NetworkStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, network: Network,
                 control_plane_subnets: Sequence[ControlPlaneSubnet] = (), **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        self.vpc = HyperPodVpc(
            self, "Vpc", cidr=network.vpc_cidr, az_ids=list(network.az_ids),
            public_subnet_cidr=network.public_subnet_cidr, private_subnet_cidrs=list(network.private_subnet_cidrs),
            restricted_s3_endpoint=network.s3_endpoint_policy == "restricted",
            interface_endpoints=list(network.interface_endpoints),
            flow_log_retention_days=network.flow_logs.retention_days if network.flow_logs.enabled else None,
            control_plane_subnets=[(s.az_id, s.cidr) for s in control_plane_subnets],
            studio_subnet_cidr=network.studio_subnet_cidr)
        self.efa = EfaSecurityGroup(self, "EfaSecurityGroup", vpc=self.vpc.vpc,
                                    allow_http_egress=network.allow_http_egress)
        self.refs = NetworkRefs(vpc_id=self.vpc.vpc_id, private_subnets=tuple(self.vpc.private_subnets),
                                security_group_id=self.efa.security_group.security_group_id,
                                control_plane_subnets=tuple(self.vpc.control_plane_subnets),
                                studio_subnet=self.vpc.studio_subnet)

        cdk.CfnOutput(self, "VpcId", value=self.refs.vpc_id)
        cdk.CfnOutput(self, "PrivateSubnetIds", value=cdk.Fn.join(",", [s.subnet_id for s in self.refs.private_subnets]))
        cdk.CfnOutput(self, "SecurityGroupId", value=self.refs.security_group_id,
                      description="EFA security group shared by HyperPod nodes and FSx for Lustre")
