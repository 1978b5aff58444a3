"""The stack graph, read from each synthesized cloud assembly's manifest (what `cdk deploy` orders by): each stack
waits only for what it consumes, so the slow creations (FSx, the EKS control plane, HyperPod, Studio) overlap."""

from __future__ import annotations

import json

import pytest

from support.variants import ALL_VARIANTS
from cli.stack_graph import ancestors, concurrency, mermaid, stack_dependencies, waves


def graph_problems(deps: dict[str, set[str]]) -> list[str]:
    """What would serialize creations that need not wait for each other."""
    by_role = {
        name.rsplit("-", 1)[-1]
        if not name.endswith(("-slurm-login", "-eks-access"))
        else "-".join(name.rsplit("-", 2)[-2:]): name
        for name in deps
    }
    problems = []
    studio, cluster, storage, eks = (by_role.get(r) for r in ("studio", "cluster", "storage", "eks"))
    if studio and cluster in ancestors(deps, studio):
        problems.append(f"{studio} waits for {cluster}: Studio needs nothing the HyperPod cluster creates")
    if studio and eks and eks in ancestors(deps, studio):
        problems.append(f"{studio} waits for {eks}: Studio needs nothing the EKS control plane creates")
    if eks and storage in ancestors(deps, eks):
        problems.append(f"{eks} waits for {storage}: the EKS control plane needs only the network")
    return problems


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_each_stack_waits_only_for_what_it_consumes(synth, variant):
    s = synth(variant)
    deps = stack_dependencies(s.out_dir)
    assert graph_problems(deps) == []
    name = s.config.name
    if s.config.cluster.existing is not None:  # attach mode: Studio in front of a cluster this platform did not build
        extra = "eks-access" if s.config.orchestrator == "eks" else "slurm-login"
        assert set(deps) == {f"{name}-{role}" for role in ("storage", "studio", extra)}
        assert deps[f"{name}-studio"] >= {f"{name}-storage"}
        if extra == "eks-access":
            assert deps[f"{name}-eks-access"] == {f"{name}-studio"}
        else:
            assert deps[f"{name}-slurm-login"] == set() and f"{name}-slurm-login" in deps[f"{name}-studio"]
        return
    if s.config.orchestrator == "eks":
        assert f"{name}-eks" in deps and f"{name}-storage" not in ancestors(deps, f"{name}-eks")
        # the control plane and FSx are created side by side, then HyperPod and Studio
        assert {f"{name}-eks", f"{name}-storage"} <= set(next(w for w in waves(deps) if f"{name}-eks" in w))
        assert ancestors(deps, f"{name}-eks-access") >= {f"{name}-eks", f"{name}-studio"}
    else:
        assert deps[f"{name}-slurm-login"] == set()
        assert f"{name}-slurm-login" in deps[f"{name}-cluster"] & deps[f"{name}-studio"]
    assert f"{name}-cluster" not in ancestors(deps, f"{name}-studio")
    # Observability alarms on every stack's functions and reads the cluster's ID: it comes last, after each of them.
    watched = {f"{name}-{r}" for r in ("storage", "cluster", "studio", "eks")} & set(deps)
    assert deps[f"{name}-observability"] >= watched and f"{name}-observability" in waves(deps)[-1]
    assert concurrency(deps) == 2  # HyperPod beside Studio (and, on EKS, the control plane beside FSx)


def _with_dependency(out_dir, tmp_path, consumer: str, producer: str):
    copy = tmp_path / "assembly"
    copy.mkdir()
    manifest = json.loads((out_dir / "manifest.json").read_text())
    manifest["artifacts"][consumer].setdefault("dependencies", []).append(producer)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return stack_dependencies(copy)


def test_the_check_fails_when_studio_waits_for_the_cluster(synth, tmp_path):
    s = synth("default")
    deps = _with_dependency(s.out_dir, tmp_path, "ml-cluster-studio", "ml-cluster-cluster")
    assert graph_problems(deps) == [
        "ml-cluster-studio waits for ml-cluster-cluster: Studio needs nothing the HyperPod cluster creates"
    ]
    # Studio would start only after HyperPod is in service (observability, after both, stays last)
    assert waves(deps)[-2:] == [["ml-cluster-studio"], ["ml-cluster-observability"]]


def test_the_check_fails_when_the_control_plane_waits_for_storage(synth, tmp_path):
    s = synth("eks")
    deps = _with_dependency(s.out_dir, tmp_path, "ml-eks-eks", "ml-eks-storage")
    assert graph_problems(deps) == ["ml-eks-eks waits for ml-eks-storage: the EKS control plane needs only the network"]


def test_the_mermaid_graph_draws_direct_edges_only(synth):
    text = mermaid(stack_dependencies(synth("eks").out_dir))
    ids = dict(line.strip().split("[", 1) for line in text.splitlines()[1:] if "[" in line)
    name = {k: v.strip('"]') for k, v in ids.items()}
    edges = {(name[a], name[b]) for a, _, b in (line.split() for line in text.splitlines() if "-->" in line)}
    assert edges == {
        ("ml-eks-network", "ml-eks-eks"),
        ("ml-eks-network", "ml-eks-storage"),
        ("ml-eks-eks", "ml-eks-cluster"),
        ("ml-eks-storage", "ml-eks-cluster"),
        ("ml-eks-storage", "ml-eks-studio"),
        ("ml-eks-eks", "ml-eks-eks-access"),
        ("ml-eks-studio", "ml-eks-eks-access"),
        ("ml-eks-cluster", "ml-eks-observability"),
        ("ml-eks-studio", "ml-eks-observability"),
    }


def test_a_slurm_config_imports_nothing_of_the_eks_path_or_of_features_it_leaves_off():
    """A fresh interpreter builds the default platform: no EKS module and no kubectl layer (a ~35 MB jsii
    assembly each) is imported, nor the modules of opt-in features the default leaves off (managed accounting
    database, Prometheus workspace, Grafana, budgets), nor cdk-nag, which only synthesis runs (add_security_checks
    imports it: a process that stops before, at a config error, does not load its assembly). The config model knows
    every section, EKS's included (pure pydantic, platform_config.eks), so its modules do not count."""
    import subprocess
    import sys
    from support.paths import ROOT

    unused = (
        "eks",
        "kubectl",
        "aws_rds",
        "accounting_database",
        "aws_aps",
        "metrics_workspace",
        "aws_grafana",
        "grafana_workspace",
        "aws_budgets",
        "platform_budgets",
        "cdk_nag",
    )
    code = (
        "import json, sys, aws_cdk as cdk; from platform_config import load_config; from stacks.platform import "
        "build_platform; app = cdk.App(context=json.load(open('cdk.json'))['context']); "
        "build_platform(app, load_config('config/default.yaml')); "
        f"print(sorted(m for m in sys.modules if any(u in m for u in {unused!r}) "
        "and not m.startswith('platform_config.')))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
