"""custom_resources.Provider handlers for one FSx for Lustre partition (a directory with owner, group and mode).

on_event writes the S3 directory marker and starts the metadata import; is_complete reports when the import task
has succeeded. When the file system is busy (MAX_IMPORTS_IN_FLIGHT tasks pending or running, or FSx answers
DataRepositoryTaskExecuting / ServiceLimitExceeded), on_event leaves the start to is_complete, which tries again
on every poll. Every attempt for one CloudFormation request sends the same ClientRequestToken (derived from the
stack, logical id, RequestId and path), so retries never start a second task. Delete never removes the marker or
anything on the file system.

ResourceProperties (strings, as CloudFormation passes them): FileSystemId, FileSystemPath, DataBucket, S3Prefix,
RelativePath, Uid, Gid, Mode (e.g. "0700", "2775").
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any
from collections.abc import Mapping

import partitions
from partitions import Partition

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)


def partition_from(props: Mapping[str, Any]) -> Partition:
    return Partition.build(
        file_system_id=props.get("FileSystemId", ""),
        file_system_path=props.get("FileSystemPath", ""),
        data_bucket=props.get("DataBucket", ""),
        s3_prefix=props.get("S3Prefix", ""),
        relative_path=props.get("RelativePath", ""),
        uid=props.get("Uid"),
        gid=props.get("Gid"),
        mode=props.get("Mode", ""),
    )


def max_in_flight() -> int:
    return int(os.environ.get("MAX_IMPORTS_IN_FLIGHT", partitions.DEFAULT_MAX_IMPORTS_IN_FLIGHT))


def import_token(event: Mapping[str, Any], partition: Partition) -> str:
    """Same for every attempt at one CloudFormation request (its RequestId is stable across retries)."""
    return partitions.request_token(
        event.get("StackId", ""), event.get("LogicalResourceId", ""), event.get("RequestId", ""), partition.import_uri
    )


def on_event(event: Mapping[str, Any], _context: Any = None, *, s3=None, fsx=None, sleep=time.sleep) -> dict[str, Any]:
    request = event["RequestType"]
    LOG.info("%s %s", request, event.get("PhysicalResourceId", "(new)"))
    if request == "Delete":
        # Never destructive: the marker and the directory (with whatever users stored in it) stay.
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    if request not in ("Create", "Update"):
        raise ValueError(f"unknown RequestType {request!r}")

    partition = partition_from(event["ResourceProperties"])
    s3 = s3 or partitions.client("s3")
    written = partitions.ensure_marker(
        s3, partition.data_bucket, partition.marker_key, partition.uid, partition.gid, partition.mode, sleep=sleep
    )
    # Create always imports: an earlier attempt may have written the marker and then failed before the import.
    # Update with a new physical id is a Create for the new partition (CloudFormation then deletes the old one,
    # which is a no-op). Update with the same id imports only if the marker changed.
    needs_import = request == "Create" or written or event.get("PhysicalResourceId") != partition.physical_id
    task_id, pending = "", ""
    if needs_import:
        fsx = fsx or partitions.client("fsx")
        task_id = (
            partitions.start_import(
                fsx,
                partition.file_system_id,
                partition.import_uri,
                token=import_token(event, partition),
                max_in_flight=max_in_flight(),
                sleep=sleep,
            )
            or ""
        )
        pending = "" if task_id else "true"
    return {
        "PhysicalResourceId": partition.physical_id,
        "Data": {"TaskId": task_id, "Path": partition.path, "ImportPending": pending},
    }


def is_complete(event: Mapping[str, Any], _context: Any = None, *, fsx=None, sleep=time.sleep) -> dict[str, Any]:
    """The Provider passes the on_event request merged with on_event's response, so event["Data"]["TaskId"] is
    the task on_event started. "Data" must be absent while IsComplete is false (the framework rejects it)."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    data = event.get("Data") or {}
    task_id = data.get("TaskId", "")
    if not task_id and not data.get("ImportPending"):
        return {"IsComplete": True}
    fsx = fsx or partitions.client("fsx")
    if not task_id:
        # Started on an earlier poll or not at all: the same token returns the same task, never a second one.
        partition = partition_from(event["ResourceProperties"])
        task_id = partitions.start_import(
            fsx,
            partition.file_system_id,
            partition.import_uri,
            token=import_token(event, partition),
            max_in_flight=max_in_flight(),
            sleep=sleep,
        )
        if not task_id:
            return {"IsComplete": False}
    if partitions.import_status(fsx, task_id, sleep=sleep) == "done":  # raises when the task failed
        return {"IsComplete": True}
    return {"IsComplete": False}
