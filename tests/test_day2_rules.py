"""The day-2 rules of platform_config/day2.py on their own, without CDK: the refusals an operator meets when an edit
can never be deployed in place (a smaller file system, a skipped or reversed Kubernetes upgrade), and the edits that
pass. tests/test_day2.py proves against synthesized templates that the refused edits really replace something.

The deployed side is written out as a deployed storage stack carries it (template metadata
HyperPodPlatformCreateOnly), not recomputed by snapshot(): stacks already deployed keep the keys they were written
with, so a renamed or misspelt key in the rules must fail here rather than silently skip the check."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from support.variants import VARIANT_FILES
from platform_config import PlatformConfig, parse_config
from platform_config.day2 import check_day2, snapshot

# What the storage stack of config/default.yaml carries (ml-cluster-storage, Metadata.HyperPodPlatformCreateOnly).
DEPLOYED_DEFAULT = {
    "name": "ml-cluster",
    "orchestrator": "slurm",
    "region": "us-west-2",
    "network": {
        "existing": "",
        "vpc_cidr": "10.0.0.0/16",
        "az_ids": ["usw2-az2"],
        "public_subnet_cidr": "10.0.0.0/24",
        "private_subnet_cidrs": ["10.0.64.0/18"],
    },
    "lustre": {
        "existing": "",
        "storage_capacity_gib": 1200,
        "throughput_mib_per_tib": 250,
        "file_system_path": "/data",
        "s3_prefix": "",
    },
    "eks_version": "",
    "partition_root": "studio",
    "uids": {},
    "attach": "",
}


def default_with(**lustre) -> PlatformConfig:
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    data.setdefault("storage", {}).setdefault("lustre", {}).update(lustre)
    return parse_config(data, "default.yaml+edit")


def eks_at(version: str) -> PlatformConfig:
    """config/examples/eks.yaml at another Kubernetes minor; 1.30-1.33 are past standard support (opted in)."""
    data = yaml.safe_load(VARIANT_FILES["eks"].read_text())
    data["eks"].update(kubernetes_version=version, extended_support=True)
    return parse_config(data, f"eks.yaml@{version}")


def deployed_with(**lustre) -> dict:
    deployed = copy.deepcopy(DEPLOYED_DEFAULT)
    deployed["lustre"].update(lustre)
    return deployed


def test_the_default_config_still_writes_what_deployed_stacks_carry():
    """The rules read a deployed snapshot by these keys; if snapshot() wrote others, every check would compare a
    value against a missing one."""
    assert snapshot(default_with()) == DEPLOYED_DEFAULT
    assert check_day2(DEPLOYED_DEFAULT, default_with()) == ([], [])


@pytest.mark.parametrize("deployed_gib, new_gib", [(2400, 1200), (4800, 2400), (1200 + 2400, 1200)])
def test_shrinking_the_file_system_is_refused_with_the_key_and_what_to_keep(deployed_gib, new_gib):
    errors, warnings = check_day2(
        deployed_with(storage_capacity_gib=deployed_gib), default_with(storage_capacity_gib=new_gib)
    )
    assert errors == [
        f"storage.lustre.storage_capacity_gib: {deployed_gib} -> {new_gib} cannot be deployed: FSx for "
        f"Lustre storage capacity only grows (UpdateFileSystem); keep {deployed_gib} or more"
    ]
    assert warnings == []


@pytest.mark.parametrize("deployed_gib, new_gib", [(1200, 1200), (1200, 2400), (2400, 4800)])
def test_keeping_or_growing_the_file_system_passes(deployed_gib, new_gib):
    assert check_day2(deployed_with(storage_capacity_gib=deployed_gib), default_with(storage_capacity_gib=new_gib)) == (
        [],
        [],
    )


def test_an_existing_file_system_is_not_judged_by_the_capacity_of_the_platform_built_one():
    """With storage.lustre.existing the stack builds no file system: the config's capacity is unused, so a smaller
    one than the deployed snapshot records is no shrink (and neither is a throughput change)."""
    config = parse_config(yaml.safe_load(VARIANT_FILES["existing_vpc"].read_text()), "existing-vpc.yaml")
    deployed = snapshot(config)
    deployed["lustre"].update(
        storage_capacity_gib=config.storage.lustre.storage_capacity_gib * 4, throughput_mib_per_tib=1000
    )
    assert check_day2(deployed, config) == ([], [])


def deployed_eks(version: str) -> dict:
    return {**snapshot(eks_at("1.34")), "eks_version": version}


@pytest.mark.parametrize(
    "deployed, new, message",
    [
        (
            "1.30",
            "1.32",
            "eks.kubernetes_version: '1.30' -> '1.32': EKS upgrades one minor version at a time; deploy 1.31 first",
        ),
        (
            "1.31",
            "1.33",
            "eks.kubernetes_version: '1.31' -> '1.33': EKS upgrades one minor version at a time; deploy 1.32 first",
        ),
        (
            "1.30",
            "1.34",
            "eks.kubernetes_version: '1.30' -> '1.34': EKS upgrades one minor version at a time; deploy 1.31 first",
        ),
        ("1.31", "1.30", "eks.kubernetes_version: '1.31' -> '1.30': EKS cannot downgrade a cluster"),
        ("1.34", "1.30", "eks.kubernetes_version: '1.34' -> '1.30': EKS cannot downgrade a cluster"),
    ],
)
def test_a_skipped_or_reversed_kubernetes_upgrade_is_refused(deployed, new, message):
    errors, _ = check_day2(deployed_eks(deployed), eks_at(new))
    assert errors == [message]


@pytest.mark.parametrize("deployed, new", [("1.30", "1.31"), ("1.31", "1.32"), ("1.33", "1.34"), ("1.32", "1.32")])
def test_one_minor_version_up_or_none_passes(deployed, new):
    assert check_day2(deployed_eks(deployed), eks_at(new)) == ([], [])


def test_the_guard_reads_a_deployed_stacks_snapshot_and_refuses_a_shrink(monkeypatch):
    """A storage stack deployed by this version carries the snapshot under HyperPodPlatformCreateOnly; the replacement
    guard reads it back from CloudFormation (GetTemplate, the real client under botocore's Stubber, which checks the
    request and response against CloudFormation's model, as tests/test_replacement_guard_reading.py does) and the rules
    judge the edit against it. Renaming the key would make every already deployed platform look like a different one."""
    import boto3
    from botocore.stub import Stubber
    from cli import replacement_guard as guard

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("cloudformation", region_name="us-west-2")
    template = {
        "Metadata": {"HyperPodPlatformCreateOnly": deployed_with(storage_capacity_gib=2400)},
        "Resources": {"LustreFileSystem": {"Type": "AWS::FSx::FileSystem"}},
    }
    with Stubber(client) as stub:
        stub.add_response(
            "get_template",
            {"TemplateBody": json.dumps(template)},
            {"StackName": "ml-cluster-storage", "TemplateStage": "Original"},
        )
        deployed = guard.deployed_snapshot(client, "ml-cluster-storage")
    assert check_day2(deployed, default_with(storage_capacity_gib=1200))[0] == [
        "storage.lustre.storage_capacity_gib: 2400 -> 1200 cannot be deployed: FSx for Lustre storage capacity only "
        "grows (UpdateFileSystem); keep 2400 or more"
    ]


def edited(edit) -> dict:
    new = copy.deepcopy(DEPLOYED_DEFAULT)
    edit(new)
    return new


def two_azs(snapshot: dict) -> None:
    snapshot["network"].update(az_ids=["usw2-az2", "usw2-az1"], private_subnet_cidrs=["10.0.64.0/18", "10.0.128.0/18"])


# edit of the new snapshot (the deployed one is DEPLOYED_DEFAULT, or two_azs of it for *_second) -> (the beginning of
# each error, the beginning of each warning)
EDITS = {
    "name": (
        lambda s: s.update(name="ml-other"),
        ["name: 'ml-cluster' -> 'ml-other' cannot be deployed in place: every resource name"],
        [],
    ),
    "region": (
        lambda s: s.update(region="eu-west-1"),
        ["deployment.region: 'us-west-2' -> 'eu-west-1' cannot be deployed in place: stacks cannot move"],
        [],
    ),
    "orchestrator": (
        lambda s: s.update(orchestrator="eks"),
        ["orchestrator: 'slurm' -> 'eks' cannot be deployed in place: the HyperPod cluster's"],
        [],
    ),
    "existing_vpc": (
        lambda s: s["network"].update(existing="vpc-0123456789abcdef0", vpc_cidr="10.9.0.0/16"),
        ["network.existing.vpc_id: '' -> 'vpc-0123456789abcdef0' cannot be deployed in place: switching"],
        [],
    ),
    "vpc_cidr": (
        lambda s: s["network"].update(vpc_cidr="10.1.0.0/16"),
        ["network.vpc_cidr: '10.0.0.0/16' -> '10.1.0.0/16' cannot be deployed in place: AWS::EC2::VPC"],
        [],
    ),
    "first_az": (
        lambda s: s["network"].update(az_ids=["usw2-az1"]),
        [
            "network.az_ids[0]: 'usw2-az2' -> 'usw2-az1' cannot be deployed in place: AWS::EC2::Subnet "
            "AvailabilityZoneId is create-only: the subnet is replaced, and the FSx file system in it"
        ],
        [],
    ),
    "first_subnet": (
        lambda s: s["network"].update(private_subnet_cidrs=["10.0.128.0/18"]),
        [
            "network.private_subnet_cidrs[0]: '10.0.64.0/18' -> '10.0.128.0/18' cannot be deployed in "
            "place: AWS::EC2::Subnet CidrBlock is create-only: the subnet is replaced, and the FSx file "
            "system in it"
        ],
        [],
    ),
    "public_subnet": (
        lambda s: s["network"].update(public_subnet_cidr="10.0.1.0/24"),
        [],
        ["network.public_subnet_cidr: '10.0.0.0/24' -> '10.0.1.0/24' replaces the public subnet"],
    ),
    "existing_fsx": (
        lambda s: s["lustre"].update(existing="fs-0123456789abcdef0"),
        ["storage.lustre.existing: '' -> 'fs-0123456789abcdef0' cannot be deployed in place: switching"],
        [],
    ),
    "throughput": (
        lambda s: s["lustre"].update(throughput_mib_per_tib=500),
        [
            "storage.lustre.throughput_mib_per_tib: 250 -> 500 cannot be deployed in place: CloudFormation "
            "documents LustreConfiguration.PerUnitStorageThroughput as 'Update requires: Replacement', i.e. a "
            "new, empty file system; change it in place with `aws fsx update-file-system --file-system-id "
            "<id> --lustre-configuration PerUnitStorageThroughput=500` and keep 250 in the config"
        ],
        [],
    ),
    "file_system_path": (
        lambda s: s["lustre"].update(file_system_path="/datasets"),
        ["storage.lustre.data_repository.file_system_path: '/data' -> '/datasets' cannot be deployed"],
        [],
    ),
    "s3_prefix": (
        lambda s: s["lustre"].update(s3_prefix="datasets/"),
        ["storage.lustre.data_repository.s3_prefix: '' -> 'datasets/' cannot be deployed in place"],
        [],
    ),
    "partition_root": (
        lambda s: s.update(partition_root="home"),
        [],
        ["studio.partition_root: 'studio' -> 'home': new partitions are created under the new root"],
    ),
}


@pytest.mark.parametrize("change", sorted(EDITS))
def test_each_create_only_edit_is_refused_and_each_disruptive_one_warned_about(change):
    edit, error_starts, warning_starts = EDITS[change]
    errors, warnings = check_day2(DEPLOYED_DEFAULT, edited(edit))
    assert len(errors) == len(error_starts) and all(e.startswith(s) for e, s in zip(errors, error_starts)), errors
    assert len(warnings) == len(warning_starts) and all(w.startswith(s) for w, s in zip(warnings, warning_starts)), (
        warnings
    )


def test_a_second_az_is_judged_on_its_own_and_may_not_be_removed():
    deployed = edited(two_azs)
    assert check_day2(deployed, deployed) == ([], [])
    moved = copy.deepcopy(deployed)
    moved["network"]["az_ids"][1] = "usw2-az3"
    moved["network"]["private_subnet_cidrs"][1] = "10.0.192.0/18"
    assert check_day2(deployed, moved)[0] == [
        "network.az_ids[1]: 'usw2-az1' -> 'usw2-az3' cannot be deployed in place: AWS::EC2::Subnet AvailabilityZoneId "
        "is create-only: the subnet is replaced; append new AZ IDs (and CIDRs) at the end instead",
        "network.private_subnet_cidrs[1]: '10.0.128.0/18' -> '10.0.192.0/18' cannot be deployed in place: "
        "AWS::EC2::Subnet CidrBlock is create-only: the subnet is replaced; append a new subnet at the end instead",
    ]
    assert check_day2(deployed, DEPLOYED_DEFAULT)[0] == [
        "network.az_ids: 2 -> 1 AZs: removing a private subnet deletes it while cluster groups or Studio may still use "
        "it"
    ]
    assert check_day2(DEPLOYED_DEFAULT, deployed) == ([], [])  # adding one at the end is routine


def test_an_existing_vpc_is_not_judged_by_the_cidrs_of_a_platform_built_one():
    deployed = edited(lambda s: s["network"].update(existing="vpc-0123456789abcdef0"))
    new = edited(
        lambda s: s["network"].update(
            existing="vpc-0123456789abcdef0",
            vpc_cidr="10.9.0.0/16",
            az_ids=["euw1-az1"],
            private_subnet_cidrs=["10.9.64.0/18"],
            public_subnet_cidr="10.9.0.0/24",
        )
    )
    assert check_day2(deployed, new) == ([], [])


def test_a_changed_uid_is_a_warning_about_file_owners_and_a_removed_user_is_not():
    deployed = edited(lambda s: s.update(uids={"ada": 20001, "bob": 20002}))
    new = edited(lambda s: s.update(uids={"ada": 20011}))
    assert check_day2(deployed, new) == (
        [],
        ["users[ada].uid: 20001 -> 20011: files the user owns on FSx keep the old uid; chown them after the change"],
    )


def test_a_snapshot_from_before_partition_root_was_recorded_raises_no_warning():
    deployed = {k: v for k, v in DEPLOYED_DEFAULT.items() if k != "partition_root"}
    assert check_day2(deployed, edited(lambda s: s.update(partition_root="home"))) == ([], [])


def test_an_error_without_an_in_place_alternative_ends_with_what_would_be_lost():
    assert check_day2(DEPLOYED_DEFAULT, edited(lambda s: s.update(region="eu-west-1")))[0] == [
        "deployment.region: 'us-west-2' -> 'eu-west-1' cannot be deployed in place: stacks cannot move between regions"
    ]


@pytest.mark.parametrize(
    "section, key, existing",
    [
        ("network", "network.existing.vpc_id", "vpc-0123456789abcdef0"),
        ("lustre", "storage.lustre.existing", "fs-0123456789abcdef0"),
    ],
)
def test_leaving_an_existing_vpc_or_file_system_for_a_platform_built_one_is_refused(section, key, existing):
    deployed = edited(lambda s: s[section].update(existing=existing))
    (error,) = check_day2(deployed, DEPLOYED_DEFAULT)[0]
    assert error.startswith(f"{key}: {existing!r} -> '' cannot be deployed in place: switching between")


def test_a_snapshot_written_before_the_existing_keys_is_a_platform_built_one():
    """Snapshots from before network.existing and storage.lustre.existing were recorded lack the keys: they describe
    a platform-built VPC and file system, whose rules still apply."""
    deployed = copy.deepcopy(DEPLOYED_DEFAULT)
    del deployed["network"]["existing"], deployed["lustre"]["existing"]
    assert check_day2(deployed, DEPLOYED_DEFAULT) == ([], [])
    errors, _ = check_day2(deployed, edited(lambda s: s["lustre"].update(storage_capacity_gib=600)))
    assert [e.split(":")[0] for e in errors] == ["storage.lustre.storage_capacity_gib"]


def test_moving_a_slurm_platform_to_eks_is_refused_as_an_orchestrator_change_not_a_kubernetes_upgrade():
    """The Slurm snapshot records no Kubernetes version (""): the version rules must not read one from it."""
    errors, _ = check_day2(
        DEPLOYED_DEFAULT,
        {
            **snapshot(eks_at("1.34")),
            **{k: DEPLOYED_DEFAULT[k] for k in ("name", "region", "network", "lustre", "partition_root")},
        },
    )
    assert [e.split(":")[0] for e in errors] == ["orchestrator"]
    errors, _ = check_day2(deployed_eks("1.34"), {**deployed_eks("1.34"), "orchestrator": "slurm", "eks_version": ""})
    assert [e.split(":")[0] for e in errors] == ["orchestrator"]
