"""Core functions: POSIX metadata format, marker idempotency (moto S3), busy-file-system backoff, profile merging
(stubbed)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

import partitions
from partitions import Partition

from support.raw_answers import answer


def busy(code: str = "DataRepositoryTaskExecuting") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "come back later"}}, "CreateDataRepositoryTask")


# --- metadata format ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("0700", "040700"),
        ("700", "040700"),
        ("2775", "042775"),
        ("0755", "040755"),
        (0o1777, "041777"),
        ("0000", "040000"),
        ("3777", "043777"),
    ],
)
def test_directory_permissions_carry_the_directory_type_bits(mode, expected):
    assert partitions.directory_permissions(partitions.parse_mode(mode)) == expected


@pytest.mark.parametrize("mode", ["4755", "10000", "0800", "rwx", "", "-1"])
def test_invalid_or_setuid_modes_are_refused(mode):
    with pytest.raises(ValueError, match="(?i)mode"):
        partitions.parse_mode(mode)


def alice_partition(**changes: str) -> Partition:
    """alice's partition under /data of fs-0123456789abcdef0, bucket b, no prefix; `changes` replace any input."""
    inputs = {
        "file_system_id": "fs-0123456789abcdef0",
        "file_system_path": "/data",
        "data_bucket": "b",
        "s3_prefix": "",
        "relative_path": "studio/alice",
        "uid": "20001",
        "gid": "1001",
        "mode": "0700",
        **changes,
    }
    return Partition.build(**inputs)


def test_partition_paths_keys_and_import_uri():
    p = alice_partition(file_system_path="/data/", s3_prefix="lustre/", uid="2001")
    assert p.path == "/data/studio/alice"
    assert p.physical_id == "fs-0123456789abcdef0:/data/studio/alice"
    assert p.marker_key == "lustre/studio/alice/"
    assert p.import_uri == "s3://b/lustre/studio/alice/"
    assert p.metadata == {"file-owner": "2001", "file-group": "1001", "file-permissions": "040700"}


@pytest.mark.parametrize(
    "file_system_path, path",
    [
        ("/", "/studio/alice"),
        ("/fsx", "/fsx/studio/alice"),
        ("/fsx/", "/fsx/studio/alice"),
        ("/data//", "/data/studio/alice"),
    ],
)
def test_the_directory_is_under_the_linked_path_however_it_is_written(file_system_path, path):
    """FileSystemPath is where the data repository association links the bucket: the file system's root, or a path
    such as /fsx (a common Lustre mount point, whose trailing 'x' is no separator), with or without trailing '/'."""
    p = alice_partition(file_system_path=file_system_path)
    assert p.path == path and p.physical_id == f"fs-0123456789abcdef0:{path}"
    assert p.marker_key == "studio/alice/"


@pytest.mark.parametrize(
    "field, value",
    [
        ("relative_path", "../etc"),
        ("relative_path", "/studio/a"),
        ("relative_path", "studio//a"),
        ("relative_path", ""),
        ("relative_path", "studio/./a"),
        ("s3_prefix", "noslash"),
        ("s3_prefix", "/lustre/"),
        ("file_system_path", "data"),
        ("uid", "-1"),
        ("gid", "x"),
    ],
)
def test_partition_rejects_bad_inputs(field, value):
    shared = {"relative_path": "studio/shared", "uid": "0", "gid": "100", "mode": "2775"}
    alice_partition(**shared)  # builds as it is: the one changed field is what is refused
    with pytest.raises(ValueError):
        alice_partition(**{**shared, field: value})


# --- marker against moto S3 ------------------------------------------------------------------------------------------


def test_factory_client_reaches_moto(s3, moto_endpoint):
    assert s3.meta.endpoint_url == moto_endpoint


def test_ensure_marker_creates_zero_byte_directory_object(s3, bucket):
    assert partitions.ensure_marker(s3, bucket, "studio/alice/", 2001, 1001, 0o700) is True
    head = s3.head_object(Bucket=bucket, Key="studio/alice/")
    assert head["ContentLength"] == 0
    assert head["Metadata"] == {"file-owner": "2001", "file-group": "1001", "file-permissions": "040700"}


def test_ensure_marker_skips_identical_metadata(s3, s3_calls, bucket):
    partitions.ensure_marker(s3, bucket, "studio/alice/", 2001, 1001, 0o700)
    s3_calls.calls.clear()
    assert partitions.ensure_marker(s3, bucket, "studio/alice/", 2001, 1001, 0o700) is False
    assert s3_calls.names() == ["HeadObject"]


def test_ensure_marker_rewrites_changed_metadata_and_keeps_other_keys(s3, bucket):
    s3.put_object(
        Bucket=bucket,
        Key="studio/shared/",
        Body=b"",
        Metadata={
            "file-owner": "0",
            "file-group": "100",
            "file-permissions": "040755",
            "file-mtime": "1700000000000000000ns",
        },
    )
    assert partitions.ensure_marker(s3, bucket, "studio/shared/", 0, 100, 0o2775) is True
    assert s3.head_object(Bucket=bucket, Key="studio/shared/")["Metadata"] == {
        "file-owner": "0",
        "file-group": "100",
        "file-permissions": "042775",
        "file-mtime": "1700000000000000000ns",
    }


def test_ensure_marker_writes_when_head_is_denied(sleeps):
    """Without s3:ListBucket a missing key answers HEAD with 403. moto does not enforce IAM, so this one S3 case
    uses a Stubber: the marker must still be written (a real denial would then fail the PutObject)."""
    client = partitions.client("s3")
    with Stubber(client) as stub:
        stub.add_client_error("head_object", service_error_code="403", http_status_code=403)
        stub.add_response(
            "put_object",
            {},
            {
                "Bucket": "b",
                "Key": "studio/alice/",
                "Body": b"",
                "Metadata": partitions.marker_metadata(20001, 1001, 0o700),
            },
        )
        assert partitions.ensure_marker(client, "b", "studio/alice/", 20001, 1001, 0o700, sleep=sleeps) is True
        stub.assert_no_pending_responses()


def test_ensure_marker_propagates_other_errors(s3):
    with pytest.raises(ClientError):  # the bucket does not exist
        partitions.ensure_marker(s3, "missing-bucket", "studio/alice/", 1, 1, 0o700)


def test_a_marker_s3_will_not_describe_is_left_as_it_is(s3, s3_calls, bucket):
    """HEAD answered with neither 404 (absent) nor 403 (absent, or denied without s3:ListBucket) but e.g. 400, as S3
    answers HEAD on an SSE-C object without its key: no proof the partition is free, so no marker is written over
    the one there (which would hand the directory to another owner). Injected at before-send on the real client."""
    s3.put_object(Bucket=bucket, Key="studio/alice/", Body=b"", Metadata=partitions.marker_metadata(20001, 1001, 0o700))
    s3.meta.events.register("before-send.s3.HeadObject", lambda request, **_: answer(request, 400))
    s3_calls.calls.clear()
    with pytest.raises(ClientError) as failure:
        partitions.ensure_marker(s3, bucket, "studio/alice/", 20002, 1001, 0o700)
    assert failure.value.response["Error"]["Code"] == "400"
    assert not {"PutObject", "CopyObject"} & set(s3_calls.names())  # botocore may ask HeadBucket for the region
    assert s3.get_object(Bucket=bucket, Key="studio/alice/")["Metadata"]["file-owner"] == "20001"


# --- retry ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(partitions.IMPORT_BUSY_CODES))
def test_retry_retries_a_busy_file_system_then_succeeds(code, sleeps):
    outcomes = [busy(code), busy(code), "ok"]

    def call():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert partitions.retry(call, attempts=5, base_delay=1.0, max_delay=8.0, sleep=sleeps) == "ok"
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 1.0 and 0 <= sleeps[1] <= 2.0


def test_retry_backoff_is_exponential_and_capped(sleeps):
    calls = []

    def call():
        calls.append(1)
        raise busy()

    with pytest.raises(ClientError) as raised:
        partitions.retry(call, attempts=6, base_delay=1.0, max_delay=4.0, sleep=sleeps, jitter=lambda: 1.0)
    assert raised.value.response["Error"]["Code"] == "DataRepositoryTaskExecuting"
    assert len(calls) == 6
    assert sleeps == [1.0, 2.0, 4.0, 4.0, 4.0]


@pytest.mark.parametrize("code", ["AccessDenied", "ThrottlingException"])
def test_retry_does_not_retry_other_errors(code, sleeps):
    """Throttling included: the client retries it (aws_clients.py), and a second loop would multiply the attempts."""

    def call():
        raise ClientError({"Error": {"Code": code, "Message": "no"}}, "PutObject")

    with pytest.raises(ClientError, match=code):
        partitions.retry(call, sleep=sleeps)
    assert sleeps == []


def test_retry_defaults_four_attempts_backing_off_2_4_8_seconds_at_most(sleeps):
    """What start_import (the only caller, passing no attempts or delays) does while FSx says the file system is
    busy: the full-jitter ceiling (jitter 1.0) is 2, 4, then 8 s, four attempts in all, then the error."""
    calls = []

    def call():
        calls.append(1)
        raise busy()

    with pytest.raises(ClientError, match="DataRepositoryTaskExecuting"):
        partitions.retry(call, sleep=sleeps, jitter=lambda: 1.0)
    assert len(calls) == 4 and sleeps == [2.0, 4.0, 8.0]


def test_retry_with_one_attempt_calls_once_and_with_none_refuses(sleeps):
    calls = []

    def call():
        calls.append(1)
        raise busy()

    with pytest.raises(ClientError):
        partitions.retry(call, attempts=1, sleep=sleeps)
    assert len(calls) == 1 and sleeps == []
    with pytest.raises(ValueError, match="attempts must be at least 1"):
        partitions.retry(call, attempts=0, sleep=sleeps)
    assert len(calls) == 1


@pytest.mark.parametrize("max_wait, slept", [(10, [2, 4, 4]), (6.5, [2, 4, 0.5])])
def test_wait_for_is_bounded_with_injected_sleep(max_wait, slept, sleeps):
    """The last sleep is what is left of the budget, however little; the error says how often it looked."""
    checks = []
    with pytest.raises(TimeoutError, match=r"^thing: not done after \d+s \(4 checks, limit \d+s\)$"):
        partitions.wait_for(
            lambda: checks.append(1), what="thing", max_wait=max_wait, sleep=sleeps, first_delay=2, max_delay=30
        )
    assert sum(sleeps) == max_wait and sleeps == slept
    assert len(checks) == 4


def test_wait_for_backs_off_from_2_to_30_seconds_by_default(sleeps):
    """profile_events waits for the profile and the import with the defaults: polls no further apart than 30 s."""
    with pytest.raises(TimeoutError, match=r"\(8 checks, limit 100s\)"):
        partitions.wait_for(lambda: None, what="import", max_wait=100, sleep=sleeps)
    assert sleeps == [2, 4, 8, 16, 30, 30, 10]


# --- profile merge (SageMaker user profiles are stubbed: moto 5.2 has no user-profile API) ---------------------------

EFS_ENTRY = {"EFSFileSystemConfig": {"FileSystemId": "fs-00000ef51", "FileSystemPath": "/team"}}
POSIX = {"Uid": 20001, "Gid": 1001}  # SageMaker requires Uid >= 10000, Gid >= 1001
FSX = "fs-0123456789abcdef0"


def profile(configs, status="InService", posix=POSIX):
    settings = {"CustomFileSystemConfigs": configs}
    if posix is not None:
        settings["CustomPosixUserConfig"] = posix
    return {"DomainId": "d-ours", "UserProfileName": "alice", "Status": status, "UserSettings": settings}


def test_merge_keeps_existing_entries_and_posix(sagemaker, sleeps):
    client, stub = sagemaker
    stub.add_response("describe_user_profile", profile([EFS_ENTRY]), {"DomainId": "d-ours", "UserProfileName": "alice"})
    stub.add_response(
        "update_user_profile",
        {},
        {
            "DomainId": "d-ours",
            "UserProfileName": "alice",
            "UserSettings": {
                "CustomPosixUserConfig": POSIX,
                "CustomFileSystemConfigs": [
                    EFS_ENTRY,
                    {"FSxLustreFileSystemConfig": {"FileSystemId": FSX, "FileSystemPath": "/data/studio/alice"}},
                ],
            },
        },
    )
    assert partitions.merge_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice", sleep=sleeps)
    stub.assert_no_pending_responses()


def test_merge_is_a_no_op_when_present(sagemaker):
    client, stub = sagemaker
    entry = {"FSxLustreFileSystemConfig": {"FileSystemId": FSX, "FileSystemPath": "/data/studio/alice"}}
    stub.add_response("describe_user_profile", profile([EFS_ENTRY, entry]))
    assert partitions.merge_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice") is False
    stub.assert_no_pending_responses()  # and no update_user_profile: the stub would reject an unexpected call


def test_remove_drops_only_our_entry(sagemaker):
    client, stub = sagemaker
    ours = {"FSxLustreFileSystemConfig": {"FileSystemId": FSX, "FileSystemPath": "/data/studio/alice"}}
    other = {"FSxLustreFileSystemConfig": {"FileSystemId": FSX, "FileSystemPath": "/data/studio/shared"}}
    stub.add_response("describe_user_profile", profile([other, ours, EFS_ENTRY]))
    stub.add_response(
        "update_user_profile",
        {},
        {
            "DomainId": "d-ours",
            "UserProfileName": "alice",
            "UserSettings": {"CustomPosixUserConfig": POSIX, "CustomFileSystemConfigs": [other, EFS_ENTRY]},
        },
    )
    assert partitions.remove_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice") is True
    stub.assert_no_pending_responses()


def test_merge_adds_up_to_ten_file_systems_and_refuses_an_eleventh(sagemaker):
    """SageMaker's UserSettings.CustomFileSystemConfigs holds at most 10 entries: the tenth is added, an eleventh
    refused with a reason instead of an UpdateUserProfile that would drop or fail on the profile's own entries."""
    client, stub = sagemaker
    others = [
        {"EFSFileSystemConfig": {"FileSystemId": f"fs-00000ef5{n}", "FileSystemPath": "/team"}} for n in range(10)
    ]
    ours = {"FSxLustreFileSystemConfig": {"FileSystemId": FSX, "FileSystemPath": "/data/studio/alice"}}
    stub.add_response("describe_user_profile", profile(others[:9]))
    stub.add_response(
        "update_user_profile",
        {},
        {
            "DomainId": "d-ours",
            "UserProfileName": "alice",
            "UserSettings": {"CustomPosixUserConfig": POSIX, "CustomFileSystemConfigs": [*others[:9], ours]},
        },
    )
    assert partitions.merge_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice") is True
    stub.add_response("describe_user_profile", profile(others))
    with pytest.raises(ValueError, match="already has 10 custom file systems"):
        partitions.merge_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice")
    stub.assert_no_pending_responses()  # and no second update_user_profile: the stub would reject it


def test_remove_leaves_a_profile_without_our_entry_alone(sagemaker):
    client, stub = sagemaker
    other = {"FSxLustreFileSystemConfig": {"FileSystemId": FSX, "FileSystemPath": "/data/studio/shared"}}
    stub.add_response("describe_user_profile", profile([other, EFS_ENTRY]))
    assert partitions.remove_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice") is False
    stub.assert_no_pending_responses()  # and no update_user_profile


def test_remove_fails_when_the_profile_cannot_be_read(sagemaker):
    """Only a deleted profile counts as nothing to remove; a denied read fails, the mount stays as it was."""
    client, stub = sagemaker
    stub.add_client_error("describe_user_profile", service_error_code="AccessDeniedException", http_status_code=400)
    with pytest.raises(ClientError, match="AccessDeniedException"):
        partitions.remove_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice")
    stub.assert_no_pending_responses()


def test_remove_tolerates_a_deleted_profile(sagemaker):
    client, stub = sagemaker
    stub.add_client_error("describe_user_profile", service_error_code="ResourceNotFound", http_status_code=400)
    assert partitions.remove_file_system_config(client, "d-ours", "alice", FSX, "/data/studio/alice") is False
