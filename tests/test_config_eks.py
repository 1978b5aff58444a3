"""The EKS sections of the config (eks, eks.task_governance): their bad input, each with its exact error."""

from __future__ import annotations

import copy

import pytest

from platform_config import load_config, parse_config
from support.configs import CONTROLLER, WORKERS, errors_of, with_
from support.docs import stated_count
from support.variants import VARIANT_FILES


# ---------------------------------------------------------------------------------------------- EKS
def eks_base(**eks) -> dict:
    return {"name": "test", "orchestrator": "eks", "eks": eks, "cluster": {"instance_groups": [copy.deepcopy(WORKERS)]}}


TEAM = {"name": "research", "instance_type": "ml.g5.8xlarge", "instance_count": 1}

EKS_BAD_INPUT = [
    (
        "version too old",
        eks_base(kubernetes_version="1.29"),
        "eks.kubernetes_version: '1.29' — Input should be '1.30', '1.31', '1.32', '1.33' or '1.34'",
    ),
    (
        "version HyperPod does not list",
        eks_base(kubernetes_version="1.35"),
        "eks.kubernetes_version: '1.35' — Input should be '1.30', '1.31', '1.32', '1.33' or '1.34'",
    ),
    (
        "version past standard support",
        eks_base(kubernetes_version="1.33"),
        "eks.kubernetes_version: '1.33' left EKS standard support on 2026-07-29 (extended support, billed per cluster "
        "hour, ends 2027-07-29); use 1.34, or set eks.extended_support: true to accept the cost",
    ),
    (
        "kube-proxy for another version",
        eks_base(addons={"kube_proxy": "v1.33.10-eksbuild.13"}),
        "eks.addons.kube_proxy: 'v1.33.10-eksbuild.13' does not match eks.kubernetes_version '1.34'; use a "
        "v1.34.x-eksbuild.N version",
    ),
    (
        "a training operator pin older than the version",
        eks_base(addons={"training_operator": "v1.2.0-eksbuild.1"}),
        "eks.addons.training_operator: 'v1.2.0-eksbuild.1' does not support eks.kubernetes_version '1.34' (it supports "
        "1.28, 1.29, 1.30, 1.31, 1.32, 1.33; https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator.html "
        "(supported Kubernetes 1.28-1.33); elastic training from v1.2: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html); for 1.34 use "
        "v1.2.1-eksbuild.1",
    ),
    (
        "coredns pinned for another version",
        eks_base(kubernetes_version="1.32", extended_support=True, addons={"coredns": "v1.12.4-eksbuild.1"}),
        "eks.addons.coredns: 'v1.12.4-eksbuild.1' does not support eks.kubernetes_version '1.32' (it supports 1.33, "
        "1.34; https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html (latest version per Kubernetes "
        "version)); for 1.32 use v1.11.4-eksbuild.24",
    ),
    (
        "addon pin without a source",
        eks_base(addons={"fsx_csi_driver": "v1.7.0-eksbuild.1"}),
        "eks.addons.fsx_csi_driver: 'v1.7.0-eksbuild.1' has no recorded source; known: v1.6.0-eksbuild.1 (leave it "
        "unset for EKS's default, or add the version to ADDON_SUPPORT in platform_config/eks.py with its source)",
    ),
    (
        "every compute group tainted",
        {
            **eks_base(),
            "cluster": {
                "instance_groups": [
                    {**WORKERS, "kubernetes_taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]},
                    {
                        **WORKERS,
                        "name": "b",
                        "kubernetes_taints": [{"key": "dedicated", "value": "b", "effect": "NoExecute"}],
                    },
                ]
            },
        },
        "cluster.instance_groups: every compute group carries a NoSchedule or NoExecute taint; the FSx CSI controller, "
        "the training operator and task governance (Kueue) tolerate none, so they could never run; leave at least one "
        "compute group untainted (or use effect PreferNoSchedule)",
    ),
    (
        "the old vpc-cni pin, which no source names",
        eks_base(addons={"vpc_cni": "v1.20.4-eksbuild.1"}),
        "eks.addons.vpc_cni: 'v1.20.4-eksbuild.1' has no recorded source; known: none (leave it unset for EKS's "
        "default, or add the version to ADDON_SUPPORT in platform_config/eks.py with its source)",
    ),
    (
        "training operator too old for elastic jobs",
        eks_base(addons={"training_operator": "v1.0.1-eksbuild.1"}),
        "eks.addons.training_operator: 'v1.0.1-eksbuild.1'; elastic training (elasticPolicy) needs v1.2 or later "
        "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html)",
    ),
    (
        "addon version format",
        eks_base(addons={"coredns": "1.11"}),
        "eks.addons.coredns: '1.11' — must be an EKS add-on version such as v1.20.1-eksbuild.3",
    ),
    (
        "public endpoint without allow-list",
        eks_base(endpoint={"public": True}),
        "eks.endpoint.public_access_cidrs: [] with eks.endpoint.public: true; list the CIDR blocks allowed to reach "
        "the public endpoint",
    ),
    (
        "public endpoint open to the world",
        eks_base(endpoint={"public": True, "public_access_cidrs": ["0.0.0.0/0"]}),
        "eks.endpoint.public_access_cidrs[0]: '0.0.0.0/0' opens the API server to the internet; allowed: specific "
        "CIDR blocks",
    ),
    (
        "allow-list on a private endpoint",
        eks_base(endpoint={"public_access_cidrs": ["203.0.113.0/24"]}),
        "eks.endpoint.public_access_cidrs: ['203.0.113.0/24'] with eks.endpoint.public: false; remove them or set "
        "public: true",
    ),
    (
        "control plane in one AZ",
        eks_base(
            control_plane_subnets=[
                {"az_id": "usw2-az1", "cidr": "10.0.1.0/28"},
                {"az_id": "usw2-az1", "cidr": "10.0.1.16/28"},
            ]
        ),
        "eks.control_plane_subnets: 1 distinct AZ ID(s) ['usw2-az1']; the EKS control plane needs subnets in at least "
        "two AZs",
    ),
    (
        "control plane subnet too small",
        eks_base(
            control_plane_subnets=[
                {"az_id": "usw2-az1", "cidr": "10.0.1.0/29"},
                {"az_id": "usw2-az3", "cidr": "10.0.1.16/28"},
            ]
        ),
        "eks.control_plane_subnets[0].cidr: '10.0.1.0/29'; EKS needs at least a /28 per subnet",
    ),
    (
        "control plane overlaps private subnet",
        eks_base(
            control_plane_subnets=[
                {"az_id": "usw2-az1", "cidr": "10.0.64.0/28"},
                {"az_id": "usw2-az3", "cidr": "10.0.1.16/28"},
            ]
        ),
        "eks.control_plane_subnets[0].cidr: '10.0.64.0/28' overlaps network.private_subnet_cidrs[0] '10.0.64.0/18'",
    ),
    (
        "no compute group",
        {"orchestrator": "eks", "cluster": {"instance_groups": [copy.deepcopy(CONTROLLER)]}},
        "cluster.instance_groups: no group with role 'compute'; an EKS cluster needs at least one",
    ),
    (
        "taint effect",
        {
            "orchestrator": "eks",
            "cluster": {"instance_groups": [{**WORKERS, "kubernetes_taints": [{"key": "gpu", "effect": "Never"}]}]},
        },
        "cluster.instance_groups[0].kubernetes_taints[0].effect: 'Never' — Input should be 'NoSchedule', "
        "'PreferNoSchedule' or 'NoExecute'",
    ),
    (
        "label key",
        {"orchestrator": "eks", "cluster": {"instance_groups": [{**WORKERS, "kubernetes_labels": {"bad key": "x"}}]}},
        "cluster.instance_groups[0].kubernetes_labels key: 'bad key' — must be a Kubernetes label key such "
        "as team or example.com/pool",
    ),
    (
        "studio partitions in the team directories",
        {**eks_base(task_governance={"teams": [TEAM]}), "studio": {"partition_root": "eks"}},
        "studio.partition_root: 'eks' is where the EKS team directories live; allowed: any other directory name "
        "(the default is 'studio')",
    ),
    (
        "team name",
        eks_base(task_governance={"teams": [{**TEAM, "name": "Research"}]}),
        "eks.task_governance.teams[0].name: 'Research' — must be 1-40 lowercase letters, digits and '-', starting and "
        "ending alphanumeric",
    ),
    (
        "duplicate team",
        eks_base(task_governance={"teams": [TEAM, TEAM]}),
        "eks.task_governance.teams[1].name: 'research' is already used by eks.task_governance.teams[0]; team names must "
        "be unique",
    ),
    (
        "team without a size",
        eks_base(task_governance={"teams": [{"name": "a", "instance_type": "ml.g5.8xlarge"}]}),
        "eks.task_governance.teams[0]: instance_count=None, accelerators=None; give exactly one of them",
    ),
    (
        "team on a type the cluster lacks",
        eks_base(task_governance={"teams": [{**TEAM, "instance_type": "ml.p5.48xlarge"}]}),
        "eks.task_governance.teams[0].instance_type: 'ml.p5.48xlarge' is not the type of any compute group; allowed: "
        "ml.g5.8xlarge",
    ),
    (
        "teams guaranteed more than exists",
        eks_base(
            task_governance={"teams": [{**TEAM, "instance_count": 2}, {**TEAM, "name": "prod", "instance_count": 1}]}
        ),
        "eks.task_governance.teams: 3 guaranteed ml.g5.8xlarge instance(s) across teams; the compute groups have 2",
    ),
    (
        "borrow limit without borrowing",
        eks_base(task_governance={"teams": [{**TEAM, "sharing": "Lend", "borrow_limit_percent": 80}]}),
        "eks.task_governance.teams[0].borrow_limit_percent: 80 with sharing 'Lend'; a borrow limit applies only to "
        "LendAndBorrow",
    ),
    (
        "priority weight",
        eks_base(task_governance={"priority_classes": [{"name": "urgent", "weight": 101}]}),
        "eks.task_governance.priority_classes[0].weight: 101 — Input should be less than or equal to 100",
    ),
    (
        "duplicate priority class",
        eks_base(task_governance={"priority_classes": [{"name": "a", "weight": 1}, {"name": "a", "weight": 2}]}),
        "eks.task_governance.priority_classes[1].name: 'a' is listed twice; names must be unique",
    ),
    (
        "team member who is not a user",
        {
            **eks_base(task_governance={"teams": [{**TEAM, "members": ["carol"]}]}),
            "users": [{"name": "alice", "uid": 10001}],
        },
        "eks.task_governance.teams[0].members[0]: 'carol' is not a user; allowed: alice",
    ),
    (
        "user in two teams",
        {
            **eks_base(
                task_governance={
                    "teams": [
                        {**TEAM, "instance_count": 1, "members": ["alice"]},
                        {**TEAM, "name": "prod", "instance_count": 1, "members": ["alice"]},
                    ]
                }
            ),
            "cluster": {"instance_groups": [{**copy.deepcopy(WORKERS), "instance_count": 2}]},
            "users": [{"name": "alice", "uid": 10001}],
        },
        "eks.task_governance.teams[1].members[0]: 'alice' is already a member of team 'research'; a Studio profile "
        "runs as one team's role",
    ),
    (
        "teams with governance off",
        eks_base(task_governance={"enabled": False, "teams": [TEAM]}),
        "eks.task_governance.teams: 1 team(s) with task governance disabled; enable it or remove the teams",
    ),
    (
        "existing VPC without control-plane subnets",
        {
            "orchestrator": "eks",
            "cluster": {"instance_groups": [copy.deepcopy(WORKERS)]},
            "network": {
                "existing": {
                    "vpc_id": "vpc-0123456789abcdef0",
                    "security_group_id": "sg-0123456789abcdef0",
                    "private_subnets": [{"id": "subnet-0123456789abcdef0", "az_id": "usw2-az2"}],
                }
            },
        },
        "network.existing.control_plane_subnets: 0 distinct AZ ID(s) []; the EKS control plane needs subnets in at "
        "least two AZs",
    ),
]


@pytest.mark.parametrize("case, data, expected", EKS_BAD_INPUT, ids=[c[0] for c in EKS_BAD_INPUT])
def test_eks_bad_input_names_key_value_and_what_is_allowed(case, data, expected):
    assert expected in errors_of(data)


def test_extended_support_is_accepted_when_asked_for_and_add_ons_default_to_eks():
    assert parse_config(eks_base(kubernetes_version="1.33", extended_support=True), "test").eks.extended_support
    cfg = parse_config(eks_base(), "test")
    assert cfg.eks.kubernetes_version == "1.34" and not cfg.eks.extended_support
    assert set(cfg.eks.addons.model_dump().values()) == {None}  # every add-on at EKS's default for the version


def test_one_switch_turns_the_default_config_into_eks():
    cfg = load_config(VARIANT_FILES["default"], {"orchestrator": "eks"})
    assert cfg.orchestrator == "eks"
    assert [g.role for g in cfg.cluster.instance_groups if g.role == "compute"]


def test_existing_file_system_needs_real_identifiers():
    errors = errors_of(
        with_(
            "storage.lustre.existing",
            {
                "file_system_id": "fs-1",
                "dns_name": "fsx.example.com",
                "mount_name": "ABC",
                "data_bucket": "Data_Bucket",
            },
        )
    )
    assert errors == [
        "storage.lustre.existing.file_system_id: 'fs-1' — must be a file system ID such as fs-0123456789abcdef0",
        "storage.lustre.existing.dns_name: 'fsx.example.com' — must be the file system's DNS name, "
        "fs-....fsx.<region>.amazonaws.com",
        "storage.lustre.existing.mount_name: 'ABC' — must be the file system's LustreConfiguration.MountName",
        "storage.lustre.existing.data_bucket: 'Data_Bucket' — must be an S3 bucket name",
    ]


def test_docs_state_the_size_of_the_eks_table():
    assert stated_count(r"EKS bad-input table \((\d+) cases") == len(EKS_BAD_INPUT)


def test_teams_on_a_file_system_you_bring_need_its_s3_link():
    """The EKS cluster stack makes the teams' directories through the file system's data repository
    (constructs/fsx_partitions.py): without data_bucket it has nothing to make them with."""
    existing = {
        "file_system_id": "fs-0123456789abcdef0",
        "dns_name": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
        "mount_name": "abcdefgh",
    }
    data = eks_base(task_governance={"enabled": True, "teams": [copy.deepcopy(TEAM)]})
    data["studio"] = {"enabled": False}
    data["storage"] = {"lustre": {"existing": existing}}
    assert errors_of(copy.deepcopy(data)) == [
        "storage.lustre.existing.data_bucket: not set with eks.task_governance.teams; the teams' directories on the "
        "file system are made through its S3 link. Allowed: the bucket the file system's data repository association "
        "links, or no teams"
    ]
    existing["data_bucket"] = "team-data-bucket"
    assert parse_config(copy.deepcopy(data), "test").storage.lustre.existing.data_bucket == "team-data-bucket"
    del existing["data_bucket"]
    data["eks"]["task_governance"] = {"enabled": True}  # no teams, no team directories
    assert parse_config(data, "test").eks.task_governance.teams == []
