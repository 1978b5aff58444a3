"""custom_resource.on_event / is_complete: S3 on moto server, FSx data repository tasks stubbed (not in moto 5.2)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import botocore.endpoint
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY

import aws_clients
import custom_resource
import partitions

from support.events import PROVIDER_TOKEN, custom_resource_event, is_complete_event
from support.raw_answers import answer

FS = "fs-0123456789abcdef0"
PROPS = {
    "ServiceToken": PROVIDER_TOKEN,
    "FileSystemId": FS,
    "FileSystemPath": "/data",
    "DataBucket": "data-bucket",
    "S3Prefix": "lustre/",
    "RelativePath": "studio/shared",
    "Uid": "0",
    "Gid": "1001",
    "Mode": "2775",
}
PHYSICAL_ID = f"{FS}:/data/studio/shared"
MARKER = "lustre/studio/shared/"


def cfn_event(request_type, props=None, old_props=None, physical_id=None):
    return custom_resource_event(
        request_type,
        props or PROPS,
        logical_id="SharedPartition",
        resource_type="Custom::FsxPartition",
        old_properties=old_props,
        physical_id=physical_id,
    )


def task(task_id="task-0123456789abcdef0", lifecycle="PENDING", **extra):
    return {
        "DataRepositoryTask": {
            "TaskId": task_id,
            "Lifecycle": lifecycle,
            "FileSystemId": FS,
            "Type": "IMPORT_METADATA_FROM_REPOSITORY",
            "CreationTime": datetime(2026, 11, 21, tzinfo=timezone.utc),
            **extra,
        }
    }


IN_FLIGHT_FILTERS = [
    {"Name": "file-system-id", "Values": [FS]},
    {"Name": "task-lifecycle", "Values": ["PENDING", "EXECUTING"]},
]


def expect_in_flight(stub, count=0, next_token=None, after=None):
    response = {
        "DataRepositoryTasks": [
            task(f"task-busy{index:012d}", "EXECUTING")["DataRepositoryTask"] for index in range(count)
        ]
    }
    if next_token:
        response["NextToken"] = next_token
    params = {"Filters": IN_FLIGHT_FILTERS}
    if after:
        params["NextToken"] = after
    stub.add_response("describe_data_repository_tasks", response, params)


def expect_import(stub, uri=f"s3://data-bucket/{MARKER}", task_id="task-0123456789abcdef0", token=ANY, in_flight=0):
    expect_in_flight(stub, in_flight)
    stub.add_response(
        "create_data_repository_task",
        task(task_id),
        {
            "Type": "IMPORT_METADATA_FROM_REPOSITORY",
            "FileSystemId": FS,
            "Paths": [uri],
            "Report": {"Enabled": False},
            "ClientRequestToken": token,
        },
    )


def expect_status(stub, lifecycle, task_id="task-0123456789abcdef0", **extra):
    stub.add_response(
        "describe_data_repository_tasks",
        {"DataRepositoryTasks": [task(task_id, lifecycle, **extra)["DataRepositoryTask"]]},
        {"TaskIds": [task_id]},
    )


def test_create_writes_marker_and_starts_import(s3, bucket, fsx, sleeps):
    client, stub = fsx
    expect_import(stub)
    result = custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client, sleep=sleeps)
    stub.assert_no_pending_responses()
    assert result == {
        "PhysicalResourceId": PHYSICAL_ID,
        "Data": {"TaskId": "task-0123456789abcdef0", "Path": "/data/studio/shared", "ImportPending": ""},
    }
    head = s3.head_object(Bucket=bucket, Key=MARKER)
    assert head["ContentLength"] == 0
    assert head["Metadata"] == {"file-owner": "0", "file-group": "1001", "file-permissions": "042775"}
    assert sleeps == []


def test_is_complete_follows_the_task(fsx):
    client, stub = fsx
    request = cfn_event("Create")
    event = is_complete_event(
        request,
        {
            "PhysicalResourceId": PHYSICAL_ID,
            "Data": {"TaskId": "task-0123456789abcdef0", "Path": "/data/studio/shared"},
        },
    )
    expect_status(stub, "PENDING")
    expect_status(stub, "EXECUTING")
    expect_status(stub, "SUCCEEDED")
    # The framework rejects "Data" while IsComplete is false, so not-complete answers carry none.
    assert custom_resource.is_complete(event, None, fsx=client) == {"IsComplete": False}
    assert custom_resource.is_complete(event, None, fsx=client) == {"IsComplete": False}
    assert custom_resource.is_complete(event, None, fsx=client) == {"IsComplete": True}
    stub.assert_no_pending_responses()


@pytest.mark.parametrize("lifecycle", ["FAILED", "CANCELED"])
def test_is_complete_raises_with_the_failure_reason(fsx, lifecycle):
    client, stub = fsx
    expect_status(stub, lifecycle, FailureDetails={"Message": "Path s3://data-bucket/lustre/x is not linked"})
    event = is_complete_event(
        cfn_event("Create"),
        {
            "PhysicalResourceId": PHYSICAL_ID,
            "Data": {"TaskId": "task-0123456789abcdef0", "Path": "/data/studio/shared"},
        },
    )
    with pytest.raises(partitions.ImportFailed, match=f"{lifecycle}: Path s3://data-bucket/lustre/x is not linked"):
        custom_resource.is_complete(event, None, fsx=client)


def test_duplicate_create_does_not_rewrite_the_marker(s3, s3_calls, bucket, fsx):
    client, stub = fsx
    expect_import(stub, task_id="task-00000000000000001")
    expect_import(stub, task_id="task-00000000000000002")
    first = custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)
    before = s3.head_object(Bucket=bucket, Key=MARKER)
    s3_calls.calls.clear()
    second = custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)
    assert s3_calls.names() == ["HeadObject"]  # no PutObject / CopyObject the second time
    assert first["PhysicalResourceId"] == second["PhysicalResourceId"] == PHYSICAL_ID
    after = s3.head_object(Bucket=bucket, Key=MARKER)
    assert after["Metadata"] == before["Metadata"] and after["LastModified"] == before["LastModified"]


def test_update_with_a_new_mode_rewrites_and_reimports(s3, bucket, fsx):
    client, stub = fsx
    expect_import(stub, task_id="task-00000000000000001")
    custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)
    expect_import(stub, task_id="task-00000000000000002")
    new_props = {**PROPS, "Mode": "0770", "Gid": "1002"}
    result = custom_resource.on_event(cfn_event("Update", new_props, PROPS, PHYSICAL_ID), None, s3=s3, fsx=client)
    stub.assert_no_pending_responses()
    assert result["PhysicalResourceId"] == PHYSICAL_ID
    assert result["Data"]["TaskId"] == "task-00000000000000002"
    assert s3.head_object(Bucket=bucket, Key=MARKER)["Metadata"] == {
        "file-owner": "0",
        "file-group": "1002",
        "file-permissions": "040770",
    }


def test_update_without_relevant_change_skips_the_import(s3, bucket, fsx):
    client, stub = fsx
    expect_import(stub)
    custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)
    result = custom_resource.on_event(cfn_event("Update", PROPS, PROPS, PHYSICAL_ID), None, s3=s3, fsx=client)
    stub.assert_no_pending_responses()
    assert result["Data"]["TaskId"] == ""
    event = is_complete_event(cfn_event("Update", PROPS, PROPS, PHYSICAL_ID), result)
    assert custom_resource.is_complete(event, None, fsx=client) == {"IsComplete": True}


def test_update_to_a_new_path_creates_it_and_the_old_delete_keeps_data(s3, bucket, fsx):
    client, stub = fsx
    expect_import(stub, task_id="task-00000000000000001")
    custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)
    s3.put_object(Bucket=bucket, Key=f"{MARKER}results.csv", Body=b"user data")
    new_props = {**PROPS, "RelativePath": "studio/team"}
    expect_import(stub, uri="s3://data-bucket/lustre/studio/team/", task_id="task-00000000000000002")
    result = custom_resource.on_event(cfn_event("Update", new_props, PROPS, PHYSICAL_ID), None, s3=s3, fsx=client)
    assert result["PhysicalResourceId"] == f"{FS}:/data/studio/team"
    assert s3.head_object(Bucket=bucket, Key="lustre/studio/team/")["Metadata"]["file-permissions"] == "042775"
    # CloudFormation then deletes the old physical id:
    deleted = custom_resource.on_event(cfn_event("Delete", PROPS, physical_id=PHYSICAL_ID), None, s3=s3, fsx=client)
    assert deleted == {"PhysicalResourceId": PHYSICAL_ID}
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert {MARKER, f"{MARKER}results.csv", "lustre/studio/team/"} <= keys
    stub.assert_no_pending_responses()


def test_delete_is_non_destructive(s3, s3_calls, bucket, fsx):
    client, stub = fsx
    expect_import(stub)
    custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)
    s3_calls.calls.clear()
    event = cfn_event("Delete", physical_id=PHYSICAL_ID)
    assert custom_resource.on_event(event, None, s3=s3, fsx=client) == {"PhysicalResourceId": PHYSICAL_ID}
    assert custom_resource.is_complete({**event, "PhysicalResourceId": PHYSICAL_ID}, None, fsx=client) == {
        "IsComplete": True
    }
    assert s3_calls.names() == []
    assert s3.head_object(Bucket=bucket, Key=MARKER)["Metadata"]["file-permissions"] == "042775"


class ThrottledFsx:
    """A before-send hook on the handlers' real FSx client (partitions.client, botocore's standard retry mode): no
    import task in flight, and CreateDataRepositoryTask throttled `times` times before FSx starts the task."""

    def __init__(self, times: int):
        self.times, self.creates = times, 0

    def __call__(self, request, **_):
        target = request.headers.get("X-Amz-Target", b"")
        if (target.decode() if isinstance(target, bytes) else target).endswith("DescribeDataRepositoryTasks"):
            return answer(request, 200, b'{"DataRepositoryTasks": []}')
        self.creates += 1
        if self.creates <= self.times:
            return answer(request, 400, b'{"__type": "ThrottlingException", "message": "Rate exceeded"}')
        started = {"DataRepositoryTask": {**task()["DataRepositoryTask"], "CreationTime": 1795000000}}
        return answer(request, 200, json.dumps(started).encode())


@pytest.fixture
def backoffs(monkeypatch):
    """botocore sleeps between attempts in botocore.endpoint; record instead of sleeping."""
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=delays.append))
    return delays


def test_create_retries_a_throttled_import(s3, bucket, sleeps, backoffs):
    """Throttling is the client's to retry (lambda/shared/aws_clients.py), not a loop of the handler's own."""
    fsx = partitions.client("fsx")
    answers = ThrottledFsx(times=2)
    fsx.meta.events.register("before-send.fsx", answers)
    result = custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=fsx, sleep=sleeps)
    assert result["Data"]["TaskId"] == "task-0123456789abcdef0"
    assert answers.creates == 3 and len(backoffs) == 2 and sleeps == []


def test_create_gives_up_after_bounded_throttling(s3, bucket, sleeps, backoffs):
    fsx = partitions.client("fsx")
    answers = ThrottledFsx(times=100)
    fsx.meta.events.register("before-send.fsx", answers)
    with pytest.raises(ClientError, match="Rate exceeded"):
        custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=fsx, sleep=sleeps)
    assert answers.creates == aws_clients.MAX_ATTEMPTS and sleeps == []


def test_create_rejects_bad_properties_before_touching_anything(s3, bucket, s3_calls, fsx):
    client, _ = fsx
    with pytest.raises(ValueError, match="RelativePath"):
        custom_resource.on_event(cfn_event("Create", {**PROPS, "RelativePath": "../etc"}), None, s3=s3, fsx=client)
    assert s3_calls.names() == []


@pytest.mark.parametrize(
    "missing", ["FileSystemId", "FileSystemPath", "DataBucket", "RelativePath", "Uid", "Gid", "Mode"]
)
def test_create_without_a_required_property_is_refused_before_touching_anything(missing, s3, bucket, s3_calls, fsx):
    """No stand-in for what the template left out: without RelativePath no directory named after a default, without
    DataBucket or FileSystemId no marker in another bucket or import on another file system."""
    client, stub = fsx
    props = {name: value for name, value in PROPS.items() if name != missing}
    with pytest.raises(ValueError, match=rf"^{missing} "):
        custom_resource.on_event(cfn_event("Create", props), None, s3=s3, fsx=client)
    assert s3_calls.names() == []
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    stub.assert_no_pending_responses()  # and nothing unstubbed was called: the Stubber would have raised


@pytest.mark.parametrize("props", [{**PROPS, "S3Prefix": ""}, {k: v for k, v in PROPS.items() if k != "S3Prefix"}])
def test_without_an_s3_prefix_the_partition_is_at_the_bucket_root(props, s3, bucket, fsx):
    """A data repository association linked to the bucket root: the marker and the import path carry no prefix,
    whether the template passes S3Prefix empty or not at all."""
    client, stub = fsx
    expect_import(stub, uri="s3://data-bucket/studio/shared/")
    result = custom_resource.on_event(cfn_event("Create", props), None, s3=s3, fsx=client)
    stub.assert_no_pending_responses()
    assert result["PhysicalResourceId"] == PHYSICAL_ID
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["studio/shared/"]


def test_an_unknown_request_type_is_refused_and_touches_nothing(s3, bucket, s3_calls, fsx):
    client, stub = fsx
    with pytest.raises(ValueError, match="unknown RequestType 'Replace'"):
        custom_resource.on_event(cfn_event("Replace", physical_id=PHYSICAL_ID), None, s3=s3, fsx=client)
    assert s3_calls.names() == []
    stub.assert_no_pending_responses()


def test_the_handlers_make_the_clients_they_need_as_in_lambda(clients_by_name, s3, bucket, fsx, sleeps):
    """In Lambda nothing passes clients in: on_event and is_complete make them by service name (S3 a real client to
    moto server, FSx the real client under Stubber that every other test uses)."""
    client, stub = fsx
    expect_import(stub)
    request = cfn_event("Create")
    result = custom_resource.on_event(request, None, sleep=sleeps)
    assert s3.head_object(Bucket=bucket, Key=MARKER)["Metadata"]["file-permissions"] == "042775"
    expect_status(stub, "SUCCEEDED")
    assert custom_resource.is_complete(is_complete_event(request, result), None, sleep=sleeps) == {"IsComplete": True}
    # An import the file system was too busy to start on_event is started by is_complete, with its own client too.
    expect_in_flight(stub, count=custom_resource.max_in_flight())
    deferred = custom_resource.on_event({**request, "RequestId": "req-2"}, None, sleep=sleeps)
    assert deferred["Data"]["ImportPending"] == "true"
    expect_import(stub)
    expect_status(stub, "SUCCEEDED")
    event = is_complete_event({**request, "RequestId": "req-2"}, deferred)
    assert custom_resource.is_complete(event, None, sleep=sleeps) == {"IsComplete": True}
    stub.assert_no_pending_responses()


# --- busy file systems, bounded imports in flight, one task per request ---------------------------------------------


class Tokens:
    """Records the ClientRequestToken of every CreateDataRepositoryTask the real client sends."""

    def __init__(self, client):
        self.seen: list[str] = []
        client.meta.events.register("provide-client-params.fsx.CreateDataRepositoryTask", self._record)

    def _record(self, params, **_):
        self.seen.append(params.get("ClientRequestToken"))


@pytest.mark.parametrize("code", ["DataRepositoryTaskExecuting", "ServiceLimitExceeded"])
def test_busy_file_system_is_retried_with_backoff(code, s3, bucket, fsx, sleeps):
    client, stub = fsx
    tokens = Tokens(client)
    expect_in_flight(stub)
    stub.add_client_error("create_data_repository_task", service_error_code=code, http_status_code=400)
    stub.add_client_error("create_data_repository_task", service_error_code=code, http_status_code=400)
    stub.add_response(
        "create_data_repository_task",
        task(),
        {
            "Type": "IMPORT_METADATA_FROM_REPOSITORY",
            "FileSystemId": FS,
            "Paths": [f"s3://data-bucket/{MARKER}"],
            "Report": {"Enabled": False},
            "ClientRequestToken": ANY,
        },
    )
    result = custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client, sleep=sleeps)
    stub.assert_no_pending_responses()
    assert result["Data"]["TaskId"] == "task-0123456789abcdef0"
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 2.0 and 0 <= sleeps[1] <= 4.0
    assert len(set(tokens.seen)) == 1 and len(tokens.seen) == 3  # every retry carries the same token


def test_still_busy_defers_the_start_to_is_complete_with_the_same_token(s3, bucket, fsx, sleeps):
    client, stub = fsx
    tokens = Tokens(client)
    expect_in_flight(stub)
    for _ in range(4):
        stub.add_client_error(
            "create_data_repository_task", service_error_code="DataRepositoryTaskExecuting", http_status_code=400
        )
    request = cfn_event("Create")
    result = custom_resource.on_event(request, None, s3=s3, fsx=client, sleep=sleeps)
    assert result["Data"] == {"TaskId": "", "Path": "/data/studio/shared", "ImportPending": "true"}
    event = is_complete_event(request, result)
    # Poll 1: the file system is at its limit -> nothing is started.
    expect_in_flight(stub, count=custom_resource.max_in_flight())
    assert custom_resource.is_complete(event, None, fsx=client, sleep=sleeps) == {"IsComplete": False}
    # Poll 2: a slot is free -> the import starts; poll 3: the same token comes back with the same task.
    expect_import(stub)
    expect_status(stub, "EXECUTING")
    assert custom_resource.is_complete(event, None, fsx=client, sleep=sleeps) == {"IsComplete": False}
    expect_import(stub)
    expect_status(stub, "SUCCEEDED")
    assert custom_resource.is_complete(event, None, fsx=client, sleep=sleeps) == {"IsComplete": True}
    stub.assert_no_pending_responses()
    assert len(tokens.seen) == 6 and len(set(tokens.seen)) == 1


def test_at_the_in_flight_limit_nothing_is_started(s3, bucket, fsx, sleeps, monkeypatch):
    client, stub = fsx
    monkeypatch.setenv("MAX_IMPORTS_IN_FLIGHT", "2")
    expect_in_flight(stub, count=1, next_token="page-2")  # counted across pages
    expect_in_flight(stub, count=1, after="page-2")
    result = custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client, sleep=sleeps)
    stub.assert_no_pending_responses()  # and no create_data_repository_task
    assert result["Data"]["ImportPending"] == "true" and result["Data"]["TaskId"] == ""


def test_below_the_in_flight_limit_the_import_starts(s3, bucket, fsx, sleeps, monkeypatch):
    client, stub = fsx
    monkeypatch.setenv("MAX_IMPORTS_IN_FLIGHT", "2")
    expect_import(stub, in_flight=1)
    result = custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client, sleep=sleeps)
    stub.assert_no_pending_responses()
    assert result["Data"]["TaskId"] == "task-0123456789abcdef0" and result["Data"]["ImportPending"] == ""


def test_an_import_task_fsx_no_longer_knows_fails_the_request(fsx):
    """No task to follow is no proof the directory exists: the request fails rather than waiting for ever."""
    client, stub = fsx
    stub.add_response(
        "describe_data_repository_tasks", {"DataRepositoryTasks": []}, {"TaskIds": ["task-0000000000000dead"]}
    )
    event = is_complete_event(
        cfn_event("Create"),
        {"PhysicalResourceId": PHYSICAL_ID, "Data": {"TaskId": "task-0000000000000dead", "Path": "/x"}},
    )
    with pytest.raises(partitions.ImportFailed, match="import task task-0000000000000dead not found"):
        custom_resource.is_complete(event, None, fsx=client)


def test_token_is_stable_per_request_and_differs_between_requests(s3, bucket, fsx):
    """FSx answers a token it has seen with the task it started then, so a request that reused another's token would
    never import its own marker. CloudFormation's RequestId identifies a request together with the StackId ("The
    combination of StackId with RequestId forms a value that you can use to uniquely identify a request on a
    particular custom resource", custom resource request reference), so the token takes both, and the logical id."""
    client, stub = fsx
    tokens = Tokens(client)
    for _ in range(5):
        expect_import(stub)
    custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)
    custom_resource.on_event(cfn_event("Create"), None, s3=s3, fsx=client)  # the same request, retried
    custom_resource.on_event({**cfn_event("Create"), "RequestId": "req-2"}, None, s3=s3, fsx=client)
    other_stack = "arn:aws:cloudformation:us-east-1:111122223333:stack/other/1"
    custom_resource.on_event({**cfn_event("Create"), "StackId": other_stack}, None, s3=s3, fsx=client)
    custom_resource.on_event({**cfn_event("Create"), "LogicalResourceId": "RenamedPartition"}, None, s3=s3, fsx=client)
    first, retried, *others = tokens.seen
    assert first == retried and len({first, *others}) == 4
    assert 1 <= len(first) <= 63 and all(c.isalnum() or c in "_.-" for c in first)
