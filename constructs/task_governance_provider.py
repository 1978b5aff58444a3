"""Provider for HyperPod task governance resources in Regions whose CloudFormation lacks the native types.

`Custom::ClusterSchedulerConfig` and `Custom::ComputeQuota` take the properties of
AWS::SageMaker::ClusterSchedulerConfig and AWS::SageMaker::ComputeQuota plus `ServiceToken`, so a stack builds one
property dict and picks the type per Region. The handlers (lambda/task_governance/) wait until SageMaker reports
each resource Created or Updated, and fail with SageMaker's reason otherwise.
"""

from __future__ import annotations


import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.lambda_assets import RUNTIME, function_dir, function_log_group, handler_code
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider

HANDLER_DIR = function_dir("task_governance")
NOUNS = ("ClusterSchedulerConfig", "ComputeQuota")


def _actions(*verbs: str) -> list[str]:
    return [f"sagemaker:{verb}{noun}" for verb in verbs for noun in NOUNS]


class TaskGovernanceProvider(Construct):
    def __init__(self, scope: Construct, id_: str, *, cluster_arn: str) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        self.governance_arns = [
            stack.format_arn(service="sagemaker", resource=resource, resource_name="*")
            for resource in ("cluster-scheduler-config", "compute-quota")
        ]
        code = handler_code(HANDLER_DIR)

        def function(name: str, handler: str, timeout: cdk.Duration) -> lambda_.Function:
            log_group = function_log_group(self, f"{name}Logs")
            return lambda_.Function(
                self,
                name,
                runtime=RUNTIME,
                code=code,
                handler=handler,
                timeout=timeout,
                memory_size=256,
                log_group=log_group,
            )

        self.on_event = function("OnEvent", "governance.on_event", cdk.Duration.minutes(2))
        self.is_complete = function("IsComplete", "governance.is_complete", cdk.Duration.minutes(1))
        self._grant(cluster_arn)

        provider_logs = function_log_group(self, "ProviderLogs")
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event,
            is_complete_handler=self.is_complete,
            query_interval=cdk.Duration.seconds(20),
            total_timeout=cdk.Duration.minutes(30),
            log_group=provider_logs,
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(destination=provider_logs, level=sfn.LogLevel.ALL),
        )
        self.service_token = self.provider.service_token
        acknowledge_provider(self.provider, [self.on_event, self.is_complete])

    def _grant(self, cluster_arn: str) -> None:
        # Create authorizes against the cluster and the new resource; the rest only against the resource.
        self.on_event.add_to_role_policy(
            iam.PolicyStatement(
                sid="CreateOnCluster", actions=_actions("Create"), resources=[cluster_arn, *self.governance_arns]
            )
        )
        self.on_event.add_to_role_policy(
            iam.PolicyStatement(
                sid="ManageGovernance",
                actions=[
                    *_actions("Describe", "Update", "Delete"),
                    "sagemaker:AddTags",
                    "sagemaker:DeleteTags",
                    "sagemaker:ListTags",
                ],
                resources=self.governance_arns,
            )
        )
        # The List actions support no resource-level permissions.
        self.on_event.add_to_role_policy(
            iam.PolicyStatement(
                sid="FindEarlierAttempts",
                resources=["*"],
                actions=["sagemaker:ListClusterSchedulerConfigs", "sagemaker:ListComputeQuotas"],
            )
        )
        self.is_complete.add_to_role_policy(
            iam.PolicyStatement(
                sid="WatchGovernance", actions=_actions("Describe", "Delete"), resources=self.governance_arns
            )
        )

        ids_only = (
            "SageMaker assigns scheduler config and compute quota ids on create, so handlers are scoped to "
            "those two resource types in this account and Region"
        )
        acknowledge(
            self.on_event,
            "AwsSolutions-IAM5",
            f"{ids_only}; listing them by name and cluster (to adopt a retried create) is only possible on '*'",
            findings=["Resource::*", *(f"Resource::{arn}" for arn in self.governance_arns)],
        )
        acknowledge(
            self.is_complete,
            "AwsSolutions-IAM5",
            ids_only,
            findings=[f"Resource::{arn}" for arn in self.governance_arns],
        )
        basic_execution = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        for handler in (self.on_event, self.is_complete):
            acknowledge(
                handler,
                "AwsSolutions-IAM4",
                "task governance handlers log to their own CloudWatch log group through the basic execution policy",
                findings=[basic_execution],
            )
