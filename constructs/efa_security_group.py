"""The security group HyperPod nodes (and FSx for Lustre) share."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct
from constructs.lustre_ports import LUSTRE_PORTS as LUSTRE_PORT_RANGES

LUSTRE_PORTS = tuple(
    ec2.Port.tcp(first) if first == last else ec2.Port.tcp_range(first, last) for first, last in LUSTRE_PORT_RANGES
)


class EfaSecurityGroup(Construct):
    """All traffic to and from itself (EFA needs both directions), the Lustre ports, and narrow egress.

    `allow_all_outbound=False` is deliberate: with it set to True, CDK silently drops the self-egress rule,
    and EFA health checks fail without it.
    """

    def __init__(self, scope: Construct, id_: str, *, vpc: ec2.IVpc, allow_http_egress: bool) -> None:
        super().__init__(scope, id_)
        self.security_group = ec2.SecurityGroup(
            self,
            "Group",
            vpc=vpc,
            allow_all_outbound=False,
            description="HyperPod nodes and FSx for Lustre: EFA (all traffic within the group), Lustre, HTTPS out",
        )
        group = self.security_group
        group.add_ingress_rule(group, ec2.Port.all_traffic(), "EFA and intra-cluster traffic from the group")
        group.add_egress_rule(group, ec2.Port.all_traffic(), "EFA and intra-cluster traffic to the group")
        for port in LUSTRE_PORTS:
            # Redundant with the all-traffic rule for members, but explicit so the Lustre contract survives
            # anyone narrowing that rule, and so FSx's own port check at create time sees it.
            group.add_ingress_rule(group, port, "FSx for Lustre (LNet) from the group")
        group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to AWS APIs, ECR and package mirrors")
        if allow_http_egress:
            group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP to Ubuntu apt mirrors")

    def allow_lustre_clients(self, peer: ec2.IPeer, description: str) -> None:
        """Let another group (e.g. Studio apps) mount the file system that lives in this group."""
        for port in LUSTRE_PORTS:
            self.security_group.add_ingress_rule(peer, port, description)
