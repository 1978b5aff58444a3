"""profile_events.handler's time budget: MAX_WAIT_SECONDS is shared by the wait for the profile, the wait for an import
slot and the wait for the import, whose sum stays within it (plus the short floors below), so the function ends
before Lambda's timeout with an error EventBridge retries. The clock is the injected sleep: the waits count the
seconds it was asked to sleep (profile_events.Clock, partitions.wait_for), so no test sleeps for real.

SageMaker is stubbed as in test_profile_events.py; FSx answers at its real client's before-send (SlowFsx), since a
file system that stays busy or an import that stays EXECUTING answers however many polls the budget allows."""

from __future__ import annotations

import json

import partitions
import pytest

import profile_events

from support.profile_answers import FS, SETTINGS, TASK, WHO, cloudtrail_event, expect_uid_check, profile
from support.raw_answers import answer


class SlowFsx:
    """FSx behind the handler's real client: with `busy`, as many import tasks in flight as the handler allows (no
    slot); the import task it starts stays EXECUTING."""

    def __init__(self, *, busy: bool):
        self.busy = busy

    def __call__(self, request, **_):
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).rsplit(".", 1)[-1]
        params = json.loads(request.body or b"{}")
        if operation == "CreateDataRepositoryTask":
            return self._answer(request, {"DataRepositoryTask": self._task(TASK, "PENDING")})
        assert operation == "DescribeDataRepositoryTasks", operation
        if params.get("TaskIds") == [TASK]:
            return self._answer(request, {"DataRepositoryTasks": [self._task(TASK, "EXECUTING")]})
        in_flight = SETTINGS.max_in_flight if self.busy else 0
        tasks = [self._task(f"task-other{index:011d}", "EXECUTING") for index in range(in_flight)]
        return self._answer(request, {"DataRepositoryTasks": tasks})

    @staticmethod
    def _task(task_id: str, lifecycle: str) -> dict:
        return {
            "TaskId": task_id,
            "Lifecycle": lifecycle,
            "Type": "IMPORT_METADATA_FROM_REPOSITORY",
            "FileSystemId": FS,
            "CreationTime": 1795000000,
        }

    @staticmethod
    def _answer(request, body: dict):
        return answer(request, 200, json.dumps(body).encode(), {"Content-Type": "application/x-amz-json-1.1"})


def slow_fsx(*, busy: bool):
    client = partitions.client("fsx")
    client.meta.events.register("before-send.fsx", SlowFsx(busy=busy))
    return client


def expect_in_service_after(sm_stub, seconds: int) -> None:
    """The profile is Pending at each poll before `seconds` of the budget and InService at the poll at `seconds`
    (wait_for polls at 0, 2, 6, 14, 30, 60, ...: one of those)."""
    for _ in range([0, 2, 6, 14, 30, 60].index(seconds)):
        sm_stub.add_response("describe_user_profile", profile("Pending"), WHO)
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)


def handle(s3, fsx, sagemaker, sleeps):
    """The handler on alice's CloudTrail event with SETTINGS (a 60 s budget), sleeping through `sleeps`."""
    return profile_events.handler(
        cloudtrail_event(), None, settings=SETTINGS, s3=s3, fsx=fsx, sagemaker=sagemaker, sleep=sleeps
    )


def test_profile_never_in_service_raises_after_bounded_waits(s3, bucket, s3_calls, fsx, sagemaker, sleeps):
    sm_client, sm_stub = sagemaker
    for _ in range(6):  # polls at 0, 2, 6, 14, 30 and 60 "seconds" of injected sleep
        sm_stub.add_response("describe_user_profile", profile("Pending"), WHO)
    with pytest.raises(profile_events.ProfileNotReady, match="InService"):
        handle(s3, fsx[0], sm_client, sleeps)
    sm_stub.assert_no_pending_responses()
    assert sum(sleeps) == SETTINGS.max_wait_seconds
    assert s3_calls.names() == []


def test_the_import_stops_waiting_for_a_slot_at_half_the_budget(s3, bucket, sagemaker, sleeps):
    """A file system whose import slots stay full costs half of what is left (60 s of budget, the profile InService at
    once: 30 s), so an import that gets a slot late still has the other half to run in."""
    sm_client, sm_stub = sagemaker
    sm_stub.add_response("describe_user_profile", profile("InService"), WHO)
    expect_uid_check(sm_stub)
    with pytest.raises(TimeoutError, match="free import slot"):
        handle(s3, slow_fsx(busy=True), sm_client, sleeps)
    assert sum(sleeps) == pytest.approx(SETTINGS.max_wait_seconds / 2, abs=0.1)
    sm_stub.assert_no_pending_responses()  # the profile never got an entry for a directory that does not exist


def test_an_import_that_stays_running_gets_what_the_profile_wait_left_of_the_budget(s3, bucket, sagemaker, sleeps):
    """The profile came InService at 14 s of the 60: the import that then stays EXECUTING is given up at 60 s in all
    (not 14 + 60), with the profile left without a mount; EventBridge retries the event."""
    sm_client, sm_stub = sagemaker
    expect_in_service_after(sm_stub, 14)
    expect_uid_check(sm_stub)
    with pytest.raises(TimeoutError, match=f"import task {TASK}"):
        handle(s3, slow_fsx(busy=False), sm_client, sleeps)
    assert sum(sleeps) == pytest.approx(SETTINGS.max_wait_seconds, abs=0.1)
    sm_stub.assert_no_pending_responses()  # no update_user_profile: nothing mounted


@pytest.mark.parametrize(
    "busy, gave_up_on, after",
    [(True, "free import slot", 0.5), (False, f"import task {TASK}", 1.0)],
    ids=["no-slot", "import-running"],
)
def test_a_profile_that_spent_the_whole_budget_still_gets_one_more_look_and_no_more(
    busy, gave_up_on, after, s3, bucket, sagemaker, sleeps
):
    """The profile came InService at the last poll of the 60 s budget: the handler still looks for a slot (and starts
    the import) and looks again half a second later for a slot, a second later for the import, then gives up: at
    most a second and a half past MAX_WAIT_SECONDS (780 s, Lambda's timeout 900 s: constructs/fsx_partitions.py)."""
    sm_client, sm_stub = sagemaker
    expect_in_service_after(sm_stub, 60)
    expect_uid_check(sm_stub)
    with pytest.raises(TimeoutError, match=gave_up_on):
        handle(s3, slow_fsx(busy=busy), sm_client, sleeps)
    assert sum(sleeps) == pytest.approx(60 + after, abs=0.1)
    sm_stub.assert_no_pending_responses()
