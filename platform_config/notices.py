"""What a valid config sets that the platform will not use, said as notices (synth prints them on stderr; they are not
errors, since one file may serve both orchestrators through `-c orchestrator=...`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from platform_config.cluster import Cluster

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

# cluster.* keys only a Slurm cluster reads (their descriptions say "Slurm only"); the EKS stacks never look at them.
SLURM_ONLY_CLUSTER_KEYS = (
    "slurm_config_strategy",
    "slurm_auto_resume",
    "container_runtime",
    "accounting",
    "login_access",
    "pam_slurm_adopt",
    "directory",
    "controller_ssh",
)


def unused_on_eks(cfg: PlatformConfig) -> list[str]:
    """On EKS: head-node groups (only compute groups become HyperPod instance groups, stacks/eks_cluster_stack.py),
    Slurm partitions, and every Slurm-only cluster key set to something other than its default."""
    if cfg.orchestrator != "eks" or cfg.cluster.existing is not None:
        return []  # Slurm reads them all; attach mode builds no groups and no cluster (platform_config/attach.py)
    notices = []
    for i, g in enumerate(cfg.cluster.instance_groups):
        if g.role != "compute":
            notices.append(
                f"cluster.instance_groups[{i}] ({g.name}, role {g.role}): not used on EKS, which builds "
                "only the compute groups"
            )
        elif g.partitions:
            notices.append(
                f"cluster.instance_groups[{i}].partitions: {g.partitions} not used on EKS (Slurm partitions)"
            )
    for key in SLURM_ONLY_CLUSTER_KEYS:
        value, default = getattr(cfg.cluster, key), Cluster.model_fields[key].get_default(call_default_factory=True)
        if value != default:
            notices.append(f"cluster.{key}: set, but Slurm only; not used on EKS")
    return notices
