"""custom_resources.Provider handler: add a security group to every network interface of an existing FSx for Lustre
file system, and remove it again on delete.

The file system is not ours, so its security groups cannot be changed declaratively. Each ENI keeps the groups it
has; ours is merged in (ModifyNetworkInterfaceAttribute replaces the whole set, so every call sends the full list).
Delete removes only our group and never touches the file system.

ResourceProperties: FileSystemId, SecurityGroupId. Environment: AWS_REGION (set by Lambda), optionally
AWS_ENDPOINT_URL (tests) and MAX_GROUPS_PER_INTERFACE (default 5, the default VPC quota).
"""

from __future__ import annotations

import logging
import os
from typing import Any
from collections.abc import Mapping

from botocore.exceptions import ClientError

from aws_clients import client

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

FILE_SYSTEM_GONE = frozenset({"FileSystemNotFound"})
INTERFACE_GONE = frozenset({"InvalidNetworkInterfaceID.NotFound"})


def max_groups() -> int:
    return int(os.environ.get("MAX_GROUPS_PER_INTERFACE", "5"))


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def interface_ids(fsx, file_system_id: str, *, missing_ok: bool) -> list[str]:
    try:
        file_systems = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    except ClientError as error:
        if missing_ok and _code(error) in FILE_SYSTEM_GONE:
            LOG.info("file system %s no longer exists", file_system_id)
            return []
        raise
    if not file_systems:
        if missing_ok:
            return []
        raise RuntimeError(f"file system {file_system_id} not found")
    return list(file_systems[0].get("NetworkInterfaceIds", []))


def current_groups(ec2, eni_ids: list[str]) -> dict[str, list[str]]:
    """ENI id -> its security group ids, in order. ENIs that no longer exist are simply absent (a filter, unlike
    NetworkInterfaceIds, does not fail the whole call on one missing id)."""
    if not eni_ids:
        return {}
    pages = ec2.get_paginator("describe_network_interfaces").paginate(
        Filters=[{"Name": "network-interface-id", "Values": eni_ids}]
    )
    return {
        eni["NetworkInterfaceId"]: [group["GroupId"] for group in eni.get("Groups", [])]
        for page in pages
        for eni in page["NetworkInterfaces"]
    }


def apply(fsx, ec2, file_system_id: str, *, add: str | None = None, remove: str | None = None) -> list[str]:
    """Add `add` to and/or drop `remove` from every ENI of the file system, keeping all other groups; one
    ModifyNetworkInterfaceAttribute per ENI that changes, so a swap never leaves an ENI without either group.
    Returns the ENI ids changed. Removing tolerates a file system or ENI that is gone; adding does not."""
    removing_only = add is None
    eni_ids = interface_ids(fsx, file_system_id, missing_ok=removing_only)
    groups_by_eni = current_groups(ec2, eni_ids)
    if not removing_only and (missing := sorted(set(eni_ids) - set(groups_by_eni))):
        raise RuntimeError(f"network interfaces {missing} of file system {file_system_id} not found")

    planned: dict[str, list[str]] = {}
    for eni_id, groups in groups_by_eni.items():
        wanted = [group for group in groups if group != remove]
        if add is not None and add not in wanted:
            wanted.append(add)
        if wanted == groups:
            continue
        if len(wanted) > max_groups():
            raise RuntimeError(
                f"cannot add {add} to network interface {eni_id} of file system {file_system_id}: it already has "
                f"{len(groups)} security groups ({', '.join(groups)}) and this function allows at most {max_groups()} "
                f"(MAX_GROUPS_PER_INTERFACE, the default 'Security groups per network interface' quota: raising the "
                f"quota alone does not change it); remove one from the file system first"
            )
        if not wanted:
            raise RuntimeError(
                f"cannot remove {remove} from network interface {eni_id} of file system {file_system_id}: it is the "
                f"only security group and an interface needs at least one; add another group to the file system first"
            )
        planned[eni_id] = wanted

    # Checked for every ENI before changing any, so a limit error leaves the file system as it was.
    changed = []
    for eni_id, wanted in planned.items():
        try:
            ec2.modify_network_interface_attribute(NetworkInterfaceId=eni_id, Groups=wanted)
        except ClientError as error:
            if removing_only and _code(error) in INTERFACE_GONE:
                continue
            raise RuntimeError(
                f"could not set security groups {wanted} on network interface {eni_id} of file "
                f"system {file_system_id}: {error}"
            ) from error
        LOG.info("%s %s: %s -> %s", file_system_id, eni_id, groups_by_eni[eni_id], wanted)
        changed.append(eni_id)
    return changed


def attach(fsx, ec2, file_system_id: str, group_id: str) -> list[str]:
    return apply(fsx, ec2, file_system_id, add=group_id)


def detach(fsx, ec2, file_system_id: str, group_id: str) -> list[str]:
    return apply(fsx, ec2, file_system_id, remove=group_id)


def _required(props: Mapping[str, Any]) -> tuple[str, str]:
    file_system_id, group_id = props.get("FileSystemId", ""), props.get("SecurityGroupId", "")
    if not str(file_system_id).startswith("fs-") or not str(group_id).startswith("sg-"):
        raise ValueError(
            f"FileSystemId (fs-...) and SecurityGroupId (sg-...) are required, got {file_system_id!r} and {group_id!r}"
        )
    return file_system_id, group_id


def on_event(event: Mapping[str, Any], _context: Any = None, *, fsx=None, ec2=None) -> dict[str, Any]:
    request = event["RequestType"]
    props = event["ResourceProperties"]
    LOG.info("%s %s", request, event.get("PhysicalResourceId", "(new)"))
    fsx = fsx or client("fsx")
    ec2 = ec2 or client("ec2")

    if request == "Delete":
        try:
            file_system_id, group_id = _required(props)
        except ValueError:  # the Create failed validation and attached nothing
            return {"PhysicalResourceId": event["PhysicalResourceId"]}
        detach(fsx, ec2, file_system_id, group_id)
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    if request not in ("Create", "Update"):
        raise ValueError(f"unknown RequestType {request!r}")

    file_system_id, group_id = _required(props)
    old = event.get("OldResourceProperties") or {}
    old_fs, old_group = old.get("FileSystemId"), old.get("SecurityGroupId")
    if request == "Update" and old_fs == file_system_id and old_group and old_group != group_id:
        apply(fsx, ec2, file_system_id, add=group_id, remove=old_group)
    else:
        attach(fsx, ec2, file_system_id, group_id)
        if request == "Update" and old_fs and old_group and old_fs != file_system_id:
            detach(fsx, ec2, old_fs, old_group)
    return {"PhysicalResourceId": f"{file_system_id}/{group_id}"}
