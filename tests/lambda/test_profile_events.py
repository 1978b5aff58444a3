"""profile_events.handler: S3 on moto server; SageMaker user profiles and FSx tasks stubbed (not in moto 5.2)."""
from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest

import profile_events
from profile_events import Settings

FS = "fs-0123456789abcdef0"
TASK = "task-0123456789abcdef0"
POSIX = {"Uid": 20001, "Gid": 1001}
EFS_ENTRY = {"EFSFileSystemConfig": {"FileSystemId": "fs-00000ef51", "FileSystemPath": "/team"}}
OUR_ENTRY = {"FSxLustreFileSystemConfig": {"FileSystemId": FS, "FileSystemPath": "/data/studio/alice"}}
SETTINGS = Settings(domain_id="d-ours0000001", file_system_id=FS, file_system_path="/data",
                    data_bucket="data-bucket", s3_prefix="", max_wait_seconds=60)


def cloudtrail_event(domain_id="d-ours0000001", name="alice", **detail):
    return {"version": "0", "source": "aws.sagemaker", "detail-type": "AWS API Call via CloudTrail",
            "detail": {"eventSource": "sagemaker.amazonaws.com", "eventName": "CreateUserProfile",
                       "requestParameters": {"domainId": domain_id, "userProfileName": name}, **detail}}


def profile(status="InService", posix=POSIX, configs=(EFS_ENTRY,)):
    settings = {"CustomFileSystemConfigs": list(configs)}
    if posix is not None:
        settings["CustomPosixUserConfig"] = posix
    return {"DomainId": "d-ours0000001", "UserProfileName": "alice", "Status": status, "UserSettings": settings}


def task(lifecycle):
    return {"TaskId": TASK, "Lifecycle": lifecycle, "Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": FS,
            "CreationTime": datetime(2026, 11, 21, tzinfo=timezone.utc)}


WHO = {"DomainId": "d-ours0000001", "UserProfileName": "alice"}


def test_new_profile_gets_a_private_partition_and_keeps_other_mounts(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("Pending"), WHO)
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    fsx_stub.add_response("create_data_repository_task", {"DataRepositoryTask": task("PENDING")},
                          {"Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": FS,
                           "Paths": ["s3://data-bucket/studio/alice/"], "Report": {"Enabled": False}})
    fsx_stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": [task("EXECUTING")]},
                          {"TaskIds": [TASK]})
    fsx_stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": [task("SUCCEEDED")]},
                          {"TaskIds": [TASK]})
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    sm_stub.add_response("update_user_profile", {}, {**WHO, "UserSettings": {
        "CustomPosixUserConfig": POSIX, "CustomFileSystemConfigs": [EFS_ENTRY, OUR_ENTRY]}})

    result = profile_events.handler(cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx_client,
                                    sagemaker=sm_client, sleep=sleeps)

    assert result == {"status": "done", "profile": "alice", "path": "/data/studio/alice", "taskId": TASK}
    assert s3.head_object(Bucket=bucket, Key="studio/alice/")["Metadata"] == {
        "file-owner": "20001", "file-group": "1001", "file-permissions": "040700"}
    assert len(sleeps) == 2  # one wait for InService, one for the import
    sm_stub.assert_no_pending_responses()
    fsx_stub.assert_no_pending_responses()


def test_settings_come_from_the_environment(monkeypatch):
    for name, value in {"DOMAIN_ID": "d-x", "FILE_SYSTEM_ID": FS, "FILE_SYSTEM_PATH": "/data",
                        "DATA_BUCKET": "b", "S3_PREFIX": "p/", "MAX_WAIT_SECONDS": "300",
                        "PARTITION_ROOT": "home"}.items():
        monkeypatch.setenv(name, value)
    assert Settings.from_env(os.environ) == Settings("d-x", FS, "/data", "b", "p/", 300.0, "home")
    monkeypatch.delenv("PARTITION_ROOT")
    assert Settings.from_env(os.environ).partition_root == "studio"
    monkeypatch.delenv("DATA_BUCKET")
    with pytest.raises(RuntimeError, match="DATA_BUCKET"):
        Settings.from_env(os.environ)


@pytest.mark.parametrize("event", [
    cloudtrail_event(domain_id="d-someoneelse"),
    cloudtrail_event(errorCode="ValidationException"),
    {**cloudtrail_event(), "detail": {**cloudtrail_event()["detail"], "eventName": "DeleteUserProfile"}},
])
def test_events_we_do_not_own_are_ignored(event, s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    # The stubs hold no responses: any FSx or SageMaker call would raise.
    result = profile_events.handler(event, None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sagemaker[0],
                                    sleep=sleeps)
    assert result["status"] == "ignored"
    assert s3_calls.names() == []


def test_profile_never_in_service_raises_after_bounded_waits(s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    for _ in range(6):  # polls at 0, 2, 6, 14, 30 and 60 "seconds" of injected sleep
        sm_stub.add_response("describe_user_profile", profile("Pending"), WHO)
    with pytest.raises(profile_events.ProfileNotReady, match="InService"):
        profile_events.handler(cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx[0],
                               sagemaker=sm_client, sleep=sleeps)
    sm_stub.assert_no_pending_responses()
    assert sum(sleeps) == SETTINGS.max_wait_seconds
    assert s3_calls.names() == []


def test_failed_profile_raises_with_reason(s3, bucket, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", {**profile("Failed"), "FailureReason": "role not assumable"})
    with pytest.raises(profile_events.ProfileNotReady, match="Failed: role not assumable"):
        profile_events.handler(cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx[0],
                               sagemaker=sm_client, sleep=sleeps)
    assert sleeps == []


def test_profile_without_posix_identity_raises(s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("InService", posix=None), WHO)
    with pytest.raises(ValueError, match="CustomPosixUserConfig"):
        profile_events.handler(cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx[0],
                               sagemaker=sm_client, sleep=sleeps)
    assert s3_calls.names() == []


def test_failed_import_raises_and_leaves_the_profile_alone(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    fsx_stub.add_response("create_data_repository_task", {"DataRepositoryTask": task("PENDING")})
    fsx_stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": [
        {**task("FAILED"), "FailureDetails": {"Message": "S3 path not linked to a DRA"}}]})
    with pytest.raises(Exception, match="S3 path not linked to a DRA"):
        profile_events.handler(cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx_client,
                               sagemaker=sm_client, sleep=sleeps)
    sm_stub.assert_no_pending_responses()  # no update_user_profile was attempted
