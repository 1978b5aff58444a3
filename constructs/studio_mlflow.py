"""Studio's SageMaker managed MLflow tracking server, its artifact bucket (with access logs) and its service role."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from constructs.nag_acknowledgments import acknowledge
from constructs.secure_bucket import access_log_bucket, secure_bucket


class StudioMlflow:
    """Its resources are created in `scope` (the stack), where they have always been: their logical ids are those
    of deployed stacks. Apps are granted use of the server by StudioExecutionRole.grant_mlflow(`server_arn`)."""

    def __init__(
        self, scope: Construct, *, tracking_server_name: str, size: str, mlflow_version: str, encryption_key: kms.IKey
    ) -> None:
        logs_bucket = access_log_bucket(scope, "MlflowAccessLogs")
        artifacts = secure_bucket(
            scope, "MlflowArtifacts", access_logs=logs_bucket, log_prefix="mlflow/", encryption_key=encryption_key
        )
        self.server_role = iam.Role(
            scope,
            "MlflowServerRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="MLflow tracking server: its artifact bucket only",
        )
        artifacts.grant_read_write(self.server_role)
        self.server = sagemaker.CfnMlflowTrackingServer(
            scope,
            "Mlflow",
            tracking_server_name=tracking_server_name,
            role_arn=self.server_role.role_arn,
            artifact_store_uri=f"s3://{artifacts.bucket_name}/artifacts",
            tracking_server_size=size,
            mlflow_version=mlflow_version,
            automatic_model_registration=False,
        )
        # The server checks its bucket access at creation: wait for the role's policy, not just the role.
        self.server.node.add_dependency(self.server_role.node.find_child("DefaultPolicy"))
        self.server_arn = self.server.attr_tracking_server_arn
        acknowledge(
            self.server_role,
            "AwsSolutions-IAM5",
            "the MLflow server reads and writes run artifacts anywhere in its own artifact bucket",
            findings=[
                "Action::s3:GetObject*",
                "Action::s3:GetBucket*",
                "Action::s3:List*",
                "Action::s3:DeleteObject*",
                "Action::s3:Abort*",
                "Action::kms:ReEncrypt*",
                "Action::kms:GenerateDataKey*",
                f"Resource::{artifacts.arn_for_objects('*')}",
            ],
        )
