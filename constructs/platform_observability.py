"""What an operator is told and shown: one encrypted SNS topic for alarms and HyperPod events, the alarms, the
EventBridge rules, the dashboard, and retention on HyperPod's own cluster log group."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Sequence

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.lambda_assets import RUNTIME, function_dir, function_log_group, handler_code
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider
from constructs.observability_dashboard import PERIOD, DashboardInputs, dashboard_body

if TYPE_CHECKING:
    from aws_cdk.interfaces.aws_events import IRuleRef

HANDLER_DIR = function_dir("cluster_log_retention")
# EventBridge detail-types HyperPod sends (source aws.sagemaker), from "SageMaker HyperPod cluster events reference",
# section "EventBridge integration":
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-events-reference.html and the payloads
# in https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html
NODE_HEALTH = "SageMaker HyperPod Cluster Node Health Event"  # detail.ClusterName, detail.HealthSummary
STATE_CHANGE = "SageMaker HyperPod Cluster State Change"  # detail.ClusterName, detail.ClusterStatus
CLUSTER_EVENT = (
    "SageMaker HyperPod Cluster Event"  # detail.EventDetails.{ClusterName, EventLevel}; Continuous mode only
)


def platform_functions(stacks: Sequence[cdk.Stack]) -> list[tuple[str, lambda_.Function]]:
    """The Lambda functions the platform's stacks deploy (custom-resource handlers, event handlers, asset uploads),
    each with a label for its alarms, without aws-cdk-lib's Provider framework functions (they only relay what a
    handler returns)."""
    found = []
    for stack in stacks:
        kind = stack.node.id.rsplit("-", 1)[-1]
        for node in stack.node.find_all():
            if not isinstance(node, lambda_.Function):
                continue
            tree = node.node  # each read of `.node` is a round trip to the jsii kernel
            if not isinstance(tree.scope, cr.Provider) and cdk.Stack.of(node) is stack:
                label = re.sub(r"[^A-Za-z0-9-]", "", "-".join(tree.path.split("/")[1:]))[:60]
                found.append((f"{kind}-{label}", node))
    return found


@jsii.implements(events.IRuleTarget)
class _TopicTarget:
    """An SNS topic as a rule's target, without the unconditioned publish grant of aws_events_targets.SnsTopic (the
    caller adds a statement conditioned on the rules' ARNs, aws:SourceArn: https://docs.aws.amazon.com/eventbridge/
    latest/userguide/eb-use-resource-based.html#eb-sns-permissions)."""

    def __init__(self, topic: sns.ITopic) -> None:
        self.topic = topic

    def bind(self, _rule: IRuleRef, _id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self.topic.topic_arn)


@dataclass(frozen=True)
class Subscription:
    protocol: str
    endpoint: str


@dataclass(frozen=True)
class LustreTargets:
    file_system_id: str
    capacity_gib: int | None  # None for a file system the platform does not own
    throughput_mb_per_tib: int | None


class PlatformObservability(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        name: str,
        cluster_name: str,
        cluster_id: str,
        lustre: LustreTargets,
        functions: Sequence[tuple[str, lambda_.IFunction]],
        dead_letter_queue: sqs.IQueue | None,
        instance_groups: Sequence[tuple[str, str]],
        subscriptions_: Sequence[Subscription],
        log_retention_days: int,
        free_capacity_percent: int,
        throughput_percent: int,
        throughput_minutes: int,
        export_backlog_minutes: int,
        cluster_log_key: kms.IKey | None = None,
    ) -> None:
        """cluster_log_key: the customer managed key HyperPod's own cluster log group is created with (or associated
        with, if HyperPod made the group first); its policy must let CloudWatch Logs use it (constructs/log_encryption)."""
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        self.topic = self._topic(name, subscriptions_)
        action = cw_actions.SnsAction(self.topic)
        self.alarms: list[cloudwatch.Alarm] = []

        def alarm(id_: str, description: str, **kwargs) -> cloudwatch.Alarm:
            created = cloudwatch.Alarm(self, id_, alarm_description=description, **kwargs)
            created.add_alarm_action(action)
            created.add_ok_action(action)
            self.alarms.append(created)
            return created

        fs = lustre.file_system_id
        capacity_bytes = lustre.capacity_gib * 1024**3 if lustre.capacity_gib else None
        # PERSISTENT_2 baseline: storage (TiB) x throughput per unit of storage, in decimal MB/s.
        baseline = (
            lustre.capacity_gib / 1024 * lustre.throughput_mb_per_tib * 1e6
            if lustre.capacity_gib and lustre.throughput_mb_per_tib
            else None
        )
        period = cdk.Duration.seconds(PERIOD)

        def fsx(metric: str, statistic: str = "Sum", **dimensions: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace="AWS/FSx",
                metric_name=metric,
                period=period,
                statistic=statistic,
                dimensions_map={"FileSystemId": fs, **dimensions},
            )

        if capacity_bytes:
            alarm(
                "FsxFreeCapacity",
                f"Less than {free_capacity_percent}% of the FSx for Lustre file system {fs} is "
                "free; jobs writing checkpoints will fail when it is full",
                metric=cloudwatch.MathExpression(
                    expression=f"100 * free / {capacity_bytes:.0f}",
                    using_metrics={"free": fsx("FreeDataStorageCapacity")},
                    label="free capacity (%)",
                    period=period,
                ),
                threshold=free_capacity_percent,
                evaluation_periods=2,
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.MISSING,
            )
        if baseline:
            periods = -(-throughput_minutes * 60 // PERIOD)
            alarm(
                "FsxThroughputHigh",
                f"FSx for Lustre {fs} ran above {throughput_percent}% of its baseline "
                f"throughput ({baseline / 1e6:,.0f} MB/s) for {throughput_minutes} minutes",
                metric=cloudwatch.MathExpression(
                    expression=f"100 * (r + w) / PERIOD(r) / {baseline:.0f}",
                    label="throughput (% of baseline)",
                    using_metrics={"r": fsx("DataReadBytes"), "w": fsx("DataWriteBytes")},
                    period=period,
                ),
                threshold=throughput_percent,
                evaluation_periods=periods,
                datapoints_to_alarm=periods,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        alarm(
            "ExportBacklog",
            f"Changes on {fs} have waited over {export_backlog_minutes} minutes for automatic "
            "export to S3; checkpoints are not yet durable (FSx publishes no export-failure metric)",
            metric=fsx("AgeOfOldestQueuedMessage", "Maximum", Publisher="AutoExport"),
            threshold=export_backlog_minutes * 60,
            evaluation_periods=2,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if dead_letter_queue is not None:
            alarm(
                "PartitionEventsDeadLetters",
                "Profile events the partition handler could not process are waiting "
                "in its dead-letter queue: some users have no FSx partition",
                metric=dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=period, statistic="Maximum"
                ),
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        for label, function in functions:
            alarm(
                f"Errors-{label}",
                f"The platform's {label} Lambda function failed",
                metric=function.metric_errors(period=period, statistic="Sum"),
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        self.rules = self._event_rules(cluster_name)
        self.cluster_log_group = f"/aws/sagemaker/Clusters/{cluster_name}/{cluster_id}"
        self.retention = self._cluster_log_retention(self.cluster_log_group, log_retention_days, cluster_log_key)
        body = dashboard_body(
            DashboardInputs(
                region=stack.region,
                file_system_id=fs,
                capacity_bytes=capacity_bytes,
                baseline_bytes_per_second=baseline,
                functions=[(label, fn.function_name) for label, fn in functions],
                dead_letter_queue=dead_letter_queue.queue_name if dead_letter_queue is not None else None,
                alarm_arns=[a.alarm_arn for a in self.alarms],
                cluster_log_group=self.cluster_log_group,
                instance_groups=instance_groups,
                free_capacity_percent=free_capacity_percent,
                throughput_percent=throughput_percent,
            )
        )
        self.dashboard = cloudwatch.CfnDashboard(
            self, "Dashboard", dashboard_name=f"{name}-platform", dashboard_body=stack.to_json_string(body)
        )

    def _topic(self, name: str, subs: Sequence[Subscription]) -> sns.Topic:
        key = kms.Key(
            self,
            "TopicKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            description=f"{name}: encrypts the platform alarm and event topic",
        )
        stack = cdk.Stack.of(self)
        # CloudWatch alarms and EventBridge publish to an encrypted topic only if the key lets them.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmsAndEventsPublish",
                principals=[
                    iam.ServicePrincipal("cloudwatch.amazonaws.com"),
                    iam.ServicePrincipal("events.amazonaws.com"),
                ],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            )
        )
        self.topic_key = key
        topic = sns.Topic(self, "Topic", display_name=f"{name} platform alarms", master_key=key, enforce_ssl=True)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            )
        )
        for sub in subs:
            topic.add_subscription(self._subscription(sub))
        return topic

    def _subscription(self, sub: Subscription) -> sns.ITopicSubscription:
        if sub.protocol == "email":
            return subscriptions.EmailSubscription(sub.endpoint)
        if sub.protocol == "sms":
            return subscriptions.SmsSubscription(sub.endpoint)
        if sub.protocol == "https":
            return subscriptions.UrlSubscription(sub.endpoint, protocol=sns.SubscriptionProtocol.HTTPS)
        if sub.protocol == "sqs":
            name = sub.endpoint.rsplit(":", 1)[1]
            return subscriptions.SqsSubscription(sqs.Queue.from_queue_arn(self, f"Queue-{name}", sub.endpoint))
        name = sub.endpoint.split(":")[6]
        return subscriptions.LambdaSubscription(
            lambda_.Function.from_function_arn(self, f"Function-{name}", sub.endpoint)
        )

    def _event_rules(self, cluster_name: str) -> list[events.Rule]:
        # Not targets.SnsTopic: it grants events.amazonaws.com sns:Publish with no condition, so any EventBridge rule
        # in any account could publish here. The topic policy below names exactly these rules.
        target = _TopicTarget(self.topic)
        patterns = {
            "NodeHealth": (
                "HyperPod node health changes (unhealthy, replaced, healthy again)",
                events.EventPattern(
                    source=["aws.sagemaker"], detail_type=[NODE_HEALTH], detail={"ClusterName": [cluster_name]}
                ),
            ),
            "ClusterState": (
                "HyperPod cluster status changes",
                events.EventPattern(
                    source=["aws.sagemaker"], detail_type=[STATE_CHANGE], detail={"ClusterName": [cluster_name]}
                ),
            ),
            "ClusterErrors": (
                "HyperPod cluster, instance-group and instance errors",
                events.EventPattern(
                    source=["aws.sagemaker"],
                    detail_type=[CLUSTER_EVENT],
                    detail={"EventDetails": {"ClusterName": [cluster_name], "EventLevel": ["Error"]}},
                ),
            ),
        }
        rules = []
        for id_, (description, pattern) in patterns.items():
            rule = events.Rule(self, id_, description=f"{cluster_name}: {description}", event_pattern=pattern)
            rule.add_target(target)
            rules.append(rule)
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PlatformRulesPublish",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"ArnEquals": {"aws:SourceArn": [r.rule_arn for r in rules]}},
            )
        )
        return rules

    def _cluster_log_retention(self, log_group_name: str, days: int, key: kms.IKey | None) -> cdk.CfnResource:
        stack = cdk.Stack.of(self)
        own_logs = function_log_group(self, "RetentionLogs")
        self.retention_function = lambda_.Function(
            self,
            "ClusterLogRetention",
            runtime=RUNTIME,
            handler="log_retention.on_event",
            code=handler_code(HANDLER_DIR),
            timeout=cdk.Duration.minutes(2),
            memory_size=128,
            log_group=own_logs,
            description="Sets retention on the log group HyperPod creates for the cluster",
        )
        # The one log group, by its full name (the cluster ID is a deploy-time value).
        self.cluster_log_group_arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=log_group_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.retention_function.add_to_role_policy(
            iam.PolicyStatement(
                sid="ClusterLogGroupRetention",
                actions=["logs:CreateLogGroup", "logs:PutRetentionPolicy"]
                + (["logs:AssociateKmsKey"] if key is not None else []),
                resources=[self.cluster_log_group_arn],
            )
        )
        provider_logs = function_log_group(self, "RetentionProviderLogs")
        provider = cr.Provider(
            self, "RetentionProvider", on_event_handler=self.retention_function, log_group=provider_logs
        )
        acknowledge(
            self.retention_function,
            "AwsSolutions-IAM4",
            "the cluster log retention handler logs to its own CloudWatch log group through the basic execution policy",
            findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
        )
        acknowledge_provider(provider, [self.retention_function])
        return cdk.CfnResource(
            self,
            "ClusterLogRetentionResource",
            type="Custom::ClusterLogRetention",
            properties={
                "ServiceToken": provider.service_token,
                "LogGroupName": log_group_name,
                "RetentionInDays": days,
                **({"KmsKeyId": key.key_arn} if key is not None else {}),
            },
        )
