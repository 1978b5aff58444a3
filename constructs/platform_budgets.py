"""AWS Budgets for the cluster and its departments, alerting to the platform's encrypted topic and to e-mail.

A budget counts the cost of what carries a cost allocation tag: CostFilters `TagKeyValue` takes `user:<key>$<value>`
(AWS::Budgets::Budget BudgetData, CostFilters; https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
aws-properties-budgets-budget-budgetdata.html). A tag counts only once it is activated as a cost allocation tag, an
account-level (in an organization: management-account) setting docs/slurm-departments.md ("Spend") activates with one
command; nothing here can.

Budgets publishes to an SNS topic only if the topic policy lets budgets.amazonaws.com, and, for an encrypted topic,
the key lets it encrypt (https://docs.aws.amazon.com/cost-management/latest/userguide/budgets-sns-policy.html).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct


@dataclass(frozen=True)
class BudgetSpec:
    id: str  # construct id
    name: str  # BudgetName prefix, unique in the account
    tag_key: str
    tag_value: str
    monthly_usd: int
    emails: tuple[str, ...]
    # The budget's own tags (ResourceTags; the Tags aspect does not reach this property).
    resource_tags: tuple[tuple[str, str], ...] = ()


class PlatformBudgets(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        specs: Sequence[BudgetSpec],
        thresholds_percent: Sequence[int],
        topic: sns.ITopic | None,
        topic_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        if topic is not None:
            source = {
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:budgets::{stack.account}:*"},
            }
            topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="BudgetsPublish",
                    principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
                    actions=["sns:Publish"],
                    resources=[topic.topic_arn],
                    conditions=source,
                )
            )
            if topic_key is not None:  # in a key policy "*" means this key
                topic_key.add_to_resource_policy(
                    iam.PolicyStatement(
                        sid="BudgetsEncrypt",
                        principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
                        actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                        resources=["*"],
                        conditions=source,
                    )
                )
        self.budgets = [self._budget(spec, thresholds_percent, topic) for spec in specs]

    def _budget(self, spec: BudgetSpec, thresholds: Sequence[int], topic: sns.ITopic | None) -> budgets.CfnBudget:
        subscribers = [budgets.CfnBudget.SubscriberProperty(subscription_type="EMAIL", address=a) for a in spec.emails]
        if topic is not None:
            subscribers.append(budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn))
        # BudgetName and NotificationsWithSubscribers are create-only (the resource schema): a change of thresholds
        # or recipients replaces the budget, and CloudFormation creates the new one before deleting the old, so the
        # name carries a digest of what would force that.
        digest = hashlib.sha256(json.dumps([list(thresholds), list(spec.emails), topic is not None]).encode())
        return budgets.CfnBudget(
            self,
            spec.id,
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{spec.name}-{digest.hexdigest()[:8]}",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=spec.monthly_usd, unit="USD"),
                cost_filters={"TagKeyValue": [f"user:{spec.tag_key}${spec.tag_value}"]},
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type="ACTUAL",
                        comparison_operator="GREATER_THAN",
                        threshold=t,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=subscribers,
                )
                for t in thresholds
            ],
            resource_tags=[budgets.CfnBudget.ResourceTagProperty(key=k, value=v) for k, v in spec.resource_tags]
            or None,
        )
