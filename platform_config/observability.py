"""`observability:` always on: one encrypted SNS topic for alarms and HyperPod events, a dashboard, log retention.
Opt-in: node metrics in an Amazon Managed Service for Prometheus workspace, and an Amazon Managed Grafana workspace.
The rules: endpoints that fit their protocol, Grafana with metrics, SAML or IAM Identity Center, the node metrics
packages each node needs."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import Field, StrictBool

from platform_config.fields import LOG_RETENTION_DAYS, AddonVersion, Artifact, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

# What an SNS subscription endpoint must look like for each protocol the platform offers.
SUBSCRIPTION_ENDPOINTS = {
    "email": (r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address such as ops@example.com"),
    "https": (r"https://[^\s/]+(/\S*)?", "an https:// URL"),
    "sms": (r"\+[1-9]\d{7,14}", "a phone number in E.164 form such as +14155550100"),
    "sqs": (r"arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[\w-]{1,80}(\.fifo)?", "an SQS queue ARN"),
    "lambda": (r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[\w-]{1,64}(:[\w$-]+)?", "a Lambda function ARN"),
}


class AlarmSubscription(Strict):
    protocol: Literal[tuple(SUBSCRIPTION_ENDPOINTS)]  # type: ignore[valid-type]
    endpoint: Annotated[str, Field(min_length=1, max_length=2048)]


# What lifecycle/hyperpod/install_node_metrics.sh installs from observability.node_metrics.artifacts, by artifact name,
# and on which nodes. Prometheus runs in agent mode (`--enable-feature=agent`), which Prometheus 2.32.0 introduced
# (https://prometheus.io/blog/2021/11/16/agent/); Ubuntu 22.04's own `prometheus` (2.31.2) predates it.
NODE_METRICS_ARTIFACTS = {"prometheus-node-exporter": "every node", "prometheus": "every node",
                          "dcgm-exporter": "compute nodes with an NVIDIA GPU"}
NODE_METRICS_REQUIRED = ("prometheus-node-exporter", "prometheus")
PROMETHEUS_AGENT_MIN_VERSION = (2, 32)


class NodeMetrics(Strict):
    """Opt-in metrics from the nodes, remote-written to an Amazon Managed Service for Prometheus workspace the storage
    stack creates (constructs/metrics_workspace.py). Slurm nodes run the lifecycle exporters and a Prometheus agent
    (SigV4) installed from the operator's S3 mirror, checksum-verified; EKS clusters run the HyperPod observability
    add-on."""
    enabled: StrictBool = False
    # Days AMP keeps samples (AWS::APS::Workspace WorkspaceConfiguration.RetentionPeriodInDays; AMP's default is 150).
    retention_days: int = Field(default=150, ge=1, le=1095)
    # Slurm only.
    scrape_interval_seconds: int = Field(default=30, ge=10, le=300)
    artifacts: list[Artifact] = []
    # EKS only: the add-on amazon-sagemaker-hyperpod-observability; v1.0.5-eksbuild.1 is the version AWS names as
    # adding the restricted-instance-group toleration (docs.aws.amazon.com/sagemaker/latest/dg/
    # hyperpod-observability-addon-troubleshooting.html). Check `aws eks describe-addon-versions` before raising it.
    eks_addon_version: AddonVersion = "v1.0.5-eksbuild.1"


SsoGroupId = Annotated[str, pattern(r"([0-9a-f]{10}-)?[A-Fa-f0-9]{8}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-"
                                     r"[A-Fa-f0-9]{12}", "an IAM Identity Center group ID such as "
                                     "9067c5ed5d-0b3a8c3e-7f39-4b2e-9b2f-0123456789ab")]


class GrafanaSaml(Strict):
    idp_metadata_url: Annotated[str, pattern(r"https://\S{1,2040}", "an https:// URL of the IdP's SAML metadata")]
    role_attribute: Annotated[str, Field(min_length=1, max_length=256)] = "role"
    admin_role_values: list[Annotated[str, Field(min_length=1, max_length=256)]] = []


class Grafana(Strict):
    """Opt-in Amazon Managed Grafana workspace with the platform's data sources and dashboards
    (observability/grafana/*.json, provisioned by lambda/grafana_provisioning)."""
    enabled: StrictBool = False
    authentication_provider: Literal["AWS_SSO", "SAML"] = "AWS_SSO"
    # CUSTOMER_MANAGED only: the platform's own role may read exactly its AMP workspace (and CloudWatch); a
    # SERVICE_MANAGED workspace gets the AWS-managed data-source policies instead.
    permission_type: Literal["CUSTOMER_MANAGED"] = "CUSTOMER_MANAGED"
    # IAM Identity Center groups given Grafana's Viewer role (the Studio users) and Admin role (AWS_SSO only).
    viewer_group_ids: list[SsoGroupId] = []
    admin_group_ids: list[SsoGroupId] = []
    saml: Optional[GrafanaSaml] = None


class Observability(Strict):
    """Always on: one encrypted SNS topic for alarms and HyperPod events, a dashboard, log retention."""
    subscriptions: list[AlarmSubscription] = []
    # Every log group the platform creates (Lambda handlers, providers) and HyperPod's own cluster log group;
    # network.flow_logs.retention_days and eks.log_retention_days keep governing theirs.
    log_retention_days: Literal[LOG_RETENTION_DAYS] = 90  # type: ignore[valid-type]
    fsx_free_capacity_percent: int = Field(default=10, ge=1, le=90)  # alarm below this share of free space
    fsx_throughput_percent: int = Field(default=80, ge=10, le=100)  # of the file system's baseline throughput
    fsx_throughput_minutes: int = Field(default=30, ge=5, le=1440)  # ... sustained this long
    # Alarm when the oldest change waiting for automatic export to S3 is older than this.
    export_backlog_minutes: int = Field(default=60, ge=5, le=1440)
    node_metrics: NodeMetrics = NodeMetrics()  # opt-in
    grafana: Grafana = Grafana()  # opt-in


def observability_errors(cfg: PlatformConfig) -> list[str]:
    obs = cfg.observability
    errors = []
    grafana = obs.grafana
    if grafana.enabled and not obs.node_metrics.enabled:
        errors.append("observability.grafana.enabled: true with observability.node_metrics.enabled: false; the "
                      "Grafana dashboards read the node metrics workspace, enable node_metrics too")
    if grafana.authentication_provider == "SAML":
        if grafana.enabled and grafana.saml is None:
            errors.append("observability.grafana.saml: missing with authentication_provider SAML; set "
                          "saml.idp_metadata_url (and admin_role_values)")
        for key in ("viewer_group_ids", "admin_group_ids"):
            if getattr(grafana, key):
                errors.append(f"observability.grafana.{key}: {getattr(grafana, key)} with authentication_provider "
                              "SAML; IAM Identity Center groups apply to AWS_SSO only (SAML users get Viewer unless "
                              "their role attribute is in saml.admin_role_values)")
    elif grafana.saml is not None:
        errors.append("observability.grafana.saml: set with authentication_provider AWS_SSO; remove it or use SAML")
    for i, sub in enumerate(obs.subscriptions):
        regex, allowed = SUBSCRIPTION_ENDPOINTS[sub.protocol]
        if not re.fullmatch(regex, sub.endpoint):
            errors.append(f"observability.subscriptions[{i}].endpoint: {sub.endpoint!r} — with protocol "
                          f"{sub.protocol!r} it must be {allowed}")
    return errors


def node_metrics_errors(cfg: PlatformConfig) -> list[str]:
    metrics = cfg.observability.node_metrics
    path = "observability.node_metrics"
    errors: list[str] = []
    for i, artifact in enumerate(metrics.artifacts):
        if artifact.name not in NODE_METRICS_ARTIFACTS:
            errors.append(f"{path}.artifacts[{i}].name: {artifact.name!r}; allowed: "
                          + ", ".join(f"{n} ({where})" for n, where in NODE_METRICS_ARTIFACTS.items()))
        package, version = artifact.s3_uri.rsplit("/", 1)[-1].split("_")[:2]
        if artifact.name in NODE_METRICS_ARTIFACTS and package != artifact.name:
            errors.append(f"{path}.artifacts[{i}].s3_uri: {artifact.s3_uri!r} holds package {package!r}, but the "
                          f"artifact is named {artifact.name!r}; name it after the package it installs")
        if package == "prometheus":
            found = re.match(r"(?:\d+:)?(\d+)\.(\d+)", version)
            if not found or tuple(map(int, found.groups())) < PROMETHEUS_AGENT_MIN_VERSION:
                errors.append(f"{path}.artifacts[{i}].s3_uri: prometheus {version!r} has no agent mode; pin a "
                              "build of Prometheus 2.32 or later (e.g. Ubuntu 24.04's 2.45.3 or Debian 12's 2.42.0)")
    if not metrics.enabled:
        return errors
    if cfg.orchestrator != "slurm":
        if metrics.artifacts:  # EKS nodes get the HyperPod observability add-on, not the lifecycle collectors
            errors.append(f"{path}.artifacts: {len(metrics.artifacts)} artifact(s) with orchestrator "
                          f"{cfg.orchestrator!r}; the lifecycle collectors are for Slurm nodes (EKS clusters get the "
                          "HyperPod observability add-on, eks_addon_version): remove artifacts")
        return errors
    names = {a.name for a in metrics.artifacts}
    for required in NODE_METRICS_REQUIRED:
        if required not in names:
            errors.append(f"{path}.artifacts: no {required!r} artifact with node metrics enabled; list the Debian "
                          f"package mirrored to your S3 bucket as {{name: {required}, s3_uri: "
                          f"s3://<bucket>/<path>/{required}_<version>_<arch>.deb, sha256: <64 hex>}}")
    return errors
