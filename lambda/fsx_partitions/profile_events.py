"""EventBridge target for CloudTrail CreateUserProfile calls: give each new Studio user a private FSx partition.

For a profile in our domain: wait until it is InService, read its POSIX identity
(UserSettings.CustomPosixUserConfig), write the marker for <FILE_SYSTEM_PATH>/<PARTITION_ROOT>/<profile> with mode
0700, import it, then add the directory to the profile's CustomFileSystemConfigs (keeping any other entry). Every
step is idempotent, so the asynchronous invocation retries (and then the dead-letter queue) can take over on any
failure.

Before anything is written, a profile is refused (UidConflict: logged, raised, nothing written or mounted) when its uid
is a config user's (RESERVED_UIDS) other than a profile of that user's name, or is another profile's in
the domain; and when its partition already exists with another owner (a profile deleted and created again with a
new uid) unless the CreateUserProfile call carried the tag hyperpod:force-uid-change=true, which re-owns the
partition's top directory (files below it keep their owner).

Environment: DOMAIN_ID, FILE_SYSTEM_ID, FILE_SYSTEM_PATH, DATA_BUCKET, S3_PREFIX, MAX_WAIT_SECONDS (budget shared by
the waits for the profile, an import slot (at most half of what is left) and the import; each of the last two gets
at least 1 s, halved for the slot; keep it below the function timeout) and optionally PARTITION_ROOT (default
"studio") and RESERVED_UIDS_FILE (a JSON object uid -> config user name, shipped with the code: a thousand users do
not fit Lambda's 4 KB of environment variables).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

from botocore.exceptions import ClientError

import partitions
from partitions import Partition

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

PRIVATE_MODE = 0o700
CLOUDFORMATION = "cloudformation.amazonaws.com"
PROFILE_FAILED_STATES = frozenset({"Failed", "Deleting", "Delete_Failed"})
FORCE_UID_CHANGE_TAG = "hyperpod:force-uid-change"


class ProfileNotReady(RuntimeError):
    pass


class UidConflict(ValueError):
    """The profile's uid would give it another identity's files: nothing is written or mounted."""


class Clock:
    """The time one event has spent: the seconds it slept or the wall-clock time, whichever is more, as
    partitions.wait_for counts its own budget. Every wait sleeps through it, so the waits share MAX_WAIT_SECONDS
    whether `sleep` is time.sleep (whose seconds are wall seconds: no change) or a sleep a test injects."""

    def __init__(self, sleep) -> None:
        self._sleep = sleep
        self._slept = 0.0
        self._started = time.monotonic()

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)
        self._slept += seconds

    def spent(self) -> float:
        return max(self._slept, time.monotonic() - self._started)


@dataclass(frozen=True)
class Settings:
    domain_id: str
    file_system_id: str
    file_system_path: str
    data_bucket: str
    s3_prefix: str
    max_wait_seconds: float
    partition_root: str = "studio"
    max_in_flight: int = partitions.DEFAULT_MAX_IMPORTS_IN_FLIGHT
    reserved_uids: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        missing = [
            name for name in ("DOMAIN_ID", "FILE_SYSTEM_ID", "FILE_SYSTEM_PATH", "DATA_BUCKET") if not env.get(name)
        ]
        if missing:
            raise RuntimeError(f"missing environment variables: {', '.join(missing)}")
        return cls(
            domain_id=env["DOMAIN_ID"],
            file_system_id=env["FILE_SYSTEM_ID"],
            file_system_path=env["FILE_SYSTEM_PATH"],
            data_bucket=env["DATA_BUCKET"],
            s3_prefix=env.get("S3_PREFIX", ""),
            max_wait_seconds=float(env.get("MAX_WAIT_SECONDS", "600")),
            partition_root=env.get("PARTITION_ROOT", "").strip("/") or "studio",
            max_in_flight=int(env.get("MAX_IMPORTS_IN_FLIGHT", partitions.DEFAULT_MAX_IMPORTS_IN_FLIGHT)),
            reserved_uids=read_reserved_uids(env.get("RESERVED_UIDS_FILE", "")),
        )


def read_reserved_uids(path: str) -> dict[int, str]:
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        return {int(uid): name for uid, name in json.load(f).items()}


def created_by_cloudformation(detail: Mapping[str, Any]) -> bool:
    """CloudTrail records a call CloudFormation makes for a stack with userIdentity.invokedBy (and sourceIPAddress
    and userAgent) set to cloudformation.amazonaws.com (CloudTrail userIdentity element: "invokedBy: the name of
    the AWS service that made the request"), and CloudFormation tags what it creates with aws:cloudformation:*.
    Such profiles belong to a stack, which creates their partition itself (StudioUsers: a partition resource
    each, the profile waits for it), so the event must not start a second import for them."""
    identity = detail.get("userIdentity") or {}
    if CLOUDFORMATION in (identity.get("invokedBy"), detail.get("sourceIPAddress"), detail.get("userAgent")):
        return True
    return any(key.startswith("aws:cloudformation:") for key in request_tags(detail))


def request_tags(detail: Mapping[str, Any]) -> dict[str, str]:
    """The tags of the CreateUserProfile call, as CloudTrail records requestParameters.tags."""
    tags = (detail.get("requestParameters") or {}).get("tags") or []
    return {
        str(tag.get("key", tag.get("Key", ""))): str(tag.get("value", tag.get("Value", "")))
        for tag in tags
        if isinstance(tag, Mapping)
    }


LIST_PAGE = 100  # ListUserProfiles' MaxResults ceiling (botocore's sagemaker model)
# The uid of each profile this environment described, by (domain, profile), with the LastModifiedTime that
# ListUserProfiles reported then: reused while it reports the same one. A warm Lambda environment handles event after
# event; when thousands of profiles are created at once, describing every profile for every event would be N^2 calls
# (25 million at 5,000), with it each environment describes each profile once (plus each change).
_UIDS: dict[tuple[str, str], tuple[Any, int | None]] = {}


def profile_uid(sagemaker, domain_id: str, summary: Mapping[str, Any], *, sleep=time.sleep) -> int | None:
    """CustomPosixUserConfig.Uid of the profile a ListUserProfiles entry names (None without one)."""
    name, modified = summary["UserProfileName"], summary.get("LastModifiedTime")
    cached = _UIDS.get((domain_id, name))
    if modified is not None and cached is not None and cached[0] == modified:
        return cached[1]
    described = sagemaker.describe_user_profile(DomainId=domain_id, UserProfileName=name)
    uid = ((described.get("UserSettings") or {}).get("CustomPosixUserConfig") or {}).get("Uid")
    if modified is not None:
        _UIDS[(domain_id, name)] = (modified, uid)
    return uid


def uid_owner(
    sagemaker, domain_id: str, profile_name: str, uid: int, reserved: Mapping[int, str], *, sleep=time.sleep
) -> str | None:
    """Who else holds `uid`: a config user of another name, or another profile of the domain (ListUserProfiles
    returns no settings: each profile is described, once per environment and change, see _UIDS). None when nobody
    does. (Root cannot occur: the SageMaker API takes CustomPosixUserConfig.Uid from 10000 up.)"""
    if uid in reserved and reserved[uid] != profile_name:
        return f"config user {reserved[uid]!r}"
    token = None
    while True:
        page = sagemaker.list_user_profiles(
            DomainIdEquals=domain_id, MaxResults=LIST_PAGE, **({"NextToken": token} if token else {})
        )
        for summary in page.get("UserProfiles", []):
            other = summary["UserProfileName"]
            if other != profile_name and profile_uid(sagemaker, domain_id, summary, sleep=sleep) == uid:
                return f"user profile {other!r}"
        token = page.get("NextToken")
        if not token:
            return None


def partition_owner(s3, bucket: str, key: str, *, sleep=time.sleep) -> int | None:
    """The uid the partition's marker gives its directory, None when there is no partition yet."""
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if partitions.error_code(error) in partitions.NOT_FOUND_CODES:
            return None
        raise
    owner = {name.lower(): value for name, value in head.get("Metadata", {}).items()}.get(partitions.META_OWNER)
    return int(owner) if owner is not None and owner.isdigit() else None


def handler(
    event: Mapping[str, Any],
    _context: Any = None,
    *,
    settings: Settings | None = None,
    s3=None,
    fsx=None,
    sagemaker=None,
    sleep=time.sleep,
) -> dict[str, Any]:
    settings = settings or Settings.from_env(os.environ)
    detail = event.get("detail") or {}
    params = detail.get("requestParameters") or {}
    domain_id = params.get("domainId")
    profile_name = params.get("userProfileName")
    if detail.get("eventName") != "CreateUserProfile" or not profile_name:
        LOG.info("ignoring event %s", detail.get("eventName"))
        return {"status": "ignored", "reason": "not a CreateUserProfile call"}
    if detail.get("errorCode"):
        LOG.info("ignoring failed CreateUserProfile for %s/%s: %s", domain_id, profile_name, detail["errorCode"])
        return {"status": "ignored", "reason": "the CreateUserProfile call failed"}
    if created_by_cloudformation(detail):
        LOG.info(
            "ignoring profile %s/%s: created by CloudFormation, whose stack owns its partition", domain_id, profile_name
        )
        return {"status": "ignored", "reason": "created by CloudFormation"}
    if domain_id != settings.domain_id:
        LOG.info("ignoring profile %s in domain %s (ours is %s)", profile_name, domain_id, settings.domain_id)
        return {"status": "ignored", "reason": "other domain"}

    sagemaker = sagemaker or partitions.client("sagemaker")
    deadline_budget = settings.max_wait_seconds
    clock = Clock(sleep)
    sleep = clock.sleep  # every wait and retry below spends the budget through the clock

    profile = wait_in_service(sagemaker, domain_id, profile_name, max_wait=deadline_budget, sleep=sleep)
    posix = (profile.get("UserSettings") or {}).get("CustomPosixUserConfig")
    if not posix or "Uid" not in posix or "Gid" not in posix:
        raise ValueError(
            f"user profile {domain_id}/{profile_name} has no UserSettings.CustomPosixUserConfig "
            f"(Uid/Gid): per-user FSx partitions need a POSIX identity; set it on the profile or "
            f"as the domain default"
        )

    partition = Partition.build(
        file_system_id=settings.file_system_id,
        file_system_path=settings.file_system_path,
        data_bucket=settings.data_bucket,
        s3_prefix=settings.s3_prefix,
        relative_path=f"{settings.partition_root}/{profile_name}",
        uid=posix["Uid"],
        gid=posix["Gid"],
        mode=PRIVATE_MODE,
    )
    s3 = s3 or partitions.client("s3")
    holder = uid_owner(sagemaker, domain_id, profile_name, partition.uid, settings.reserved_uids, sleep=sleep)
    if holder:
        raise refuse(
            f"user profile {domain_id}/{profile_name}: uid {partition.uid} is already {holder}'s; "
            f"nothing was mounted. Give the profile a uid of its own (UserSettings.CustomPosixUserConfig)"
        )
    owner = partition_owner(s3, partition.data_bucket, partition.marker_key, sleep=sleep)
    if owner is not None and owner != partition.uid:
        if request_tags(detail).get(FORCE_UID_CHANGE_TAG, "").lower() != "true":
            raise refuse(
                f"user profile {domain_id}/{profile_name}: its partition {partition.path} belongs to uid "
                f"{owner}, the profile has uid {partition.uid}; nothing was mounted. Create the profile "
                f"with the tag {FORCE_UID_CHANGE_TAG}=true to hand the partition to the new uid"
            )
        LOG.warning(
            "user profile %s/%s: partition %s goes from uid %s to %s (%s=true)",
            domain_id,
            profile_name,
            partition.path,
            owner,
            partition.uid,
            FORCE_UID_CHANGE_TAG,
        )
    fsx = fsx or partitions.client("fsx")
    partitions.ensure_marker(
        s3, partition.data_bucket, partition.marker_key, partition.uid, partition.gid, partition.mode, sleep=sleep
    )
    # EventBridge and Lambda redeliver the same CloudTrail record (same eventID) on retry: same token, same task.
    token = partitions.request_token(
        "profile", str(detail.get("eventID") or event.get("id") or ""), partition.import_uri
    )
    remaining = max(1.0, deadline_budget - clock.spent())
    task_id = partitions.wait_for(
        lambda: partitions.start_import(
            fsx,
            partition.file_system_id,
            partition.import_uri,
            token=token,
            max_in_flight=settings.max_in_flight,
            sleep=sleep,
        ),
        what=f"a free import slot on {partition.file_system_id} for {partition.path}",
        max_wait=remaining / 2,
        sleep=sleep,
    )
    remaining = max(1.0, deadline_budget - clock.spent())
    partitions.wait_for(
        lambda: partitions.import_status(fsx, task_id, sleep=sleep) == "done",
        what=f"import task {task_id} for {partition.path}",
        max_wait=remaining,
        sleep=sleep,
    )
    partitions.merge_file_system_config(
        sagemaker, domain_id, profile_name, partition.file_system_id, partition.path, sleep=sleep
    )
    return {"status": "done", "profile": profile_name, "path": partition.path, "taskId": task_id}


def refuse(message: str) -> UidConflict:
    LOG.error("refused: %s", message)
    return UidConflict(message)


def wait_in_service(
    sagemaker, domain_id: str, profile_name: str, *, max_wait: float, sleep=time.sleep
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        profile = sagemaker.describe_user_profile(DomainId=domain_id, UserProfileName=profile_name)
        status = profile.get("Status")
        if status == "InService":
            return profile
        if status in PROFILE_FAILED_STATES:
            raise ProfileNotReady(
                f"user profile {domain_id}/{profile_name} is {status}: "
                f"{profile.get('FailureReason', 'no failure reason')}"
            )
        LOG.info("user profile %s/%s is %s, waiting", domain_id, profile_name, status)
        return None

    try:
        return partitions.wait_for(
            check, what=f"user profile {domain_id}/{profile_name} InService", max_wait=max_wait, sleep=sleep
        )
    except TimeoutError as error:
        raise ProfileNotReady(str(error)) from error
