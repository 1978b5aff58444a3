"""custom_resources.Provider handlers for one FSx for Lustre partition (a directory with owner, group and mode).

on_event writes the S3 directory marker and starts the metadata import; is_complete reports when the import task
has succeeded. Delete never removes the marker or anything on the file system.

ResourceProperties (strings, as CloudFormation passes them): FileSystemId, FileSystemPath, DataBucket, S3Prefix,
RelativePath, Uid, Gid, Mode (e.g. "0700", "2775").
"""
from __future__ import annotations

import logging
import time
from typing import Any, Mapping

import partitions
from partitions import Partition

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)


def partition_from(props: Mapping[str, Any]) -> Partition:
    return Partition.build(
        file_system_id=props.get("FileSystemId", ""), file_system_path=props.get("FileSystemPath", ""),
        data_bucket=props.get("DataBucket", ""), s3_prefix=props.get("S3Prefix", ""),
        relative_path=props.get("RelativePath", ""), uid=props.get("Uid"), gid=props.get("Gid"),
        mode=props.get("Mode", ""))


def on_event(event: Mapping[str, Any], _context: Any = None, *, s3=None, fsx=None,
             sleep=time.sleep) -> dict[str, Any]:
    request = event["RequestType"]
    LOG.info("%s %s", request, event.get("PhysicalResourceId", "(new)"))
    if request == "Delete":
        # Never destructive: the marker and the directory (with whatever users stored in it) stay.
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    if request not in ("Create", "Update"):
        raise ValueError(f"unknown RequestType {request!r}")

    partition = partition_from(event["ResourceProperties"])
    s3 = s3 or partitions.client("s3")
    written = partitions.ensure_marker(s3, partition.data_bucket, partition.marker_key, partition.uid,
                                       partition.gid, partition.mode, sleep=sleep)
    # Create always imports: an earlier attempt may have written the marker and then failed before the import.
    # Update with a new physical id is a Create for the new partition (CloudFormation then deletes the old one,
    # which is a no-op). Update with the same id imports only if the marker changed.
    needs_import = request == "Create" or written or event.get("PhysicalResourceId") != partition.physical_id
    task_id = ""
    if needs_import:
        fsx = fsx or partitions.client("fsx")
        task_id = partitions.start_import(fsx, partition.file_system_id, partition.import_uri, sleep=sleep)
    return {"PhysicalResourceId": partition.physical_id, "Data": {"TaskId": task_id, "Path": partition.path}}


def is_complete(event: Mapping[str, Any], _context: Any = None, *, fsx=None, sleep=time.sleep) -> dict[str, Any]:
    """The Provider passes the on_event request merged with on_event's response, so event["Data"]["TaskId"] is
    the task on_event started. "Data" must be absent while IsComplete is false (the framework rejects it)."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    task_id = (event.get("Data") or {}).get("TaskId", "")
    if not task_id:
        return {"IsComplete": True}
    fsx = fsx or partitions.client("fsx")
    if partitions.import_status(fsx, task_id, sleep=sleep) == "done":  # raises when the task failed
        return {"IsComplete": True}
    return {"IsComplete": False}
