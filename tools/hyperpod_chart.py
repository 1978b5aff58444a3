"""Chart.yaml / values.yaml checks that tools/fetch_hyperpod_chart.sh runs on the fetched HyperPod chart.

    python tools/hyperpod_chart.py build-order CHART_DIR   # dirs (relative to CHART_DIR) to `helm dependency build`,
                                                           # deepest first; "." is CHART_DIR itself
    python tools/hyperpod_chart.py check-pins CHART_DIR    # every remote dependency names one exact version
    python tools/hyperpod_chart.py toggles CHART_DIR       # dependency, condition path, default (or "absent")
    python tools/hyperpod_chart.py repositories CHART_DIR    # the http(s) chart repositories to `helm repo add`
    python tools/hyperpod_chart.py content-digest CHART_DIR  # what synth checks against the pin (archives aside)
    python tools/hyperpod_chart.py plan CHART_DIR  # check-pins, then "build<TAB>dir" and "repository<TAB>url" lines
                                                   # (build-order and repositories in one start)
    python tools/hyperpod_chart.py compare CHART_DIR FIXTURE_DIR
        # the fixture's values.yaml must agree with the chart's on every toggle and on global.region

Helm enables a dependency whose condition path is absent from values.yaml ("if no paths exist then the condition
has no effect"), so "absent" is reported as its own state, never as false.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ABSENT = object()
REGION_PATH = "global.region"
# An exact SemVer-ish version ("0.16.1", "v1.18.2"); anything with a range operator or wildcard is not a pin.
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text()) if path.exists() else None
    return data if isinstance(data, dict) else {}


def dependencies(chart_dir: Path) -> list[dict]:
    return [d for d in load(chart_dir / "Chart.yaml").get("dependencies") or [] if isinstance(d, dict)]


def lookup(values: dict, dotted: str):
    node = values
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return ABSENT
        node = node[key]
    return node


def show(value) -> str:
    return (
        "absent"
        if value is ABSENT
        else yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    )


def local_subcharts(chart_dir: Path) -> list[Path]:
    """Directories of the file:// dependencies, as Helm resolves them (relative to the chart)."""
    return [
        (chart_dir / d["repository"][len("file://") :]).resolve()
        for d in dependencies(chart_dir)
        if str(d.get("repository", "")).startswith("file://")
    ]


def build_order(chart_dir: Path) -> list[Path]:
    """Post-order: a local subchart's own dependencies must be vendored before its parent packages it
    (`helm dependency build` does not recurse into file:// subcharts)."""
    order: list[Path] = []
    seen: set[Path] = set()

    def visit(d: Path, trail: tuple[Path, ...]) -> None:
        if d in trail:
            raise SystemExit(f"dependency cycle: {' -> '.join(map(str, trail + (d,)))}")
        if d in seen:
            return
        seen.add(d)
        if not (d / "Chart.yaml").exists():
            raise SystemExit(f"{trail[-1] if trail else d}: file:// dependency {d} has no Chart.yaml")
        for sub in local_subcharts(d):
            visit(sub, trail + (d,))
        if dependencies(d):
            order.append(d)

    visit(chart_dir.resolve(), ())
    return order


def check_pins(chart_dir: Path) -> list[str]:
    problems = []
    for d in build_order(chart_dir):
        for dep in dependencies(d):
            repo, version = str(dep.get("repository", "")), str(dep.get("version", ""))
            if repo.startswith("file://"):
                continue
            if not EXACT_VERSION.match(version):
                problems.append(
                    f"{d / 'Chart.yaml'}: {dep.get('name')} from {repo} has version {version!r}, "
                    f"not one exact version; the vendored chart would drift"
                )
    return problems


def toggles(chart_dir: Path) -> list[tuple[str, str, object]]:
    """(dependency name, condition path, default in values.yaml or ABSENT) for the chart's own dependencies."""
    values = load(chart_dir / "values.yaml")
    rows = []
    for dep in dependencies(chart_dir):
        for path in filter(None, (p.strip() for p in str(dep.get("condition") or "").split(","))):
            rows.append((str(dep.get("name")), path, lookup(values, path)))
    return rows


def toggle_like_paths(values: dict) -> list[str]:
    """`<top>.enabled`, `<top>.enable`, `<top>.devicePlugin.enabled` leaves: what a fixture declares as toggles."""
    paths = []
    for top, block in values.items():
        if not isinstance(block, dict):
            continue
        for leaf in ("enabled", "enable"):
            if leaf in block:
                paths.append(f"{top}.{leaf}")
        if isinstance(block.get("devicePlugin"), dict) and "enabled" in block["devicePlugin"]:
            paths.append(f"{top}.devicePlugin.enabled")
    return paths


def compare(chart_dir: Path, fixture_dir: Path) -> list[str]:
    real, fake = load(chart_dir / "values.yaml"), load(fixture_dir / "values.yaml")
    problems = []
    checked = set()
    for name, path, default in toggles(chart_dir):
        checked.add(path)
        if lookup(fake, path) != default:  # ABSENT is one object, so "absent in both" is equal
            problems.append(
                f"condition {path} (dependency {name}): chart default {show(default)}, "
                f"fixture {show(lookup(fake, path))}"
            )
    for path in toggle_like_paths(fake):
        if path not in checked and lookup(real, path) != lookup(fake, path):
            problems.append(f"{path}: fixture has {show(lookup(fake, path))}, chart has {show(lookup(real, path))}")
    if (lookup(real, REGION_PATH) is ABSENT) != (lookup(fake, REGION_PATH) is ABSENT):
        problems.append(
            f"{REGION_PATH}: chart {show(lookup(real, REGION_PATH))}, fixture {show(lookup(fake, REGION_PATH))}"
        )
    return problems


def build_dirs(chart_dir: Path) -> list[str]:
    """build_order as `helm dependency build` arguments: relative to CHART_DIR where inside it ("." for itself)."""
    root = chart_dir.resolve()
    return [str(d.relative_to(root)) if d.is_relative_to(root) else str(d) for d in build_order(chart_dir)]


def repositories(chart_dir: Path) -> list[str]:
    """The http(s) chart repositories of the chart and its file:// subcharts, each once."""
    return sorted(
        {
            str(dep.get("repository"))
            for d in build_order(chart_dir)
            for dep in dependencies(d)
            if str(dep.get("repository", "")).startswith(("https://", "http://"))
        }
    )


def _chart_source():
    """platform_config/chart_pin.py, the pin synth checks the chart against."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from platform_config import chart_pin

    return chart_pin


def main(argv: list[str]) -> int:
    if (
        len(argv) < 2
        or argv[0] not in {"build-order", "check-pins", "toggles", "compare", "content-digest", "repositories", "plan"}
        or (argv[0] == "compare") != (len(argv) == 3)
    ):
        print(__doc__, file=sys.stderr)
        return 2
    command, chart = argv[0], Path(argv[1])
    if not (chart / "Chart.yaml").is_file():
        print(f"{chart}: no Chart.yaml", file=sys.stderr)
        return 1
    if command == "build-order":
        print("\n".join(build_dirs(chart)))
        return 0
    if command == "repositories":
        print("\n".join(repositories(chart)))
        return 0
    if command == "plan":
        problems = check_pins(chart)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            return 1
        print("".join(f"build\t{d}\n" for d in build_dirs(chart)), end="")
        print("".join(f"repository\t{url}\n" for url in repositories(chart)), end="")
        return 0
    if command == "content-digest":
        source = _chart_source()
        print(source.content_digest(source.directory_files(chart)))
        return 0
    if command == "toggles":
        for name, path, default in toggles(chart):
            print(f"{name}\t{path}\t{show(default)}")
        print(f"-\t{REGION_PATH}\t{show(lookup(load(chart / 'values.yaml'), REGION_PATH))}")
        return 0
    problems = check_pins(chart) if command == "check-pins" else compare(chart, Path(argv[2]))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
