"""The events a handler receives: CloudFormation's custom-resource requests (through the Provider framework), the
framework's is_complete event, and EventBridge's delivery of a CloudTrail-recorded CreateUserProfile call."""

from __future__ import annotations

from typing import Any, Mapping

PROVIDER_TOKEN = "arn:aws:lambda:us-east-1:111122223333:function:provider"
# Who called the API, as CloudTrail records a person using the AWS CLI.
USER_CALL = {
    "userIdentity": {"type": "AssumedRole", "arn": "arn:aws:sts::111122223333:assumed-role/Admin/alice"},
    "sourceIPAddress": "203.0.113.7",
    "userAgent": "aws-cli/2.22.0",
}


def custom_resource_event(
    request_type: str,
    properties: Mapping[str, Any],
    *,
    logical_id: str = "Resource",
    resource_type: str = "Custom::Resource",
    old_properties: Mapping[str, Any] | None = None,
    physical_id: str | None = None,
) -> dict[str, Any]:
    """A Create, Update or Delete request as CloudFormation sends it (the fields of the custom resource request
    reference); Update and Delete carry the physical id, Update the old properties."""
    event: dict[str, Any] = {
        "RequestType": request_type,
        "RequestId": "req-1",
        "StackId": "arn:aws:cloudformation:stack",
        "LogicalResourceId": logical_id,
        "ResourceType": resource_type,
        "ResponseURL": "https://example.invalid",
        "ResourceProperties": dict(properties),
    }
    if old_properties is not None:
        event["OldResourceProperties"] = dict(old_properties)
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def is_complete_event(request: Mapping[str, Any], on_event_response: Mapping[str, Any]) -> dict[str, Any]:
    """What the Provider framework hands is_complete: the request merged with on_event's response."""
    return {**request, **on_event_response}


def create_user_profile_event(
    domain_id: str,
    name: str,
    *,
    event_id: str,
    delivery_id: str = "eb-delivery-1",
    tags: list[dict[str, str]] | None = None,
    **detail: Any,
) -> dict[str, Any]:
    """EventBridge's delivery of a CreateUserProfile call CloudTrail recorded ("AWS API Call via CloudTrail");
    `detail` replaces fields of the record (who called, errorCode, ...)."""
    params: dict[str, Any] = {"domainId": domain_id, "userProfileName": name}
    if tags is not None:
        params["tags"] = tags
    return {
        "version": "0",
        "id": delivery_id,
        "source": "aws.sagemaker",
        "detail-type": "AWS API Call via CloudTrail",
        "detail": {
            "eventSource": "sagemaker.amazonaws.com",
            "eventName": "CreateUserProfile",
            "eventID": event_id,
            **USER_CALL,
            "requestParameters": params,
            **detail,
        },
    }
