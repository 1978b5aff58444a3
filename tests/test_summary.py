"""What `make synth` prints after synthesizing (cli/summarize.py): the cluster and the file system named from the
templates, what bills while every group is at 0, GPU models per group."""
from __future__ import annotations

import subprocess
import sys

import pytest

from support.paths import ROOT
from support.variants import VARIANT_FILES


def summary(synth, variant: str) -> tuple[str, object]:
    built = synth(variant)
    result = subprocess.run([sys.executable, "-m", "cli.summarize", str(built.out_dir), "--config",
                             str(VARIANT_FILES[variant])], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout, built.config


@pytest.mark.parametrize("variant, orchestrator", [("default", "Slurm"), ("eks", "EKS")])
def test_the_summary_names_the_cluster_and_the_file_system(synth, variant, orchestrator):
    out, cfg = summary(synth, variant)
    groups = [g for g in cfg.cluster.instance_groups if orchestrator == "Slurm" or g.role == "compute"]
    cluster = next(line for line in out.splitlines() if line.startswith("  HyperPod cluster"))
    assert f"{cfg.name} ({orchestrator}; " in cluster
    for g in groups:
        assert f"{g.name} {g.instance_count} x {g.instance_type}" in cluster
    lustre = cfg.storage.lustre
    fsx = next(line for line in out.splitlines() if line.startswith("  FSx file system"))
    assert f"LUSTRE {lustre.storage_capacity_gib} GiB PERSISTENT_2 {lustre.throughput_mib_per_tib} MB/s/TiB, kept on " \
           "delete" in fsx
    assert any(line.startswith("  Studio domain") for line in out.splitlines())
    if orchestrator == "EKS":
        assert any(line.startswith("  EKS control plane") for line in out.splitlines())


def test_what_bills_with_every_group_at_zero_is_counted_from_the_templates(synth):
    out, _cfg = summary(synth, "default")
    built = synth("default")
    nat = sum(1 for t in built.templates.values() for r in t["Resources"].values() if r["Type"] == "AWS::EC2::NatGateway")
    keys = sum(1 for t in built.templates.values() for r in t["Resources"].values() if r["Type"] == "AWS::KMS::Key")
    line = next(line for line in out.splitlines() if line.startswith("  billed even with every group at 0:"))
    assert f"{nat} x NAT gateway" in line and f"{keys} x KMS key" in line
    assert "endpoint" not in line  # the default has only the S3 gateway endpoint, which is free
