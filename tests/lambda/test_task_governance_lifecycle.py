"""governance.on_event / is_complete beyond the happy path: replacements by name or cluster, what a retried Create
adopts, the owner tag's limit, refusals, and the waits of a delete. SageMaker is a real client under
botocore.stub.Stubber (moto 5.2 has neither compute quotas nor scheduler configs): a call the test did not expect,
or one with other parameters, fails the test."""

from __future__ import annotations

import re

import botocore.validate
import pytest
from botocore.exceptions import ClientError

import governance
from governance import GovernanceError

from support.events import is_complete_event
from support.task_governance import (
    ACCOUNT,
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
    cfn_event,
    config,
    quota,
)

OTHER_CLUSTER = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/fedcba543210"
NEW_CONFIG_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/{NEW_ID}"
CONFIG_AS_SENT = {
    "PriorityClasses": [{"Name": "inference", "Weight": 90}, {"Name": "training", "Weight": 50}],
    "FairShare": "Enabled",
    "IdleResourceSharing": "Enabled",
}
QUOTA_TARGET = {"TeamName": "team-a", "FairShareWeight": 10}


def created(kind, arn, *, name, cluster, tags):
    """What Create<kind> is asked (the converted properties, the owner tag last) and what it answers."""
    if kind == "quota":
        params = {
            "Name": name,
            "ClusterArn": cluster,
            "ActivationState": "Enabled",
            "ComputeQuotaConfig": QUOTA_CONFIG,
            "ComputeQuotaTarget": QUOTA_TARGET,
        }
        return "create_compute_quota", {"ComputeQuotaArn": arn, "ComputeQuotaId": NEW_ID}, {**params, "Tags": tags}
    params = {
        "Name": name,
        "ClusterArn": cluster,
        "SchedulerConfig": CONFIG_AS_SENT,
        "Description": "priorities for the platform",
    }
    answer = {"ClusterSchedulerConfigArn": arn, "ClusterSchedulerConfigId": NEW_ID}
    return "create_cluster_scheduler_config", answer, {**params, "Tags": tags}


KINDS = {
    # kind: (ResourceType, properties, physical id, the new resource's ARN, its list call and summaries key, tags sent)
    "quota": ("Custom::ComputeQuota", QUOTA_PROPS, QUOTA_ARN, NEW_QUOTA_ARN, "list_compute_quotas", [OWNER_TAG]),
    "config": (
        "Custom::ClusterSchedulerConfig",
        CONFIG_PROPS,
        CONFIG_ARN,
        NEW_CONFIG_ARN,
        "list_cluster_scheduler_configs",
        [{"Key": "team", "Value": "platform"}, OWNER_TAG],
    ),
}
SUMMARIES = {
    "list_compute_quotas": "ComputeQuotaSummaries",
    "list_cluster_scheduler_configs": "ClusterSchedulerConfigSummaries",
}


# --- replacements -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(
    "change", [{"Name": "renamed"}, {"ClusterArn": OTHER_CLUSTER}], ids=["new name", "other cluster"]
)
def test_a_new_name_or_cluster_creates_a_replacement_there(sagemaker, kind, change):
    """Name and ClusterArn are createOnlyProperties: the new resource is created where the properties now say, and
    its ARN becomes the physical id (CloudFormation then deletes the old one). Updating in place would leave the
    quota on the old cluster under the old name."""
    client, stub = sagemaker
    resource_type, props, physical_id, new_arn, list_call, tags = KINDS[kind]
    new_props = {**props, **change}
    name, cluster = new_props["Name"], new_props["ClusterArn"]
    stub.add_response(list_call, {SUMMARIES[list_call]: []}, {"NameContains": name, "ClusterArn": cluster})
    stub.add_response(*created(kind, new_arn, name=name, cluster=cluster, tags=tags))
    request = cfn_event("Update", new_props, old_props=props, physical_id=physical_id, resource_type=resource_type)
    assert governance.on_event(request, None, sagemaker=client) == {
        "PhysicalResourceId": new_arn,
        "Data": {"Arn": new_arn, "Id": NEW_ID},
    }
    stub.assert_no_pending_responses()


def test_a_team_change_on_another_cluster_is_a_replacement_not_a_refusal(sagemaker):
    """The refusal of a team change is for the same name on the same cluster only (the replacement is created
    before the old quota is deleted, and names are unique within a cluster); on another cluster there is no clash."""
    client, stub = sagemaker
    new_props = {**QUOTA_PROPS, "ClusterArn": OTHER_CLUSTER, "ComputeQuotaTarget": {"TeamName": "team-b"}}
    stub.add_response(
        "list_compute_quotas", {"ComputeQuotaSummaries": []}, {"NameContains": "team-a", "ClusterArn": OTHER_CLUSTER}
    )
    method, answer, params = created("quota", NEW_QUOTA_ARN, name="team-a", cluster=OTHER_CLUSTER, tags=[OWNER_TAG])
    stub.add_response(method, answer, {**params, "ComputeQuotaTarget": {"TeamName": "team-b"}})
    request = cfn_event("Update", new_props, old_props=QUOTA_PROPS, physical_id=QUOTA_ARN)
    assert governance.on_event(request, None, sagemaker=client)["PhysicalResourceId"] == NEW_QUOTA_ARN
    stub.assert_no_pending_responses()


@pytest.mark.parametrize("status", ["Deleting", "Deleted"])
def test_a_same_named_quota_on_its_way_out_is_not_adopted(sagemaker, status):
    """A quota being deleted (the one a replacement under the old name follows) is neither adopted nor refused:
    a new one is created. No list_tags is stubbed: reading its owner would fail the test."""
    client, stub = sagemaker
    stub.add_response(
        "list_compute_quotas",
        {"ComputeQuotaSummaries": [quota(status)]},
        {"NameContains": "team-a", "ClusterArn": CLUSTER},
    )
    stub.add_response(*created("quota", NEW_QUOTA_ARN, name="team-a", cluster=CLUSTER, tags=[OWNER_TAG]))
    result = governance.on_event(cfn_event("Create", QUOTA_PROPS), None, sagemaker=client)
    assert result["PhysicalResourceId"] == NEW_QUOTA_ARN
    stub.assert_no_pending_responses()


def test_an_adopted_scheduler_config_gets_the_declared_tags(sagemaker):
    """A retried Create adopts what its first attempt made; that attempt's tags may be gone or stale, so the
    declared tags are added with the owner tag."""
    client, stub = sagemaker
    stub.add_response(
        "list_cluster_scheduler_configs",
        {"ClusterSchedulerConfigSummaries": [config("Created", version=1)]},
        {"NameContains": "platform-policy", "ClusterArn": CLUSTER},
    )
    stub.add_response("list_tags", {"Tags": [OWNER_TAG]}, {"ResourceArn": CONFIG_ARN})
    stub.add_response("describe_cluster_scheduler_config", config(), {"ClusterSchedulerConfigId": CONFIG_ID})
    stub.add_response(
        "update_cluster_scheduler_config",
        {"ClusterSchedulerConfigArn": CONFIG_ARN, "ClusterSchedulerConfigVersion": 2},
        {
            "ClusterSchedulerConfigId": CONFIG_ID,
            "TargetVersion": 1,
            "SchedulerConfig": CONFIG_AS_SENT,
            "Description": "priorities for the platform",
        },
    )
    stub.add_response(
        "add_tags", {}, {"ResourceArn": CONFIG_ARN, "Tags": [{"Key": "team", "Value": "platform"}, OWNER_TAG]}
    )
    event = cfn_event("Create", CONFIG_PROPS, resource_type="Custom::ClusterSchedulerConfig")
    assert governance.on_event(event, None, sagemaker=client)["ExpectedVersion"] == 2
    stub.assert_no_pending_responses()


def test_the_owner_tag_keeps_the_last_256_characters(sagemaker):
    """SageMaker's tag values hold 256 characters at most (TagValue, max 256); a stack name has up to 128 and a
    logical id up to 255. The tag keeps the end, where the logical id is, whole."""
    client, stub = sagemaker
    logical_id = "TeamQuota" + "A" * 246  # 255 characters
    event = cfn_event("Create", QUOTA_PROPS)
    event["StackId"] = (
        f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/{'p' * 128}/8f5c0a60-1d6b-11f0-9a2e-0e1d2c3b4a59"
    )
    event["LogicalResourceId"] = logical_id
    stub.add_response(
        "list_compute_quotas", {"ComputeQuotaSummaries": []}, {"NameContains": "team-a", "ClusterArn": CLUSTER}
    )
    tag = {"Key": OWNER_TAG["Key"], "Value": "/" + logical_id}
    stub.add_response(*created("quota", NEW_QUOTA_ARN, name="team-a", cluster=CLUSTER, tags=[tag]))
    assert governance.on_event(event, None, sagemaker=client)["PhysicalResourceId"] == NEW_QUOTA_ARN
    assert len(tag["Value"]) == 256


# --- refusals -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "props, message",
    [
        (
            {**QUOTA_PROPS, "Team": "team-a", "TeamName": "team-a"},
            "unknown properties Team, TeamName; allowed: Name, Description, ClusterArn, ComputeQuotaConfig, "
            "ComputeQuotaTarget, ActivationState, Tags",
        ),
        (
            {"Name": "team-a", "ClusterArn": CLUSTER},
            "missing required properties ComputeQuotaConfig, ComputeQuotaTarget",
        ),
        ({**QUOTA_PROPS, "ComputeQuotaTarget": "team-a"}, "ComputeQuotaTarget must be an object, got 'team-a'"),
        (
            {**QUOTA_PROPS, "ComputeQuotaConfig": {"ComputeQuotaResources": {"InstanceType": "ml.p5.48xlarge"}}},
            "ComputeQuotaConfig.ComputeQuotaResources must be a list, got {'InstanceType': 'ml.p5.48xlarge'}",
        ),
    ],
    ids=["two unknown", "two missing", "not an object", "not a list"],
)
def test_malformed_properties_are_refused_before_any_call(sagemaker, props, message):
    client, _ = sagemaker
    with pytest.raises(GovernanceError) as refusal:
        governance.on_event(cfn_event("Create", props), None, sagemaker=client)
    assert str(refusal.value) == message


def test_an_update_of_another_kinds_arn_is_refused(sagemaker):
    """The physical id names what is updated: a scheduler config's ARN is never updated as a compute quota."""
    client, _ = sagemaker
    new_props = {**QUOTA_PROPS, "ActivationState": "Disabled"}
    request = cfn_event("Update", new_props, old_props=QUOTA_PROPS, physical_id=CONFIG_ARN)
    with pytest.raises(GovernanceError, match=f"^physical id '{re.escape(CONFIG_ARN)}' is not a compute-quota ARN$"):
        governance.on_event(request, None, sagemaker=client)


def test_an_unknown_request_type_is_refused(sagemaker):
    client, _ = sagemaker
    with pytest.raises(GovernanceError, match="^unknown RequestType 'Replace'$"):
        governance.on_event(cfn_event("Replace", QUOTA_PROPS, physical_id=QUOTA_ARN), None, sagemaker=client)


def test_a_refused_update_says_what_was_attempted(sagemaker):
    client, stub = sagemaker
    stub.add_response("describe_compute_quota", quota(version=3), {"ComputeQuotaId": QUOTA_ID})
    stub.add_client_error(
        "update_compute_quota",
        service_error_code="ConflictException",
        http_status_code=400,
        service_message="TargetVersion 3 is not the latest version",
    )
    new_props = {**QUOTA_PROPS, "ActivationState": "Disabled"}
    request = cfn_event("Update", new_props, old_props=QUOTA_PROPS, physical_id=QUOTA_ARN)
    with pytest.raises(
        GovernanceError,
        match=f"^UpdateComputeQuota {QUOTA_ID} failed: ConflictException: TargetVersion 3 is not the latest version$",
    ):
        governance.on_event(request, None, sagemaker=client)


# --- Delete -------------------------------------------------------------------------------------------------------


def test_delete_without_permission_to_read_the_owner_fails_and_deletes_nothing(sagemaker):
    """Only a quota tagged as this resource's is deleted; when its tags cannot be read, nothing is."""
    client, stub = sagemaker
    stub.add_client_error(
        "list_tags",
        service_error_code="AccessDeniedException",
        http_status_code=400,
        expected_params={"ResourceArn": QUOTA_ARN},
    )
    with pytest.raises(ClientError, match="AccessDeniedException"):
        governance.on_event(cfn_event("Delete", QUOTA_PROPS, physical_id=QUOTA_ARN), None, sagemaker=client)


def test_a_refused_delete_fails_naming_the_quota(sagemaker):
    client, stub = sagemaker
    stub.add_response("list_tags", {"Tags": [OWNER_TAG]}, {"ResourceArn": QUOTA_ARN})
    stub.add_client_error(
        "delete_compute_quota",
        service_error_code="AccessDeniedException",
        http_status_code=400,
        service_message="not authorized to perform: sagemaker:DeleteComputeQuota",
    )
    with pytest.raises(
        GovernanceError,
        match=f"^DeleteComputeQuota {QUOTA_ID} failed: AccessDeniedException: not authorized to perform: "
        "sagemaker:DeleteComputeQuota$",
    ):
        governance.on_event(cfn_event("Delete", QUOTA_PROPS, physical_id=QUOTA_ARN), None, sagemaker=client)


def delete_wait(client):
    request = cfn_event("Delete", QUOTA_PROPS, physical_id=QUOTA_ARN)
    return governance.is_complete(is_complete_event(request, {"PhysicalResourceId": QUOTA_ARN}), None, sagemaker=client)


def test_the_delete_wait_does_not_delete_again_while_the_quota_updates(sagemaker):
    """Updating is busy: SageMaker would refuse the delete (ConflictException); the wait asks again later."""
    client, stub = sagemaker
    stub.add_response("describe_compute_quota", quota("Updating"), {"ComputeQuotaId": QUOTA_ID})
    assert delete_wait(client) == {"IsComplete": False}  # no delete_compute_quota stubbed


def test_the_delete_wait_ends_when_sagemaker_reports_deleted(sagemaker):
    client, stub = sagemaker
    stub.add_response("describe_compute_quota", quota("Deleted"), {"ComputeQuotaId": QUOTA_ID})
    assert delete_wait(client) == {"IsComplete": True}


def test_the_delete_wait_fails_with_sagemakers_reason_when_the_delete_fails(sagemaker):
    client, stub = sagemaker
    reason = "Compute quota is in use by running tasks"
    stub.add_response(
        "describe_compute_quota", quota("DeleteFailed", FailureReason=reason), {"ComputeQuotaId": QUOTA_ID}
    )
    with pytest.raises(GovernanceError) as failure:
        delete_wait(client)
    assert str(failure.value) == f"ComputeQuota 'team-a' ({QUOTA_ARN}) is DeleteFailed: {reason}"


def test_a_quota_whose_create_failed_is_deleted_not_reported(sagemaker):
    """CreateFailed is not a failed delete: the quota still exists and is deleted; the stack's delete goes on."""
    client, stub = sagemaker
    stub.add_response("describe_compute_quota", quota("CreateFailed"), {"ComputeQuotaId": QUOTA_ID})
    stub.add_response("delete_compute_quota", {}, {"ComputeQuotaId": QUOTA_ID})
    assert delete_wait(client) == {"IsComplete": False}
    stub.assert_no_pending_responses()


def test_the_delete_wait_fails_when_sagemaker_cannot_be_read(sagemaker):
    """Only ResourceNotFound means gone; any other error fails the wait rather than report a quota deleted."""
    client, stub = sagemaker
    stub.add_client_error("describe_compute_quota", service_error_code="AccessDeniedException", http_status_code=400)
    with pytest.raises(ClientError, match="AccessDeniedException"):
        delete_wait(client)


# --- is_complete after Create or Update ---------------------------------------------------------------------------


def create_wait(client):
    request = cfn_event("Create", QUOTA_PROPS)
    return governance.is_complete(is_complete_event(request, {"PhysicalResourceId": QUOTA_ARN}), None, sagemaker=client)


@pytest.mark.parametrize("status", ["Deleting", "Deleted"])
def test_a_quota_deleted_while_it_is_created_fails_the_create(sagemaker, status):
    client, stub = sagemaker
    stub.add_response("describe_compute_quota", quota(status), {"ComputeQuotaId": QUOTA_ID})
    with pytest.raises(
        GovernanceError, match=f"^ComputeQuota {QUOTA_ID} is {status} \\(deleted outside this stack\\?\\)$"
    ):
        create_wait(client)


def test_a_quota_gone_while_it_is_created_fails_the_create(sagemaker):
    client, stub = sagemaker
    stub.add_client_error(
        "describe_compute_quota",
        service_error_code="ResourceNotFound",
        http_status_code=404,
        service_message="Compute quota not found",
    )
    with pytest.raises(
        GovernanceError,
        match=f"^ComputeQuota {QUOTA_ID} disappeared while waiting for it: ResourceNotFound: Compute quota not found$",
    ):
        create_wait(client)


@pytest.mark.parametrize("length, shown", [(1000, "r" * 1000), (1001, "r" * 1000 + "...")])
def test_a_long_failure_reason_is_cut_after_1000_characters(sagemaker, length, shown):
    client, stub = sagemaker
    stub.add_response(
        "describe_compute_quota", quota("CreateFailed", FailureReason="r" * length), {"ComputeQuotaId": QUOTA_ID}
    )
    with pytest.raises(GovernanceError) as failure:
        create_wait(client)
    assert str(failure.value) == f"ComputeQuota 'team-a' ({QUOTA_ARN}) is CreateFailed: {shown}"


# --- types SageMaker may add to these operations ----------------------------------------------------------------


def test_booleans_longs_doubles_and_maps_are_converted_as_the_model_declares(sagemaker):
    """CreateComputeQuota and CreateClusterSchedulerConfig (botocore 1.44) declare only strings, integers and floats,
    but the function runs with Lambda's boto3, whose model may add members of the other types. Real SageMaker shapes
    that have them: what CloudFormation's strings become passes botocore's own validation of that shape."""
    client, _ = sagemaker
    model = client.meta.service_model
    profiler = model.shape_for("ProfilerConfig")
    converted = governance.coerce(
        {"S3OutputPath": "s3://b/p", "ProfilingIntervalInMilliseconds": "500", "DisableProfiler": " True "}, profiler
    )
    assert converted == {"S3OutputPath": "s3://b/p", "ProfilingIntervalInMilliseconds": 500, "DisableProfiler": True}
    assert governance.coerce({"DisableProfiler": "false"}, profiler) == {"DisableProfiler": False}
    trial = model.operation_model("CreateTrialComponent").input_shape
    parameters = {
        "TrialComponentName": "t",
        "Parameters": {"lr": {"NumberValue": "0.01"}, "opt": {"StringValue": "adam"}},
    }
    converted = governance.coerce(parameters, trial)
    assert converted["Parameters"] == {"lr": {"NumberValue": 0.01}, "opt": {"StringValue": "adam"}}
    validator = botocore.validate.ParamValidator()
    assert not validator.validate(converted, trial).has_errors()
    with pytest.raises(GovernanceError, match="^DisableProfiler must be true or false, got 'yes'$"):
        governance.coerce({"DisableProfiler": "yes"}, profiler)
