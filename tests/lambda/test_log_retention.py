"""log_retention: the real CloudWatch Logs API of moto server."""

from __future__ import annotations


import json

import pytest
from botocore.exceptions import ClientError

from support.recording import Recorder


import log_retention
from support.events import custom_resource_event
from support.raw_answers import answer

GROUP = "/aws/sagemaker/Clusters/ml-cluster/abc123def456"


@pytest.fixture
def logs():
    return log_retention.client("logs")


def event(request_type: str, days="90", **extra) -> dict:
    request = custom_resource_event(
        request_type,
        {"LogGroupName": GROUP, "RetentionInDays": days},
        logical_id="ClusterLogRetention",
        resource_type="Custom::LogRetention",
    )
    return {**request, **extra}


def retention(logs) -> int | None:
    (group,) = [
        g for g in logs.describe_log_groups(logGroupNamePrefix=GROUP)["logGroups"] if g["logGroupName"] == GROUP
    ]
    return group.get("retentionInDays")


def test_sets_retention_on_the_group_hyperpod_created(logs):
    logs.create_log_group(logGroupName=GROUP)
    assert retention(logs) is None
    assert log_retention.on_event(event("Create")) == {"PhysicalResourceId": GROUP}
    assert retention(logs) == 90


def test_creates_the_group_when_hyperpod_has_not_yet(logs):
    log_retention.on_event(event("Create", days="30"))
    assert retention(logs) == 30


def test_update_changes_retention_and_a_second_run_changes_nothing(logs):
    log_retention.on_event(event("Create"))
    log_retention.on_event(event("Update", days="365", PhysicalResourceId=GROUP))
    assert retention(logs) == 365
    log_retention.on_event(event("Update", days="365", PhysicalResourceId=GROUP))
    assert retention(logs) == 365
    assert len(logs.describe_log_groups(logGroupNamePrefix="/aws/sagemaker/Clusters/")["logGroups"]) == 1


def test_delete_keeps_the_group_and_calls_nothing(logs, monkeypatch):
    log_retention.on_event(event("Create"))
    recorder = Recorder(logs)
    monkeypatch.setattr(log_retention, "client", lambda _service: logs)
    assert log_retention.on_event(event("Delete", PhysicalResourceId=GROUP)) == {"PhysicalResourceId": GROUP}
    assert recorder.names() == []
    assert retention(logs) == 90


KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_creates_the_group_encrypted_with_the_platform_key(logs):
    log_retention.on_event(
        event("Create", ResourceProperties={"LogGroupName": GROUP, "RetentionInDays": "30", "KmsKeyId": KEY})
    )
    (group,) = logs.describe_log_groups(logGroupNamePrefix=GROUP)["logGroups"]
    assert group["kmsKeyId"] == KEY and group["retentionInDays"] == 30


def test_a_group_hyperpod_made_first_is_associated_with_the_key(logs, monkeypatch):
    """moto 5.2 has no AssociateKmsKey: the calls go to a Stubber on the real client, in the order the handler makes
    them (create refused as existing, associate, retention)."""
    from botocore.stub import Stubber

    stub = Stubber(logs)
    stub.add_client_error(
        "create_log_group",
        service_error_code="ResourceAlreadyExistsException",
        expected_params={"logGroupName": GROUP, "kmsKeyId": KEY},
    )
    stub.add_response("associate_kms_key", {}, {"logGroupName": GROUP, "kmsKeyId": KEY})
    stub.add_response("put_retention_policy", {}, {"logGroupName": GROUP, "retentionInDays": 90})
    monkeypatch.setattr(log_retention, "client", lambda _service: logs)
    with stub:
        log_retention.on_event(
            {
                "RequestType": "Create",
                "ResourceProperties": {"LogGroupName": GROUP, "RetentionInDays": "90", "KmsKeyId": KEY},
            }
        )
    stub.assert_no_pending_responses()


def test_without_a_key_nothing_is_associated(logs, monkeypatch):
    logs.create_log_group(logGroupName=GROUP)
    recorder = Recorder(logs)
    monkeypatch.setattr(log_retention, "client", lambda _service: logs)
    log_retention.on_event(event("Create"))
    assert recorder.names() == ["CreateLogGroup", "PutRetentionPolicy"]


def test_a_key_cloudwatch_logs_refuses_fails_the_resource_and_creates_nothing(logs, monkeypatch):
    """CreateLogGroup answers InvalidParameterException when the KMS key does not exist or is disabled (CloudWatch
    Logs API reference, CreateLogGroup). The resource fails with that error, for CloudFormation to show, not with
    whatever a later call on a group that was never made would say."""

    def refuse(request, **_):
        body = {"__type": "InvalidParameterException", "message": "Specified KMS key is disabled."}
        return answer(request, 400, json.dumps(body).encode(), {"Content-Type": "application/x-amz-json-1.1"})

    logs.meta.events.register("before-send.cloudwatch-logs.CreateLogGroup", refuse)
    monkeypatch.setattr(log_retention, "client", lambda _service: logs)
    with pytest.raises(ClientError) as raised:
        log_retention.on_event(
            event("Create", ResourceProperties={"LogGroupName": GROUP, "RetentionInDays": "30", "KmsKeyId": KEY})
        )
    assert raised.value.response["Error"]["Code"] == "InvalidParameterException"
    assert logs.describe_log_groups(logGroupNamePrefix=GROUP)["logGroups"] == []
