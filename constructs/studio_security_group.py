"""The Studio apps' security group: NFS and app traffic within the group (required for VpcOnly), HTTPS out, and the
cluster's Lustre and scheduler ports, opened on both sides declaratively."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from constructs import Construct
from constructs.lustre_ports import LUSTRE_PORTS

SLURM_PORTS = ((6817, 6817), (6819, 6819))  # slurmctld, slurmdbd (sacct)
EKS_API_PORTS = ((443, 443),)


class StudioSecurityGroup(ec2.CfnSecurityGroup):
    """The group, with its rules and the matching rules on the cluster's side. The rules are created beside the
    group, in `scope` (the stack), where they have always been: their logical ids are those of deployed stacks."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc_id: str,
        cluster_security_group_id: str,
        lustre_security_group_id: str,
        scheduler: str,
        scheduler_ports: Sequence[tuple[int, int]],
    ) -> None:
        """`scheduler`: the label of the scheduler's rules ("Slurm", "EksApi"), reached on `scheduler_ports` in the
        cluster's group. `lustre_security_group_id`: the group Lustre lives in (the cluster's when the platform owns
        the file system, else the access group the storage stack attached to the file system you brought)."""
        super().__init__(
            scope, id_, vpc_id=vpc_id, group_description="SageMaker Studio apps: domain EFS, Lustre, Slurm, HTTPS out"
        )
        group_id = self.attr_group_id
        for name, (low, high) in {"Nfs": (2049, 2049), "Apps": (8192, 65535)}.items():
            ec2.CfnSecurityGroupIngress(
                scope,
                f"StudioSelf{name}In",
                group_id=group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                source_security_group_id=group_id,
                description=f"Studio {name.lower()} traffic within the group",
            )
            ec2.CfnSecurityGroupEgress(
                scope,
                f"StudioSelf{name}Out",
                group_id=group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                destination_security_group_id=group_id,
                description=f"Studio {name.lower()} traffic within the group",
            )
        ec2.CfnSecurityGroupEgress(
            scope,
            "StudioHttpsOut",
            group_id=group_id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            cidr_ip="0.0.0.0/0",
            description="HTTPS to AWS APIs and package mirrors",
        )
        for label, ports, target in (
            ("Lustre", LUSTRE_PORTS, lustre_security_group_id),
            (scheduler, scheduler_ports, cluster_security_group_id),
        ):
            for low, high in ports:
                ec2.CfnSecurityGroupEgress(
                    scope,
                    f"StudioTo{label}{low}",
                    group_id=group_id,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    destination_security_group_id=target,
                    description=f"{label} on the cluster from Studio apps",
                )
                ec2.CfnSecurityGroupIngress(
                    scope,
                    f"ClusterFrom{label}{low}",
                    group_id=target,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    source_security_group_id=group_id,
                    description=f"{label} from Studio apps",
                )
        # Lustre servers also open connections to their clients: FSx asks that clients allow inbound from the file
        # system's group on 988 and 1018-1023, and that the file system's group may reach them
        # (https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html). The same rules
        # for the platform's file system (cluster group) and one you bring (access group).
        for low, high in LUSTRE_PORTS:
            ec2.CfnSecurityGroupIngress(
                scope,
                f"StudioFromLustre{low}",
                group_id=group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                source_security_group_id=lustre_security_group_id,
                description="Lustre from the file system's servers to Studio apps",
            )
            ec2.CfnSecurityGroupEgress(
                scope,
                f"LustreToStudio{low}",
                group_id=lustre_security_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                destination_security_group_id=group_id,
                description="Lustre servers to Studio apps",
            )
