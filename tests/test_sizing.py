"""cli/sizing.py: accelerators by group, FSx throughput from AWS's per-unit figures, checkpoint time and budget."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.paths import ROOT
from platform_config import parse_config
from cli.sizing import MB_PER_GIB, render, size

GROUPS = [
    {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
    {"name": "p5", "role": "compute", "instance_type": "ml.p5.48xlarge", "instance_count": 4, "partitions": ["gpu"]},
    {"name": "trn", "role": "compute", "instance_type": "ml.trn1.32xlarge", "instance_count": 2, "partitions": ["trn"]},
]


def cfg(**storage):
    lustre = storage.pop("lustre", {})
    return parse_config({"cluster": {"instance_groups": GROUPS}, "storage": {"lustre": lustre, **storage}})


def test_accelerators_by_group_and_in_total():
    c = cfg()
    s = size(c)
    assert [(g.name, g.accelerator, g.total) for g in s.groups] == [
        ("controller", None, 0),
        ("p5", "nvidia.com/gpu", 32),
        ("trn", "aws.amazon.com/neurondevice", 32),
    ]
    assert "  total: 32 x NVIDIA H100 (80 GiB), 32 x Trainium (32 GiB)" in render(s, c)
    assert (
        "  p5                          4 x ml.p5.48xlarge     192 vCPU, 2048 GiB; 32 x NVIDIA H100 (8 per "
        "instance, 80 GiB each)"
    ) in render(s, c)


def test_on_eks_only_the_compute_groups_are_counted():
    c = parse_config({"orchestrator": "eks", "cluster": {"instance_groups": GROUPS}})
    assert [g.name for g in size(c).groups] == ["p5", "trn"]


def test_the_instance_specs_are_the_installed_ec2_copy_and_agree_with_the_accelerator_counts():
    result = subprocess.run(
        [sys.executable, "tools/instance_type_specs.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    counts = json.loads((ROOT / "config" / "facts" / "accelerators.json").read_text())["accelerators"]
    specs = json.loads((ROOT / "config" / "facts" / "instance_type_specs.json").read_text())["specs"]
    both = sorted(set(counts) & set(specs))
    assert len(both) > 20
    assert [(t, counts[t]["count"]) for t in both] == [(t, (specs[t]["accelerator"] or {}).get("count")) for t in both]


@pytest.mark.parametrize(
    "capacity, tier, disk, network",
    [
        (1200, 125, 1200 / 1024 * 125, 1200 / 1024 * 320),
        (2400, 250, 2400 / 1024 * 250, 2400 / 1024 * 640),
        (4800, 500, 4800 / 1024 * 500, 4800 / 1024 * 1300),
        (48000, 1000, 48000 / 1024 * 1000, 48000 / 1024 * 2600),
    ],
)
def test_aggregate_throughput_is_capacity_times_per_unit(capacity, tier, disk, network):
    s = size(cfg(lustre={"storage_capacity_gib": capacity, "throughput_mib_per_tib": tier}))
    assert s.disk_mbps == pytest.approx(disk)
    assert s.network_mbps == pytest.approx(network)


def test_checkpoint_time_and_budget_warning():
    # 1200 GiB at 250 MB/s/TiB: 292.97 MB/s; 100 GiB = 107374 MB -> 366.5 s, inside a 10 minute budget.
    s = size(cfg(checkpoint_gib=100))
    assert s.write_seconds == pytest.approx(100 * MB_PER_GIB / (1200 / 1024 * 250))
    assert s.write_seconds == pytest.approx(366.5, abs=0.1)
    assert s.warnings == []
    # The same checkpoint against a 5 minute budget: warned, with the throughput it needs.
    s = size(cfg(checkpoint_gib=100, checkpoint_budget_minutes=5))
    assert len(s.warnings) == 1
    assert "over storage.checkpoint_budget_minutes (5 min); it needs about 358 MB/s" in s.warnings[0]


def test_metadata_iops_user_provisioned_is_printed():
    c = cfg(lustre={"metadata": {"mode": "USER_PROVISIONED", "iops": 12000}})
    assert "12000 metadata IOPS (USER_PROVISIONED)" in "\n".join(render(size(c), c))


def test_no_checkpoint_size_says_how_to_get_one():
    c = cfg()
    assert size(c).write_seconds is None
    assert "  checkpoint time: set storage.checkpoint_gib to see write and read time" in render(size(c), c)


def test_summarize_prints_the_sizing_for_the_config(tmp_path):
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"artifacts": {}}))
    config = tmp_path / "c.yaml"
    config.write_text("storage:\n  checkpoint_gib: 500\n")
    result = subprocess.run(
        [sys.executable, "-m", "cli.summarize", str(out), "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "one 500 GiB checkpoint: write 30.5 min" in result.stdout
    assert "WARNING: writing one 500 GiB checkpoint takes 30.5 min" in result.stdout
