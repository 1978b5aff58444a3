"""custom_resources.Provider handlers for HyperPod task governance where CloudFormation lacks the native types.

Custom::ClusterSchedulerConfig and Custom::ComputeQuota take exactly the properties of
AWS::SageMaker::ClusterSchedulerConfig and AWS::SageMaker::ComputeQuota, so a stack passes one property dict to
either. CloudFormation hands custom resources every value as a string; each is converted to the type the SageMaker
API model declares for it. The physical id is the resource's ARN, as for the native types.

on_event creates, updates or deletes; is_complete waits until SageMaker reports the resource Created/Updated (or
gone, after a delete) and fails with SageMaker's FailureReason. Changing a createOnlyProperty of the CloudFormation
schema creates a replacement and returns its ARN; CloudFormation then deletes the old resource.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

from botocore import xform_name
from botocore.exceptions import ClientError

import aws_clients

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

SETTLED = frozenset({"Created", "Updated"})
BUSY = frozenset({"Creating", "Updating", "Deleting"})
MAX_REASON = 1000  # CloudFormation shows the whole failure reason; keep room for the context around it
# Every resource the handler creates carries the stack and logical id that own it. Only a resource with this tag
# is adopted (a retried create) or deleted; a same-named resource made by hand or by another stack is left alone.
OWNER_TAG = "hyperpod-platform:owner"


@dataclass(frozen=True)
class Kind:
    noun: str  # the API's noun: CreateComputeQuota, ComputeQuotaArn, ...
    arn_resource: str  # arn:<partition>:sagemaker:<region>:<account>:<arn_resource>/<id>
    create_only: tuple[tuple[str, ...], ...]  # createOnlyProperties of the CloudFormation schema

    def key(self, suffix: str) -> str:
        return f"{self.noun}{suffix}"


KINDS = {
    "Custom::ClusterSchedulerConfig": Kind(
        "ClusterSchedulerConfig", "cluster-scheduler-config", (("Name",), ("ClusterArn",))
    ),
    "Custom::ComputeQuota": Kind(
        "ComputeQuota", "compute-quota", (("Name",), ("ClusterArn",), ("ComputeQuotaTarget", "TeamName"))
    ),
}


class GovernanceError(RuntimeError):
    """Fails the CloudFormation operation; the message is what the stack events show."""


def client():
    """Eleven attempts in all ride out the burst of a stack creating or updating every team's quota at once."""
    return aws_clients.client("sagemaker", max_attempts=11)


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def describe_error(error: ClientError) -> str:
    return f"{error_code(error)}: {error.response.get('Error', {}).get('Message', '')}"


# --- CloudFormation strings -> API types -----------------------------------------------------------------------


def coerce(value: Any, shape, path: str = "") -> Any:
    """Convert CloudFormation's strings to the types of the botocore shape, recursively. Unknown or missing
    (required) keys fail, named by their path."""
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, Mapping):
            raise GovernanceError(f"{path or 'properties'} must be an object, got {value!r}")
        unknown = sorted(set(value) - set(shape.members))
        if unknown:
            raise GovernanceError(
                f"unknown propert{'y' if len(unknown) == 1 else 'ies'} "
                f"{', '.join(_join(path, name) for name in unknown)}; "
                f"allowed: {', '.join(shape.members)}"
            )
        missing = [name for name in shape.required_members if name not in value]
        if missing:
            raise GovernanceError(
                f"missing required propert{'y' if len(missing) == 1 else 'ies'} "
                f"{', '.join(_join(path, name) for name in missing)}"
            )
        return {name: coerce(item, shape.members[name], _join(path, name)) for name, item in value.items()}
    if kind == "list":
        if not isinstance(value, list):
            raise GovernanceError(f"{path} must be a list, got {value!r}")
        return [coerce(item, shape.member, f"{path}[{index}]") for index, item in enumerate(value)]
    if kind == "map":
        return {key: coerce(item, shape.value, _join(path, key)) for key, item in value.items()}
    if kind in ("integer", "long"):
        return _convert(value, path, "an integer", int)
    if kind in ("float", "double"):
        return _convert(value, path, "a number", float)
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if str(value).strip().lower() in ("true", "false"):
            return str(value).strip().lower() == "true"
        raise GovernanceError(f"{path} must be true or false, got {value!r}")
    return value


def _convert(value: Any, path: str, what: str, to: type) -> Any:
    if isinstance(value, bool):
        raise GovernanceError(f"{path} must be {what}, got {value!r}")
    if isinstance(value, to):
        return value
    try:
        return to(str(value).strip())
    except ValueError:
        raise GovernanceError(f"{path} must be {what}, got {value!r}") from None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def value_at(props: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = props
    for name in path:
        value = value.get(name) if isinstance(value, Mapping) else None
    return value


def properties(event: Mapping[str, Any], key: str = "ResourceProperties") -> dict[str, Any]:
    return {name: value for name, value in (event.get(key) or {}).items() if name != "ServiceToken"}


# --- one kind's API --------------------------------------------------------------------------------------------


class Api:
    """The SageMaker operations of one kind, called with CloudFormation-shaped properties."""

    def __init__(self, sagemaker, kind: Kind) -> None:
        self.sagemaker = sagemaker
        self.kind = kind

    def call(self, verb: str, **params: Any) -> dict[str, Any]:
        return getattr(self.sagemaker, xform_name(f"{verb}{self.kind.noun}"))(**params)

    def params(self, verb: str, props: Mapping[str, Any]) -> dict[str, Any]:
        """Properties as `verb` takes them. All properties are checked against Create (the CloudFormation
        property set); Update then takes the members it has (not Name, ClusterArn or Tags)."""
        model = self.sagemaker.meta.service_model
        converted = coerce(props, model.operation_model(f"Create{self.kind.noun}").input_shape)
        members = model.operation_model(f"{verb}{self.kind.noun}").input_shape.members
        return {name: value for name, value in converted.items() if name in members}

    def id_of(self, arn: str) -> str | None:
        marker = f":{self.kind.arn_resource}/"
        return arn.rsplit("/", 1)[1] if arn.startswith("arn:") and marker in arn else None

    def describe(self, resource_id: str) -> dict[str, Any]:
        return self.call("Describe", **{self.kind.key("Id"): resource_id})

    def find(self, name: str, cluster_arn: str, *, excluding: str | None) -> dict[str, Any] | None:
        """A live resource with this Name on this cluster, other than `excluding` (the one being replaced)."""
        paginator = self.sagemaker.get_paginator(xform_name(f"List{self.kind.noun}s"))
        for page in paginator.paginate(NameContains=name, ClusterArn=cluster_arn):
            for summary in page.get(self.kind.key("Summaries"), []):
                if (
                    summary["Name"] == name
                    and summary.get("ClusterArn") == cluster_arn
                    and summary[self.kind.key("Arn")] != excluding
                    and summary["Status"] not in ("Deleting", "Deleted")
                ):
                    return summary
        return None

    def owner_of(self, arn: str) -> str | None:
        tags = self.sagemaker.list_tags(ResourceArn=arn).get("Tags", [])
        return next((tag["Value"] for tag in tags if tag["Key"] == OWNER_TAG), None)

    def failure(self, described: Mapping[str, Any]) -> str:
        reason = described.get("FailureReason") or "SageMaker gave no reason"
        if len(reason) > MAX_REASON:
            reason = reason[:MAX_REASON] + "..."
        return (
            f"{self.kind.noun} {described.get('Name', '')!r} ({described[self.kind.key('Arn')]}) is "
            f"{described['Status']}: {reason}"
        )


def _response(arn: str, resource_id: str, expected_version: int | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"PhysicalResourceId": arn, "Data": {"Arn": arn, "Id": resource_id}}
    if expected_version is not None:
        # The Provider passes on_event's response to is_complete but sends only PhysicalResourceId and Data to
        # CloudFormation, so this is is_complete's alone: a describe just after the update may still show the
        # previous version as Created.
        response["ExpectedVersion"] = expected_version
    return response


# --- Create / Update / Delete ------------------------------------------------------------------------------------


def owner(event: Mapping[str, Any]) -> str:
    return f"{event.get('StackId', '')}/{event.get('LogicalResourceId', '')}"[-256:]


def create(api: Api, props: Mapping[str, Any], *, owned_by: str, replacing: str | None = None) -> dict[str, Any]:
    params = api.params("Create", props)
    params["Tags"] = [*params.get("Tags", []), {"Key": OWNER_TAG, "Value": owned_by}]
    name, cluster_arn = params.get("Name", ""), params.get("ClusterArn", "")
    existing = api.find(name, cluster_arn, excluding=replacing)
    if existing:
        arn, resource_id = existing[api.kind.key("Arn")], existing[api.kind.key("Id")]
        if api.owner_of(arn) != owned_by:
            raise GovernanceError(
                f"{api.kind.noun} {name!r} already exists on {cluster_arn} ({arn}) and was not created by this "
                f"stack resource; it is left alone: delete or rename it, or give this one another name"
            )
        # A retried Create: the first attempt timed out after SageMaker accepted it.
        LOG.info("adopting %s %s (%s) in %s", api.kind.noun, name, existing["Status"], arn)
        expected = None
        if existing["Status"] in SETTLED:
            expected = apply(api, resource_id, props)
            sync_tags(api, arn, params["Tags"], [{"Key": OWNER_TAG, "Value": owned_by}])
        return _response(arn, resource_id, expected)
    try:
        created = api.call("Create", **params)
    except ClientError as error:
        raise GovernanceError(
            f"Create{api.kind.noun} {name!r} on {cluster_arn} failed: {describe_error(error)}"
        ) from error
    LOG.info("created %s %s: %s", api.kind.noun, name, created[api.kind.key("Arn")])
    return _response(created[api.kind.key("Arn")], created[api.kind.key("Id")])


def update(
    api: Api, physical_id: str, props: Mapping[str, Any], old_props: Mapping[str, Any], *, owned_by: str
) -> dict[str, Any]:
    changed = [".".join(path) for path in api.kind.create_only if value_at(props, path) != value_at(old_props, path)]
    if changed:
        same_place = all(value_at(props, (key,)) == value_at(old_props, (key,)) for key in ("Name", "ClusterArn"))
        if same_place:
            raise GovernanceError(
                f"{', '.join(changed)} cannot change unless Name (or ClusterArn) changes too: the replacement is "
                f"created before {physical_id} is deleted, and names are unique within a cluster"
            )
        LOG.info("%s changed: replacing %s", ", ".join(changed), physical_id)
        return create(api, props, owned_by=owned_by, replacing=physical_id)

    resource_id = api.id_of(physical_id)
    if resource_id is None:
        raise GovernanceError(f"physical id {physical_id!r} is not a {api.kind.arn_resource} ARN")
    params = api.params("Create", props)  # checks every property, Tags included
    expected = None
    if api.params("Update", props) != api.params("Update", old_props):
        expected = apply(api, resource_id, props)
    sync_tags(api, physical_id, params.get("Tags", []), api.params("Create", old_props).get("Tags", []))
    return _response(physical_id, resource_id, expected)


def apply(api: Api, resource_id: str, props: Mapping[str, Any]) -> int:
    """Update in place against the current version; returns the version the update produces."""
    try:
        current = api.describe(resource_id)
        updated = api.call(
            "Update",
            **{
                api.kind.key("Id"): resource_id,
                "TargetVersion": current[api.kind.key("Version")],
                **api.params("Update", props),
            },
        )
    except ClientError as error:
        raise GovernanceError(f"Update{api.kind.noun} {resource_id} failed: {describe_error(error)}") from error
    LOG.info("updating %s %s to version %s", api.kind.noun, resource_id, updated[api.kind.key("Version")])
    return updated[api.kind.key("Version")]


def sync_tags(api: Api, arn: str, tags: list[dict[str, str]], old_tags: list[dict[str, str]]) -> None:
    """Update has no Tags; the native types tag through AddTags/DeleteTags, and so do we."""
    wanted = {tag["Key"]: tag["Value"] for tag in tags}
    previous = {tag["Key"]: tag["Value"] for tag in old_tags}
    removed = sorted(set(previous) - set(wanted))
    if removed:
        api.sagemaker.delete_tags(ResourceArn=arn, TagKeys=removed)
    if any(previous.get(key) != value for key, value in wanted.items()):
        api.sagemaker.add_tags(ResourceArn=arn, Tags=tags)


def delete(api: Api, resource_id: str) -> None:
    """Start the delete. NotFound is success; a busy resource (Creating/Updating) is retried by is_complete."""
    try:
        api.call("Delete", **{api.kind.key("Id"): resource_id})
    except ClientError as error:
        code = error_code(error)
        if code == "ResourceNotFound":
            LOG.info("%s %s is already gone", api.kind.noun, resource_id)
        elif code == "ConflictException":
            LOG.warning(
                "%s %s cannot be deleted yet (%s); will retry", api.kind.noun, resource_id, describe_error(error)
            )
        else:
            raise GovernanceError(f"Delete{api.kind.noun} {resource_id} failed: {describe_error(error)}") from error


# --- handlers ------------------------------------------------------------------------------------------------------


def _api(event: Mapping[str, Any], sagemaker) -> Api:
    resource_type = event.get("ResourceType", "")
    if resource_type not in KINDS:
        raise GovernanceError(f"unsupported ResourceType {resource_type!r}; expected one of {', '.join(KINDS)}")
    return Api(sagemaker or client(), KINDS[resource_type])


def on_event(event: Mapping[str, Any], _context: Any = None, *, sagemaker=None) -> dict[str, Any]:
    request = event["RequestType"]
    LOG.info("%s %s %s", request, event.get("ResourceType"), event.get("PhysicalResourceId", "(new)"))
    api = _api(event, sagemaker)
    if request == "Create":
        return create(api, properties(event), owned_by=owner(event))
    if request == "Update":
        return update(
            api,
            event["PhysicalResourceId"],
            properties(event),
            properties(event, "OldResourceProperties"),
            owned_by=owner(event),
        )
    if request == "Delete":
        physical_id = event["PhysicalResourceId"]
        resource_id = api.id_of(physical_id)
        if resource_id is None:
            LOG.info("%s is not a %s ARN; nothing to delete", physical_id, api.kind.arn_resource)
            return {"PhysicalResourceId": physical_id}
        try:
            owned = api.owner_of(physical_id) == owner(event)
        except ClientError as error:
            if error_code(error) != "ResourceNotFound":
                raise
            owned = True  # already gone: is_complete confirms it
        if not owned:
            LOG.warning("%s is not tagged as created by this stack resource; leaving it", physical_id)
            return {"PhysicalResourceId": physical_id, "NotOwned": True}
        delete(api, resource_id)
        return {"PhysicalResourceId": physical_id}
    raise GovernanceError(f"unknown RequestType {request!r}")


def is_complete(event: Mapping[str, Any], _context: Any = None, *, sagemaker=None) -> dict[str, Any]:
    """The Provider passes the on_event request merged with on_event's response, so PhysicalResourceId is the
    resource on_event created or updated. "Data" must be absent while IsComplete is false."""
    api = _api(event, sagemaker)
    resource_id = api.id_of(event["PhysicalResourceId"])
    if event["RequestType"] == "Delete":
        return {"IsComplete": resource_id is None or bool(event.get("NotOwned")) or _deleted(api, resource_id)}
    if resource_id is None:
        raise GovernanceError(f"physical id {event['PhysicalResourceId']!r} is not a {api.kind.arn_resource} ARN")
    try:
        described = api.describe(resource_id)
    except ClientError as error:
        raise GovernanceError(
            f"{api.kind.noun} {resource_id} disappeared while waiting for it: {describe_error(error)}"
        ) from error
    status = described["Status"]
    if status.endswith("Failed"):
        raise GovernanceError(api.failure(described))
    if status in ("Deleting", "Deleted"):
        raise GovernanceError(f"{api.kind.noun} {resource_id} is {status} (deleted outside this stack?)")
    version = described.get(api.kind.key("Version"), 0)
    done = status in SETTLED and version >= event.get("ExpectedVersion", 0)
    LOG.info("%s %s is %s (version %s)", api.kind.noun, resource_id, status, version)
    return {"IsComplete": done}


def _deleted(api: Api, resource_id: str) -> bool:
    try:
        described = api.describe(resource_id)
    except ClientError as error:
        if error_code(error) == "ResourceNotFound":
            return True
        raise
    status = described["Status"]
    if status == "Deleted":
        return True
    if status.startswith("Delete") and status.endswith("Failed"):
        raise GovernanceError(api.failure(described))
    if status not in BUSY:
        delete(api, resource_id)  # on_event's delete was refused while the resource was busy
    return False
