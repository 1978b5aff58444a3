"""The IAM statements of a template: what a role is granted, what a resource policy allows."""

from __future__ import annotations

from typing import Any

POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
# The property holding a resource policy's document, by resource type.
RESOURCE_POLICY_DOCUMENT = {
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::KMS::Key": "KeyPolicy",
    "AWS::SecretsManager::ResourcePolicy": "ResourcePolicy",
}


def listed(value: Any) -> list:
    """An IAM field that may be one value or a list, as a list."""
    return value if isinstance(value, list) else [value]


def actions(statement: dict[str, Any]) -> list[str]:
    return listed(statement.get("Action", []))


def _is_role(reference: Any, role: str, prefix: bool) -> bool:
    name = reference.get("Ref", "") if isinstance(reference, dict) else ""
    return name.startswith(role) if prefix else name == role


def statements_of(template: dict[str, Any], role: str, *, prefix: bool = False) -> list[dict[str, Any]]:
    """Every statement granted to the role with logical id `role` (with prefix=True: every role whose id starts so,
    CDK's ids ending in a hash): its inline policies, then each AWS::IAM::Policy or ManagedPolicy attached to it."""
    found = []
    for lid, resource in template["Resources"].items():
        if resource["Type"] == "AWS::IAM::Role" and (lid.startswith(role) if prefix else lid == role):
            found += [s for p in resource["Properties"].get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] in POLICY_TYPES and any(_is_role(r, role, prefix) for r in props.get("Roles", [])):
            found += props["PolicyDocument"]["Statement"]
    return found


def statements_by_role(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The statements of every AWS::IAM::Policy of the template, by the logical id of each role it is attached to."""
    out: dict[str, list[dict[str, Any]]] = {}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy":
            for role in resource["Properties"].get("Roles", []):
                out.setdefault(role["Ref"], []).extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return out


def by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The statements that have a Sid, by it (fails on two with one Sid: the later would hide the earlier)."""
    out: dict[str, dict[str, Any]] = {}
    for statement in statements:
        if (sid := statement.get("Sid")) is not None:
            assert sid not in out, f"two statements with Sid {sid}"
            out[sid] = statement
    return out


def resource_policy_statements(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    """The statements of every resource policy of one type (bucket, topic, queue, key or secret policies)."""
    field = RESOURCE_POLICY_DOCUMENT[type_]
    return [
        s for r in template["Resources"].values() if r["Type"] == type_ for s in r["Properties"][field]["Statement"]
    ]
