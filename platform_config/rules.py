"""Every semantic rule of the config, in the order its errors are reported. pydantic has checked shapes and ranges
before these run; each rule is a pure function of the whole config returning one line per problem, and all of them
run, so every problem is reported at once. Rules about one section live beside its model; the rules that tie sections
together are here, above the list."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from pydantic import BaseModel

from platform_config.accounting import accounting_errors
from platform_config.attach import BUILD_ONLY_RULES, attach_errors, attached
from platform_config.budgets import budget_errors
from platform_config.cluster_rules import (
    container_runtime_errors,
    instance_group_errors,
    pam_slurm_adopt_errors,
    slurm_config_strategy_errors,
    slurm_node_role_errors,
)
from platform_config.directory import directory_errors
from platform_config.eks import eks_errors
from platform_config.eks_governance import task_governance_errors
from platform_config.login_access import login_access_errors
from platform_config.model import PlatformConfig
from platform_config.network import network_errors
from platform_config.observability import node_metrics_errors, observability_errors
from platform_config.storage import checkpoint_errors, lustre_errors
from platform_config.studio import studio_errors
from platform_config.users import identity_errors, user_errors

Rule = Callable[[PlatformConfig], list[str]]


# ----------------------------------------------------------------------- rules that tie sections together
def per_user_mode_errors(cfg: PlatformConfig) -> list[str]:
    """What shared mode (shared_fsx: true) cannot offer safely. (MLflow in per-user mode is allowed, with the trust
    docs/security.md writes down: one tracking server is readable by every profile that may use it.)"""
    errors: list[str] = []
    departments = cfg.cluster.accounting.departments
    if cfg.orchestrator == "slurm" and cfg.studio.enabled and cfg.shared_fsx and departments:
        errors.append(
            f"cluster.accounting.departments: {len(departments)} department(s) with shared_fsx: true; shared "
            "mode gives every Studio space the cluster's munge key, so any department member is root on the "
            "compute nodes and can change every department's associations, limits and fair share with "
            "sacctmgr as root. Allowed: shared_fsx: false (per-user mode: each profile its own Slurm "
            "token and role), or no departments"
        )
    return errors


# Lists of records whose identity is a subset of their fields; the API or synth refuses two with the same identity.
_RECORD_KEYS = {
    "cluster.container_runtime.artifacts": ("name",),
    "cluster.pam_slurm_adopt_artifacts": ("name",),
    "network.existing.private_subnets": ("id",),
    "network.existing.control_plane_subnets": ("id",),
    "cluster.instance_groups[].kubernetes_taints": ("key", "effect"),  # Kubernetes: one taint per key and effect
    "observability.subscriptions": ("protocol", "endpoint"),
    "observability.node_metrics.artifacts": ("name",),
}
# Checked with their own message elsewhere (instance groups, users, teams, priority classes, AZ IDs).
_DUPLICATES_CHECKED_ELSEWHERE = {"network.az_ids"}


def duplicate_errors(cfg: PlatformConfig) -> list[str]:
    """No list accepts an entry twice: every list of plain values, and the record lists in _RECORD_KEYS."""
    errors: list[str] = []

    def walk(node: Any, path: str, shape: str) -> None:
        if isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name), f"{path}.{name}" if path else name, f"{shape}.{name}" if shape else name)
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}", f"{shape}.{key}")
        elif isinstance(node, list):
            keys = _RECORD_KEYS.get(shape)
            if node and not isinstance(node[0], BaseModel) and shape not in _DUPLICATES_CHECKED_ELSEWHERE:
                keys = ()
            if keys is not None:
                first: dict[Any, int] = {}
                for i, item in enumerate(node):
                    identity = tuple(getattr(item, k) for k in keys) if keys else item
                    if identity in first:
                        shown = ", ".join(f"{k}={getattr(item, k)!r}" for k in keys) if keys else repr(item)
                        errors.append(f"{path}[{i}]: {shown} repeats {path}[{first[identity]}]; list each at most once")
                    first.setdefault(identity, i)
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]", f"{shape}[]")

    walk(cfg, "", "")
    return errors


# ----------------------------------------------------------------------- every rule, in reporting order
RULES: tuple[Rule, ...] = (
    instance_group_errors,  # cluster: unique names, deep health checks, partitions, controllers, AZs
    slurm_node_role_errors,  # cluster: one controller group, at most one login group (Slurm)
    eks_errors,  # eks: versions, add-on pins, endpoint, control-plane subnets, Neuron taints
    task_governance_errors,  # eks.task_governance: quotas that fit, team gids, caps, members
    slurm_config_strategy_errors,  # cluster: no strategy on a continuous cluster
    container_runtime_errors,  # cluster.container_runtime: a pinned Docker build for the Ubuntu release
    lustre_errors,  # storage: capacity, metadata IOPS, mount path
    checkpoint_errors,  # storage: checkpoints inside the exported data repository path
    network_errors,  # network: region, subnets inside the VPC and apart, Studio's subnet
    duplicate_errors,  # every list: no entry twice
    observability_errors,  # observability: Grafana's needs, subscription endpoints
    node_metrics_errors,  # observability.node_metrics: the packages each node needs
    accounting_errors,  # cluster.accounting: names, QoS, users, limits, the managed database
    login_access_errors,  # cluster.login_access: SSH sources, the run-as default user
    budget_errors,  # cluster.budget: thresholds and recipients
    directory_errors,  # cluster.directory: encrypted URIs, required keys, the CA file
    pam_slurm_adopt_errors,  # cluster.pam_slurm_adopt: Slurm only, admin groups pam_access can list
    user_errors,  # users: unique names and uids, Studio profile names
    identity_errors,  # users: no system name, no squash identity
    studio_errors,  # studio: the shared spaces' user
    per_user_mode_errors,  # shared_fsx with departments
    attach_errors,  # cluster.existing: what attach mode needs and cannot offer
)


def semantic_errors(cfg: PlatformConfig) -> list[str]:
    """Every rule's errors, in the order of RULES; in attach mode without the rules about what it does not build."""
    skip = BUILD_ONLY_RULES if attached(cfg) else ()
    return [error for rule in RULES if rule.__name__ not in skip for error in rule(cfg)]
