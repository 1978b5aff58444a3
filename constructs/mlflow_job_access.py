"""Training jobs logging to the platform's SageMaker managed MLflow tracking server (the Studio stack's).

The server has a fixed name, so the cluster stacks grant on its ARN without a reference to the Studio stack, which is
created while the cluster is. What IAM can express for MLflow: the `sagemaker-mlflow` actions have one resource type,
the tracking server (`arn:${Partition}:sagemaker:${Region}:${Account}:mlflow-tracking-server/${Name}`), and one
condition key, `aws:ResourceTag/${TagKey}` (Service Authorization Reference, "Amazon SageMaker with MLflow":
https://docs.aws.amazon.com/service-authorization/latest/reference/list_sagemaker-mlflow.html). No experiment or run
can be named in a policy, so whoever may log to the server may read and change every run on it: the platform refuses
MLflow in per-user mode (platform_config/rules.py) and grants jobs no more than the Studio profiles already have.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from constructs.nag_acknowledgments import acknowledge


def tracking_server_name(platform_name: str) -> str:
    return f"{platform_name}-mlflow"


def tracking_server_arn(scope: cdk.Stack, platform_name: str) -> str:
    return scope.format_arn(
        service="sagemaker", resource="mlflow-tracking-server", resource_name=tracking_server_name(platform_name)
    )


def allow_mlflow_logging(role: iam.IRole, *, tracking_server_arn: str, who: str) -> None:
    """The MLflow data-plane actions on the platform's one tracking server. The wildcard is the service's own action
    list on that single resource: a job's MLflow client calls experiment, run, metric, parameter, tag, input, trace
    and model-registry APIs, and new MLflow versions add more (logged models, traces); an enumerated list would break
    jobs without narrowing what they can reach, which is this one server either way."""
    role.add_to_principal_policy(
        iam.PolicyStatement(sid="LogToPlatformMlflow", actions=["sagemaker-mlflow:*"], resources=[tracking_server_arn])
    )
    acknowledge(
        role,
        "AwsSolutions-IAM5",
        f"{who} log experiments, runs and metrics to the platform's one MLflow tracking server: the "
        "sagemaker-mlflow actions are granted on that server's ARN only (the service has no finer resource)",
        findings=["Action::sagemaker-mlflow:*"],
    )
