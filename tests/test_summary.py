"""What `make synth` prints after synthesizing (cli/summarize.py): the cluster and the file system named from the
templates, what bills while every group is at 0, GPU models per group."""

from __future__ import annotations

import pytest

from support.cli_main import run_main
from support.paths import ROOT
from support.variants import VARIANT_FILES


def summary(synth, capsys, variant: str) -> tuple[str, object]:
    """What `python -m cli.summarize OUT --config FILE` prints after `make synth`, run in this process
    (tests/test_sizing.py and tests/test_cli.py start the command as a process)."""
    built = synth(variant)
    result = run_main("cli.summarize", [str(built.out_dir), "--config", str(VARIANT_FILES[variant])], capsys)
    assert result.returncode == 0, result.stderr
    return result.stdout, built.config


@pytest.mark.parametrize("variant, orchestrator", [("default", "Slurm"), ("eks", "EKS")])
def test_the_summary_names_the_cluster_and_the_file_system(synth, capsys, variant, orchestrator):
    out, cfg = summary(synth, capsys, variant)
    groups = [g for g in cfg.cluster.instance_groups if orchestrator == "Slurm" or g.role == "compute"]
    cluster = next(line for line in out.splitlines() if line.startswith("  HyperPod cluster"))
    assert f"{cfg.name} ({orchestrator}; " in cluster
    for g in groups:
        assert f"{g.name} {g.instance_count} x {g.instance_type}" in cluster
    lustre = cfg.storage.lustre
    fsx = next(line for line in out.splitlines() if line.startswith("  FSx file system"))
    assert (
        f"LUSTRE {lustre.storage_capacity_gib} GiB PERSISTENT_2 {lustre.throughput_mib_per_tib} MB/s/TiB, kept on "
        "delete" in fsx
    )
    assert any(line.startswith("  Studio domain") for line in out.splitlines())
    if orchestrator == "EKS":
        assert any(line.startswith("  EKS control plane") for line in out.splitlines())


def test_what_bills_with_every_group_at_zero_is_counted_from_the_templates(synth, capsys):
    out, _cfg = summary(synth, capsys, "default")
    built = synth("default")
    nat = sum(
        1 for t in built.templates.values() for r in t["Resources"].values() if r["Type"] == "AWS::EC2::NatGateway"
    )
    keys = sum(1 for t in built.templates.values() for r in t["Resources"].values() if r["Type"] == "AWS::KMS::Key")
    line = next(line for line in out.splitlines() if line.startswith("  billed even with every group at 0:"))
    assert f"{nat} x NAT gateway" in line and f"{keys} x KMS key" in line
    assert "endpoint" not in line  # the default has only the S3 gateway endpoint, which is free


def test_each_deploy_step_takes_as_long_as_its_slowest_stack(synth, capsys):
    """The steps are the stack graph's waves; the cluster's step carries the HyperPod figure of the facts file."""
    import json

    from cli.stack_graph import stack_dependencies, waves

    out, cfg = summary(synth, capsys, "default")
    built = synth("default")
    facts = json.loads((ROOT / "config" / "facts" / "deploy_times.json").read_text())
    steps = [line for line in out.splitlines() if line.startswith("  step ")]
    assert len(steps) == len(waves(stack_dependencies(built.out_dir)))
    low, high = facts["types"]["AWS::SageMaker::Cluster"]["minutes"]
    cluster_step = next(line for line in steps if f"{cfg.name}-cluster (" in line)
    assert cluster_step.split()[2] == f"{low}-{high}"
    assert f"{cfg.name}-cluster ({low}-{high} min: HyperPod cluster)" in cluster_step
    assert any(line.startswith("  total: at least ") for line in out.splitlines())


def test_a_nested_stacks_resources_count_for_its_parent_and_the_slowest_stack_sets_the_step():
    from cli.deploy_times import lines

    facts = {
        "source": "src",
        "types": {
            "AWS::FSx::FileSystem": {"minutes": [10, 10], "label": "FSx"},
            "AWS::SageMaker::Cluster": {"minutes": [15, 25], "label": "HyperPod"},
        },
    }
    templates = {
        "net": {"Resources": {}},
        "z-fast": {"Resources": {"F": {"Type": "AWS::FSx::FileSystem"}}},
        "slow": {
            "Resources": {
                "N": {
                    "Type": "AWS::CloudFormation::Stack",
                    "Metadata": {"aws:asset:path": "slowInner1234.nested.template.json"},
                }
            }
        },
    }
    nested = {"slowInner1234": {"Resources": {"C": {"Type": "AWS::SageMaker::Cluster"}}}}
    out = lines({"net": set(), "z-fast": {"net"}, "slow": {"net"}}, templates, nested, facts)
    assert out[1] == "  step 1: no time on record  net (no time on record)"
    assert out[2] == "  step 2: 15-25 min          slow (15-25 min: HyperPod), z-fast (~10 min: FSx)"
    assert out[3].startswith("  total: at least 15-25 min, plus what has no time on record; figures from src ")
