"""The HyperPod dependency chart: the pin, the facts generated from it, what the project sets, what synth accepts,
and (where clones of the upstream repositories are present) `helm template` of the real chart."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from support.app_main import run_app
from support.paths import ROOT
from support.variants import cdk_json_context, eks_config, STAND_IN_CHART, VARIANT_FILES
from manifests.hyperpod_dependency_chart import dependency_chart_values
from platform_config import ConfigError, chart_pin
from platform_config.chart_pin import chart_directory
from platform_config.cluster import Taint
from platform_config.eks_tolerations import NEURON_PLUGIN_TOLERATIONS, tolerates
from tools import hyperpod_chart_facts, render_hyperpod_chart

FACTS = json.loads((ROOT / "tests" / "fixtures" / "hyperpod-chart-facts.json").read_text())
MIRRORS = Path(os.environ.get("UPSTREAM_MIRRORS", "/work/.mirror"))
HYPERPOD_CLI = MIRRORS / "aws+sagemaker-hyperpod-cli" / "repo"
DEVICE_PLUGIN = MIRRORS / "NVIDIA+k8s-device-plugin" / "repo"
EKS_CHARTS = MIRRORS / "aws+eks-charts" / "repo"


def needs(*clones: Path) -> None:
    missing = [str(c) for c in clones if not (c / "objects").is_dir()]
    if missing:
        pytest.skip(f"no clone at {', '.join(missing)} (set UPSTREAM_MIRRORS; CI cannot reach GitHub)")


def stand_in_values() -> dict:
    return yaml.safe_load((STAND_IN_CHART / "values.yaml").read_text())


def example_values(**eks) -> dict:
    return dependency_chart_values(
        eks_config(VARIANT_FILES["eks"], eks=eks), region="eu-west-1", chart_values=stand_in_values()
    )


# ---------------------------------------------------------------------------------------------- pin and facts
def test_facts_describe_the_pinned_revision():
    pin = chart_pin.pin()
    assert FACTS["source"] == {k: pin[k] for k in ("repository", "commit", "path", "tree")}
    fetch = (ROOT / "tools" / "fetch_hyperpod_chart.sh").read_text()
    assert "config/hyperpod-chart-pin.json" in fetch  # the fetch reads the same pin


def test_committed_facts_and_stand_in_equal_a_fresh_generation():
    needs(HYPERPOD_CLI)
    assert hyperpod_chart_facts.main(["--git-dir", str(HYPERPOD_CLI), "--check"]) == 0


def test_pinned_content_digest_matches_the_upstream_tree(tmp_path):
    needs(HYPERPOD_CLI)
    chart = hyperpod_chart_facts.extract(HYPERPOD_CLI, tmp_path)
    assert chart_pin.content_digest(chart_pin.directory_files(chart)) == chart_pin.pin()["content_sha256"]


def test_every_subchart_in_charts_is_a_listed_dependency():
    # A directory under charts/ that Chart.yaml does not list is installed whatever the values say.
    assert [e for e in FACTS["charts_dir"] if not e["listed_in_chart_yaml"]] == []


def test_project_sets_every_condition_of_the_chart_and_only_keys_it_has():
    values = example_values()
    conditions = {d["condition"]: d for d in FACTS["dependencies"]}

    def at(tree, dotted):
        for key in dotted.split("."):
            tree = tree[key]
        return tree

    for condition in conditions:
        assert isinstance(at(values, condition), bool), f"{condition} is left to the chart's default"

    def leaves(tree, prefix=""):
        for key, value in tree.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict):
                yield from leaves(value, path + ".")
            else:
                yield path

    known = set(conditions) | {FACTS["region"]["path"]} | set(FACTS["default_tolerations"])
    assert set(leaves(values)) <= known
    off = {d["name"] for c, d in conditions.items() if at(values, c) is False}
    assert off == {
        "cert-manager",
        "mlflow",
        "storage",
        "cluster-role-and-bindings",
        "namespaced-role-and-bindings",
        "team-role-and-bindings",
        "hyperpod-inference-operator",
        "gpu-operator",
        "neuron-device-plugin",
    }


def test_device_plugins_and_health_agent_tolerate_every_configured_taint():
    values = example_values()
    taint = Taint(key="dedicated", value="development", effect="NoSchedule")  # config/examples/eks.yaml, dev-g5
    for plugin in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin"):
        tolerations = values[plugin]["tolerations"]
        assert any(tolerates(t, taint) for t in tolerations)
        assert all(t in tolerations for t in FACTS["default_tolerations"][f"{plugin}.tolerations"])  # kept
    for block in FACTS["hard_coded_tolerations"]["health-monitoring-agent"]:
        assert any(tolerates(t, taint) for t in block)


def test_without_taints_the_chart_keeps_its_own_tolerations():
    cfg = eks_config(VARIANT_FILES["eks"])
    groups = [g.model_copy(update={"kubernetes_taints": []}) for g in cfg.cluster.instance_groups]
    cfg = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"instance_groups": groups})})
    values = dependency_chart_values(cfg, region="eu-west-1", chart_values=stand_in_values())
    assert "tolerations" not in values["nvidia-device-plugin"]


def test_neuron_tolerations_in_the_config_model_are_the_charts():
    (block,) = FACTS["hard_coded_tolerations"]["neuron-device-plugin"]
    assert list(NEURON_PLUGIN_TOLERATIONS) == block


# ---------------------------------------------------------------------------------------------- what synth accepts
def pinned_copy(tmp_path: Path) -> Path:
    """The pinned chart as tools/fetch_hyperpod_chart.sh leaves it: local subcharts packaged into charts/ (the
    remote ones need chart repositories this machine cannot reach), .pin and .dependencies.sha256 written."""
    needs(HYPERPOD_CLI)
    chart = hyperpod_chart_facts.extract(HYPERPOD_CLI, tmp_path / "src")
    for dep in yaml.safe_load((chart / "Chart.yaml").read_text())["dependencies"]:
        if dep["repository"].startswith("file://"):
            render_hyperpod_chart.package_local(chart / dep["repository"][len("file://") :], chart / "charts")
    pin = chart_pin.pin()
    (chart / ".pin").write_text("".join(f"{k}={pin[k]}\n" for k in ("repository", "commit", "path", "tree")))
    sums = [
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  ./{p.relative_to(chart).as_posix()}"
        for p in sorted(chart.rglob("*.tgz"))
    ]
    (chart / ".dependencies.sha256").write_text("".join(s + "\n" for s in sums))
    return chart


def with_chart(chart_dir: Path):
    cfg = eks_config(VARIANT_FILES["eks"])
    deps = cfg.eks.hyperpod_dependencies.model_copy(update={"chart_dir": str(chart_dir)})
    return cfg.model_copy(update={"eks": cfg.eks.model_copy(update={"hyperpod_dependencies": deps})})


def test_the_stale_archive_upstream_commits_is_refused_until_the_fetch_replaces_it(tmp_path):
    needs(HYPERPOD_CLI)
    chart = hyperpod_chart_facts.extract(HYPERPOD_CLI, tmp_path)
    pin = chart_pin.pin()
    (chart / ".pin").write_text(f"commit={pin['commit']}\ntree={pin['tree']}\n")
    archive = chart / "charts" / "health-monitoring-agent-0.1.0.tgz"
    (chart / ".dependencies.sha256").write_text(
        f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  ./charts/health-monitoring-agent-0.1.0.tgz\n"
    )
    (problem,) = chart_pin.problems(chart)
    assert problem.startswith("charts/health-monitoring-agent-0.1.0.tgz differs from charts/health-monitoring-agent/")


def test_synth_refuses_the_stand_in_unless_tests_allow_it():
    with pytest.raises(ConfigError) as info:
        chart_directory(with_chart(STAND_IN_CHART))
    (error,) = info.value.errors
    assert "is not the pinned HyperPod chart" in error and "it has no .pin" in error and "make hyperpod-chart" in error
    assert chart_directory(with_chart(STAND_IN_CHART), allow_stand_in=True) == STAND_IN_CHART


def test_synth_accepts_the_pinned_chart_and_refuses_any_change_to_it(tmp_path):
    chart = pinned_copy(tmp_path)
    assert chart_pin.problems(chart) == []
    assert chart_directory(with_chart(chart)) == chart
    original = (chart / "values.yaml").read_text()
    (chart / "values.yaml").write_text(original.replace("enabled: false", "enabled: true", 1))
    assert any("digest" in p for p in chart_pin.problems(chart))
    (chart / "values.yaml").write_text(original)
    assert chart_pin.problems(chart) == []
    (chart / "charts" / "extra-0.1.0.tgz").write_bytes(b"not recorded")
    assert chart_pin.problems(chart) == [
        "charts/extra-0.1.0.tgz is not the archive the fetch recorded in .dependencies.sha256"
    ]


def test_a_template_built_on_the_stand_in_cannot_deploy(synth):
    rules = synth("eks").templates["eks"]["Rules"]
    (rule,) = [r for k, r in rules.items() if k.startswith("PinnedDependencyChart")]
    (assertion,) = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Contains": [["stand-in chart"], {"Ref": "BootstrapVersion"}]}
    assert "test stand-in" in assertion["AssertDescription"]


def test_app_refuses_the_stand_in_without_traceback(tmp_path, monkeypatch, capsys):
    config = tmp_path / "eks.yaml"
    config.write_text(
        VARIANT_FILES["eks"].read_text().replace("chart_dir: build/hyperpod-helm-chart", f"chart_dir: {STAND_IN_CHART}")
    )
    # app.py in this process, as tests/test_config_loading.py runs it (one case there starts it as the CLI does)
    result = run_app({**cdk_json_context(), "config": str(config)}, monkeypatch, capsys, outdir=tmp_path / "out")
    assert result.returncode == 1
    assert "is not the pinned HyperPod chart" in result.stderr and "Traceback" not in result.stderr
    assert not list((tmp_path / "out").glob("*.template.json"))


# ---------------------------------------------------------------------------------------------- helm template
@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    needs(HYPERPOD_CLI, DEVICE_PLUGIN, EKS_CHARTS)
    work = tmp_path_factory.mktemp("render")
    helm = render_hyperpod_chart.helm_binary(work)
    chart = render_hyperpod_chart.build_chart(
        work,
        hyperpod_cli=HYPERPOD_CLI,
        helm=helm,
        sources={"nvidia-device-plugin": DEVICE_PLUGIN, "aws-efa-k8s-device-plugin": EKS_CHARTS},
    )
    return render_hyperpod_chart.render(chart, example_values(), helm=helm, work=work)


def test_rendered_chart_has_what_the_project_expects_and_nothing_it_disabled(rendered):
    names = {(o["kind"], o["metadata"]["name"]) for o in rendered}
    expected = {
        ("DaemonSet", "hyperpod-dependencies-nvidia-device-plugin"),
        ("DaemonSet", "hyperpod-dependencies-aws-efa-k8s-device-plugin"),
        ("DaemonSet", "health-monitoring-agent"),
        ("DaemonSet", "health-monitoring-agent-non-nvidia"),
        ("Deployment", "hyperpod-dependencies-training-operators"),
        ("Deployment", "hyperpod-dependencies-mpi-operator"),
        ("ClusterRole", "deep-health-check-service-account-role"),
        ("ClusterRole", "job-auto-restart"),
        ("ClusterRole", "hyperpod-patching"),
    }
    assert expected <= names
    kinds = {o["kind"] for o in rendered}
    assert not kinds & {"PersistentVolume", "PersistentVolumeClaim", "Certificate", "Issuer", "RoleBinding"}
    text = json.dumps(rendered)
    for disabled in (
        "neuron-device-plugin",
        "inference",
        "mlflow",
        "cert-manager",
        "gpu-operator",
        "hyperpod-ns-",
        "namespace-level-group",
    ):
        assert disabled not in text, disabled
    assert len(names) == len(rendered)  # no object rendered twice (charts/ holds a directory and an archive)


def test_rendered_device_plugins_tolerate_the_development_taint(rendered):
    taint = Taint(key="dedicated", value="development", effect="NoSchedule")
    daemonsets = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "DaemonSet"}
    for name in (
        "hyperpod-dependencies-nvidia-device-plugin",
        "hyperpod-dependencies-aws-efa-k8s-device-plugin",
        "health-monitoring-agent",
        "health-monitoring-agent-non-nvidia",
    ):
        tolerations = daemonsets[name]["spec"]["template"]["spec"]["tolerations"]
        assert any(tolerates(t, taint) for t in tolerations), name


def test_every_rendered_chart_object_validates_against_kubernetes_schemas(rendered):
    import kubernetes_validate

    for obj in rendered:
        kubernetes_validate.validate(obj, "1.33", strict=False)
