"""`observability:` always on: one encrypted SNS topic for alarms and HyperPod events, a dashboard, log retention.
Opt-in: node metrics in an Amazon Managed Service for Prometheus workspace, and an Amazon Managed Grafana workspace.
The rules: endpoints that fit their protocol, Grafana with metrics, SAML or IAM Identity Center, the node metrics
packages each node needs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal

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
    """A subscriber of the alarm topic."""

    protocol: Literal[tuple(SUBSCRIPTION_ENDPOINTS)] = Field(  # type: ignore[valid-type]
        description="The SNS protocol: email (an address), https (a URL), sms (an E.164 number), sqs (a queue ARN), "
        "lambda (a function ARN)."
    )
    endpoint: Annotated[str, Field(min_length=1, max_length=2048)] = Field(
        description="Where to deliver, checked against the protocol; no pair twice. E-mail subscriptions must be "
        "confirmed from the message SNS sends."
    )


# What lifecycle/hyperpod/install_node_metrics.sh installs from observability.node_metrics.artifacts, by artifact name,
# and on which nodes. Prometheus runs in agent mode (`--enable-feature=agent`), which Prometheus 2.32.0 introduced
# (https://prometheus.io/blog/2021/11/16/agent/); Ubuntu 22.04's own `prometheus` (2.31.2) predates it.
NODE_METRICS_ARTIFACTS = {
    "prometheus-node-exporter": "every node",
    "prometheus": "every node",
    "dcgm-exporter": "compute nodes with an NVIDIA GPU",
}
NODE_METRICS_REQUIRED = ("prometheus-node-exporter", "prometheus")
PROMETHEUS_AGENT_MIN_VERSION = (2, 32)


class NodeMetrics(Strict):
    """Opt-in metrics from the nodes, remote-written to an Amazon Managed Service for Prometheus workspace the storage
    stack creates (constructs/metrics_workspace.py). Slurm nodes run the lifecycle exporters and a Prometheus agent
    (SigV4) installed from the operator's S3 mirror, checksum-verified; EKS clusters run the HyperPod observability
    add-on."""

    enabled: StrictBool = Field(
        False,
        description="An Amazon Managed Service for Prometheus workspace (storage stack) the nodes remote-write "
        "to: on Slurm the lifecycle exporters, with aps:RemoteWrite on the execution role; on EKS "
        "the HyperPod observability add-on (docs/observability.md).",
    )
    retention_days: int = Field(
        default=150,
        ge=1,
        le=1095,
        description="Days the workspace keeps samples (AWS::APS::Workspace RetentionPeriodInDays; AMP's default is "
        "150).",
    )
    scrape_interval_seconds: int = Field(
        default=30, ge=10, le=300, description="Slurm only: the node agents' scrape interval."
    )
    artifacts: list[Artifact] = Field(
        [],
        description="Slurm only: the collectors' Debian packages from your S3 mirror: prometheus-node-exporter and "
        "prometheus (2.32 or later, for agent mode) on every node, optionally dcgm-exporter (compute "
        "nodes with an NVIDIA GPU); each named after the package it installs.",
    )
    # v1.0.5-eksbuild.1 is the version AWS names as adding the restricted-instance-group toleration
    # (docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html).
    eks_addon_version: AddonVersion = Field(
        "v1.0.5-eksbuild.1",
        description="EKS only: the pinned amazon-sagemaker-hyperpod-observability add-on version; "
        "check aws eks describe-addon-versions before raising it.",
    )


SsoGroupId = Annotated[
    str,
    pattern(
        r"([0-9a-f]{10}-)?[A-Fa-f0-9]{8}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-"
        r"[A-Fa-f0-9]{12}",
        "an IAM Identity Center group ID such as 9067c5ed5d-0b3a8c3e-7f39-4b2e-9b2f-0123456789ab",
    ),
]


class GrafanaSaml(Strict):
    """SAML sign-in to Grafana."""

    idp_metadata_url: Annotated[str, pattern(r"https://\S{1,2040}", "an https:// URL of the IdP's SAML metadata")] = (
        Field(description="Where Grafana reads the identity provider's SAML metadata.")
    )
    role_attribute: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        "role", description="The SAML assertion attribute that holds a user's role."
    )
    admin_role_values: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        [], description="Values of role_attribute that make a user Grafana Admin; everyone else is Viewer."
    )


class Grafana(Strict):
    """Opt-in Amazon Managed Grafana workspace with the platform's data sources and dashboards
    (observability/grafana/*.json, provisioned by lambda/grafana_provisioning)."""

    enabled: StrictBool = Field(
        False,
        description="An Amazon Managed Grafana workspace with the platform's data sources and dashboards; needs "
        "node_metrics.enabled.",
    )
    authentication_provider: Literal["AWS_SSO", "SAML"] = Field(
        "AWS_SSO", description="AWS_SSO (IAM Identity Center groups) or SAML (then saml)."
    )
    permission_type: Literal["CUSTOMER_MANAGED"] = Field(
        "CUSTOMER_MANAGED",
        description="Only CUSTOMER_MANAGED: the platform's own role may read exactly its AMP "
        "workspace (and CloudWatch); a SERVICE_MANAGED workspace would get the "
        "AWS-managed data-source policies instead.",
    )
    viewer_group_ids: list[SsoGroupId] = Field(
        [],
        description="IAM Identity Center groups given Grafana's Viewer role (AWS_SSO only): put the Studio users' "
        "group here.",
    )
    admin_group_ids: list[SsoGroupId] = Field(
        [], description="IAM Identity Center groups given Grafana's Admin role (AWS_SSO only)."
    )
    saml: GrafanaSaml | None = Field(None, description="With authentication_provider SAML only.")


class Observability(Strict):
    """Always on: one encrypted SNS topic for alarms and HyperPod events, a dashboard, log retention."""

    subscriptions: list[AlarmSubscription] = Field([], description="Subscribers of the alarm topic.")
    log_retention_days: Literal[LOG_RETENTION_DAYS] = Field(  # type: ignore[valid-type]
        90,
        description="A CloudWatch Logs retention value, applied to every log group the platform creates (handlers, "
        "providers, asset uploads) and, after the cluster exists, to HyperPod's "
        "/aws/sagemaker/Clusters/<name>/<id>. Flow logs and the EKS control plane keep their own keys.",
    )
    fsx_free_capacity_percent: int = Field(
        default=10, ge=1, le=90, description="Alarm when less of the file system is free."
    )
    fsx_throughput_percent: int = Field(
        default=80,
        ge=10,
        le=100,
        description="Alarm when client throughput stays above this share of the baseline (capacity x throughput "
        "tier)...",
    )
    fsx_throughput_minutes: int = Field(default=30, ge=5, le=1440, description="... for this long, minutes.")
    export_backlog_minutes: int = Field(
        default=60,
        ge=5,
        le=1440,
        description="Alarm when the oldest change waiting for automatic export to S3 is older, minutes.",
    )
    node_metrics: NodeMetrics = Field(NodeMetrics(), description="Opt-in: metrics from the nodes.")
    grafana: Grafana = Field(Grafana(), description="Opt-in: a Grafana workspace.")


def observability_errors(cfg: PlatformConfig) -> list[str]:
    obs = cfg.observability
    errors = []
    grafana = obs.grafana
    if grafana.enabled and not obs.node_metrics.enabled:
        errors.append(
            "observability.grafana.enabled: true with observability.node_metrics.enabled: false; the "
            "Grafana dashboards read the node metrics workspace, enable node_metrics too"
        )
    if grafana.authentication_provider == "SAML":
        if grafana.enabled and grafana.saml is None:
            errors.append(
                "observability.grafana.saml: missing with authentication_provider SAML; set "
                "saml.idp_metadata_url (and admin_role_values)"
            )
        for key in ("viewer_group_ids", "admin_group_ids"):
            if getattr(grafana, key):
                errors.append(
                    f"observability.grafana.{key}: {getattr(grafana, key)} with authentication_provider "
                    "SAML; IAM Identity Center groups apply to AWS_SSO only (SAML users get Viewer unless "
                    "their role attribute is in saml.admin_role_values)"
                )
    elif grafana.saml is not None:
        errors.append("observability.grafana.saml: set with authentication_provider AWS_SSO; remove it or use SAML")
    for i, sub in enumerate(obs.subscriptions):
        regex, allowed = SUBSCRIPTION_ENDPOINTS[sub.protocol]
        if not re.fullmatch(regex, sub.endpoint):
            errors.append(
                f"observability.subscriptions[{i}].endpoint: {sub.endpoint!r} — with protocol "
                f"{sub.protocol!r} it must be {allowed}"
            )
    return errors


def node_metrics_errors(cfg: PlatformConfig) -> list[str]:
    metrics = cfg.observability.node_metrics
    path = "observability.node_metrics"
    errors: list[str] = []
    for i, artifact in enumerate(metrics.artifacts):
        if artifact.name not in NODE_METRICS_ARTIFACTS:
            errors.append(
                f"{path}.artifacts[{i}].name: {artifact.name!r}; allowed: "
                + ", ".join(f"{n} ({where})" for n, where in NODE_METRICS_ARTIFACTS.items())
            )
        package, version = artifact.s3_uri.rsplit("/", 1)[-1].split("_")[:2]
        if artifact.name in NODE_METRICS_ARTIFACTS and package != artifact.name:
            errors.append(
                f"{path}.artifacts[{i}].s3_uri: {artifact.s3_uri!r} holds package {package!r}, but the "
                f"artifact is named {artifact.name!r}; name it after the package it installs"
            )
        if package == "prometheus":
            found = re.match(r"(?:\d+:)?(\d+)\.(\d+)", version)
            if not found or tuple(map(int, found.groups())) < PROMETHEUS_AGENT_MIN_VERSION:
                errors.append(
                    f"{path}.artifacts[{i}].s3_uri: prometheus {version!r} has no agent mode; pin a "
                    "build of Prometheus 2.32 or later (e.g. Ubuntu 24.04's 2.45.3 or Debian 12's 2.42.0)"
                )
    if not metrics.enabled:
        return errors
    if cfg.orchestrator != "slurm":
        if metrics.artifacts:  # EKS nodes get the HyperPod observability add-on, not the lifecycle collectors
            errors.append(
                f"{path}.artifacts: {len(metrics.artifacts)} artifact(s) with orchestrator "
                f"{cfg.orchestrator!r}; the lifecycle collectors are for Slurm nodes (EKS clusters get the "
                "HyperPod observability add-on, eks_addon_version): remove artifacts"
            )
        return errors
    names = {a.name for a in metrics.artifacts}
    for required in NODE_METRICS_REQUIRED:
        if required not in names:
            errors.append(
                f"{path}.artifacts: no {required!r} artifact with node metrics enabled; list the Debian "
                f"package mirrored to your S3 bucket as {{name: {required}, s3_uri: "
                f"s3://<bucket>/<path>/{required}_<version>_<arch>.deb, sha256: <64 hex>}}"
            )
    return errors
