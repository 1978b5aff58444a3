"""Job files (examples/*.yaml's `jobs:` list) for the training-job tests: one valid job, and it with one key changed."""

from __future__ import annotations

import copy
import functools
from typing import Any

import yaml

from support.data import set_path
from support.paths import ROOT

# The teams, their gids and priority classes the job examples are rendered for (examples/elastic-jobs.yaml).
TEAMS = ("research", "production")
GIDS = {"research": 3001, "production": 3002}
PRIORITY_CLASSES = ("inference", "training", "experimentation")
MANIFESTS = ROOT / "examples" / "manifests"

BASE = {
    "name": "job-a",
    "team": "research",
    "priority": "training",
    "image": "repo.example/train:1.0",
    "command": ["hyperpodrun"],
    "args": ["--nproc-per-node=8", "train.py"],
    "instance_type": "ml.p5.48xlarge",
    "accelerators_per_pod": 8,
    "nproc_per_node": 8,
    "global_batch_size": 192,
    "micro_batch_size": 2,
    "checkpoint_dir": "/fsx/ckpt/job-a",
    "elastic_policy": {"min_replicas": 1, "max_replicas": 4},
}


def with_(path: str, value: Any) -> dict[str, Any]:
    """A one-job file with one dotted path of the job set to value (support.data.DROP removes the key)."""
    return {"jobs": [set_path(copy.deepcopy(BASE), path, value)]}


def committed() -> dict[str, dict[str, Any]]:
    """The committed job manifests (examples/manifests), by file name: read once per process (~40 ms, at collection
    and by ~40 tests), a copy of its own for each caller (~1 ms), which may change it."""
    return copy.deepcopy(_committed())


@functools.cache
def _committed() -> dict[str, dict[str, Any]]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(MANIFESTS.glob("*.yaml"))}
