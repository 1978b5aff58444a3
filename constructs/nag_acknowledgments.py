"""cdk-nag 3 acknowledgments: one rule, one reason, narrowed to the exact findings where the rule has them."""

from __future__ import annotations

from typing import Any, NamedTuple, cast
from collections.abc import Iterable, Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: Iterable[str] = ()) -> None:
    """Acknowledge `rule` (e.g. "AwsSolutions-IAM5") on `scope` and its children.

    cdk-nag matches acknowledgments exactly, so for rules that report findings (IAM4, IAM5) each finding
    (e.g. "Resource::*") is acknowledged by name and any new wildcard still fails synth. Findings may hold
    tokens (a bucket ARN); they are rendered the way cdk-nag prints them (`<AWS::AccountId>`).
    """
    acknowledge_rules(scope, [Rule(rule, reason, findings)])


class Rule(NamedTuple):
    """A rule to acknowledge, why, and its findings (as for `acknowledge`)."""

    rule: str
    reason: str
    findings: Iterable[str] = ()


def acknowledge_rules(scope: IConstruct, rules: Iterable[Rule]) -> None:
    """`acknowledge` for several rules on one scope, in their order: one call into aws-cdk-lib, which records each
    acknowledgment as `acknowledge` one at a time would (a jsii round trip costs ~1 ms of CPU)."""
    rules = [Rule(rule.rule, rule.reason, list(rule.findings)) for rule in rules]
    rendered = _render_findings(scope, [finding for rule in rules for finding in rule.findings])
    acknowledgments = [
        cdk.Acknowledgment(id=rule_id, reason=rule.reason)
        for rule in rules
        for rule_id in ([f"{rule.rule}[{rendered[finding]}]" for finding in rule.findings] or [rule.rule])
    ]
    cdk.Validations.of(scope).acknowledge(*acknowledgments)


def nag_text(scope: IConstruct, value: str) -> str:
    return _render_findings(scope, [value])[value]


def _render_findings(scope: IConstruct, findings: Iterable[str]) -> dict[str, str]:
    """Each finding as cdk-nag prints it. Only a string that holds a token (aws-cdk-lib encodes one as
    "${Token[...]}", a list element as "#{Token[...]}") is resolved, all of them by one call to the scope's stack:
    resolving any other string gives it back unchanged, and each call into the jsii kernel is a round trip."""
    rendered = {finding: finding for finding in findings}
    # By key, as a mapping: aws-cdk-lib resolves each value on its own (a list would be read as one list token if
    # an element held one).
    tokens = {str(i): finding for i, finding in enumerate(f for f in rendered if "${Token[" in f or "#{Token[" in f)}
    if tokens:
        resolved = cdk.Stack.of(scope).resolve(tokens)
        rendered.update((finding, _render(resolved[key])) for key, finding in tokens.items())
    return rendered


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


def acknowledge_provider(provider: cr.Provider, handlers: Sequence[lambda_.Function]) -> None:
    """What aws-cdk-lib's custom-resource Provider framework brings with it, for a provider of `handlers`."""
    acknowledge_rules(
        provider,
        [
            Rule(
                "AwsSolutions-IAM4",
                "aws-cdk-lib's custom-resource Provider framework functions log through the basic execution policy",
                findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
            ),
            Rule("AwsSolutions-L1", "the Provider framework's runtime is chosen by aws-cdk-lib, not by this project"),
            Rule(
                "AwsSolutions-IAM5",
                "the Provider framework invokes this construct's handlers and its own functions, by any version "
                "('<arn>:*'), as aws-cdk-lib grants it",
                findings=[f"Resource::{fn.function_arn}:*" for fn in handlers]
                + [
                    # jsii types default_child as IConstruct | None; a Function's is its CfnFunction.
                    f"Resource::{cast(lambda_.CfnFunction, child.node.default_child).attr_arn}:*"
                    for child in provider.node.children
                    if isinstance(child, lambda_.Function) and child.node.id != "framework-onEvent"
                ],
            ),
        ],
    )
    waiter = provider.node.try_find_child("waiter-state-machine")
    if waiter is not None:
        acknowledge(
            waiter,
            "AwsSolutions-IAM5",
            "Step Functions' CloudWatch Logs delivery actions support no resource-level permissions; this "
            "role only delivers the waiter's execution logs",
            findings=["Resource::*"],
        )
        acknowledge(
            provider,
            "AwsSolutions-SF2",
            "the Provider's waiter state machine only polls is_complete; its executions are logged (SF1) "
            "and X-Ray tracing would add no insight into a single Lambda poll",
        )
