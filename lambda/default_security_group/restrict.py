"""custom_resources.Provider handler: close a VPC's default security group (no inbound, no outbound rule).

EC2 creates every VPC with a default security group that admits all traffic from its own members and lets all
traffic out; anything launched without a group (an ENI, an endpoint someone adds later) lands in it. CloudFormation
cannot remove those rules, so this handler revokes every rule the group has: nothing in the platform uses the group,
and a resource placed in it by mistake then reaches nothing and is reached by nothing (AWS Security Hub control
EC2.2, "VPC default security groups should not allow inbound or outbound traffic").

Create and Update revoke whatever rules the group has (a second run finds none and changes nothing). Delete leaves
the group closed: the VPC goes with the stack, and a group re-opened by a removed resource would be a surprise.
Refuses any group that is not a VPC's `default` group.

ResourceProperties: SecurityGroupId. Environment: AWS_REGION (set by Lambda), optionally AWS_ENDPOINT_URL (tests).
"""

from __future__ import annotations

import logging
from typing import Any
from collections.abc import Mapping

from aws_clients import client

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)
# What DescribeSecurityGroups returns in IpPermissions that RevokeSecurityGroup* accepts back.
PERMISSION_KEYS = ("IpProtocol", "FromPort", "ToPort", "IpRanges", "Ipv6Ranges", "PrefixListIds", "UserIdGroupPairs")


def _permissions(rules: list[dict]) -> list[dict]:
    return [{k: v for k, v in rule.items() if k in PERMISSION_KEYS and v != []} for rule in rules]


def close(ec2, group_id: str) -> dict[str, int]:
    """Revokes every rule of the default group `group_id`; returns how many ingress and egress rules it removed."""
    (group,) = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    if group.get("GroupName") != "default":
        raise ValueError(
            f"{group_id} is {group.get('GroupName')!r}, not a VPC's default security group; refusing "
            "to remove its rules"
        )
    ingress, egress = _permissions(group.get("IpPermissions", [])), _permissions(group.get("IpPermissionsEgress", []))
    if ingress:
        ec2.revoke_security_group_ingress(GroupId=group_id, IpPermissions=ingress)
    if egress:
        ec2.revoke_security_group_egress(GroupId=group_id, IpPermissions=egress)
    LOG.info("closed %s: %d inbound and %d outbound rule(s) removed", group_id, len(ingress), len(egress))
    return {"IngressRulesRemoved": len(ingress), "EgressRulesRemoved": len(egress)}


def on_event(event: Mapping[str, Any], _context: Any = None) -> dict:
    group_id = event["ResourceProperties"]["SecurityGroupId"]
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    close(client("ec2"), group_id)
    return {"PhysicalResourceId": group_id}
