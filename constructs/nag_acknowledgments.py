"""cdk-nag 3 acknowledgments: one rule, one reason, narrowed to the exact findings where the rule has them."""
from __future__ import annotations

from typing import Any, Iterable

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: Iterable[str] = ()) -> None:
    """Acknowledge `rule` (e.g. "AwsSolutions-IAM5") on `scope` and its children.

    cdk-nag matches acknowledgments exactly, so for rules that report findings (IAM4, IAM5) each finding
    (e.g. "Resource::*") is acknowledged by name and any new wildcard still fails synth. Findings may hold
    tokens (a bucket ARN); they are rendered the way cdk-nag prints them (`<AWS::AccountId>`).
    """
    ids = [f"{rule}[{nag_text(scope, finding)}]" for finding in findings] or [rule]
    for rule_id in ids:
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def nag_text(scope: IConstruct, value: str) -> str:
    return _render(cdk.Stack.of(scope).resolve(value))


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_render(part) for part in parts)
    raise ValueError(f"cannot render {value!r} as cdk-nag prints it")
