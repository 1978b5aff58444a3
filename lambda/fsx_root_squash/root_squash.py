"""custom_resources.Provider handlers: FSx for Lustre root squash, which CloudFormation cannot set.

AWS::FSx::FileSystem's LustreConfiguration has no root squash property (the CloudFormation Template Reference and
the resource schema cfn-lint 1.58 bundles, dated 2026-10-20, list none); the FSx API sets it with UpdateFileSystem
`LustreConfiguration.RootSquashConfiguration`
(https://docs.aws.amazon.com/fsx/latest/APIReference/API_LustreRootSquashConfiguration.html):
- `RootSquash` "UID:GID": root on a client acts as that user on the file system; "0:0" turns squash off.
- `NoSquashNids`: clients that keep root, as Lustre NIDs: one address `10.0.1.6@tcp` or a range per octet
  `10.0.[2-10].[1-255]@tcp`; at most 64, each 11 to 43 characters.

The exempt clients are given as subnet ids (the cluster's own subnets, whose addresses only cluster nodes hold); their
CIDR blocks are read with DescribeSubnets, so a VPC you bring works the same as the platform's, and each CIDR becomes
exactly one NID range. Delete leaves the file system's setting as it is: the file system is retained, and quietly
giving root back to every client would be the wrong default.

ResourceProperties: FileSystemId, RootSquash ("UID:GID"), NoSquashSubnetIds (list). Environment: AWS_REGION,
optionally AWS_ENDPOINT_URL (tests).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any
from collections.abc import Mapping

from aws_clients import client

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

MAX_NIDS = 64


def nid_range(cidr: str) -> str:
    """The Lustre NID range holding exactly the addresses of an IPv4 CIDR block: fixed octets as numbers, the octet
    the prefix ends in as [low-high], the rest [0-255]. 10.0.64.0/18 -> 10.0.[64-127].[0-255]@tcp."""
    network = ipaddress.IPv4Network(cidr, strict=True)
    low, high = network.network_address.packed, network.broadcast_address.packed
    octets = [str(a) if a == b else f"[{a}-{b}]" for a, b in zip(low, high, strict=True)]
    return ".".join(octets) + "@tcp"


def subnet_cidrs(ec2, subnet_ids: list[str]) -> list[str]:
    if not subnet_ids:
        return []
    subnets = {s["SubnetId"]: s["CidrBlock"] for s in ec2.describe_subnets(SubnetIds=subnet_ids)["Subnets"]}
    missing = sorted(set(subnet_ids) - set(subnets))
    if missing:
        raise RuntimeError(f"subnets {missing} not found")
    return [subnets[s] for s in subnet_ids]


def desired(props: Mapping[str, Any], ec2) -> dict[str, Any]:
    squash = str(props["RootSquash"])
    nids = sorted({nid_range(c) for c in subnet_cidrs(ec2, list(props.get("NoSquashSubnetIds") or []))})
    if squash == "0:0":
        return {"RootSquash": squash, "NoSquashNids": []}
    if len(nids) > MAX_NIDS:
        raise RuntimeError(f"{len(nids)} exempt address ranges; FSx takes at most {MAX_NIDS} NoSquashNids")
    return {"RootSquash": squash, "NoSquashNids": nids}


def current(fsx, file_system_id: str) -> tuple[str, dict[str, Any]]:
    (fs,) = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    config = fs.get("LustreConfiguration", {}).get("RootSquashConfiguration", {})
    return fs["Lifecycle"], {
        "RootSquash": config.get("RootSquash", "0:0"),
        "NoSquashNids": sorted(config.get("NoSquashNids", [])),
    }


def matches(have: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """With squash off, leftover NoSquashNids change nothing."""
    return have == wanted or (wanted["RootSquash"] == have["RootSquash"] == "0:0")


def on_event(event: Mapping[str, Any], _context: Any = None, *, fsx=None, ec2=None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    file_system_id = props["FileSystemId"]
    physical_id = f"{file_system_id}/root-squash"
    if event["RequestType"] == "Delete":
        LOG.info("leaving root squash on %s as it is", file_system_id)
        return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
    fsx, ec2 = fsx or client("fsx"), ec2 or client("ec2")
    wanted = desired(props, ec2)
    _, have = current(fsx, file_system_id)
    if not matches(have, wanted):
        LOG.info("%s root squash %s -> %s", file_system_id, have, wanted)
        fsx.update_file_system(FileSystemId=file_system_id, LustreConfiguration={"RootSquashConfiguration": wanted})
    return {
        "PhysicalResourceId": physical_id,
        "Data": {"RootSquash": wanted["RootSquash"], "NoSquashNids": ",".join(wanted["NoSquashNids"])},
    }


def is_complete(event: Mapping[str, Any], _context: Any = None, *, fsx=None, ec2=None) -> dict[str, Any]:
    """Done when the file system reports the wanted setting and is AVAILABLE again (the update is asynchronous)."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    props = event["ResourceProperties"]
    fsx, ec2 = fsx or client("fsx"), ec2 or client("ec2")
    lifecycle, have = current(fsx, props["FileSystemId"])
    if lifecycle in ("FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE"):
        raise RuntimeError(f"file system {props['FileSystemId']} is {lifecycle}")
    return {"IsComplete": lifecycle == "AVAILABLE" and matches(have, desired(props, ec2))}
