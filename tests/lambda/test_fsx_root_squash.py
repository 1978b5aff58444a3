"""root_squash: subnets (and their CIDR blocks) are real EC2 subnets on moto server; FSx DescribeFileSystems and
UpdateFileSystem are stubbed (moto 5.2 implements no UpdateFileSystem). The expected requests follow the FSx API
reference (LustreRootSquashConfiguration)."""

from __future__ import annotations

import re

import pytest
from botocore.stub import Stubber


import root_squash
from support.events import custom_resource_event

FS = "fs-0123456789abcdef0"
# The NoSquashNids pattern and length limits from the FSx API reference; botocore's model carries the same ones.
NID = re.compile(r"^([0-9\[\]\-]*\.){3}([0-9\[\]\-]*)@tcp$")


@pytest.mark.parametrize(
    "cidr,nid",
    [
        ("10.0.64.0/18", "10.0.[64-127].[0-255]@tcp"),
        ("10.0.4.0/22", "10.0.[4-7].[0-255]@tcp"),
        ("10.1.128.0/24", "10.1.128.[0-255]@tcp"),
        ("10.0.1.16/28", "10.0.1.[16-31]@tcp"),
        ("172.16.0.0/12", "172.[16-31].[0-255].[0-255]@tcp"),
        ("10.0.1.6/32", "10.0.1.6@tcp"),
    ],
)
def test_each_cidr_is_exactly_one_nid_range(cidr, nid):
    assert root_squash.nid_range(cidr) == nid
    assert NID.match(nid) and 11 <= len(nid) <= 43


def test_the_nid_pattern_is_botocores():
    shape = root_squash.client("fsx").meta.service_model.shape_for("LustreNoSquashNid")
    assert shape.metadata["pattern"] == NID.pattern and shape.metadata["max"] == 43


@pytest.fixture
def subnets():
    ec2 = root_squash.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ids = [ec2.create_subnet(VpcId=vpc, CidrBlock=c)["Subnet"]["SubnetId"] for c in ("10.0.64.0/18", "10.0.128.0/18")]
    return ec2, ids


def _describe(stub, squash: str | None, nids=(), lifecycle="AVAILABLE"):
    lustre = {"RootSquashConfiguration": {"RootSquash": squash, "NoSquashNids": list(nids)}} if squash else {}
    stub.add_response(
        "describe_file_systems",
        {
            "FileSystems": [
                {"FileSystemId": FS, "Lifecycle": lifecycle, "FileSystemType": "LUSTRE", "LustreConfiguration": lustre}
            ]
        },
        {"FileSystemIds": [FS]},
    )


def _event(request="Create", squash="65534:65534", subnet_ids=()):
    return custom_resource_event(
        request,
        {"FileSystemId": FS, "RootSquash": squash, "NoSquashSubnetIds": list(subnet_ids)},
        logical_id="RootSquash",
        resource_type="Custom::FsxRootSquash",
        physical_id=f"{FS}/root-squash",
    )


def test_create_squashes_root_and_exempts_exactly_the_cluster_subnets(subnets):
    ec2, ids = subnets
    fsx = root_squash.client("fsx")
    wanted = {"RootSquash": "65534:65534", "NoSquashNids": ["10.0.[128-191].[0-255]@tcp", "10.0.[64-127].[0-255]@tcp"]}
    with Stubber(fsx) as stub:
        _describe(stub, None)
        stub.add_response(
            "update_file_system", {}, {"FileSystemId": FS, "LustreConfiguration": {"RootSquashConfiguration": wanted}}
        )
        result = root_squash.on_event(_event(subnet_ids=ids), fsx=fsx, ec2=ec2)
        stub.assert_no_pending_responses()
    assert result["PhysicalResourceId"] == f"{FS}/root-squash"
    # Asynchronous on FSx: not complete until the file system reports it and is AVAILABLE again.
    with Stubber(fsx) as stub:
        _describe(stub, "65534:65534", wanted["NoSquashNids"], lifecycle="UPDATING")
        assert root_squash.is_complete(_event(subnet_ids=ids), fsx=fsx, ec2=ec2) == {"IsComplete": False}
        _describe(stub, "65534:65534", wanted["NoSquashNids"])
        assert root_squash.is_complete(_event(subnet_ids=ids), fsx=fsx, ec2=ec2) == {"IsComplete": True}


def test_no_update_when_already_set_and_off_means_0_0(subnets):
    ec2, ids = subnets
    fsx = root_squash.client("fsx")
    nids = ["10.0.[128-191].[0-255]@tcp", "10.0.[64-127].[0-255]@tcp"]
    with Stubber(fsx) as stub:
        _describe(stub, "65534:65534", list(reversed(nids)))
        root_squash.on_event(_event("Update", subnet_ids=ids), fsx=fsx, ec2=ec2)  # no update_file_system stubbed
        _describe(stub, "65534:65534", nids)
        stub.add_response(
            "update_file_system",
            {},
            {
                "FileSystemId": FS,
                "LustreConfiguration": {"RootSquashConfiguration": {"RootSquash": "0:0", "NoSquashNids": []}},
            },
        )
        root_squash.on_event(_event("Update", squash="0:0", subnet_ids=ids), fsx=fsx, ec2=ec2)
        stub.assert_no_pending_responses()


def test_delete_leaves_the_file_system_as_it_is():
    fsx = root_squash.client("fsx")
    with Stubber(fsx):  # any call would fail: nothing is stubbed
        assert root_squash.on_event(_event("Delete"), fsx=fsx, ec2=None)["PhysicalResourceId"] == f"{FS}/root-squash"
        assert root_squash.is_complete(_event("Delete"), fsx=fsx, ec2=None) == {"IsComplete": True}


def test_an_unknown_subnet_fails_the_deployment(subnets):
    ec2, _ = subnets
    with pytest.raises(Exception, match="subnet-0000000000000000"):
        root_squash.desired({"RootSquash": "65534:65534", "NoSquashSubnetIds": ["subnet-0000000000000000"]}, ec2)


def test_without_exempt_subnets_root_is_squashed_on_every_client(subnets):
    """No exempt subnets means none: not every subnet of the VPC (DescribeSubnets without ids lists them all)."""
    ec2, _ = subnets
    fsx = root_squash.client("fsx")
    with Stubber(fsx) as stub:
        _describe(stub, None)
        stub.add_response(
            "update_file_system",
            {},
            {
                "FileSystemId": FS,
                "LustreConfiguration": {"RootSquashConfiguration": {"RootSquash": "65534:65534", "NoSquashNids": []}},
            },
        )
        root_squash.on_event(_event(), fsx=fsx, ec2=ec2)
        stub.assert_no_pending_responses()


def test_64_exempt_ranges_is_the_limit_and_65_are_refused_before_any_change():
    """FSx takes at most 64 NoSquashNids (LustreRootSquashConfiguration): 64 subnets are set, a 65th fails the
    deployment before the file system is read or changed."""
    ec2 = root_squash.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ids = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24")["Subnet"]["SubnetId"] for i in range(65)]
    fsx = root_squash.client("fsx")
    with Stubber(fsx) as stub:
        _describe(stub, None)
        nids = sorted(f"10.0.{i}.[0-255]@tcp" for i in range(64))
        stub.add_response(
            "update_file_system",
            {},
            {
                "FileSystemId": FS,
                "LustreConfiguration": {"RootSquashConfiguration": {"RootSquash": "65534:65534", "NoSquashNids": nids}},
            },
        )
        root_squash.on_event(_event(subnet_ids=ids[:64]), fsx=fsx, ec2=ec2)
        stub.assert_no_pending_responses()
        with pytest.raises(RuntimeError, match="65 exempt address ranges; FSx takes at most 64"):
            root_squash.on_event(_event(subnet_ids=ids), fsx=fsx, ec2=ec2)  # nothing stubbed: no FSx call


@pytest.mark.parametrize("reported", [None, "0:0"], ids=["never-set", "off-with-leftover-nids"])
def test_turning_squash_off_where_it_is_off_changes_nothing(subnets, reported):
    """A file system that reports no RootSquashConfiguration, or "0:0" with NoSquashNids left from before, already
    gives root to every client: no UpdateFileSystem, and the wait is over at once."""
    ec2, ids = subnets
    fsx = root_squash.client("fsx")
    with Stubber(fsx) as stub:  # no update_file_system stubbed: calling it fails the test
        _describe(stub, reported, ["10.0.[64-127].[0-255]@tcp"])
        result = root_squash.on_event(_event("Update", squash="0:0", subnet_ids=ids), fsx=fsx, ec2=ec2)
        _describe(stub, reported, ["10.0.[64-127].[0-255]@tcp"])
        assert root_squash.is_complete(_event("Update", squash="0:0", subnet_ids=ids), fsx=fsx, ec2=ec2) == {
            "IsComplete": True
        }
        stub.assert_no_pending_responses()
    assert result["PhysicalResourceId"] == f"{FS}/root-squash"


def test_delete_keeps_the_physical_id_cloudformation_holds():
    """The Delete after a Create that failed carries the id the Provider framework gave it (the request id); the
    framework fails a Delete that answers with another ("DELETE: cannot change the physical resource ID",
    aws-cdk-lib 2.275.0 custom-resources/lib/provider-framework/runtime/framework.js)."""
    event = custom_resource_event(
        "Delete",
        {"FileSystemId": FS, "RootSquash": "65534:65534", "NoSquashSubnetIds": []},
        logical_id="RootSquash",
        resource_type="Custom::FsxRootSquash",
        physical_id="req-1",
    )
    fsx = root_squash.client("fsx")
    with Stubber(fsx):
        assert root_squash.on_event(event, fsx=fsx, ec2=None) == {"PhysicalResourceId": "req-1"}


@pytest.mark.parametrize("lifecycle", ["FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE"])
def test_a_broken_file_system_fails_the_wait_instead_of_waiting_an_hour(subnets, lifecycle):
    """These Lifecycle states (FSx FileSystem.Lifecycle) do not end in AVAILABLE by themselves: the deployment fails
    naming the state instead of polling until the provider's one-hour timeout."""
    ec2, ids = subnets
    fsx = root_squash.client("fsx")
    with Stubber(fsx) as stub:
        _describe(stub, "65534:65534", lifecycle=lifecycle)
        with pytest.raises(RuntimeError, match=f"file system {FS} is {lifecycle}$"):
            root_squash.is_complete(_event(subnet_ids=ids), fsx=fsx, ec2=ec2)


def test_the_handlers_make_their_own_clients_as_in_lambda(subnets, monkeypatch):
    """In Lambda nothing passes clients in: both handlers make them by service name (EC2 a real client to moto
    server; FSx the real client under Stubber, as moto has no UpdateFileSystem)."""
    _, ids = subnets
    fsx = root_squash.client("fsx")
    real = root_squash.client
    monkeypatch.setattr(root_squash, "client", lambda service: fsx if service == "fsx" else real(service))
    nids = ["10.0.[128-191].[0-255]@tcp", "10.0.[64-127].[0-255]@tcp"]
    with Stubber(fsx) as stub:
        _describe(stub, None)
        stub.add_response(
            "update_file_system",
            {},
            {
                "FileSystemId": FS,
                "LustreConfiguration": {"RootSquashConfiguration": {"RootSquash": "65534:65534", "NoSquashNids": nids}},
            },
        )
        root_squash.on_event(_event(subnet_ids=ids))
        _describe(stub, "65534:65534", nids)
        assert root_squash.is_complete(_event(subnet_ids=ids)) == {"IsComplete": True}
        stub.assert_no_pending_responses()
