"""The events a custom-resource handler receives: from CloudFormation through the Provider framework (on_event), and
the framework's is_complete event."""
from __future__ import annotations

from typing import Any, Mapping

PROVIDER_TOKEN = "arn:aws:lambda:us-east-1:111122223333:function:provider"


def custom_resource_event(request_type: str, properties: Mapping[str, Any], *, logical_id: str = "Resource",
                          resource_type: str = "Custom::Resource", old_properties: Mapping[str, Any] | None = None,
                          physical_id: str | None = None) -> dict[str, Any]:
    """A Create, Update or Delete request as CloudFormation sends it (the fields of the custom resource request
    reference); Update and Delete carry the physical id, Update the old properties."""
    event: dict[str, Any] = {
        "RequestType": request_type, "RequestId": "req-1", "StackId": "arn:aws:cloudformation:stack",
        "LogicalResourceId": logical_id, "ResourceType": resource_type, "ResponseURL": "https://example.invalid",
        "ResourceProperties": dict(properties)}
    if old_properties is not None:
        event["OldResourceProperties"] = dict(old_properties)
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def is_complete_event(request: Mapping[str, Any], on_event_response: Mapping[str, Any]) -> dict[str, Any]:
    """What the Provider framework hands is_complete: the request merged with on_event's response."""
    return {**request, **on_event_response}
