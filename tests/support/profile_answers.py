"""The profile-events handler's tests' world: its settings, the CloudTrail event it gets, and what SageMaker and FSx
answer it through botocore's Stubber (moto 5.2 has neither user profiles nor data repository tasks)."""

from __future__ import annotations

from datetime import datetime, timezone

from botocore.stub import ANY

from profile_events import Settings

from support.events import create_user_profile_event

FS = "fs-0123456789abcdef0"
TASK = "task-0123456789abcdef0"
POSIX = {"Uid": 20001, "Gid": 1001}
EFS_ENTRY = {"EFSFileSystemConfig": {"FileSystemId": "fs-00000ef51", "FileSystemPath": "/team"}}
OUR_ENTRY = {"FSxLustreFileSystemConfig": {"FileSystemId": FS, "FileSystemPath": "/data/studio/alice"}}
SETTINGS = Settings(
    domain_id="d-ours0000001",
    file_system_id=FS,
    file_system_path="/data",
    data_bucket="data-bucket",
    s3_prefix="",
    max_wait_seconds=60,
)


def cloudtrail_event(
    domain_id="d-ours0000001", name="alice", tags=None, event_id="7c0ee8b6-0000-4000-8000-1", **detail
):
    return create_user_profile_event(domain_id, name, event_id=event_id, tags=tags, **detail)


def profile(status="InService", posix=POSIX, configs=(EFS_ENTRY,)):
    settings = {"CustomFileSystemConfigs": list(configs)}
    if posix is not None:
        settings["CustomPosixUserConfig"] = posix
    return {"DomainId": "d-ours0000001", "UserProfileName": "alice", "Status": status, "UserSettings": settings}


def task(lifecycle):
    return {
        "TaskId": TASK,
        "Lifecycle": lifecycle,
        "Type": "IMPORT_METADATA_FROM_REPOSITORY",
        "FileSystemId": FS,
        "CreationTime": datetime(2026, 11, 21, tzinfo=timezone.utc),
    }


WHO = {"DomainId": "d-ours0000001", "UserProfileName": "alice"}
IN_FLIGHT = {
    "Filters": [
        {"Name": "file-system-id", "Values": [FS]},
        {"Name": "task-lifecycle", "Values": ["PENDING", "EXECUTING"]},
    ]
}


def expect_in_flight(fsx_stub, count=0):
    fsx_stub.add_response(
        "describe_data_repository_tasks",
        {"DataRepositoryTasks": [{**task("EXECUTING"), "TaskId": f"task-other{index:011d}"} for index in range(count)]},
        IN_FLIGHT,
    )


def expect_start(fsx_stub, in_flight=0):
    expect_in_flight(fsx_stub, in_flight)
    fsx_stub.add_response(
        "create_data_repository_task",
        {"DataRepositoryTask": task("PENDING")},
        {
            "Type": "IMPORT_METADATA_FROM_REPOSITORY",
            "FileSystemId": FS,
            "Paths": ["s3://data-bucket/studio/alice/"],
            "Report": {"Enabled": False},
            "ClientRequestToken": ANY,
        },
    )


def expect_uid_check(sm_stub, others=(), pages=1):
    """ListUserProfiles (split over `pages`) lists alice and `others` ({name: uid}); each other is described."""
    names = ["alice", *others]
    chunks = [names[i::pages] for i in range(pages)]
    for index, chunk in enumerate(chunks):
        page = {"UserProfiles": [{"DomainId": "d-ours0000001", "UserProfileName": n} for n in chunk]}
        if index + 1 < pages:
            page["NextToken"] = f"page-{index + 1}"
        sm_stub.add_response(
            "list_user_profiles",
            page,
            {"DomainIdEquals": "d-ours0000001", "MaxResults": 100, **({"NextToken": f"page-{index}"} if index else {})},
        )
        for name in chunk:
            if name != "alice":
                sm_stub.add_response(
                    "describe_user_profile",
                    {
                        "DomainId": "d-ours0000001",
                        "UserProfileName": name,
                        "Status": "InService",
                        "UserSettings": {"CustomPosixUserConfig": {"Uid": others[name], "Gid": 1001}},
                    },
                    {"DomainId": "d-ours0000001", "UserProfileName": name},
                )
