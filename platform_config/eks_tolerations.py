"""Kubernetes tolerations for the platform's taints: the matching rule, the Neuron device plugin's fixed tolerations
(which eks_errors checks Neuron groups against), and the tolerations the add-ons that take them (coredns,
cert-manager) are given."""

from __future__ import annotations

from typing import TYPE_CHECKING

from platform_config.cluster import Taint

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig


# The Neuron device plugin's tolerations are written into its template, not values:
# aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea helm_chart/HyperPodHelmChart/charts/
# neuron-device-plugin/templates/k8s-neuron-device-plugin.yaml (tests compare with the generated chart facts).
NEURON_PLUGIN_TOLERATIONS = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"},
    {
        "key": "sagemaker.amazonaws.com/node-health-status",
        "operator": "Equal",
        "value": "Unschedulable",
        "effect": "NoSchedule",
    },
)


def tolerates(toleration: dict, taint: Taint) -> bool:
    """Kubernetes' matching rule: an empty key with Exists matches every key, an empty effect every effect."""
    if toleration.get("effect") and toleration["effect"] != taint.effect:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.key
    return toleration.get("key") == taint.key and toleration.get("value", "") == taint.value


def blocking_taints(group) -> list[Taint]:
    """The taints of a group that keep pods without a matching toleration off its nodes."""
    return [t for t in group.kubernetes_taints if t.effect in ("NoSchedule", "NoExecute")]


def addon_tolerations(cfg: PlatformConfig) -> list[dict]:
    """Tolerations for the platform's own taints (every compute group's NoSchedule/NoExecute taints), for the add-ons
    whose configuration takes them (coredns, cert-manager). HyperPod's deep-health-check taint is not among them:
    a node under deep health checks is stressed and may be replaced."""
    seen = {
        (t.key, t.value, t.effect)
        for g in cfg.cluster.instance_groups
        if g.role == "compute"
        for t in blocking_taints(g)
    }
    return [{"key": k, "operator": "Equal", "value": v, "effect": e} for k, v, e in sorted(seen)]


def cert_manager_values(tolerations: list[dict]) -> dict | None:
    """cert-manager's controller, webhook and cainjector each take tolerations (the keys AWS's HyperPod Terraform sets:
    awslabs/awsome-distributed-ai@95b939cd .../hyperpod-eks-tf/modules/hyperpod_cluster/cert_manager.tf)."""
    if not tolerations:
        return None
    return {
        "tolerations": tolerations,
        "webhook": {"tolerations": tolerations},
        "cainjector": {"tolerations": tolerations},
    }
