"""The cluster section's rules across keys (instance groups, node roles, the Slurm configuration strategy, the
container runtime, pam_slurm_adopt): each returns the errors a config breaks, naming key, value and what is allowed.
The section's model is platform_config/cluster.py."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING


from platform_config.facts import ACCELERATORS
from platform_config.network import private_subnet_az_ids

from platform_config.cluster import (
    CONNECTIVITY_CHECK_MIN_INSTANCES,
    DEEP_HEALTH_CHECK_PAGES,
    EXTERNAL_ACCOUNTING_PAGE,
    MULTIHEAD_PAGE,
    SLURM_MIGRATION_PAGE,
)

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig


def instance_group_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append
    groups = cfg.cluster.instance_groups
    seen: dict[str, int] = {}
    for i, g in enumerate(groups):
        path = f"cluster.instance_groups[{i}]"
        if g.name.lower() in seen:
            add(
                f"{path}.name: {g.name!r} is already used by cluster.instance_groups[{seen[g.name.lower()]}]; "
                "instance group names must be unique (case-insensitive)"
            )
        seen.setdefault(g.name.lower(), i)
        if g.deep_health_checks and g.instance_type not in ACCELERATORS:
            # AWS lists each deep health check as for GPU or Trainium instances
            # (sagemaker-hyperpod-eks-resiliency-deep-health-checks); HyperPod rejects them on CPU-only types.
            add(
                f"{path}.deep_health_checks: {g.deep_health_checks} on {g.instance_type!r}; deep health checks "
                "run only on instance types with NVIDIA GPUs or Trainium devices (config/facts/accelerators.json)"
            )
        if "InstanceConnectivity" in g.deep_health_checks and g.instance_count < CONNECTIVITY_CHECK_MIN_INSTANCES:
            add(
                f"{path}.deep_health_checks: InstanceConnectivity with {path}.instance_count: {g.instance_count}; the "
                "connectivity check tests the network between the group's instances and needs at least "
                f"{CONNECTIVITY_CHECK_MIN_INSTANCES} of them ({DEEP_HEALTH_CHECK_PAGES[cfg.orchestrator]}). Allowed: "
                f"instance_count of {CONNECTIVITY_CHECK_MIN_INSTANCES} or more, or deep_health_checks without "
                "InstanceConnectivity (e.g. [InstanceStress])"
            )
        if g.role != "compute" and g.partitions:
            add(f"{path}.partitions: {g.partitions} on a {g.role} group; only compute groups belong to partitions")
        if cfg.orchestrator == "slurm" and g.role == "compute" and not g.partitions:
            add(
                f"{path}.partitions: [] on a compute group; HyperPod's API-driven Slurm configuration needs exactly "
                f"one partition name per compute group, e.g. [{g.name}]"
            )
        if g.role == "controller":
            errors.extend(_controller_count_errors(cfg, path, g.instance_count))
        if g.az_id is not None:
            azs = private_subnet_az_ids(cfg)
            if g.az_id not in azs:
                add(f"{path}.az_id: {g.az_id!r} has no private subnet; allowed: {', '.join(azs)}")
    return errors


def slurm_node_role_errors(cfg: PlatformConfig) -> list[str]:
    """A Slurm cluster has one controller group and at most one login group."""
    if cfg.orchestrator != "slurm":
        return []
    errors: list[str] = []
    add = errors.append
    groups = cfg.cluster.instance_groups
    controllers = [i for i, g in enumerate(groups) if g.role == "controller"]
    if len(controllers) != 1:
        add(f"cluster.instance_groups: {len(controllers)} groups with role 'controller'; exactly one is required")
    logins = [i for i, g in enumerate(groups) if g.role == "login"]
    if len(logins) > 1:
        add(
            f"cluster.instance_groups: {len(logins)} groups with role 'login' (indexes {logins}); at most one "
            "is allowed"
        )
    return errors


def _controller_count_errors(cfg: PlatformConfig, path: str, count: int) -> list[str]:
    """One controller, or several (HyperPod multi-head: a primary slurmctld and backups that take over, MULTIHEAD_PAGE)
    with what that needs: Slurm accounting outside the controllers (HyperPod's own MariaDB lives on one controller;
    the external accounting database keeps accounting through a controller's failure, EXTERNAL_ACCOUNTING_PAGE), which
    in turn needs continuous provisioning (accounting.managed_database_errors)."""
    if count == 1 or cfg.orchestrator != "slurm":
        return []
    allowed = "1, or 2 or more with cluster.accounting.database: managed (HyperPod multi-head controllers)"
    if count < 1:
        return [f"{path}.instance_count: {count} for the controller group; allowed: {allowed}"]
    if cfg.cluster.accounting.database != "managed":
        return [
            (
                f"{path}.instance_count: {count} for the controller group with cluster.accounting.database: "
                f"{cfg.cluster.accounting.database!r}; allowed: {allowed}. Backup controllers take over from the "
                "primary, so Slurm accounting must live outside the controllers (an external database, which HyperPod "
                f"attaches to continuous clusters only: {EXTERNAL_ACCOUNTING_PAGE}; {MULTIHEAD_PAGE})"
            )
        ]
    return []


def slurm_config_strategy_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append
    strategy = cfg.cluster.slurm_config_strategy
    if cfg.orchestrator == "slurm" and cfg.cluster.node_provisioning_mode == "Continuous" and strategy is not None:
        add(
            f"cluster.slurm_config_strategy: {strategy!r} with cluster.node_provisioning_mode: Continuous; allowed: "
            "unset (continuous provisioning clusters support only the Merge behavior and reject requests that set "
            f"SlurmConfigStrategy: {SLURM_MIGRATION_PAGE})"
        )
    return errors


def container_runtime_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append
    runtime = cfg.cluster.container_runtime
    if runtime.enabled and not runtime.docker_apt_version:
        add(
            "cluster.container_runtime.docker_apt_version: '' with the container runtime enabled; pin the docker.io "
            "package version, e.g. '24.0.7-0ubuntu2~22.04.1'"
        )
    built_for = re.search(r"ubuntu[0-9.]*~(\d\d\.\d\d)", runtime.docker_apt_version)
    if built_for and built_for.group(1) != runtime.ubuntu_release:
        add(
            f"cluster.container_runtime.docker_apt_version: {runtime.docker_apt_version!r} is a build for Ubuntu "
            f"{built_for.group(1)}, but cluster.container_runtime.ubuntu_release is {runtime.ubuntu_release!r}; pin a "
            "version built for that release"
        )
    return errors


# AWS's reference builds the module on every node from the matching Slurm release's source, fetched from GitHub
# (awslabs/awsome-distributed-ai@95b939cd, base-config/utils/pam_adopt_cgroup_wheel.sh).
PAM_ADOPT_REFERENCE = (
    "awslabs/awsome-distributed-ai@95b939cd 1.architectures/5.sagemaker-hyperpod/LifecycleScripts/"
    "base-config/utils/pam_adopt_cgroup_wheel.sh"
)


def pam_slurm_adopt_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append
    artifacts = cfg.cluster.pam_slurm_adopt_artifacts
    if cfg.cluster.pam_slurm_adopt and cfg.orchestrator == "slurm" and not artifacts:
        add(
            "cluster.pam_slurm_adopt: true with cluster.pam_slurm_adopt_artifacts: []; HyperPod's AMI has no "
            "pam_slurm_adopt.so and the platform fetches nothing from GitHub at deploy time, so every compute node "
            "would stop. Allowed: false, or a .deb of pam_slurm_adopt.so built from the source of the Slurm release "
            f"HyperPod runs (as {PAM_ADOPT_REFERENCE} builds it) in pam_slurm_adopt_artifacts"
        )
    if artifacts and not cfg.cluster.pam_slurm_adopt:
        add(
            f"cluster.pam_slurm_adopt_artifacts: {len(artifacts)} package(s) with cluster.pam_slurm_adopt: false; "
            "allowed only with pam_slurm_adopt: true (nothing would install them)"
        )
    if cfg.cluster.pam_slurm_adopt and cfg.orchestrator != "slurm":
        add(
            f"cluster.pam_slurm_adopt: true with orchestrator {cfg.orchestrator!r}; it is a Slurm PAM module, "
            "allowed only with orchestrator slurm"
        )
    if cfg.cluster.pam_slurm_adopt and cfg.cluster.directory.enabled:
        for i, group in enumerate(cfg.cluster.directory.admin_groups):
            if " " in group:  # pam_access(8) lists users and (groups) separated by spaces
                add(
                    f"cluster.directory.admin_groups[{i}]: {group!r} with cluster.pam_slurm_adopt: true; compute "
                    "nodes let admin groups past pam_slurm_adopt through pam_access, whose lists cannot hold a "
                    "space. Allowed: a group name without spaces"
                )
    return errors
