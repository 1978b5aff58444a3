"""Network stack: VPC pinned to AZ IDs, NAT, S3 endpoint, flow logs, interface endpoints, EFA security group."""

import json

from aws_cdk.assertions import Match


def _group(template):
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    assert len(groups) == 1
    return next(iter(groups))


def test_private_subnets_use_az_ids_and_route_through_nat(synth):
    s = synth("multi_az")
    t = s.template("network")
    t.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.1.0.0/16", "EnableDnsHostnames": True})
    for az, cidr in [("use1-az4", "10.1.64.0/18"), ("use1-az6", "10.1.128.0/18")]:
        t.has_resource_properties(
            "AWS::EC2::Subnet", {"AvailabilityZoneId": az, "CidrBlock": cidr, "MapPublicIpOnLaunch": False}
        )
    t.resource_count_is("AWS::EC2::Subnet", 4)  # one public (NAT only) + two private + Studio's
    subnets = t.find_resources("AWS::EC2::Subnet")
    assert all("AvailabilityZone" not in r["Properties"] for r in subnets.values())
    t.resource_count_is("AWS::EC2::NatGateway", 1)
    t.has_resource_properties(
        "AWS::EC2::Route",
        {"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": {"Ref": Match.string_like_regexp("NatGateway")}},
    )
    routes = t.find_resources("AWS::EC2::Route", {"Properties": {"NatGatewayId": Match.any_value()}})
    assert len(routes) == 3


def test_studio_gets_a_subnet_of_its_own_beside_fsx(synth):
    """Studio's addresses must not be the cluster's: FSx root squash exempts the cluster's subnets."""
    t = synth("multi_az").template("network")
    (studio,) = [r["Properties"] for k, r in t.find_resources("AWS::EC2::Subnet").items() if k.startswith("VpcStudio")]
    assert studio["CidrBlock"] == "10.1.4.0/22" and studio["AvailabilityZoneId"] == "use1-az4"
    (s3,) = [
        e for e in t.find_resources("AWS::EC2::VPCEndpoint").values() if e["Properties"]["VpcEndpointType"] == "Gateway"
    ]
    assert any("VpcStudioRouteTable" in json.dumps(r) for r in s3["Properties"]["RouteTableIds"])


def test_s3_gateway_endpoint_is_open_by_default(synth):
    t = synth("default").template("network")
    endpoints = t.find_resources("AWS::EC2::VPCEndpoint")
    (s3,) = endpoints.values()
    assert s3["Properties"]["VpcEndpointType"] == "Gateway"
    assert "PolicyDocument" not in s3["Properties"]  # AWS's default full-access policy, as AWS's templates use


def test_restricted_s3_endpoint_allows_own_account_and_aws_owned_buckets_only(synth):
    t = synth("multi_az").template("network")
    gateway = [
        r
        for r in t.find_resources("AWS::EC2::VPCEndpoint").values()
        if r["Properties"].get("VpcEndpointType") == "Gateway"
    ]
    statements = gateway[0]["Properties"]["PolicyDocument"]["Statement"]
    by_sid = {s["Sid"]: s for s in statements}
    assert set(by_sid) == {"ThisAccountsBuckets", "AwsOwnedBucketsRead"}
    assert by_sid["ThisAccountsBuckets"]["Condition"] == {
        "StringEquals": {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}
    }
    assert by_sid["AwsOwnedBucketsRead"]["Action"] == "s3:GetObject"
    rendered = str(by_sid["AwsOwnedBucketsRead"]["Resource"])
    assert "starport-layer-bucket" in rendered and "amazon-ssm-" in rendered


def test_interface_endpoints_are_private_and_https_only(synth):
    t = synth("multi_az").template("network")
    interfaces = t.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}})
    assert len(interfaces) == 8
    assert all(r["Properties"]["PrivateDnsEnabled"] for r in interfaces.values())
    t.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": Match.string_like_regexp("Interface endpoints"),
            "SecurityGroupIngress": [
                Match.object_like({"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "10.1.0.0/16"})
            ],
        },
    )
    assert (
        synth("default")
        .template("network")
        .find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}})
        == {}
    )


def test_flow_logs_with_retention(synth):
    t = synth("default").template("network")
    t.has_resource_properties(
        "AWS::EC2::FlowLog", {"ResourceType": "VPC", "TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs"}
    )
    t.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 90})
    synth("multi_az").template("network").has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 365})


def test_efa_group_allows_all_traffic_to_and_from_itself(synth):
    t = synth("default").template("network")
    group = _group(t)
    self_ref = {"Fn::GetAtt": [group, "GroupId"]}
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress", {"IpProtocol": "-1", "GroupId": self_ref, "SourceSecurityGroupId": self_ref}
    )
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"IpProtocol": "-1", "GroupId": self_ref, "DestinationSecurityGroupId": self_ref},
    )


def test_efa_group_opens_lustre_ports(synth):
    t = synth("default").template("network")
    self_ref = {"Fn::GetAtt": [_group(t), "GroupId"]}
    for low, high in [(988, 988), (1018, 1023)]:
        t.has_resource_properties(
            "AWS::EC2::SecurityGroupIngress",
            {
                "IpProtocol": "tcp",
                "FromPort": low,
                "ToPort": high,
                "GroupId": self_ref,
                "SourceSecurityGroupId": self_ref,
            },
        )


def test_efa_group_egress_is_narrow(synth):
    t = synth("default").template("network")
    egress = t.find_resources("AWS::EC2::SecurityGroup")[_group(t)]["Properties"]["SecurityGroupEgress"]
    assert (
        sorted((r["IpProtocol"], r["FromPort"], r["CidrIp"]) for r in egress)
        == [("tcp", 443, "0.0.0.0/0"), ("tcp", 80, "0.0.0.0/0")][::-1]
    )


def test_existing_network_creates_no_network_stack(synth):
    s = synth("existing_vpc")
    assert s.platform.network_stack is None and "network" not in s.templates
    cluster = s.templates["cluster"]
    (hyperpod,) = [r for r in cluster["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert hyperpod["Properties"]["VpcConfig"] == {
        "SecurityGroupIds": ["sg-0a1b2c3d4e5f60718"],
        "Subnets": ["subnet-0a1b2c3d4e5f60718"],
    }
    # This example brings its file system too (tests/test_storage.py); FSx placement is checked on "multi_az".


def test_the_vpcs_default_security_group_is_closed(synth):
    """EC2's default group (all in from its members, all out) gets every rule revoked by a custom resource: the handler
    may revoke rules of exactly that group (lambda/default_security_group, tested against moto)."""
    t = synth("default").templates["network"]
    resources = t["Resources"]
    (vpc_id,) = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::VPC"]
    (closer,) = [r for r in resources.values() if r["Type"] == "Custom::RestrictDefaultSecurityGroup"]
    assert closer["Properties"]["SecurityGroupId"] == {"Fn::GetAtt": [vpc_id, "DefaultSecurityGroup"]}
    token = closer["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    assert resources[token]["Type"] == "AWS::Lambda::Function"
    statements = {
        st["Sid"]: st
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy"
        for st in r["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid")
    }
    close = statements["CloseDefaultGroup"]
    assert sorted(close["Action"]) == ["ec2:RevokeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress"]
    (_, parts) = close["Resource"]["Fn::Join"]
    assert parts[-1] == {"Fn::GetAtt": [vpc_id, "DefaultSecurityGroup"]} and parts[-2].endswith(":security-group/")
    (handler,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "restrict.on_event"
    ]
    # An existing VPC is not the platform's: nothing touches its default group.
    assert "network" not in synth("existing_vpc").templates
    assert "RestrictDefaultSecurityGroup" not in json.dumps(synth("existing_vpc").templates)
