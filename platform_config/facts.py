"""Facts the config is checked against, read from files under config/facts/ that maintainer tools generate from
upstream sources (each file names its source): accelerators per instance type, and the account names no user may
take. Nothing here knows the config model."""

from __future__ import annotations

import json
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# Account and group names no config user may take (the node image's, Slurm's, HyperPod's, Studio's), with where each
# comes from: tools/reserved_users.py writes the file. The Slurm token issuer gets the same list
# (constructs/slurm_token_issuer.py passes it in its environment), so config and handler cannot disagree.
RESERVED_USERS_FACTS = REPO_ROOT / "config" / "facts" / "reserved-users.json"


def _reserved_users(path: Path = RESERVED_USERS_FACTS) -> tuple[dict[str, str], dict[str, str]]:
    facts = json.loads(path.read_text())
    return facts["names"], facts["prefixes"]


RESERVED_USER_NAMES, RESERVED_USER_PREFIXES = _reserved_users()
# nobody/nogroup (base-passwd): files that root squash or NFS map to "no one" belong to them.
NOBODY_ID = 65534


def reserved_user(name: str) -> str | None:
    """Why `name` is reserved (its source), or None."""
    if name in RESERVED_USER_NAMES:
        return RESERVED_USER_NAMES[name]
    prefix = next((p for p in RESERVED_USER_PREFIXES if name.startswith(p)), None)
    return f"names starting with {prefix!r}: {RESERVED_USER_PREFIXES[prefix]}" if prefix else None


# The instance types HyperPod clusters accept (CreateCluster's ClusterInstanceType enum), written from botocore's
# service model by tools/cluster_instance_types.py; the file names the botocore version.
CLUSTER_INSTANCE_TYPE_FACTS = REPO_ROOT / "config" / "facts" / "cluster_instance_types.json"
CLUSTER_INSTANCE_TYPES: tuple[str, ...] = tuple(json.loads(CLUSTER_INSTANCE_TYPE_FACTS.read_text())["instance_types"])


# Accelerators per instance (extended resource name, count): team ResourceQuotas on EKS, the GPUs a Slurm compute node
# has as GRES (lifecycle/hyperpod/check_gres.sh compares HyperPod's Gres=gpu:N with this), QoS gpu limits. The counts
# are aws/sagemaker-hyperpod-cli's INSTANCE_RESOURCES at a pinned commit, written to ACCELERATOR_FACTS by
# tools/accelerator_counts.py (repository, commit and path are in the file; Trainium counts are Neuron devices).
# A type not listed counts as no accelerator.
ACCELERATOR_FACTS = REPO_ROOT / "config" / "facts" / "accelerators.json"
NVIDIA = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neurondevice"


def _accelerators_from_facts(path: Path = ACCELERATOR_FACTS) -> dict[str, tuple[str, int]]:
    rows = json.loads(path.read_text())["accelerators"]
    unknown = {row["resource"] for row in rows.values()} - {NVIDIA, NEURON}
    if unknown:  # nvidia_gpus and the Neuron taint check would silently ignore them
        raise ValueError(f"{path}: extended resources {sorted(unknown)}; this platform knows {NVIDIA}, {NEURON}")
    return {instance_type: (row["resource"], row["count"]) for instance_type, row in sorted(rows.items())}


ACCELERATORS: dict[str, tuple[str, int]] = _accelerators_from_facts()


def nvidia_gpus(instance_type: str) -> int:
    """NVIDIA GPUs per instance (0 for other accelerators and unknown types): the GRES count Slurm should show."""
    kind, count = ACCELERATORS.get(instance_type, ("", 0))
    return count if kind == NVIDIA else 0
