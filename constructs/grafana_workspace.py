"""Amazon Managed Grafana workspace (observability.grafana) reading the platform's Prometheus workspace and
CloudWatch through a role of its own, with the dashboards of observability/grafana/ provisioned into it by
lambda/grafana_provisioning and Grafana roles for IAM Identity Center groups (the Studio users as Viewers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.grafana_dashboards import CLOUDWATCH_UID, PROMETHEUS_UID
from constructs.metrics_workspace import MetricsWorkspace
from constructs.lambda_assets import RUNTIME, function_dir, function_log_group, handler_code
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider

ROOT = Path(__file__).resolve().parent.parent
HANDLER_DIR = function_dir("grafana_provisioning")
DASHBOARD_DIR = ROOT / "observability" / "grafana"
# The Grafana version the dashboards' schemaVersion (39) targets; AMG offers 8.4, 9.4 and 10.4
# (docs.aws.amazon.com/grafana/latest/userguide/AMG-workspace-version-update.html).
GRAFANA_VERSION = "10.4"
# CloudWatch data source: what Grafana's CloudWatch plugin calls for metric queries and the metric browser
# (docs.aws.amazon.com/grafana/latest/userguide/AMG-manage-permissions.html, CloudWatch policy); none of these
# CloudWatch actions takes a resource ARN.
CLOUDWATCH_READ = (
    "cloudwatch:GetMetricData",
    "cloudwatch:ListMetrics",
    "cloudwatch:DescribeAlarmsForMetric",
    "cloudwatch:DescribeAlarms",
    "cloudwatch:GetInsightRuleReport",
)


@dataclass(frozen=True)
class SamlSettings:
    idp_metadata_url: str
    role_attribute: str
    admin_role_values: Sequence[str]


class GrafanaWorkspace(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        name: str,
        metrics: MetricsWorkspace,
        file_system_id: str,
        authentication_provider: str,
        viewer_group_ids: Sequence[str] = (),
        admin_group_ids: Sequence[str] = (),
        saml: SamlSettings | None = None,
    ) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        self.role = iam.Role(
            self,
            "WorkspaceRole",
            description=f"{name}: Grafana reads its metrics",
            assumed_by=iam.ServicePrincipal("grafana.amazonaws.com").with_conditions(
                {"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
        )
        self.role.add_to_policy(metrics.query_statement())
        self.role.add_to_policy(
            iam.PolicyStatement(sid="ReadCloudWatchMetrics", actions=list(CLOUDWATCH_READ), resources=["*"])
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Grafana's CloudWatch data source reads metrics and alarms; "
            "CloudWatch's metric read actions support no resource-level permissions (its Prometheus reads "
            "are scoped to the platform's AMP workspace)",
            findings=["Resource::*"],
        )
        saml_config = None
        if saml is not None:
            saml_config = grafana.CfnWorkspace.SamlConfigurationProperty(
                idp_metadata=grafana.CfnWorkspace.IdpMetadataProperty(url=saml.idp_metadata_url),
                assertion_attributes=grafana.CfnWorkspace.AssertionAttributesProperty(role=saml.role_attribute),
                role_values=grafana.CfnWorkspace.RoleValuesProperty(admin=list(saml.admin_role_values))
                if saml.admin_role_values
                else None,
            )
        self.workspace = grafana.CfnWorkspace(
            self,
            "Workspace",
            name=f"{name}-observability",
            description=f"HyperPod platform {name}: dashboards",
            account_access_type="CURRENT_ACCOUNT",
            authentication_providers=[authentication_provider],
            permission_type="CUSTOMER_MANAGED",
            role_arn=self.role.role_arn,
            grafana_version=GRAFANA_VERSION,
            data_sources=["PROMETHEUS", "CLOUDWATCH"],
            saml_configuration=saml_config,
        )
        self.workspace_arn = stack.format_arn(
            service="grafana",
            resource="/workspaces",
            resource_name=self.workspace.attr_id,
            arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
        )
        self.endpoint = self.workspace.attr_endpoint
        self._provision(
            metrics=metrics,
            file_system_id=file_system_id,
            viewer_group_ids=viewer_group_ids,
            admin_group_ids=admin_group_ids,
        )

    def _provision(
        self,
        *,
        metrics: MetricsWorkspace,
        file_system_id: str,
        viewer_group_ids: Sequence[str],
        admin_group_ids: Sequence[str],
    ) -> None:
        stack = cdk.Stack.of(self)
        log_group = function_log_group(self, "ProvisionerLogs")
        self.handler = lambda_.Function(
            self,
            "Provisioner",
            runtime=RUNTIME,
            handler="grafana_provision.on_event",
            code=handler_code(HANDLER_DIR),
            timeout=cdk.Duration.minutes(2),
            memory_size=256,
            log_group=log_group,
            description="Puts the platform's data sources and dashboards into its Grafana workspace",
        )
        self.handler.add_to_role_policy(
            iam.PolicyStatement(
                sid="ShortLivedGrafanaToken",
                resources=[self.workspace_arn],
                actions=[
                    "grafana:ListWorkspaceServiceAccounts",
                    "grafana:CreateWorkspaceServiceAccount",
                    "grafana:CreateWorkspaceServiceAccountToken",
                    "grafana:DeleteWorkspaceServiceAccountToken",
                ],
            )
        )
        if viewer_group_ids or admin_group_ids:
            self.handler.add_to_role_policy(
                iam.PolicyStatement(
                    sid="GrantGroupRoles", actions=["grafana:UpdatePermissions"], resources=[self.workspace_arn]
                )
            )
        acknowledge(
            self.handler,
            "AwsSolutions-IAM4",
            "the Grafana provisioner logs to its own log group through the basic execution policy",
            findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
        )
        provider_logs = function_log_group(self, "ProviderLogs")
        provider = cr.Provider(self, "Provider", on_event_handler=self.handler, log_group=provider_logs)
        acknowledge_provider(provider, [self.handler])
        dashboards = [path.read_text() for path in sorted(DASHBOARD_DIR.glob("*.json"))]
        self.provisioning = cdk.CustomResource(
            self,
            "Provisioning",
            service_token=provider.service_token,
            resource_type="Custom::GrafanaProvisioning",
            properties={
                "WorkspaceId": self.workspace.attr_id,
                "Endpoint": self.endpoint,
                "Region": stack.region,
                "PrometheusEndpoint": metrics.prometheus_endpoint,
                "PrometheusUid": PROMETHEUS_UID,
                "CloudWatchUid": CLOUDWATCH_UID,
                "FileSystemId": file_system_id,
                "Dashboards": dashboards,
                "ViewerGroupIds": list(viewer_group_ids),
                "AdminGroupIds": list(admin_group_ids),
            },
        )
