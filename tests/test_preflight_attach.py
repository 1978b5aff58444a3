"""cli/preflight.py in attach mode (cluster.existing), against a moto server: EC2 (the VPC, subnets, network ACLs,
security groups, the file system's network interfaces), SageMaker (a Slurm HyperPod cluster and its nodes), STS.
botocore Stubber (which checks requests and answers against botocore's service model) only where moto 5.2 lacks
the API or the fields: FSx DescribeFileSystems (moto has no Lifecycle, VpcId, MountName or NetworkInterfaceIds), IAM
SimulatePrincipalPolicy, CloudFormation DescribeType, an EKS-orchestrated DescribeCluster (moto's has no
Orchestrator), and the caller's assumed-role identity."""

from __future__ import annotations

import copy

import pytest
import yaml

from support.variants import VARIANT_FILES
from platform_config import parse_config
from support.moto_server import reset
from support.preflight_harness import REGION, Harness, real

from cli.preflight import ATTACH_ACTIONS, ATTACH_TYPES, FAILED, OK, Preflight, render

ACCOUNT = "123456789012"
CLUSTER = "a1b2c3d4e5f6"  # moto's cluster ARN ends in the name; a real one in a 12-character id
FS_ID = "fs-0123456789abcdef0"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/PlatformAdmin"


@pytest.fixture
def account(moto_endpoint):
    """moto's state, emptied before each test."""
    reset(moto_endpoint)
    return {"endpoint": moto_endpoint}


def network(account, groups_on_interface=1):
    ec2 = real(account, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/20", AvailabilityZoneId="usw2-az2")["Subnet"]["SubnetId"]
    studio = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.16.0/22", AvailabilityZoneId="usw2-az2")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(VpcId=vpc, GroupName="cluster", Description="cluster")["GroupId"]
    pair = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": sg}]}]
    ec2.authorize_security_group_ingress(GroupId=sg, IpPermissions=pair)
    ec2.authorize_security_group_egress(GroupId=sg, IpPermissions=pair)
    groups = [sg] + [
        ec2.create_security_group(VpcId=vpc, GroupName=f"g{i}", Description="x")["GroupId"]
        for i in range(groups_on_interface - 1)
    ]
    eni = ec2.create_network_interface(SubnetId=subnet, Groups=groups)["NetworkInterface"]["NetworkInterfaceId"]
    return {"vpc": vpc, "subnet": subnet, "studio": studio, "sg": sg, "eni": eni}


def cluster(account, net, groups=("controller-machine", "workers")):
    real(account, "sagemaker").create_cluster(
        ClusterName=CLUSTER,
        InstanceGroups=[
            {
                "InstanceGroupName": g,
                "InstanceType": "ml.m5.xlarge",
                "InstanceCount": 1,
                "ThreadsPerCore": 1,
                "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/hyperpod",
                "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/x/", "OnCreate": "on_create.sh"},
            }
            for g in groups
        ],
        VpcConfig={"SecurityGroupIds": [net["sg"]], "Subnets": [net["subnet"]]},
    )


def config(net, orchestrator="slurm", **existing):
    data = copy.deepcopy(
        yaml.safe_load(VARIANT_FILES["attach_slurm" if orchestrator == "slurm" else "attach_eks"].read_text())
    )
    data["deployment"] = {"region": REGION, "account": ACCOUNT}
    data["cluster"]["existing"].update(
        name=CLUSTER, arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER}", **existing
    )
    if orchestrator == "slurm":
        data["cluster"]["existing"]["attach_role_arn"] = ROLE
    data["network"]["existing"] = {
        "vpc_id": net["vpc"],
        "private_subnets": [{"id": net["subnet"], "az_id": "usw2-az2"}],
        "security_group_id": net["sg"],
        "studio_subnet": {"id": net["studio"], "az_id": "usw2-az2"},
    }
    data["storage"]["lustre"]["existing"].update(
        file_system_id=FS_ID, dns_name=f"{FS_ID}.fsx.{REGION}.amazonaws.com", mount_name="abcdefgh"
    )
    return parse_config(data)


def harness(
    account,
    net,
    *,
    caller=f"arn:aws:sts::{ACCOUNT}:assumed-role/PlatformAdmin/me",
    denied=(),
    slurm=True,
    eks_cluster=None,
):
    h = Harness(account)
    cfn = h.stub("cloudformation", "types")
    for name in sorted(ATTACH_TYPES):
        cfn.add_response("describe_type", {"TypeName": name}, {"Type": "RESOURCE", "TypeName": name})
    file_system = {
        "FileSystemId": FS_ID,
        "FileSystemType": "LUSTRE",
        "Lifecycle": "AVAILABLE",
        "StorageCapacity": 1200,
        "DNSName": f"{FS_ID}.fsx.{REGION}.amazonaws.com",
        "LustreConfiguration": {"MountName": "abcdefgh"},
        "VpcId": net["vpc"],
        "SubnetIds": [net["subnet"]],
        "NetworkInterfaceIds": [net["eni"]],
    }
    for purpose, answers in (("file-systems", 2), ("file-system-interfaces", 1)):
        stub = h.stub("fsx", purpose)
        for _ in range(answers):
            stub.add_response("describe_file_systems", {"FileSystems": [file_system]}, {"FileSystemIds": [FS_ID]})
    if eks_cluster is not None:
        h.stub("sagemaker", "cluster").add_response(
            "describe_cluster",
            {
                "ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER}",
                "ClusterName": CLUSTER,
                "ClusterStatus": "InService",
                "InstanceGroups": [],
                "Orchestrator": {"Eks": {"ClusterArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{eks_cluster}"}},
                "VpcConfig": {"SecurityGroupIds": [net["sg"]], "Subnets": [net["subnet"]]},
            },
            {"ClusterName": CLUSTER},
        )
    if slurm:
        h.stub("sts", "identity").add_response(
            "get_caller_identity", {"Arn": caller, "Account": ACCOUNT, "UserId": "AROAEXAMPLE:me"}, {}
        )
        if caller.split("/")[1] == "PlatformAdmin":
            h.stub("iam", "simulate").add_response(
                "simulate_principal_policy",
                {
                    "EvaluationResults": [
                        {"EvalActionName": a, "EvalDecision": "implicitDeny" if a in denied else "allowed"}
                        for a in ATTACH_ACTIONS
                    ]
                },
                {
                    "PolicySourceArn": ROLE,
                    "ActionNames": list(ATTACH_ACTIONS),
                    "ResourceArns": [f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"],
                },
            )
    return h


def checks(results):
    return {r.check: r for r in results}


def test_an_attachable_slurm_cluster_passes_every_check(account):
    net = network(account)
    cluster(account, net)
    results = Preflight(config(net), harness(account, net).client).run()
    assert {r.status for r in results} == {OK}, render(results)
    found = checks(results)
    assert set(found) == {
        "region-resource-types",
        "existing-network",
        "existing-fsx",
        "attach-cluster",
        "attach-lustre-path",
        "attach-fsx-interfaces",
        "attach-controller",
        "attach-caller",
    }
    assert found["attach-controller"].detail.startswith(
        f"Session Manager target sagemaker-cluster:{CLUSTER}_controller-machine-"
    )


def test_a_missing_cluster_is_one_line(account):
    net = network(account)
    found = checks(Preflight(config(net), harness(account, net).client).run())
    assert found["attach-cluster"].status == FAILED
    assert found["attach-cluster"].detail == f"cluster.existing.name: no HyperPod cluster '{CLUSTER}' in {REGION}"


def test_a_cluster_not_as_configured_names_each_key(account):
    net = network(account)
    cluster(account, net, groups=("head", "workers"))
    other_sg = real(account, "ec2").create_security_group(VpcId=net["vpc"], GroupName="o", Description="o")["GroupId"]
    cfg = config({**net, "sg": other_sg})
    detail = checks(Preflight(cfg, harness(account, net).client).run())["attach-cluster"].detail
    assert (
        "cluster.existing.controller_group: 'controller-machine' is not a group of the cluster (head, workers)"
        in detail
    )
    assert f"network.existing.security_group_id: {other_sg} is not the cluster's ({net['sg']})" in detail


def test_an_eks_cluster_of_another_eks_control_plane_or_orchestrator_fails(account):
    net = network(account)
    found = checks(
        Preflight(config(net, "eks"), harness(account, net, slurm=False, eks_cluster="other-eks").client).run()
    )
    assert found["attach-cluster"].status == FAILED
    assert (
        "cluster.existing.eks_cluster_name: 'hyperpod-eks-cluster', the cluster's EKS cluster is 'other-eks'"
        in found["attach-cluster"].detail
    )
    assert "attach-controller" not in found  # no Slurm controller to reach on EKS
    cluster(account, net)  # a Slurm cluster named in an EKS config
    found = checks(Preflight(config(net, "eks"), harness(account, net, slurm=False).client).run())
    assert "orchestrator: eks, the cluster is orchestrated by slurm" in found["attach-cluster"].detail


def test_a_network_acl_that_drops_lustre_fails(account):
    net = network(account)
    cluster(account, net)
    ec2 = real(account, "ec2")
    acl = ec2.describe_network_acls(Filters=[{"Name": "vpc-id", "Values": [net["vpc"]]}])["NetworkAcls"][0]
    ec2.create_network_acl_entry(
        NetworkAclId=acl["NetworkAclId"],
        RuleNumber=50,
        Protocol="6",
        RuleAction="deny",
        Egress=False,
        CidrBlock="10.1.0.0/16",
        PortRange={"From": 988, "To": 988},
    )
    check = checks(Preflight(config(net), harness(account, net).client).run())["attach-lustre-path"]
    assert check.status == FAILED
    assert f"network ACL {acl['NetworkAclId']} denies Lustre TCP 988-988 in" in check.detail


def test_interfaces_without_room_for_the_platforms_group_fail(account):
    net = network(account, groups_on_interface=5)
    cluster(account, net)
    check = checks(Preflight(config(net), harness(account, net).client).run())["attach-fsx-interfaces"]
    assert check.status == FAILED and check.detail.startswith(f"{net['eni']} of {FS_ID} already have 5 security groups")


@pytest.mark.parametrize(
    "caller, denied, expected",
    [
        (
            f"arn:aws:sts::{ACCOUNT}:assumed-role/Someone/me",
            (),
            f"you are arn:aws:sts::{ACCOUNT}:assumed-role/Someone/me; "
            f"cluster.existing.attach_role_arn {ROLE} is the only role",
        ),
        (
            f"arn:aws:sts::{ACCOUNT}:assumed-role/PlatformAdmin/me",
            ("ssm:StartSession",),
            f"{ROLE} may not ssm:StartSession on arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER}",
        ),
    ],
)
def test_the_caller_must_be_the_attach_role_and_may_start_sessions(account, caller, denied, expected):
    net = network(account)
    cluster(account, net)
    check = checks(Preflight(config(net), harness(account, net, caller=caller, denied=denied).client).run())[
        "attach-caller"
    ]
    assert check.status == FAILED and check.detail.startswith(expected), check.detail
