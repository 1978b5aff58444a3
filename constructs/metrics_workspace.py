"""The Amazon Managed Service for Prometheus workspace the nodes remote-write to (observability.node_metrics).

It holds metric history, so it is retained on stack delete and lives in the storage stack: the cluster stacks (whose
node roles write to it and whose EKS add-on points at it) and the observability stack (Grafana reads it) both deploy
after storage, and storage deploys beside the EKS control plane (tests/test_stack_graph.py)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_aps as aps
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct
from constructs.pseudo_parameters import REGION, URL_SUFFIX

# The workspace's base URL is built from its id rather than read from Fn::GetAtt PrometheusEndpoint: AWS's API
# reference gives that attribute's example with and without a trailing `api/v1/` (DescribeWorkspace's
# prometheusEndpoint: ".../workspaces/ws-.../api/v1/"), so appending to it could double the path. Remote write is
# <base>api/v1/remote_write (docs.aws.amazon.com/prometheus/latest/userguide/AMP-onboard-ingest-metrics-remote-write.html).
REMOTE_WRITE_PATH = "api/v1/remote_write"
# Alerting rules on what the nodes write (observability/rules/*.yaml, Prometheus rule files, shipped unchanged).
NODE_RULES_DIR = Path(__file__).resolve().parent.parent / "observability" / "rules"


class MetricsWorkspace(Construct):
    def __init__(self, scope: Construct, id_: str, *, alias: str, retention_days: int) -> None:
        super().__init__(scope, id_)
        # AMP encrypts with a customer managed key through grants it creates with the caller's (CloudFormation's)
        # rights; writers and readers need no key permission (docs.aws.amazon.com/prometheus/latest/userguide/
        # encryption-at-rest-Amazon-Service-Prometheus.html).
        self.key = kms.Key(
            self,
            "Key",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description=f"{alias}: encrypts the node metrics in Amazon Managed Service for Prometheus",
        )
        # No LoggingConfiguration: AMP's workspace logs report rule-evaluation and alert-manager errors
        # (docs.aws.amazon.com/prometheus/latest/userguide/AMP-CW-logs.html) and this workspace has neither.
        self.workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=alias,
            kms_key_arn=self.key.key_arn,
            workspace_configuration=aps.CfnWorkspace.WorkspaceConfigurationProperty(
                retention_period_in_days=retention_days
            ),
        )
        self.workspace.apply_removal_policy(cdk.RemovalPolicy.RETAIN)  # metric history is user data
        self.workspace_arn = self.workspace.attr_arn
        # The workspace evaluates these (e.g. a node whose users sync stopped succeeding); its firing alerts are the
        # ALERTS series here and in Grafana's alert list (docs/observability.md, "Node alerts").
        self.rule_namespaces = [
            aps.CfnRuleGroupsNamespace(
                self,
                f"Rules{rules.stem.title().replace('_', '')}",
                workspace=self.workspace_arn,
                name=f"hyperpod-platform-{rules.stem.replace('_', '-')}",
                data=rules.read_text(),
            )
            for rules in sorted(NODE_RULES_DIR.glob("*.yaml"))
        ]
        self.workspace_id = self.workspace.attr_workspace_id
        self.prometheus_endpoint = cdk.Fn.join(
            "",
            [
                "https://aps-workspaces.",
                REGION,
                ".",
                URL_SUFFIX,
                "/workspaces/",
                self.workspace_id,
                "/",
            ],
        )
        self.remote_write_url = f"{self.prometheus_endpoint}{REMOTE_WRITE_PATH}"

    def remote_write_statement(self, sid: str = "RemoteWriteNodeMetrics") -> iam.PolicyStatement:
        """Exactly what a collector needs: aps:RemoteWrite on this workspace, nothing else."""
        return iam.PolicyStatement(sid=sid, actions=["aps:RemoteWrite"], resources=[self.workspace_arn])

    def grant_remote_write(self, *roles: iam.IRole) -> None:
        for role in roles:
            role.add_to_principal_policy(self.remote_write_statement())

    def query_statement(self, sid: str = "QueryNodeMetrics") -> iam.PolicyStatement:
        """What Grafana's Prometheus data source needs to read this workspace (the query APIs, all scoped to it)."""
        return iam.PolicyStatement(
            sid=sid,
            resources=[self.workspace_arn],
            actions=["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata"],
        )
