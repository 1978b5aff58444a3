"""Observability: alarms, HyperPod events and a dashboard for the whole platform, on one encrypted SNS topic.
Deployed last; it only reads the other stacks."""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from constructs.log_encryption import logs_key
from constructs.platform_observability import LustreTargets, PlatformObservability, Subscription, platform_functions
from constructs.platform_refs import StorageRefs
from constructs.stack_outputs import output_for_another_stack

from platform_config import PlatformConfig
from constructs.studio_execution_role import PLATFORM_TAG

# Opt-in features: their modules (and aws_grafana, aws_budgets) load only when the config turns them on.
if TYPE_CHECKING:
    from constructs.grafana_workspace import GrafanaWorkspace
    from constructs.platform_budgets import BudgetSpec


class ObservabilityStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        config: PlatformConfig,
        storage: StorageRefs,
        cluster: cdk.Stack,
        cluster_id: str,
        watched: Sequence[cdk.Stack],
        dead_letter_queue: sqs.IQueue | None = None,
        **kwargs,
    ) -> None:
        """`cluster`: the stack of the HyperPod cluster whose ID is `cluster_id`. `watched`: the platform's stacks with
        Lambda functions to alarm on (storage, cluster, Studio, the EKS stack's kubectl and add-on handlers); this
        stack is deployed after each of them. `dead_letter_queue`: the Studio partition handlers' (alarmed on when
        it holds a message)."""
        super().__init__(scope, id_, **kwargs)
        for stack in watched:  # explicit: the order holds even where no value crosses the stacks
            self.add_stack_dependency(stack)
        obs = config.observability
        lustre = config.storage.lustre
        owned = lustre.existing is None
        self.observability = PlatformObservability(
            self,
            "Observability",
            name=config.name,
            cluster_name=config.name,
            cluster_id=self._cluster_id(cluster, cluster_id),
            lustre=LustreTargets(
                file_system_id=storage.lustre.file_system_id,
                capacity_gib=lustre.storage_capacity_gib if owned else None,
                throughput_mb_per_tib=lustre.throughput_mib_per_tib if owned else None,
            ),
            functions=platform_functions(watched),
            dead_letter_queue=dead_letter_queue,
            instance_groups=[(g.name, g.role) for g in config.cluster.instance_groups],
            subscriptions_=[Subscription(s.protocol, s.endpoint) for s in obs.subscriptions],
            log_retention_days=obs.log_retention_days,
            free_capacity_percent=obs.fsx_free_capacity_percent,
            throughput_percent=obs.fsx_throughput_percent,
            throughput_minutes=obs.fsx_throughput_minutes,
            export_backlog_minutes=obs.export_backlog_minutes,
            cluster_log_key=logs_key(self),
        )
        self.grafana: GrafanaWorkspace | None = None
        if obs.grafana.enabled and storage.metrics_workspace is not None:
            from constructs.grafana_workspace import GrafanaWorkspace, SamlSettings

            g = obs.grafana
            self.grafana = GrafanaWorkspace(
                self,
                "Grafana",
                name=config.name,
                metrics=storage.metrics_workspace,
                file_system_id=storage.lustre.file_system_id,
                authentication_provider=g.authentication_provider,
                viewer_group_ids=g.viewer_group_ids,
                admin_group_ids=g.admin_group_ids,
                saml=SamlSettings(g.saml.idp_metadata_url, g.saml.role_attribute, tuple(g.saml.admin_role_values))
                if g.saml is not None
                else None,
            )
            cdk.CfnOutput(self, "GrafanaUrl", value=f"https://{self.grafana.endpoint}")
        self.budgets = None
        budget = config.cluster.budget
        if budget is not None:
            from constructs.platform_budgets import PlatformBudgets

            self.budgets = PlatformBudgets(
                self,
                "Budgets",
                specs=self._budget_specs(config),
                thresholds_percent=budget.thresholds_percent,
                topic=self.observability.topic if budget.notify_topic else None,
                topic_key=self.observability.topic_key if budget.notify_topic else None,
            )
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn)
        cdk.CfnOutput(self, "DashboardName", value=f"{config.name}-platform")
        cdk.CfnOutput(self, "ClusterLogGroup", value=self.observability.cluster_log_group)

    def _cluster_id(self, cluster: cdk.Stack, cluster_id: str) -> str:
        """The cluster's ID as an output of the cluster stack, read here with Fn::GetStackOutput. A plain
        cross-stack reference would carry the cluster ARN and split it here, an Fn::Split over Fn::GetStackOutput
        that cfn-lint (E1022) cannot type; the value and the deploy order are the same."""
        value = output_for_another_stack(
            cluster,
            "ClusterIdForObservability",
            value=cluster_id,
            description="Read by the observability stack (HyperPod's log group name)",
        )
        self.add_stack_dependency(cluster)
        return value

    @staticmethod
    def _budget_specs(config: PlatformConfig) -> list[BudgetSpec]:
        """The cluster's budget over everything tagged hyperpod-platform=<name> (stacks/platform.py tags every stack),
        and one per department with monthly_budget_usd over what carries <department_tag_key>=<department>."""
        budget = config.cluster.budget
        if budget is None:
            return []
        from constructs.platform_budgets import BudgetSpec

        common = ((PLATFORM_TAG, config.name), *config.tags.items())
        specs = [
            BudgetSpec(
                id="Cluster",
                name=f"{config.name}-cluster",
                tag_key=PLATFORM_TAG,
                tag_value=config.name,
                monthly_usd=budget.monthly_limit_usd,
                emails=tuple(budget.emails),
                resource_tags=common,
            )
        ]
        for d in config.cluster.accounting.departments:
            if d.monthly_budget_usd is not None:
                specs.append(
                    BudgetSpec(
                        id=f"Department-{d.name}",
                        name=f"{config.name}-department-{d.name}",
                        tag_key=budget.department_tag_key,
                        tag_value=d.name,
                        monthly_usd=d.monthly_budget_usd,
                        emails=tuple(dict.fromkeys([*budget.emails, *d.budget_emails])),
                        resource_tags=(*common, (budget.department_tag_key, d.name)),
                    )
                )
        return specs
