"""profile_events.handler: S3 on moto server; SageMaker user profiles and FSx tasks stubbed (not in moto 5.2). Its time
budget: test_profile_events_budget.py; the events it ignores: test_profile_events_ignored.py; its settings:
test_profile_events_settings.py."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest
from botocore.exceptions import ClientError

import profile_events

from support.profile_answers import (
    TASK,
    POSIX,
    EFS_ENTRY,
    OUR_ENTRY,
    SETTINGS,
    WHO,
    cloudtrail_event,
    profile,
    task,
    expect_in_flight,
    expect_start,
    expect_uid_check,
)
from support.raw_answers import answer


def test_new_profile_gets_a_private_partition_and_keeps_other_mounts(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("Pending"), WHO)
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    expect_uid_check(sm_stub, {"bob": 20002, "carol": 20003}, pages=2)
    expect_start(fsx_stub)
    fsx_stub.add_response(
        "describe_data_repository_tasks", {"DataRepositoryTasks": [task("EXECUTING")]}, {"TaskIds": [TASK]}
    )
    fsx_stub.add_response(
        "describe_data_repository_tasks", {"DataRepositoryTasks": [task("SUCCEEDED")]}, {"TaskIds": [TASK]}
    )
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    sm_stub.add_response(
        "update_user_profile",
        {},
        {**WHO, "UserSettings": {"CustomPosixUserConfig": POSIX, "CustomFileSystemConfigs": [EFS_ENTRY, OUR_ENTRY]}},
    )

    result = profile_events.handler(
        cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx_client, sagemaker=sm_client, sleep=sleeps
    )

    assert result == {"status": "done", "profile": "alice", "path": "/data/studio/alice", "taskId": TASK}
    assert s3.head_object(Bucket=bucket, Key="studio/alice/")["Metadata"] == {
        "file-owner": "20001",
        "file-group": "1001",
        "file-permissions": "040700",
    }
    assert len(sleeps) == 2  # one wait for InService, one for the import
    sm_stub.assert_no_pending_responses()
    fsx_stub.assert_no_pending_responses()


def test_failed_profile_raises_with_reason(s3, bucket, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", {**profile("Failed"), "FailureReason": "role not assumable"})
    with pytest.raises(profile_events.ProfileNotReady, match="Failed: role not assumable"):
        profile_events.handler(
            cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sm_client, sleep=sleeps
        )
    assert sleeps == []


def test_profile_without_posix_identity_raises(s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("InService", posix=None), WHO)
    with pytest.raises(ValueError, match="CustomPosixUserConfig"):
        profile_events.handler(
            cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sm_client, sleep=sleeps
        )
    assert s3_calls.names() == []


def test_failed_import_raises_and_leaves_the_profile_alone(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    expect_uid_check(sm_stub)
    expect_start(fsx_stub)
    fsx_stub.add_response(
        "describe_data_repository_tasks",
        {"DataRepositoryTasks": [{**task("FAILED"), "FailureDetails": {"Message": "S3 path not linked to a DRA"}}]},
    )
    with pytest.raises(Exception, match="S3 path not linked to a DRA"):
        profile_events.handler(
            cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx_client, sagemaker=sm_client, sleep=sleeps
        )
    sm_stub.assert_no_pending_responses()  # no update_user_profile was attempted


class Tokens:
    def __init__(self, client):
        self.seen: list[str] = []
        client.meta.events.register(
            "provide-client-params.fsx.CreateDataRepositoryTask",
            lambda params, **_: self.seen.append(params.get("ClientRequestToken")),
        )


def run_to_done(event, s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps, busy_polls=0, posix=POSIX):
    sm_stub.add_response("describe_user_profile", profile("InService", posix=posix), WHO)
    expect_uid_check(sm_stub)
    for _ in range(busy_polls):
        expect_in_flight(fsx_stub, SETTINGS.max_in_flight)
    expect_start(fsx_stub)
    fsx_stub.add_response(
        "describe_data_repository_tasks", {"DataRepositoryTasks": [task("SUCCEEDED")]}, {"TaskIds": [TASK]}
    )
    sm_stub.add_response("describe_user_profile", profile("InService", posix=posix), WHO)
    sm_stub.add_response(
        "update_user_profile",
        {},
        {**WHO, "UserSettings": {"CustomPosixUserConfig": posix, "CustomFileSystemConfigs": [EFS_ENTRY, OUR_ENTRY]}},
    )
    return profile_events.handler(
        event, None, settings=SETTINGS, s3=s3, fsx=fsx_client, sagemaker=sm_client, sleep=sleeps
    )


def test_a_busy_file_system_delays_the_import_until_a_slot_is_free(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    tokens = Tokens(fsx_client)
    result = run_to_done(cloudtrail_event(), s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps, busy_polls=2)
    assert result["status"] == "done"
    assert tokens.seen and len(tokens.seen) == 1  # nothing was created while the limit was reached
    assert sleeps[:2] == [2.0, 4.0]  # backed off between the busy checks
    fsx_stub.assert_no_pending_responses()


def test_a_redelivered_event_sends_the_same_token_and_another_call_a_new_one(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    tokens = Tokens(fsx_client)
    run_to_done(cloudtrail_event(), s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps)
    run_to_done({**cloudtrail_event(), "id": "eb-delivery-2"}, s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps)
    run_to_done(
        cloudtrail_event(event_id="7c0ee8b6-0000-4000-8000-2"), s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps
    )
    first, redelivered, recreated = tokens.seen
    assert first == redelivered != recreated


RESERVED = dataclasses.replace(SETTINGS, reserved_uids={20001: "dave", 20050: "alice"})


@pytest.mark.parametrize(
    "settings, others, posix, holder",
    [
        (SETTINGS, {"bob": 20002, "mallory": 20001}, POSIX, "user profile 'mallory'"),
        (RESERVED, {}, POSIX, "config user 'dave'"),
    ],
)
def test_a_uid_someone_else_holds_is_refused_and_nothing_is_written(
    settings, others, posix, holder, s3, bucket, s3_calls, fsx, sagemaker, sleeps
):
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("InService", posix=posix), WHO)
    if holder.startswith("user profile"):
        expect_uid_check(sm_stub, others)
    with pytest.raises(profile_events.UidConflict, match=f"uid {posix['Uid']} is already {holder}'s"):
        profile_events.handler(
            cloudtrail_event(), None, settings=settings, s3=s3, fsx=fsx[0], sagemaker=sm_client, sleep=sleeps
        )
    sm_stub.assert_no_pending_responses()  # no update_user_profile: nothing mounted
    assert s3_calls.names() == []


def test_a_config_user_may_have_the_profile_of_its_own_name(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    result = run_to_done(
        cloudtrail_event(), s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps, posix={"Uid": 20050, "Gid": 1001}
    )
    assert result["status"] == "done"


def put_partition(s3, bucket, owner):
    s3.put_object(
        Bucket=bucket,
        Key="studio/alice/",
        Body=b"",
        Metadata={"file-owner": str(owner), "file-group": "1001", "file-permissions": "040700"},
    )


def test_the_force_tag_hands_an_existing_partition_to_the_new_uid(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    put_partition(s3, bucket, 20009)
    event = cloudtrail_event(tags=[{"key": "hyperpod:force-uid-change", "value": "true"}])
    result = run_to_done(event, s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps)
    assert result["status"] == "done"
    assert s3.head_object(Bucket=bucket, Key="studio/alice/")["Metadata"]["file-owner"] == "20001"


# Only the value true (in any case: the handler compares it lowercased) hands a partition over; CloudTrail records
# the call's tags as {key, value} (also accepted as {Key, Value}).
NOT_FORCED = {
    "false": [{"key": "hyperpod:force-uid-change", "value": "false"}],
    "empty": [{"key": "hyperpod:force-uid-change", "value": ""}],
    "yes": [{"key": "hyperpod:force-uid-change", "value": "yes"}],
    "1": [{"key": "hyperpod:force-uid-change", "value": "1"}],
    "padded": [{"key": "hyperpod:force-uid-change", "value": " true"}],
    "truthy-prefix": [{"key": "hyperpod:force-uid-change", "value": "true-ish"}],
    "other-key": [{"key": "hyperpod:force-uid", "value": "true"}],
    "key-case": [{"key": "Hyperpod:Force-Uid-Change", "value": "true"}],
    "no-tags": [],
    "tags-absent": None,  # CreateUserProfile without Tags: the request has no tags parameter at all
    "another-tag": [{"key": "team", "value": "true"}],
}


@pytest.mark.parametrize("tags", NOT_FORCED.values(), ids=NOT_FORCED.keys())
def test_only_the_force_tag_set_to_true_hands_over_a_partition(tags, s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    put_partition(s3, bucket, 20009)
    s3_calls.calls.clear()
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    expect_uid_check(sm_stub)
    with pytest.raises(profile_events.UidConflict, match="belongs to uid 20009, the profile has uid 20001"):
        profile_events.handler(
            cloudtrail_event(tags=tags), None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sm_client, sleep=sleeps
        )
    sm_stub.assert_no_pending_responses()  # no update_user_profile: nothing mounted
    assert s3_calls.names() == ["HeadObject"]
    assert s3.head_object(Bucket=bucket, Key="studio/alice/")["Metadata"]["file-owner"] == "20009"


@pytest.mark.parametrize(
    "tag",
    [
        {"key": "hyperpod:force-uid-change", "value": "TRUE"},
        {"key": "hyperpod:force-uid-change", "value": "True"},
        {"Key": "hyperpod:force-uid-change", "Value": "true"},
    ],
)
def test_the_force_tag_value_true_in_any_case_hands_over_a_partition(tag, s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    put_partition(s3, bucket, 20009)
    event = cloudtrail_event(tags=[{"key": "team", "value": "nlp"}, tag])
    assert run_to_done(event, s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps)["status"] == "done"
    assert s3.head_object(Bucket=bucket, Key="studio/alice/")["Metadata"]["file-owner"] == "20001"


def test_an_existing_partition_of_the_same_uid_is_reused(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    put_partition(s3, bucket, 20001)
    assert run_to_done(cloudtrail_event(), s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps)["status"] == "done"


@pytest.mark.parametrize("status", ["Deleting", "Delete_Failed"])
def test_a_profile_going_away_raises_at_once(status, s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile(status), WHO)
    with pytest.raises(profile_events.ProfileNotReady, match=f"is {status}"):
        profile_events.handler(
            cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sm_client, sleep=sleeps
        )
    assert sleeps == [] and s3_calls.names() == []


def test_tags_that_are_not_key_value_pairs_are_skipped(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    put_partition(s3, bucket, 20009)
    event = cloudtrail_event(tags=["hyperpod:force-uid-change", {"key": "hyperpod:force-uid-change", "value": "true"}])
    assert run_to_done(event, s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps)["status"] == "done"


def test_a_marker_without_a_numeric_owner_is_no_other_owner(s3, bucket, fsx, sagemaker, sleeps):
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    s3.put_object(Bucket=bucket, Key="studio/alice/", Body=b"", Metadata={"file-owner": "alice"})
    assert run_to_done(cloudtrail_event(), s3, fsx_client, fsx_stub, sm_client, sm_stub, sleeps)["status"] == "done"
    assert s3.head_object(Bucket=bucket, Key="studio/alice/")["Metadata"]["file-owner"] == "20001"


def test_other_profiles_are_described_once_per_modification(monkeypatch, sagemaker):
    """ListUserProfiles' LastModifiedTime says when a profile's uid may have changed: a warm environment describes
    each other profile once, again only after it changed, and every time when no time is given."""
    monkeypatch.setattr(profile_events, "_UIDS", {})
    sm_client, sm_stub = sagemaker
    first, later = datetime(2026, 11, 21, tzinfo=timezone.utc), datetime(2026, 11, 22, tzinfo=timezone.utc)

    def listing(modified):
        summary = {"DomainId": "d-ours0000001", "UserProfileName": "bob"}
        if modified:
            summary["LastModifiedTime"] = modified
        sm_stub.add_response(
            "list_user_profiles", {"UserProfiles": [summary]}, {"DomainIdEquals": "d-ours0000001", "MaxResults": 100}
        )

    def described(uid):
        sm_stub.add_response(
            "describe_user_profile",
            {
                "DomainId": "d-ours0000001",
                "UserProfileName": "bob",
                "Status": "InService",
                "UserSettings": {"CustomPosixUserConfig": {"Uid": uid, "Gid": 1001}},
            },
            {"DomainId": "d-ours0000001", "UserProfileName": "bob"},
        )

    def owner():
        return profile_events.uid_owner(sm_client, "d-ours0000001", "alice", 20002, {}, sleep=lambda _: None)

    listing(first), described(20002)
    assert owner() == "user profile 'bob'"
    listing(first)  # unchanged: no describe
    assert owner() == "user profile 'bob'"
    listing(later), described(20003)  # changed: described again, and the new uid counts
    assert owner() is None
    listing(None), described(20002)
    listing(None), described(20002)
    assert owner() == owner() == "user profile 'bob'"
    sm_stub.assert_no_pending_responses()


def test_a_marker_that_cannot_be_read_fails_the_event_and_changes_nothing(s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    """S3 answers 403 (not 404) when the role may not list the bucket: that is no proof the partition is free, so the
    handler fails (EventBridge retries) instead of writing a marker over whatever is there. The 403 is injected at
    before-send, below botocore's parsing and retries, on the real client talking to moto server."""
    sm_client, sm_stub = sagemaker
    put_partition(s3, bucket, 20009)
    s3_calls.calls.clear()
    s3.meta.events.register(
        "before-send.s3.HeadObject",
        lambda request, **_: answer(request, 403),
    )
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    expect_uid_check(sm_stub)
    with pytest.raises(ClientError) as failure:
        profile_events.handler(
            cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx[0], sagemaker=sm_client, sleep=sleeps
        )
    assert failure.value.response["Error"]["Code"] == "403"
    assert set(s3_calls.names()) == {"HeadObject"}
    sm_stub.assert_no_pending_responses()


def test_the_handler_makes_the_clients_it_needs_as_in_lambda(clients_by_name, s3, bucket, fsx, sagemaker, sleeps):
    """In Lambda nothing passes clients in: the handler makes them by service name through partitions.client (S3 a
    real client to moto server; SageMaker and FSx the real clients under Stubber that every other test uses)."""
    fsx_client, fsx_stub = fsx
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    expect_uid_check(sm_stub)
    expect_start(fsx_stub)
    fsx_stub.add_response(
        "describe_data_repository_tasks", {"DataRepositoryTasks": [task("SUCCEEDED")]}, {"TaskIds": [TASK]}
    )
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    sm_stub.add_response(
        "update_user_profile",
        {},
        {**WHO, "UserSettings": {"CustomPosixUserConfig": POSIX, "CustomFileSystemConfigs": [EFS_ENTRY, OUR_ENTRY]}},
    )
    assert profile_events.handler(cloudtrail_event(), None, settings=SETTINGS, sleep=sleeps)["status"] == "done"
    assert s3.head_object(Bucket=bucket, Key="studio/alice/")["Metadata"]["file-owner"] == "20001"
    sm_stub.assert_no_pending_responses()
    fsx_stub.assert_no_pending_responses()
