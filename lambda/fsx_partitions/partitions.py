"""FSx for Lustre partitions: directories created through the S3 data repository, never through a shell.

A partition is a directory on the file system with a POSIX owner, group and mode. We write a zero-byte
"directory marker" object (key ends in "/") into the bucket linked by the data repository association, carrying
the POSIX metadata FSx for Lustre reads on import (user metadata `file-owner`, `file-group`,
`file-permissions`; see "POSIX metadata support for data repositories" in the FSx for Lustre User Guide), then
run an IMPORT_METADATA_FROM_REPOSITORY task so the directory exists with that metadata once the task succeeds.

Plain functions taking boto3 clients; stdlib + boto3 only.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, TypeVar
from collections.abc import Callable, Mapping

from botocore.exceptions import ClientError

from aws_clients import client  # noqa: F401 - the handlers make their clients through partitions.client

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

T = TypeVar("T")
Sleep = Callable[[float], None]

NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
# CreateDataRepositoryTask's own "come back later" answers (botocore's FSx model lists both for the operation):
# DataRepositoryTaskExecuting "An existing data repository task is currently executing on the file system. Wait
# until the existing task has completed, then create the new task." and ServiceLimitExceeded (too many tasks).
IMPORT_BUSY_CODES = frozenset({"DataRepositoryTaskExecuting", "ServiceLimitExceeded"})
IN_FLIGHT = ("PENDING", "EXECUTING")
DEFAULT_MAX_IMPORTS_IN_FLIGHT = 4

S_IFDIR = 0o040000
# FSx for Lustre POSIX metadata, stored as S3 user metadata (x-amz-meta-<name>); boto3 adds the prefix.
META_OWNER = "file-owner"
META_GROUP = "file-group"
META_PERMISSIONS = "file-permissions"

MAX_CUSTOM_FILE_SYSTEMS = 10  # UserSettings.CustomFileSystemConfigs holds at most 10 entries


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def retry(
    call: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay: float = 2.0,
    max_delay: float = 8.0,
    sleep: Sleep = time.sleep,
    jitter: Callable[[], float] = random.random,
    codes: frozenset[str] = IMPORT_BUSY_CODES,
) -> T:
    """Run `call`, retrying errors whose code is in `codes` (FSx's busy file system by default: answers that mean
    "come back later", which botocore does not retry) with capped exponential backoff and full jitter. Throttling is
    the client's to retry (aws_clients.py, botocore's standard mode).

    Any other error, or a retried error on the last attempt, propagates unchanged."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except ClientError as error:
            if error_code(error) not in codes or attempt == attempts:
                raise
            delay = jitter() * min(max_delay, base_delay * 2 ** (attempt - 1))
            LOG.warning("%s, attempt %d/%d, retrying in %.2fs", error_code(error), attempt, attempts, delay)
            sleep(delay)
    raise AssertionError("unreachable")


def wait_for(
    check: Callable[[], T | None],
    *,
    what: str,
    max_wait: float,
    sleep: Sleep = time.sleep,
    first_delay: float = 2.0,
    max_delay: float = 30.0,
) -> T:
    """Poll `check` until it returns a truthy value, backing off from `first_delay` up to `max_delay`.

    `check` raises to fail fast. The budget counts both slept seconds and wall-clock time, so an injected sleep
    still ends the wait after a bounded number of polls. Raises TimeoutError when `max_wait` is spent."""
    started = time.monotonic()
    slept = 0.0
    delay = first_delay
    polls = 0
    while True:
        result = check()
        polls += 1
        if result:
            return result
        elapsed = max(slept, time.monotonic() - started)
        if elapsed >= max_wait:
            raise TimeoutError(f"{what}: not done after {elapsed:.0f}s ({polls} checks, limit {max_wait:.0f}s)")
        step = max(0.0, min(delay, max_wait - elapsed))
        sleep(step)
        slept += step
        delay = min(delay * 2, max_delay)


# --- partition description -------------------------------------------------------------------------------------


def parse_mode(value: str | int) -> int:
    """'0700', '700', '2775' or an int -> permission bits (no file type). setuid is refused: FSx drops it."""
    try:
        mode = value if isinstance(value, int) else int(str(value).strip(), 8)
    except ValueError:
        raise ValueError(f"Mode must be octal permission bits such as '0700', got {value!r}") from None
    if not 0 <= mode <= 0o7777:
        raise ValueError(f"mode {value!r} is outside 0000-7777")
    if mode & 0o4000:
        raise ValueError(f"mode {value!r} sets setuid, which FSx for Lustre does not import")
    return mode


def directory_permissions(mode: int) -> str:
    """Permission bits -> the `file-permissions` value: st_mode in octal with the directory type bits,
    e.g. 0o700 -> '040700', 0o2775 -> '042775'."""
    return f"{S_IFDIR | parse_mode(mode):06o}"


def marker_metadata(uid: int, gid: int, mode: int) -> dict[str, str]:
    return {META_OWNER: str(uid), META_GROUP: str(gid), META_PERMISSIONS: directory_permissions(mode)}


def _non_negative_int(name: str, value: Any) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if number < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return number


@dataclass(frozen=True)
class Partition:
    file_system_id: str
    file_system_path: str  # where the DRA links the bucket, e.g. "/data"
    data_bucket: str
    s3_prefix: str  # "" or ends in "/"
    relative_path: str  # e.g. "studio/alice"
    uid: int
    gid: int
    mode: int  # permission bits without the file type, e.g. 0o700

    @classmethod
    def build(
        cls,
        *,
        file_system_id: str,
        file_system_path: str,
        data_bucket: str,
        s3_prefix: str,
        relative_path: str,
        uid: Any,
        gid: Any,
        mode: Any,
    ) -> Partition:
        if not file_system_id:
            raise ValueError("FileSystemId is required")
        if not data_bucket:
            raise ValueError("DataBucket is required")
        if not file_system_path.startswith("/"):
            raise ValueError(f"FileSystemPath must start with '/', got {file_system_path!r}")
        if s3_prefix and (not s3_prefix.endswith("/") or s3_prefix.startswith("/")):
            raise ValueError(f"S3Prefix must be empty or end (and not start) with '/', got {s3_prefix!r}")
        parts = relative_path.split("/")
        if not relative_path or any(part in ("", ".", "..") for part in parts):
            raise ValueError(
                f"RelativePath must be a relative path without '.', '..' or empty parts, got {relative_path!r}"
            )
        return cls(
            file_system_id=file_system_id,
            file_system_path=file_system_path.rstrip("/") or "/",
            data_bucket=data_bucket,
            s3_prefix=s3_prefix,
            relative_path=relative_path,
            uid=_non_negative_int("Uid", uid),
            gid=_non_negative_int("Gid", gid),
            mode=parse_mode(mode),
        )

    @property
    def path(self) -> str:
        """The directory as the file system (and SageMaker's FSxLustreFileSystemConfig) sees it."""
        return f"{self.file_system_path.rstrip('/')}/{self.relative_path}"

    @property
    def physical_id(self) -> str:
        return f"{self.file_system_id}:{self.path}"

    @property
    def marker_key(self) -> str:
        return f"{self.s3_prefix}{self.relative_path}/"

    @property
    def import_uri(self) -> str:
        """Import tasks take repository paths (s3://bucket/prefix), not file-system paths; see the Paths member
        of CreateDataRepositoryTask. The trailing '/' keeps 'studio/al/' from matching 'studio/alice/'."""
        return f"s3://{self.data_bucket}/{self.marker_key}"

    @property
    def metadata(self) -> dict[str, str]:
        return marker_metadata(self.uid, self.gid, self.mode)


# --- S3 marker and FSx import ------------------------------------------------------------------------------------


def ensure_marker(s3, bucket: str, key: str, uid: int, gid: int, mode: int, *, sleep: Sleep = time.sleep) -> bool:
    """Make sure the directory marker exists with this POSIX metadata. Returns True if it was (re)written.

    Other user metadata on an existing marker (e.g. timestamps FSx exported) is kept, and an existing object is
    rewritten in place with copy_object so nothing it holds is lost."""
    wanted = marker_metadata(uid, gid, mode)
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        code = error_code(error)
        if code in ("403", "AccessDenied", "Forbidden"):
            # Without s3:ListBucket, S3 answers HEAD on a missing key with 403, not 404. Writing is then the only
            # way to know: if we truly may not write, put_object fails loudly with AccessDenied.
            LOG.warning("HEAD s3://%s/%s was denied (%s); treating the marker as absent", bucket, key, code)
        elif code not in NOT_FOUND_CODES:
            raise
        head = None
    if head is None:
        s3.put_object(Bucket=bucket, Key=key, Body=b"", Metadata=wanted)
        LOG.info("created marker s3://%s/%s %s", bucket, key, wanted)
        return True
    current = {name.lower(): value for name, value in head.get("Metadata", {}).items()}
    if all(current.get(name) == value for name, value in wanted.items()):
        LOG.info("marker s3://%s/%s already has %s", bucket, key, wanted)
        return False
    merged = {**current, **wanted}
    s3.copy_object(
        Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key}, Metadata=merged, MetadataDirective="REPLACE"
    )
    LOG.info("updated marker s3://%s/%s from %s to %s", bucket, key, current, merged)
    return True


def request_token(*parts: str) -> str:
    """A ClientRequestToken derived from what identifies one request (e.g. CloudFormation's RequestId or
    CloudTrail's eventID, and the path): a retried request sends the same token, and FSx answers a repeated token
    with the task it already started instead of starting a second one (an idempotency token, botocore FSx model,
    ClientRequestToken: at most 63 characters of [A-Za-z0-9_.-])."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:48]


def imports_in_flight(fsx, file_system_id: str, *, sleep: Sleep = time.sleep) -> int:
    """Number of this file system's data repository tasks that are PENDING or EXECUTING."""
    count, token = 0, None
    while True:
        kwargs: dict[str, Any] = {
            "Filters": [
                {"Name": "file-system-id", "Values": [file_system_id]},
                {"Name": "task-lifecycle", "Values": list(IN_FLIGHT)},
            ]
        }
        if token:
            kwargs["NextToken"] = token
        response = fsx.describe_data_repository_tasks(**kwargs)
        count += sum(1 for task in response.get("DataRepositoryTasks", []) if task.get("Lifecycle") in IN_FLIGHT)
        token = response.get("NextToken")
        if not token:
            return count


def start_import(
    fsx,
    file_system_id: str,
    path: str,
    *,
    token: str,
    max_in_flight: int = DEFAULT_MAX_IMPORTS_IN_FLIGHT,
    sleep: Sleep = time.sleep,
) -> str | None:
    """Start an IMPORT_METADATA_FROM_REPOSITORY task for one repository path (s3://bucket/prefix/).

    Returns the task id, or None when the file system is busy: `max_in_flight` tasks already pending or running,
    or FSx answered DataRepositoryTaskExecuting / ServiceLimitExceeded after a few backed-off attempts. The caller
    comes back later with the same `token`, so at most one task is ever started for one request."""
    running = imports_in_flight(fsx, file_system_id, sleep=sleep)
    if running >= max_in_flight:
        LOG.info("%d import tasks in flight on %s (limit %d); %s waits", running, file_system_id, max_in_flight, path)
        return None
    try:
        response = retry(
            lambda: fsx.create_data_repository_task(
                Type="IMPORT_METADATA_FROM_REPOSITORY",
                FileSystemId=file_system_id,
                Paths=[path],
                Report={"Enabled": False},
                ClientRequestToken=token,
            ),
            sleep=sleep,
        )
    except ClientError as error:
        if error_code(error) in IMPORT_BUSY_CODES:
            LOG.info("%s is busy (%s); %s waits", file_system_id, error_code(error), path)
            return None
        raise
    task_id = response["DataRepositoryTask"]["TaskId"]
    LOG.info("started import task %s on %s for %s (token %s)", task_id, file_system_id, path, token)
    return task_id


class ImportFailed(RuntimeError):
    pass


def import_status(fsx, task_id: str, *, sleep: Sleep = time.sleep) -> str:
    """'done' when the task SUCCEEDED, 'running' while PENDING/EXECUTING; raises ImportFailed otherwise."""
    response = fsx.describe_data_repository_tasks(TaskIds=[task_id])
    tasks = response.get("DataRepositoryTasks", [])
    if not tasks:
        raise ImportFailed(f"import task {task_id} not found")
    task = tasks[0]
    lifecycle = task["Lifecycle"]
    if lifecycle == "SUCCEEDED":
        return "done"
    if lifecycle in ("PENDING", "EXECUTING"):
        return "running"
    reason = task.get("FailureDetails", {}).get("Message") or "no failure details"
    raise ImportFailed(f"import task {task_id} {lifecycle}: {reason}")


# --- SageMaker user profile ---------------------------------------------------------------------------------------


def _fsx_entry(file_system_id: str, path: str) -> dict[str, Any]:
    return {"FSxLustreFileSystemConfig": {"FileSystemId": file_system_id, "FileSystemPath": path}}


def _same_fsx(entry: Mapping[str, Any], file_system_id: str, path: str) -> bool:
    config = entry.get("FSxLustreFileSystemConfig") or {}
    return bool(config) and config.get("FileSystemId") == file_system_id and config.get("FileSystemPath", "/") == path


def _update_file_systems(
    sagemaker,
    domain_id: str,
    profile_name: str,
    user_settings: Mapping[str, Any],
    configs: list[dict[str, Any]],
    sleep: Sleep,
) -> None:
    settings: dict[str, Any] = {"CustomFileSystemConfigs": configs}
    if "CustomPosixUserConfig" in user_settings:
        settings["CustomPosixUserConfig"] = user_settings["CustomPosixUserConfig"]
    sagemaker.update_user_profile(DomainId=domain_id, UserProfileName=profile_name, UserSettings=settings)


def merge_file_system_config(
    sagemaker, domain_id: str, profile_name: str, file_system_id: str, path: str, *, sleep: Sleep = time.sleep
) -> bool:
    """Add the FSx entry to the profile's CustomFileSystemConfigs, keeping every other entry. True if updated."""
    profile = sagemaker.describe_user_profile(DomainId=domain_id, UserProfileName=profile_name)
    user_settings = profile.get("UserSettings", {})
    configs = list(user_settings.get("CustomFileSystemConfigs", []))
    if any(_same_fsx(entry, file_system_id, path) for entry in configs):
        LOG.info("profile %s/%s already mounts %s:%s", domain_id, profile_name, file_system_id, path)
        return False
    if len(configs) >= MAX_CUSTOM_FILE_SYSTEMS:
        raise ValueError(
            f"profile {domain_id}/{profile_name} already has {len(configs)} custom file systems "
            f"(the maximum is {MAX_CUSTOM_FILE_SYSTEMS}); cannot add {file_system_id}:{path}"
        )
    _update_file_systems(
        sagemaker, domain_id, profile_name, user_settings, configs + [_fsx_entry(file_system_id, path)], sleep
    )
    LOG.info("profile %s/%s now mounts %s:%s", domain_id, profile_name, file_system_id, path)
    return True


def remove_file_system_config(
    sagemaker, domain_id: str, profile_name: str, file_system_id: str, path: str, *, sleep: Sleep = time.sleep
) -> bool:
    """Drop the FSx entry from the profile, keeping every other entry. Tolerates a missing profile."""
    try:
        profile = sagemaker.describe_user_profile(DomainId=domain_id, UserProfileName=profile_name)
    except ClientError as error:
        if error_code(error) == "ResourceNotFound":
            return False
        raise
    user_settings = profile.get("UserSettings", {})
    configs = list(user_settings.get("CustomFileSystemConfigs", []))
    kept = [entry for entry in configs if not _same_fsx(entry, file_system_id, path)]
    if len(kept) == len(configs):
        return False
    _update_file_systems(sagemaker, domain_id, profile_name, user_settings, kept, sleep)
    LOG.info("profile %s/%s no longer mounts %s:%s", domain_id, profile_name, file_system_id, path)
    return True
