"""Accelerator counts per instance type: the committed facts are what tools/accelerator_counts.py derives from the
pinned aws/sagemaker-hyperpod-cli revision, and platform_config/facts.py uses exactly those counts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from support.paths import ROOT
from platform_config import facts
from platform_config.facts import ACCELERATORS, nvidia_gpus
from tools import accelerator_counts

FACTS = json.loads(accelerator_counts.FACTS.read_text())
ROWS = FACTS["accelerators"]
HYPERPOD_CLI = Path(os.environ.get("UPSTREAM_MIRRORS", "/work/.mirror")) / "aws+sagemaker-hyperpod-cli" / "repo"


def family(instance_type: str) -> str:
    return instance_type.split(".")[1]


def test_facts_name_the_pinned_revision():
    assert accelerator_counts.FACTS == facts.ACCELERATOR_FACTS
    assert {k: FACTS[k] for k in ("repository", "commit", "path", "variable")} == {
        "repository": "aws/sagemaker-hyperpod-cli",
        "commit": accelerator_counts.COMMIT,
        "path": accelerator_counts.TABLE_PATH,
        "variable": "INSTANCE_RESOURCES",
    }


def test_committed_facts_equal_a_fresh_generation():
    if not (HYPERPOD_CLI / "objects").is_dir():
        pytest.skip(f"no clone at {HYPERPOD_CLI} (set UPSTREAM_MIRRORS; CI cannot reach GitHub)")
    assert accelerator_counts.render(HYPERPOD_CLI) == accelerator_counts.FACTS.read_text()


def test_config_uses_the_counts_of_the_facts():
    # Compared row by row against the JSON, so a count typed into (or patched over) ACCELERATORS fails here.
    assert ACCELERATORS == {t: (row["resource"], row["count"]) for t, row in ROWS.items()}
    for instance_type, row in ROWS.items():
        expected = row["count"] if row["resource"] == "nvidia.com/gpu" else 0
        assert nvidia_gpus(instance_type) == expected, instance_type
    assert nvidia_gpus("ml.c5.9xlarge") == 0  # CPU-only upstream: no row, no GRES


def test_every_accelerated_instance_type_in_the_shipped_configs_has_a_row():
    used: dict[str, str] = {}
    for path in [ROOT / "config" / "default.yaml", *sorted((ROOT / "config" / "examples").glob("*.yaml"))]:
        data = yaml.safe_load(path.read_text())
        for i, group in enumerate(data["cluster"].get("instance_groups", [])):  # attach configs build no groups
            if group["role"] == "compute":
                used[group["instance_type"]] = f"{path.name}: cluster.instance_groups[{i}]"
        for i, team in enumerate((data.get("eks") or {}).get("task_governance", {}).get("teams", [])):
            used[team["instance_type"]] = f"{path.name}: eks.task_governance.teams[{i}]"
    accelerated = {t: where for t, where in used.items() if family(t).startswith(("p", "g", "trn", "inf"))}
    assert {"ml.g5.8xlarge", "ml.p5.48xlarge", "ml.g6e.12xlarge"} <= set(accelerated)
    assert [f"{where}: {t}" for t, where in sorted(accelerated.items()) if t not in ROWS or t not in ACCELERATORS] == []


def test_neuron_rows_count_devices_under_the_neurondevice_resource():
    neuron = {t: row for t, row in ROWS.items() if family(t).startswith("trn")}
    assert neuron and {row["resource"] for row in neuron.values()} == {"aws.amazon.com/neurondevice"}
    assert all(ACCELERATORS[t][0] == "aws.amazon.com/neurondevice" for t in neuron)


def test_unknown_extended_resource_in_the_facts_is_refused(tmp_path):
    bad = tmp_path / "accelerators.json"
    bad.write_text(json.dumps({"accelerators": {"ml.p5.48xlarge": {"resource": "amd.com/gpu", "count": 8}}}))
    with pytest.raises(ValueError, match=r"\['amd.com/gpu'\]; this platform knows nvidia.com/gpu"):
        facts._accelerators_from_facts(bad)


# ---------------------------------------------------------------------------------------------- the generator
def test_generator_reads_literals_without_running_them():
    source = "X = 1\nINSTANCE_RESOURCES: dict = {'ml.a.b': {'gpu': 2, 'trainium': 0}}\n"
    assert accelerator_counts.assigned(source, "INSTANCE_RESOURCES", "t.py") == {"ml.a.b": {"gpu": 2, "trainium": 0}}
    with pytest.raises(ValueError):  # a call is code, not a literal: refused, not evaluated
        accelerator_counts.assigned("INSTANCE_RESOURCES = dict(a=1)\n", "INSTANCE_RESOURCES", "t.py")
    with pytest.raises(SystemExit, match="no module-level assignment to INSTANCE_RESOURCES"):
        accelerator_counts.assigned("OTHER = {}\n", "INSTANCE_RESOURCES", "t.py")


def test_generator_applies_upstreams_rule_trainium_then_gpu():
    table = {
        "ml.t.x": {"gpu": 0, "trainium": 16},
        "ml.g.x": {"gpu": 4, "trainium": 0},
        "ml.both.x": {"gpu": 2, "trainium": 1},
        "ml.cpu.x": {"gpu": 0, "trainium": 0},
    }
    assert accelerator_counts.accelerators(table, "G", "N") == {
        "ml.both.x": {"resource": "N", "count": 1},
        "ml.g.x": {"resource": "G", "count": 4},
        "ml.t.x": {"resource": "N", "count": 16},
    }


def test_generator_stops_when_upstream_changes_its_rule():
    if not (HYPERPOD_CLI / "objects").is_dir():
        pytest.skip(f"no clone at {HYPERPOD_CLI} (set UPSTREAM_MIRRORS; CI cannot reach GitHub)")
    source = accelerator_counts.show(HYPERPOD_CLI, accelerator_counts.COMMIT, accelerator_counts.RULE_PATH)
    accelerator_counts.check_rule(source)
    swapped = (
        source.replace('"trainium", 0', '"SWAP", 0')
        .replace('"gpu", 0', '"trainium", 0')
        .replace('"SWAP", 0', '"gpu", 0')
    )
    assert swapped != source
    with pytest.raises(SystemExit, match="now reads"):
        accelerator_counts.check_rule(swapped)
