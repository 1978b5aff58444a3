"""cli/preflight.py against a moto server (EC2, IAM, SageMaker clusters, FSx over HTTP); botocore Stubber only for
what moto 5.2 lacks: Service Quotas' ListServiceQuotas, CloudFormation DescribeType, SageMaker DescribeTrainingPlan,
and the throttling / AccessDenied answers."""

from __future__ import annotations

import copy
import datetime

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from support.moto_server import reset
from support.preflight_harness import REGION, Harness, by_check, real
from support.price_list_answers import answers, stubbed_pricing
from platform_config import parse_config
from cli.preflight import CORE_TYPES, FAILED, OK, UNKNOWN, WARNING, Preflight, exit_code, main, render

GROUPS = [
    {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
    {"name": "gpu", "role": "compute", "instance_type": "ml.p5.48xlarge", "instance_count": 2, "partitions": ["gpu"]},
]
PLAN = f"arn:aws:sagemaker:{REGION}:123456789012:training-plan/plan-a"


@pytest.fixture
def account(moto_endpoint):
    """moto's state, emptied before each test."""
    reset(moto_endpoint)
    return {"endpoint": moto_endpoint}


def quotas(values: dict[str, float]) -> dict:
    return {
        "Quotas": [
            {"QuotaName": n, "Value": v, "QuotaCode": f"L-{i:08X}", "ServiceCode": "x"}
            for i, (n, v) in enumerate(values.items())
        ]
    }


def harness(account, sagemaker_quota=4, fsx_quota=100_800, types_missing=()):
    h = Harness(account)
    cfn = h.stub("cloudformation", "types")
    for name in sorted(CORE_TYPES):
        if name in types_missing:
            cfn.add_client_error("describe_type", "TypeNotFoundException", "not found", 404)
        else:
            cfn.add_response("describe_type", {"TypeName": name}, {"Type": "RESOURCE", "TypeName": name})
    sq = h.stub("service-quotas", "sagemaker")
    if sagemaker_quota is not None:
        sq.add_response(
            "list_service_quotas",
            quotas({"ml.p5.48xlarge for cluster usage": sagemaker_quota, "ml.m5.xlarge for cluster usage": 10}),
            {"ServiceCode": "sagemaker"},
        )
    fq = h.stub("service-quotas", "fsx")
    fq.add_response(
        "list_service_quotas",
        quotas(
            {
                "Lustre total storage capacity per file system": 100_800,
                "Lustre total storage capacity": fsx_quota,
                "Lustre backups": 500,
            }
        ),
        {"ServiceCode": "fsx"},
    )
    return h


def config(**changes):
    data = {"name": "mine", "cluster": {"instance_groups": copy.deepcopy(GROUPS)}}
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return parse_config(data)


def service_linked_roles(account, names=("AWSServiceRoleForSageMakerHyperPod", "AWSServiceRoleForAmazonFSx")):
    iam = real(account, "iam")
    for name in names:
        iam.create_role(RoleName=name, Path="/aws-service-role/x.amazonaws.com/", AssumeRolePolicyDocument="{}")


def test_a_deployable_config_passes_every_check(account):
    service_linked_roles(account)
    results = Preflight(config(), harness(account).client).run()
    checks = by_check(results)
    assert {r.status for r in results} == {OK}, render(results)
    assert checks["quota ml.p5.48xlarge"].detail == "needs 2, other clusters use 0, quota 4"
    # p5.48xlarge has 32 EFA interfaces (EC2's MaximumEfaInterfaces, here moto's copy of it): 2 x 33 + 1.
    assert checks["subnet-addresses"].detail.startswith("67 addresses needed (ml.p5.48xlarge: 32 EFA), 16379 free")
    assert checks["availability-zones"].detail == "usw2-az2 (us-west-2a)"
    assert exit_code(results) == 0


def test_other_clusters_count_against_the_quota(account):
    service_linked_roles(account)
    sm = real(account, "sagemaker")
    sm.create_cluster(
        ClusterName="theirs",
        InstanceGroups=[
            {
                "InstanceGroupName": "g",
                "InstanceType": "ml.p5.48xlarge",
                "InstanceCount": 3,
                "ThreadsPerCore": 1,
                "ExecutionRole": "arn:aws:iam::123456789012:role/r",
                "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/p", "OnCreate": "on_create.sh"},
            }
        ],
        VpcConfig={"SecurityGroupIds": ["sg-12345678"], "Subnets": ["subnet-12345678"]},
    )
    results = Preflight(config(), harness(account).client).run()
    quota = by_check(results)["quota ml.p5.48xlarge"]
    assert quota.status == FAILED
    assert quota.detail.startswith("needs 2, other clusters use 3, quota 'ml.p5.48xlarge for cluster usage' is 4")
    assert exit_code(results) == 1


def test_unknown_az_and_small_subnet_fail_with_what_to_do(account):
    service_linked_roles(account)
    cfg = config(**{"network.az_ids": ["usw2-az9"], "network.private_subnet_cidrs": ["10.0.64.0/26"]})
    checks = by_check(Preflight(cfg, harness(account).client).run())
    assert checks["availability-zones"].status == FAILED
    assert "usw2-az9 not in us-west-2" in checks["availability-zones"].detail
    assert checks["subnet-addresses"].status == FAILED
    assert "all subnets: need 67, 59 free — use larger private subnets" in checks["subnet-addresses"].detail


def test_access_denied_and_throttling_are_cannot_check_never_ok(account):
    service_linked_roles(account)
    h = harness(account, sagemaker_quota=None)
    h.stubbed[("service-quotas", "sagemaker")][1].add_client_error(
        "list_service_quotas", "AccessDeniedException", "not authorized", 400
    )
    fsx = h.stub("service-quotas", "fsx")
    fsx.add_client_error("list_service_quotas", "ThrottlingException", "Rate exceeded", 400)
    results = Preflight(config(), h.client).run()
    checks = by_check(results)
    assert checks["instance-quotas"].status == UNKNOWN
    assert checks["instance-quotas"].detail == (
        "cannot check: AccessDeniedException on ListServiceQuotas; allow that read-only action to the caller"
    )
    assert checks["fsx-quota"].status == UNKNOWN
    assert "throttled (ThrottlingException)" in checks["fsx-quota"].detail
    assert exit_code(results) == 0 and exit_code(results, strict=True) == 1
    assert "CANNOT CHECK  instance-quotas: cannot check: AccessDeniedException" in render(results)


def test_missing_service_linked_role_is_a_warning_with_the_command(account):
    service_linked_roles(account, names=("AWSServiceRoleForAmazonFSx",))
    check = by_check(Preflight(config(), harness(account).client).run())["service-linked-roles"]
    assert check.status == WARNING
    assert "aws iam create-service-linked-role --aws-service-name sagemaker.amazonaws.com" in check.detail


def test_region_without_a_resource_type_fails(account):
    service_linked_roles(account)
    check = by_check(Preflight(config(), harness(account, types_missing=("AWS::SageMaker::Cluster",)).client).run())[
        "region-resource-types"
    ]
    assert check.status == FAILED and "us-west-2 does not offer AWS::SageMaker::Cluster" in check.detail


def plan(status="Active", available=2, instance_type="ml.p5.48xlarge"):
    now = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
    return {
        "TrainingPlanArn": PLAN,
        "TrainingPlanName": "plan-a",
        "Status": status,
        "StartTime": now,
        "EndTime": now + datetime.timedelta(days=7),
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": available,
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": "arn:aws:sagemaker:us-west-2:123456789012:reserved-capacity/rc-1",
                "InstanceType": instance_type,
                "TotalInstanceCount": 4,
                "Status": "Active",
            }
        ],
    }


@pytest.mark.parametrize(
    "answer, status, detail",
    [
        (plan(), OK, "Active, 2 of 4 instance(s) available"),
        (plan(status="Expired"), FAILED, "status Expired; a cluster can use an Active or Scheduled plan"),
        (plan(available=1), FAILED, "1 instance(s) available, the groups need 2"),
        (plan(instance_type="ml.p4d.24xlarge"), FAILED, "reserves ml.p4d.24xlarge, not the type of gpu"),
        (plan(status="Scheduled"), WARNING, "Scheduled (starts 2026-12-01"),
    ],
)
def test_training_plan_status_capacity_and_type(account, answer, status, detail):
    service_linked_roles(account)
    groups = copy.deepcopy(GROUPS)
    groups[1]["training_plan_arn"] = PLAN
    cfg = config(**{"cluster.instance_groups": groups})
    h = harness(account)
    h.stub("sagemaker", "training-plans").add_response("describe_training_plan", answer, {"TrainingPlanName": "plan-a"})
    check = by_check(Preflight(cfg, h.client).run())["training-plan plan-a"]
    assert check.status == status and detail in check.detail


def existing_network(account, self_rule=True):
    ec2 = real(account, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/20", AvailabilityZoneId="usw2-az1")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(VpcId=vpc, GroupName="efa", Description="efa")["GroupId"]
    if self_rule:
        pair = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": sg}]}]
        ec2.authorize_security_group_ingress(GroupId=sg, IpPermissions=pair)
        ec2.authorize_security_group_egress(GroupId=sg, IpPermissions=pair)
    studio = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.16.0/22", AvailabilityZoneId="usw2-az1")["Subnet"]["SubnetId"]
    return {
        "vpc_id": vpc,
        "private_subnets": [{"id": subnet, "az_id": "usw2-az1"}],
        "security_group_id": sg,
        "studio_subnet": {"id": studio, "az_id": "usw2-az1"},
    }


def test_existing_network_as_configured(account):
    service_linked_roles(account)
    cfg = config(**{"network.existing": existing_network(account)})
    checks = by_check(Preflight(cfg, harness(account).client).run())
    assert checks["existing-network"].status == OK, checks["existing-network"].detail
    # Free addresses come from EC2's AvailableIpAddressCount of the real subnet: a /20 less AWS's five.
    assert checks["subnet-addresses"].detail.endswith("4091 free")


def test_existing_security_group_without_self_rule_fails(account):
    service_linked_roles(account)
    net = existing_network(account, self_rule=False)
    check = by_check(Preflight(config(**{"network.existing": net}), harness(account).client).run())["existing-network"]
    assert check.status == FAILED
    assert f"{net['security_group_id']} does not allow all traffic from itself" in check.detail


def test_existing_subnet_in_another_az_fails(account):
    service_linked_roles(account)
    net = existing_network(account)
    net["private_subnets"][0]["az_id"] = "usw2-az2"
    check = by_check(Preflight(config(**{"network.existing": net}), harness(account).client).run())["existing-network"]
    assert check.status == FAILED
    assert "network.existing.private_subnets[0].az_id: 'usw2-az2', the subnet is in usw2-az1" in check.detail


def test_fsx_quota_counts_existing_lustre(account):
    service_linked_roles(account)
    real(account, "fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=2400, SubnetIds=["subnet-12345678"]
    )
    check = by_check(Preflight(config(), harness(account, fsx_quota=3000).client).run())["fsx-quota"]
    assert check.status == FAILED
    assert check.detail.startswith("1200 GiB new + 2400 GiB in use > 'Lustre total storage capacity' 3000 GiB")


def test_main_checks_once_sts_knows_the_caller(account, capsys, tmp_path):
    """Through main, as `make preflight` runs it: moto's STS answers GetCallerIdentity, then every check runs."""
    service_linked_roles(account)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"name": "mine", "cluster": {"instance_groups": GROUPS}}))
    h = harness(account)
    pricing, _ = stubbed_pricing(answers({"ml.m5.xlarge": "0.23"}))
    h.stubbed[("pricing", "prices")] = (pricing, None)
    assert main(["--config", str(path), "--prices", str(tmp_path / "prices.json")], client=h.client) == 0
    out = capsys.readouterr()
    assert out.err == ""
    assert len(out.out.splitlines()) >= 6 and all(line.startswith("ok ") for line in out.out.splitlines()), out.out
    assert out.out.splitlines()[-1].startswith("ok            price-table: 11 prices for us-west-2 written to ")


@pytest.mark.parametrize("code", ["ExpiredToken", "InvalidClientTokenId"])
def test_credentials_sts_refuses_stop_with_one_line_before_any_check(code, capsys):
    sts = boto3.client("sts", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    calls = []

    def client(service, purpose):
        calls.append(service)
        return sts

    with Stubber(sts) as stub:
        stub.add_client_error(
            "get_caller_identity", code, "The security token included in the request is\nexpired", 403
        )
        assert main(["--config", "config/default.yaml"], client=client) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (
        f"preflight: nothing checked for config/default.yaml: {code} on GetCallerIdentity: The security "
        "token included in the request is expired\n"
    )
    assert calls == ["sts"]  # no check ran


def test_a_type_ec2_does_not_offer_fails_naming_the_group(account):
    """ml.p6e-gb200.36xlarge is in HyperPod's ClusterInstanceType list but not among moto's EC2 instance types, so moto
    answers DescribeInstanceTypes with InvalidInstanceType, as EC2 does for a type a region does not offer."""
    service_linked_roles(account)
    groups = copy.deepcopy(GROUPS)
    groups[-1]["instance_type"] = "ml.p6e-gb200.36xlarge"
    results = Preflight(config(**{"cluster.instance_groups": groups}), harness(account).client).run()
    subnets = by_check(results)["subnet-addresses"]
    assert subnets.status == FAILED
    assert (
        f"for cluster.instance_groups[{len(groups) - 1}].instance_type ({groups[-1]['name']}: "
        "ml.p6e-gb200.36xlarge): choose a type offered in the region"
    ) in subnets.detail
    assert exit_code(results) == 1
