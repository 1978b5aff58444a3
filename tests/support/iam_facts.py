"""Checks of synthesized IAM statements against the Service Authorization Reference facts
(config/facts/iam_actions.json, tools/iam_action_facts.py)."""

from __future__ import annotations

import json
from typing import Any, Iterator

from support.paths import ROOT

FACTS = json.loads((ROOT / "config" / "facts" / "iam_actions.json").read_text())
ACTIONS: dict[str, dict] = FACTS["actions"]


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def statements(template: dict) -> Iterator[tuple[str, dict]]:
    """(logical id of the policy, statement) for every inline and managed policy of a template."""
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                yield logical_id, statement
        elif resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                for statement in policy["PolicyDocument"]["Statement"]:
                    yield logical_id, statement


def scoping_errors(template: dict) -> list[str]:
    """Statements granting an action of the facts on resources the action cannot be scoped to: an ARN for an action
    that authorizes no resource type (IAM then matches nothing: the call is denied), or a resource-type condition the
    action's resource types do not accept."""
    errors = []
    for logical_id, statement in statements(template):
        if statement.get("Effect") != "Allow":
            continue
        resources = as_list(statement.get("Resource", []))
        for action in as_list(statement.get("Action", [])):
            facts = ACTIONS.get(action)
            if facts is None:
                continue
            if not facts["resource_types"] and resources != ["*"]:
                errors.append(
                    f"{logical_id}: {action} authorizes no resource type, but the statement names "
                    f"{json.dumps(resources)} (only '*' matches)"
                )
    return errors
