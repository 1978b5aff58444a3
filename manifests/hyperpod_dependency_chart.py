"""Values for the HyperPod dependency Helm chart the EKS control-plane stack installs: the chart's own defaults
read from its directory, each component's toggle from the config, and tolerations for the taints the config puts on
compute groups. Pure data, no CDK: tools/render_hyperpod_chart.py renders the chart with the same values."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from platform_config import PlatformConfig


def chart_values(chart_dir: Path) -> dict[str, Any]:
    return yaml.safe_load((chart_dir / "values.yaml").read_text()) or {}


def taint_tolerations(config: PlatformConfig) -> list[dict[str, str]]:
    """One toleration per distinct taint the config puts on a compute group (key, value, effect)."""
    seen: list[dict[str, str]] = []
    for group in config.group("compute"):
        for taint in group.kubernetes_taints:
            toleration = {"key": taint.key, "operator": "Equal", "value": taint.value or "", "effect": taint.effect}
            if toleration not in seen:
                seen.append(toleration)
    return seen


def dependency_chart_values(config: PlatformConfig, *, region: str, chart_values: dict[str, Any]) -> dict[str, Any]:
    """Values for the HyperPod dependency chart: the region, each training component's toggle from the config,
    every other component of the chart set explicitly (off: the platform installs them another way, or they
    serve inference), and device plugins that tolerate every taint the config puts on an instance group.
    A list value replaces the chart's default, so the plugins get the chart's own tolerations plus the taints'.
    The health monitoring agent tolerates every NoSchedule/NoExecute taint already (its template); the Neuron
    plugin's tolerations are fixed in its template, so config validation refuses taints it would not tolerate."""
    d = config.eks.hyperpod_dependencies
    extra = taint_tolerations(config)

    def tolerations(plugin: str) -> dict[str, Any]:
        default = (chart_values.get(plugin) or {}).get("tolerations") or []
        return {"tolerations": [*default, *(t for t in extra if t not in default)]} if extra else {}

    return {
        "global": {"region": region},
        "health-monitoring-agent": {"enabled": d.health_monitoring_agent},
        "deep-health-check": {"enabled": d.deep_health_check},
        "job-auto-restart": {"enabled": d.job_auto_restart},
        "nvidia-device-plugin": {
            "devicePlugin": {"enabled": d.nvidia_device_plugin},
            **tolerations("nvidia-device-plugin"),
        },
        "neuron-device-plugin": {"devicePlugin": {"enabled": d.neuron_device_plugin}},
        "aws-efa-k8s-device-plugin": {
            "devicePlugin": {"enabled": d.efa_device_plugin},
            **tolerations("aws-efa-k8s-device-plugin"),
        },
        "trainingOperators": {"enabled": d.training_operators},
        "mpi-operator": {"enabled": d.mpi_operator},
        "hyperpod-patching": {"enabled": d.hyperpod_patching},
        "cert-manager": {"enabled": False},  # the cert-manager EKS add-on provides it
        "storage": {"enabled": False},  # FSx comes from the aws-fsx-csi-driver add-on and the stack's claims
        "gpu-operator": {"enabled": False},  # the NVIDIA device plugin above serves training
        "inferenceOperators": {"enabled": False},
        "mlflow": {"enabled": False},  # Studio's managed MLflow is the platform's
        # Access comes from EKS access entries and the stack's own per-team Roles and RoleBindings.
        "cluster-role-and-bindings": {"enabled": False},
        "team-role-and-bindings": {"enabled": False},
        "namespaced-role-and-bindings": {"enabled": False},
    }
