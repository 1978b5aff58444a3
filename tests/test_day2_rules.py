"""The day-2 rules of platform_config/day2.py on their own, without CDK: the refusals an operator meets when an edit
can never be deployed in place (a smaller file system, a skipped or reversed Kubernetes upgrade), and the edits that
pass. tests/test_day2.py proves against synthesized templates that the refused edits really replace something.

The deployed side is written out as a deployed storage stack carries it (template metadata
HyperPodPlatformCreateOnly), not recomputed by snapshot(): stacks already deployed keep the keys they were written
with, so a renamed or misspelt key in the rules must fail here rather than silently skip the check."""
from __future__ import annotations

import copy

import pytest
import yaml

from conftest import VARIANT_FILES
from platform_config import PlatformConfig, parse_config
from platform_config.day2 import check_day2, snapshot

# What the storage stack of config/default.yaml carries (ml-cluster-storage, Metadata.HyperPodPlatformCreateOnly).
DEPLOYED_DEFAULT = {
    "name": "ml-cluster", "orchestrator": "slurm", "region": "us-west-2",
    "network": {"existing": "", "vpc_cidr": "10.0.0.0/16", "az_ids": ["usw2-az2"],
                "public_subnet_cidr": "10.0.0.0/24", "private_subnet_cidrs": ["10.0.64.0/18"]},
    "lustre": {"existing": "", "storage_capacity_gib": 1200, "throughput_mib_per_tib": 250,
               "file_system_path": "/data", "s3_prefix": ""},
    "eks_version": "", "partition_root": "studio", "uids": {},
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
    errors, warnings = check_day2(deployed_with(storage_capacity_gib=deployed_gib),
                                  default_with(storage_capacity_gib=new_gib))
    assert errors == [f"storage.lustre.storage_capacity_gib: {deployed_gib} -> {new_gib} cannot be deployed: FSx for "
                      f"Lustre storage capacity only grows (UpdateFileSystem); keep {deployed_gib} or more"]
    assert warnings == []


@pytest.mark.parametrize("deployed_gib, new_gib", [(1200, 1200), (1200, 2400), (2400, 4800)])
def test_keeping_or_growing_the_file_system_passes(deployed_gib, new_gib):
    assert check_day2(deployed_with(storage_capacity_gib=deployed_gib),
                      default_with(storage_capacity_gib=new_gib)) == ([], [])


def test_an_existing_file_system_is_not_judged_by_the_capacity_of_the_platform_built_one():
    """With storage.lustre.existing the stack builds no file system: the config's capacity is unused, so a smaller
    one than the deployed snapshot records is no shrink (and neither is a throughput change)."""
    config = parse_config(yaml.safe_load(VARIANT_FILES["existing_vpc"].read_text()), "existing-vpc.yaml")
    deployed = snapshot(config)
    deployed["lustre"].update(storage_capacity_gib=config.storage.lustre.storage_capacity_gib * 4,
                              throughput_mib_per_tib=1000)
    assert check_day2(deployed, config) == ([], [])


def deployed_eks(version: str) -> dict:
    return {**snapshot(eks_at("1.34")), "eks_version": version}


@pytest.mark.parametrize("deployed, new, message", [
    ("1.30", "1.32", "eks.kubernetes_version: '1.30' -> '1.32': EKS upgrades one minor version at a time; deploy 1.31 "
                     "first"),
    ("1.31", "1.33", "eks.kubernetes_version: '1.31' -> '1.33': EKS upgrades one minor version at a time; deploy 1.32 "
                     "first"),
    ("1.30", "1.34", "eks.kubernetes_version: '1.30' -> '1.34': EKS upgrades one minor version at a time; deploy 1.31 "
                     "first"),
    ("1.31", "1.30", "eks.kubernetes_version: '1.31' -> '1.30': EKS cannot downgrade a cluster"),
    ("1.34", "1.30", "eks.kubernetes_version: '1.34' -> '1.30': EKS cannot downgrade a cluster"),
])
def test_a_skipped_or_reversed_kubernetes_upgrade_is_refused(deployed, new, message):
    errors, _ = check_day2(deployed_eks(deployed), eks_at(new))
    assert errors == [message]


@pytest.mark.parametrize("deployed, new", [("1.30", "1.31"), ("1.31", "1.32"), ("1.33", "1.34"), ("1.32", "1.32")])
def test_one_minor_version_up_or_none_passes(deployed, new):
    assert check_day2(deployed_eks(deployed), eks_at(new)) == ([], [])
