"""default_security_group: a VPC's default group closed, against the real EC2 API of moto server."""

from __future__ import annotations


import pytest

from support.recording import Recorder


import restrict


@pytest.fixture
def ec2():
    return restrict.client("ec2")


def default_group(ec2, vpc_id: str) -> dict:
    (group,) = ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"]
    return group


@pytest.fixture
def vpc(ec2):
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    group = default_group(ec2, vpc_id)
    # What EC2 gives every new VPC's default group (all from its own members in, everything out; moto 5.2 creates
    # the outbound rule only, so the member rule is added here) and a rule someone added later (SSH from anywhere).
    if not any(
        pair.get("GroupId") == group["GroupId"]
        for rule in group["IpPermissions"]
        for pair in rule.get("UserIdGroupPairs", [])
    ):
        ec2.authorize_security_group_ingress(
            GroupId=group["GroupId"],
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group["GroupId"]}]}],
        )
    ec2.authorize_security_group_ingress(
        GroupId=group["GroupId"],
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}],
    )
    group = default_group(ec2, vpc_id)
    assert group["IpPermissions"] and group["IpPermissionsEgress"]
    return vpc_id, group["GroupId"]


def test_create_removes_every_inbound_and_outbound_rule(ec2, vpc):
    vpc_id, group_id = vpc
    event = {"RequestType": "Create", "ResourceProperties": {"SecurityGroupId": group_id}}
    assert restrict.on_event(event) == {"PhysicalResourceId": group_id}
    group = default_group(ec2, vpc_id)
    assert group["IpPermissions"] == [] and group["IpPermissionsEgress"] == []


def test_ipv6_and_prefix_list_rules_are_removed_too(ec2):
    """A VPC with an IPv6 block: EC2 gives its default group an outbound rule to ::/0 besides 0.0.0.0/0 (VPC user
    guide, "Default security groups for your VPCs"; moto 5.2 does not, so it is added here), and someone let SSH in
    from a managed prefix list (an office's ranges) and from ::/0."""
    vpc_id = ec2.create_vpc(CidrBlock="10.1.0.0/16", AmazonProvidedIpv6CidrBlock=True)["Vpc"]["VpcId"]
    group_id = default_group(ec2, vpc_id)["GroupId"]
    if not any(r.get("Ipv6Ranges") for r in default_group(ec2, vpc_id)["IpPermissionsEgress"]):
        ec2.authorize_security_group_egress(
            GroupId=group_id, IpPermissions=[{"IpProtocol": "-1", "Ipv6Ranges": [{"CidrIpv6": "::/0"}]}]
        )
    office = ec2.create_managed_prefix_list(
        PrefixListName="office", AddressFamily="IPv4", MaxEntries=2, Entries=[{"Cidr": "198.51.100.0/24"}]
    )["PrefixList"]["PrefixListId"]
    ec2.authorize_security_group_ingress(
        GroupId=group_id,
        IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "PrefixListIds": [{"PrefixListId": office}]},
            {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "Ipv6Ranges": [{"CidrIpv6": "::/0"}]},
        ],
    )
    restrict.on_event({"RequestType": "Create", "ResourceProperties": {"SecurityGroupId": group_id}})
    group = default_group(ec2, vpc_id)
    assert group["IpPermissions"] == [] and group["IpPermissionsEgress"] == []


def test_a_second_run_finds_nothing_to_revoke(ec2, vpc, monkeypatch):
    _, group_id = vpc
    assert restrict.close(ec2, group_id) == {"IngressRulesRemoved": 2, "EgressRulesRemoved": 1}
    recorder = Recorder(ec2)
    assert restrict.close(ec2, group_id) == {"IngressRulesRemoved": 0, "EgressRulesRemoved": 0}
    assert recorder.names() == ["DescribeSecurityGroups"]


def test_refuses_a_group_that_is_not_the_default(ec2, vpc):
    vpc_id, _ = vpc
    other = ec2.create_security_group(GroupName="efa", Description="x", VpcId=vpc_id)["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=other, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": other}]}]
    )
    with pytest.raises(ValueError, match=rf"{other} is 'efa', not a VPC's default security group"):
        restrict.on_event({"RequestType": "Update", "ResourceProperties": {"SecurityGroupId": other}})
    (group,) = ec2.describe_security_groups(GroupIds=[other])["SecurityGroups"]
    assert group["IpPermissions"]


def test_delete_leaves_the_group_closed_and_calls_nothing(ec2, vpc, monkeypatch):
    _, group_id = vpc
    restrict.close(ec2, group_id)
    recorder = Recorder(ec2)
    monkeypatch.setattr(restrict, "client", lambda _service: ec2)
    assert restrict.on_event(
        {"RequestType": "Delete", "PhysicalResourceId": group_id, "ResourceProperties": {"SecurityGroupId": group_id}}
    ) == {"PhysicalResourceId": group_id}
    assert recorder.names() == []
