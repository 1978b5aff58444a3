"""Facts about the pinned HyperPod dependency chart, and the offline test stand-in built from them.

    python tools/hyperpod_chart_facts.py --git-dir DIR [--check]    # from a clone of aws/sagemaker-hyperpod-cli
    python tools/hyperpod_chart_facts.py --chart-dir DIR [--check]  # from a chart directory (e.g. the fetch output)

Reads the chart at the commit config/hyperpod-chart-pin.json pins (--git-dir checks the directory's tree id
first) and writes
  tests/fixtures/hyperpod-chart-facts.json  dependencies (name, version, repository, condition and its default in
                                            values.yaml, or "absent"), what charts/ holds and whether Chart.yaml
                                            lists it, the region key, the device plugins' default tolerations and
                                            the tolerations subcharts hard-code in their templates;
  tests/fixtures/hyperpod-helm-chart/       a chart with those values and no dependencies, whose one template
                                            reports which dependencies Helm would enable (CI cannot reach GitHub).
Nothing is copied from upstream but these facts; --check exits 1 when the committed files differ, so re-pinning
means rerunning this script.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "tests" / "fixtures" / "hyperpod-chart-facts.json"
STAND_IN = ROOT / "tests" / "fixtures" / "hyperpod-helm-chart"
REGION_PATH = "global.region"
# Values whose defaults the project extends (tolerations are lists: a value given replaces the default).
TOLERATION_PATHS = ("nvidia-device-plugin.tolerations", "aws-efa-k8s-device-plugin.tolerations")
ABSENT = "absent"
TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}


def _source():
    """platform_config/chart_pin.py, the pin synth checks the chart against."""
    sys.path.insert(0, str(ROOT))
    from platform_config import chart_pin

    return chart_pin


def extract(git_dir: Path, into: Path) -> Path:
    pin = _source().pin()
    tree = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", f"{pin['commit']}:{pin['path']}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if tree != pin["tree"]:
        raise SystemExit(f"{pin['path']} at {pin['commit']} has tree {tree}; the pin says {pin['tree']}")
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", pin["commit"], pin["path"]],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / pin["path"]


def lookup(values: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(values, dict) or key not in values:
            return ABSENT
        values = values[key]
    return values


def static_tolerations(template: str) -> list[list[dict]]:
    """`tolerations:` blocks written out in a template (no templating inside), as YAML lists."""
    lines, found = template.splitlines(), []
    for i, line in enumerate(lines):
        if line.strip() != "tolerations:":
            continue
        indent, block = len(line) - len(line.lstrip()), []
        for following in lines[i + 1 :]:
            if following.strip().startswith("#"):
                continue
            if (
                not following.strip()
                or len(following) - len(following.lstrip()) < indent
                or (len(following) - len(following.lstrip()) == indent and not following.lstrip().startswith("-"))
            ):
                break
            block.append(following)
        if block and not any("{{" in b for b in block):
            parsed = yaml.safe_load("\n".join(b[indent:] for b in block))
            if isinstance(parsed, list) and all(isinstance(t, dict) and set(t) <= TOLERATION_KEYS for t in parsed):
                found.append(parsed)  # not, e.g., a CRD's schema property named tolerations
    return found


def facts(chart: Path) -> dict[str, Any]:
    pin = _source().pin()
    chart_yaml = yaml.safe_load((chart / "Chart.yaml").read_text())
    values = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    dependencies = []
    for dep in chart_yaml.get("dependencies") or []:
        condition = dep.get("condition", "").strip()
        dependencies.append(
            {
                "name": dep["name"],
                "version": str(dep["version"]),
                "repository": dep["repository"],
                "condition": condition,
                "condition_default": lookup(values, condition),
            }
        )
    listed = {d["name"] for d in dependencies}
    entries = []
    for entry in sorted((chart / "charts").iterdir()):
        if entry.is_dir():
            name = (yaml.safe_load((entry / "Chart.yaml").read_text()) or {}).get("name", entry.name)
        else:
            name = entry.name.rsplit("-", 1)[0]
        entries.append({"path": f"charts/{entry.name}", "chart": name, "listed_in_chart_yaml": name in listed})
    hard_coded = {}
    for sub in sorted((chart / "charts").iterdir()):
        if sub.is_dir() and (sub / "templates").is_dir():
            blocks = [b for t in sorted((sub / "templates").glob("*.y*ml")) for b in static_tolerations(t.read_text())]
            if blocks:
                hard_coded[sub.name] = blocks
    return {
        "source": {k: pin[k] for k in ("repository", "commit", "path", "tree")},
        "name": chart_yaml["name"],
        "version": str(chart_yaml["version"]),
        "dependencies": dependencies,
        "charts_dir": entries,
        "region": {"path": REGION_PATH, "default": lookup(values, REGION_PATH)},
        "default_tolerations": {path: lookup(values, path) for path in TOLERATION_PATHS},
        "hard_coded_tolerations": hard_coded,
    }


def stand_in(f: dict[str, Any]) -> dict[str, str]:
    """Files of the offline stand-in: the facts' values and a template reporting Helm's enablement."""
    src = f["source"]
    header = (
        f"# GENERATED by tools/hyperpod_chart_facts.py from {src['repository']} {src['path']} at {src['commit']}\n"
        "# (tree " + src["tree"] + "). TEST STAND-IN, not the real chart: the real chart's values for its\n"
        "# dependency conditions, the region and the device plugins' tolerations, and no dependencies, so\n"
        "# `helm template` works offline. Synth refuses it as a deployment chart (constructs/hyperpod_chart_source.py).\n"
    )
    chart = {
        "apiVersion": "v2",
        "name": f["name"],
        "version": f["version"],
        "type": "application",
        "description": "Test stand-in for the SageMaker HyperPod dependency chart (generated facts)",
    }
    values: dict[str, Any] = {}

    def put(dotted: str, value: Any) -> None:
        node = values
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    put(f["region"]["path"], f["region"]["default"])
    for dep in f["dependencies"]:
        if dep["condition_default"] != ABSENT:
            put(dep["condition"], dep["condition_default"])
    for path, default in f["default_tolerations"].items():
        if default != ABSENT:
            put(path, default)
    conditions = "\n".join(f'  "{d["name"]}" "{d["condition"]}"' for d in f["dependencies"])
    template = (
        "{{- /* GENERATED by tools/hyperpod_chart_facts.py. Which dependencies of the real chart these values\n"
        "       would install, by Helm's condition rule: an absent (or non-boolean) condition path leaves the\n"
        "       dependency enabled. */ -}}\n"
        "{{- $conditions := dict\n" + conditions + " -}}\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-components\n"
        "  namespace: {{ .Release.Namespace }}\ndata:\n"
        "  region: {{ .Values.global.region | quote }}\n"
        "  {{- range $name, $path := $conditions }}\n"
        "  {{- $node := $.Values.AsMap }}\n"
        '  {{- range $key := splitList "." $path }}\n'
        '  {{- if and (kindIs "map" $node) (hasKey $node $key) }}{{ $node = index $node $key }}'
        '{{ else }}{{ $node = "absent" }}{{ end }}\n'
        "  {{- end }}\n"
        '  {{ $name }}: {{ ternary $node true (kindIs "bool" $node) | quote }}\n'
        "  {{- end }}\n"
    )
    return {
        "Chart.yaml": header + yaml.safe_dump(chart, sort_keys=False),
        "values.yaml": header + yaml.safe_dump(values, sort_keys=False),
        "templates/components.yaml": template,
    }


def outputs(chart: Path) -> dict[Path, str]:
    f = facts(chart)
    files = {FACTS: json.dumps(f, indent=2, sort_keys=False) + "\n"}
    files.update({STAND_IN / name: text for name, text in stand_in(f).items()})
    return files


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--git-dir", type=Path, help="a clone of aws/sagemaker-hyperpod-cli holding the pinned commit")
    source.add_argument("--chart-dir", type=Path, help="a chart directory of the pinned revision")
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        chart = extract(args.git_dir, Path(tmp)) if args.git_dir else args.chart_dir
        files = outputs(chart)
    if args.check:
        stale = [str(p.relative_to(ROOT)) for p, text in files.items() if not p.is_file() or p.read_text() != text]
        extra = [str(p.relative_to(ROOT)) for p in STAND_IN.rglob("*") if p.is_file() and p not in files]
        for name in stale + extra:
            print(f"{name}: differs from the pinned chart's facts; run tools/hyperpod_chart_facts.py", file=sys.stderr)
        return 1 if stale or extra else 0
    for path in STAND_IN.rglob("*"):
        if path.is_file() and path not in files:
            path.unlink()
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
