"""governance.on_event / is_complete. moto 5.2 has no cluster scheduler configs or compute quotas, so SageMaker is a
real client with botocore.stub.Stubber; the throttling test injects faults below the retry layer instead."""

from __future__ import annotations

import json
import types

import botocore.endpoint
import pytest
from support.raw_answers import answer
from botocore.stub import Stubber


import governance
from governance import GovernanceError

from support.events import is_complete_event
from support.task_governance import (
    CLUSTER,
    CONFIG_ARN,
    CONFIG_ID,
    CONFIG_PROPS,
    NEW_ID,
    NEW_QUOTA_ARN,
    OWNER_TAG,
    QUOTA_ARN,
    QUOTA_CONFIG,
    QUOTA_ID,
    QUOTA_PROPS,
    TOKEN,
    cfn_event,
    config,
    expect_no_quota_named,
    quota,
)


@pytest.fixture
def sagemaker():
    client = governance.client()
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


# --- Create -------------------------------------------------------------------------------------------------------


def test_create_scheduler_config_converts_cloudformation_strings(sagemaker):
    client, stub = sagemaker
    stub.add_response(
        "list_cluster_scheduler_configs",
        {"ClusterSchedulerConfigSummaries": []},
        {"NameContains": "platform-policy", "ClusterArn": CLUSTER},
    )
    stub.add_response(
        "create_cluster_scheduler_config",
        {"ClusterSchedulerConfigArn": CONFIG_ARN, "ClusterSchedulerConfigId": CONFIG_ID},
        {
            "Name": "platform-policy",
            "ClusterArn": CLUSTER,
            "SchedulerConfig": {
                "PriorityClasses": [{"Name": "inference", "Weight": 90}, {"Name": "training", "Weight": 50}],
                "FairShare": "Enabled",
                "IdleResourceSharing": "Enabled",
            },
            "Description": "priorities for the platform",
            "Tags": [{"Key": "team", "Value": "platform"}, OWNER_TAG],
        },
    )
    event = cfn_event("Create", CONFIG_PROPS, resource_type="Custom::ClusterSchedulerConfig")
    assert governance.on_event(event, None, sagemaker=client) == {
        "PhysicalResourceId": CONFIG_ARN,
        "Data": {"Arn": CONFIG_ARN, "Id": CONFIG_ID},
    }


def test_create_quota_converts_integers_and_floats(sagemaker):
    client, stub = sagemaker
    expect_no_quota_named(stub)
    stub.add_response(
        "create_compute_quota",
        {"ComputeQuotaArn": QUOTA_ARN, "ComputeQuotaId": QUOTA_ID},
        {
            "Name": "team-a",
            "ClusterArn": CLUSTER,
            "ActivationState": "Enabled",
            "ComputeQuotaConfig": QUOTA_CONFIG,
            "ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": 10},
            "Tags": [OWNER_TAG],
        },
    )
    result = governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)
    assert result == {"PhysicalResourceId": QUOTA_ARN, "Data": {"Arn": QUOTA_ARN, "Id": QUOTA_ID}}


def test_retried_create_adopts_the_quota_the_first_attempt_made(sagemaker):
    client, stub = sagemaker
    other_cluster = CLUSTER.replace("abcdef012345", "fedcba543210")
    stub.add_response(
        "list_compute_quotas",
        {
            "ComputeQuotaSummaries": [
                {**quota(), "Name": "team-a-old", "ComputeQuotaArn": NEW_QUOTA_ARN, "ComputeQuotaId": NEW_ID},
                {**quota(), "ClusterArn": other_cluster},
                quota("Creating"),
            ]
        },
        {"NameContains": "team-a", "ClusterArn": CLUSTER},
    )
    stub.add_response("list_tags", {"Tags": [OWNER_TAG]}, {"ResourceArn": QUOTA_ARN})
    # No create_compute_quota is stubbed: calling it would fail the test.
    result = governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)
    assert result == {"PhysicalResourceId": QUOTA_ARN, "Data": {"Arn": QUOTA_ARN, "Id": QUOTA_ID}}


def test_adopted_settled_quota_gets_the_declared_properties(sagemaker):
    client, stub = sagemaker
    stub.add_response(
        "list_compute_quotas",
        {"ComputeQuotaSummaries": [quota("Created", version=2)]},
        {"NameContains": "team-a", "ClusterArn": CLUSTER},
    )
    stub.add_response("list_tags", {"Tags": [OWNER_TAG]}, {"ResourceArn": QUOTA_ARN})
    stub.add_response("describe_compute_quota", quota("Created", version=2), {"ComputeQuotaId": QUOTA_ID})
    stub.add_response(
        "update_compute_quota",
        {"ComputeQuotaArn": QUOTA_ARN, "ComputeQuotaVersion": 3},
        {
            "ComputeQuotaId": QUOTA_ID,
            "TargetVersion": 2,
            "ActivationState": "Enabled",
            "ComputeQuotaConfig": QUOTA_CONFIG,
            "ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": 10},
        },
    )
    result = governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)
    assert result["PhysicalResourceId"] == QUOTA_ARN and result["ExpectedVersion"] == 3


# --- Update -------------------------------------------------------------------------------------------------------


def test_update_in_place_targets_the_current_version_and_waits_for_it(sagemaker):
    client, stub = sagemaker
    new_props = {**QUOTA_PROPS, "ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": "30"}}
    stub.add_response("describe_compute_quota", quota("Created", version=3), {"ComputeQuotaId": QUOTA_ID})
    stub.add_response(
        "update_compute_quota",
        {"ComputeQuotaArn": QUOTA_ARN, "ComputeQuotaVersion": 4},
        {
            "ComputeQuotaId": QUOTA_ID,
            "TargetVersion": 3,
            "ActivationState": "Enabled",
            "ComputeQuotaConfig": QUOTA_CONFIG,
            "ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": 30},
        },
    )
    request = cfn_event("Update", new_props, old_props=QUOTA_PROPS, physical_id=QUOTA_ARN)
    response = governance.on_event(request, None, sagemaker=client)
    assert response == {
        "PhysicalResourceId": QUOTA_ARN,
        "Data": {"Arn": QUOTA_ARN, "Id": QUOTA_ID},
        "ExpectedVersion": 4,
    }

    event = is_complete_event(request, response)
    stub.add_response("describe_compute_quota", quota("Created", version=3), {"ComputeQuotaId": QUOTA_ID})
    stub.add_response("describe_compute_quota", quota("Updating", version=4), {"ComputeQuotaId": QUOTA_ID})
    stub.add_response("describe_compute_quota", quota("Updated", version=4), {"ComputeQuotaId": QUOTA_ID})
    assert governance.is_complete(event, None, sagemaker=client) == {"IsComplete": False}  # not yet applied
    assert governance.is_complete(event, None, sagemaker=client) == {"IsComplete": False}
    assert governance.is_complete(event, None, sagemaker=client) == {"IsComplete": True}


def test_update_without_changes_calls_nothing(sagemaker):
    client, _ = sagemaker
    request = cfn_event(
        "Update", {**QUOTA_PROPS, "ServiceToken": TOKEN + "-v2"}, old_props=QUOTA_PROPS, physical_id=QUOTA_ARN
    )
    assert governance.on_event(request, None, sagemaker=client) == {
        "PhysicalResourceId": QUOTA_ARN,
        "Data": {"Arn": QUOTA_ARN, "Id": QUOTA_ID},
    }


def test_update_changes_tags_through_add_and_delete_tags(sagemaker):
    client, stub = sagemaker
    old = {**CONFIG_PROPS, "Tags": [{"Key": "team", "Value": "platform"}, {"Key": "stale", "Value": "x"}]}
    new = {**CONFIG_PROPS, "Tags": [{"Key": "team", "Value": "ml-platform"}]}
    stub.add_response("delete_tags", {}, {"ResourceArn": CONFIG_ARN, "TagKeys": ["stale"]})
    stub.add_response("add_tags", {}, {"ResourceArn": CONFIG_ARN, "Tags": [{"Key": "team", "Value": "ml-platform"}]})
    request = cfn_event(
        "Update", new, old_props=old, physical_id=CONFIG_ARN, resource_type="Custom::ClusterSchedulerConfig"
    )
    assert governance.on_event(request, None, sagemaker=client)["PhysicalResourceId"] == CONFIG_ARN


def test_changing_a_create_only_property_creates_a_replacement(sagemaker):
    client, stub = sagemaker
    new_props = {**QUOTA_PROPS, "Name": "team-a-v2", "ComputeQuotaTarget": {"TeamName": "team-b"}}
    # The quota being replaced is not adopted even if it matched.
    stub.add_response(
        "list_compute_quotas",
        {"ComputeQuotaSummaries": [{**quota(), "Name": "team-a-v2"}]},
        {"NameContains": "team-a-v2", "ClusterArn": CLUSTER},
    )
    stub.add_response(
        "create_compute_quota",
        {"ComputeQuotaArn": NEW_QUOTA_ARN, "ComputeQuotaId": NEW_ID},
        {
            "Name": "team-a-v2",
            "ClusterArn": CLUSTER,
            "ActivationState": "Enabled",
            "ComputeQuotaConfig": QUOTA_CONFIG,
            "ComputeQuotaTarget": {"TeamName": "team-b"},
            "Tags": [OWNER_TAG],
        },
    )
    request = cfn_event("Update", new_props, old_props=QUOTA_PROPS, physical_id=QUOTA_ARN)
    # A new physical id: CloudFormation deletes QUOTA_ARN once the stack update succeeds.
    assert governance.on_event(request, None, sagemaker=client) == {
        "PhysicalResourceId": NEW_QUOTA_ARN,
        "Data": {"Arn": NEW_QUOTA_ARN, "Id": NEW_ID},
    }


def test_team_change_under_the_same_name_is_refused_before_any_call(sagemaker):
    client, _ = sagemaker
    new_props = {**QUOTA_PROPS, "ComputeQuotaTarget": {"TeamName": "team-b"}}
    request = cfn_event("Update", new_props, old_props=QUOTA_PROPS, physical_id=QUOTA_ARN)
    with pytest.raises(GovernanceError, match=r"ComputeQuotaTarget\.TeamName cannot change unless Name"):
        governance.on_event(request, None, sagemaker=client)


# --- Delete -------------------------------------------------------------------------------------------------------


def test_create_refuses_a_same_named_quota_it_did_not_create(sagemaker):
    client, stub = sagemaker
    stub.add_response(
        "list_compute_quotas",
        {"ComputeQuotaSummaries": [quota("Created")]},
        {"NameContains": "team-a", "ClusterArn": CLUSTER},
    )
    stub.add_response("list_tags", {"Tags": [{"Key": "team", "Value": "made-by-hand"}]}, {"ResourceArn": QUOTA_ARN})
    # Neither update_compute_quota nor create_compute_quota is stubbed: adopting it would fail the test.
    with pytest.raises(GovernanceError, match=r"already exists on .* and was not created by this stack resource"):
        governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)


def test_delete_leaves_a_quota_another_owner_tagged(sagemaker):
    client, stub = sagemaker
    other = {**OWNER_TAG, "Value": "arn:aws:cloudformation:other-stack/TeamAQuota"}
    stub.add_response("list_tags", {"Tags": [other]}, {"ResourceArn": QUOTA_ARN})
    request = cfn_event("Delete", QUOTA_PROPS, physical_id=QUOTA_ARN)
    response = governance.on_event(request, None, sagemaker=client)  # no delete_compute_quota stubbed
    assert response == {"PhysicalResourceId": QUOTA_ARN, "NotOwned": True}
    assert governance.is_complete(is_complete_event(request, response), None, sagemaker=client) == {"IsComplete": True}


def test_delete_tolerates_a_quota_that_is_already_gone(sagemaker):
    client, stub = sagemaker
    stub.add_client_error(
        "list_tags",
        service_error_code="ResourceNotFound",
        http_status_code=404,
        expected_params={"ResourceArn": QUOTA_ARN},
    )
    stub.add_client_error(
        "delete_compute_quota",
        service_error_code="ResourceNotFound",
        http_status_code=404,
        service_message="Compute quota not found",
        expected_params={"ComputeQuotaId": QUOTA_ID},
    )
    request = cfn_event("Delete", QUOTA_PROPS, physical_id=QUOTA_ARN)
    assert governance.on_event(request, None, sagemaker=client) == {"PhysicalResourceId": QUOTA_ARN}
    stub.add_client_error("describe_compute_quota", service_error_code="ResourceNotFound", http_status_code=404)
    assert governance.is_complete(request, None, sagemaker=client) == {"IsComplete": True}


def test_delete_waits_until_the_quota_is_gone_and_retries_a_refused_delete(sagemaker):
    client, stub = sagemaker
    stub.add_response("list_tags", {"Tags": [OWNER_TAG]}, {"ResourceArn": QUOTA_ARN})
    stub.add_client_error(
        "delete_compute_quota",
        service_error_code="ConflictException",
        http_status_code=400,
        service_message="Quota is being created",
        expected_params={"ComputeQuotaId": QUOTA_ID},
    )
    request = cfn_event("Delete", QUOTA_PROPS, physical_id=QUOTA_ARN)
    governance.on_event(request, None, sagemaker=client)
    stub.add_response("describe_compute_quota", quota("Creating"), {"ComputeQuotaId": QUOTA_ID})
    stub.add_response("describe_compute_quota", quota("Created"), {"ComputeQuotaId": QUOTA_ID})
    stub.add_response("delete_compute_quota", {}, {"ComputeQuotaId": QUOTA_ID})
    stub.add_response("describe_compute_quota", quota("Deleting"), {"ComputeQuotaId": QUOTA_ID})
    stub.add_client_error("describe_compute_quota", service_error_code="ResourceNotFound", http_status_code=404)
    assert [governance.is_complete(request, None, sagemaker=client)["IsComplete"] for _ in range(4)] == [
        False,
        False,
        False,
        True,
    ]


def test_delete_of_a_failed_create_calls_nothing(sagemaker):
    client, _ = sagemaker
    request = cfn_event("Delete", QUOTA_PROPS, physical_id="req-1")
    assert governance.on_event(request, None, sagemaker=client) == {"PhysicalResourceId": "req-1"}
    assert governance.is_complete(request, None, sagemaker=client) == {"IsComplete": True}


# --- is_complete --------------------------------------------------------------------------------------------------


def test_is_complete_follows_the_status(sagemaker):
    client, stub = sagemaker
    request = cfn_event("Create", CONFIG_PROPS, resource_type="Custom::ClusterSchedulerConfig")
    event = is_complete_event(request, {"PhysicalResourceId": CONFIG_ARN, "Data": {"Arn": CONFIG_ARN, "Id": CONFIG_ID}})
    stub.add_response("describe_cluster_scheduler_config", config("Creating"), {"ClusterSchedulerConfigId": CONFIG_ID})
    stub.add_response("describe_cluster_scheduler_config", config("Created"), {"ClusterSchedulerConfigId": CONFIG_ID})
    # The framework rejects "Data" while IsComplete is false, so not-complete answers carry none.
    assert governance.is_complete(event, None, sagemaker=client) == {"IsComplete": False}
    assert governance.is_complete(event, None, sagemaker=client) == {"IsComplete": True}


def test_is_complete_fails_with_sagemakers_reason(sagemaker):
    client, stub = sagemaker
    event = is_complete_event(cfn_event("Create", QUOTA_PROPS), {"PhysicalResourceId": QUOTA_ARN})
    reason = "Team team-a already has a compute quota on this cluster"
    stub.add_response(
        "describe_compute_quota", quota("CreateFailed", FailureReason=reason), {"ComputeQuotaId": QUOTA_ID}
    )
    with pytest.raises(GovernanceError) as failure:
        governance.is_complete(event, None, sagemaker=client)
    # What the stack events show (the Provider reports the handler's error message as the reason).
    assert str(failure.value) == f"ComputeQuota 'team-a' ({QUOTA_ARN}) is CreateFailed: {reason}"


# --- what CloudFormation shows for bad input or API errors ---------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": "ten"}},
            "ComputeQuotaTarget.FairShareWeight must be an integer, got 'ten'",
        ),
        (
            {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "Count": "1.5"}]}},
            r"ComputeQuotaConfig\.ComputeQuotaResources\[0\]\.Count must be an integer, got '1.5'",
        ),
        ({"TeamName": "team-a"}, "unknown property TeamName; allowed: Name, Description, ClusterArn"),
        ({"ComputeQuotaTarget": {"FairShareWeight": "10"}}, r"missing required property ComputeQuotaTarget\.TeamName"),
    ],
)
def test_bad_properties_fail_naming_the_property(sagemaker, change, message):
    client, _ = sagemaker
    with pytest.raises(GovernanceError, match=message):
        governance.on_event(cfn_event("Create", {**QUOTA_PROPS, **change}), None, sagemaker=client)


def test_api_errors_say_what_was_attempted(sagemaker):
    client, stub = sagemaker
    expect_no_quota_named(stub)
    stub.add_client_error(
        "create_compute_quota",
        service_error_code="ResourceLimitExceeded",
        http_status_code=400,
        service_message="Too many compute quotas",
    )
    with pytest.raises(
        GovernanceError,
        match=rf"^CreateComputeQuota 'team-a' on {CLUSTER} failed: "
        r"ResourceLimitExceeded: Too many compute quotas$",
    ):
        governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)


def test_unknown_resource_type_is_refused():
    with pytest.raises(GovernanceError, match="unsupported ResourceType 'Custom::Other'"):
        governance.on_event(cfn_event("Create", QUOTA_PROPS, resource_type="Custom::Other"), None, sagemaker=object())


# --- throttling ---------------------------------------------------------------------------------------------------


def _reply(status: int, body: dict):
    """A SageMaker answer for a before-send hook to return: call it with the request."""
    return lambda request: answer(
        request, status, json.dumps(body).encode(), {"Content-Type": "application/x-amz-json-1.1"}
    )


def test_throttling_is_retried_by_the_client(monkeypatch):
    """Faults are injected at before-send, below botocore's retry handler, so the real retry policy runs."""
    throttled = {"__type": "ThrottlingException", "message": "Rate exceeded"}
    replies = [
        _reply(400, throttled),
        _reply(400, throttled),
        _reply(200, {"ComputeQuotaSummaries": []}),
        _reply(400, throttled),
        _reply(200, {"ComputeQuotaArn": QUOTA_ARN, "ComputeQuotaId": QUOTA_ID}),
    ]
    sent = []

    def send(request, **_):
        sent.append(request.headers["X-Amz-Target"].decode())
        return replies.pop(0)(request)

    delays = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=delays.append))
    client = governance.client()
    client.meta.events.register("before-send.sagemaker", send)
    result = governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)
    assert result["PhysicalResourceId"] == QUOTA_ARN
    assert sent == ["SageMaker.ListComputeQuotas"] * 3 + ["SageMaker.CreateComputeQuota"] * 2
    assert len(delays) == 3 and all(0 <= delay <= 20 for delay in delays)


def test_a_call_still_throttled_after_eleven_attempts_fails_naming_it(monkeypatch):
    """Eleven attempts in all, then the stack event shows the throttling: the burst of a stack creating every team's
    quota at once must not fail a quota at the default eight."""
    throttled = {"__type": "ThrottlingException", "message": "Rate exceeded"}
    sent = []

    def send(request, **_):
        sent.append(request.headers["X-Amz-Target"].decode())
        if sent[-1] == "SageMaker.ListComputeQuotas":
            return _reply(200, {"ComputeQuotaSummaries": []})(request)
        return _reply(400, throttled)(request)

    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _: None))
    client = governance.client()
    client.meta.events.register("before-send.sagemaker", send)
    with pytest.raises(GovernanceError, match=r"failed: ThrottlingException: Rate exceeded$"):
        governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)
    assert sent == ["SageMaker.ListComputeQuotas"] + ["SageMaker.CreateComputeQuota"] * 11
