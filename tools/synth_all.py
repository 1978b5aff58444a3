"""Synthesize every config in config/ and config/examples/ through app.py into one directory of templates.

A maintainer's proof for refactors that must not change what deploys: snapshot before, change, snapshot after, and
compare. `--compare DIR` does the comparison and exits non-zero on any difference:

    .venv/bin/python tools/synth_all.py /tmp/before            # before the change
    .venv/bin/python tools/synth_all.py /tmp/after --compare /tmp/before

Each config is synthesized twice: as written, and with `-c shared_fsx=` flipped (the context override app.py
accepts), so both Studio modes of every example are covered. A combination the config model refuses is kept as its
error text (`<variant>/error.txt`), so a refactor must also keep every refusal word for word.

Every run is a fresh `python app.py` with the context `cdk synth` would pass (cdk.json's feature flags plus
`-c config=...`), so the proof goes through the same entry point as `make synth`, without the CLI's Node start-up.
EKS configs synthesize against the test stand-in chart (tests/fixtures/hyperpod-helm-chart, `-c
allow_chart_stand_in=true`): CI cannot fetch the pinned chart, and the stand-in is what the tests use. The EKS stack's
stand-in assertion names the chart's absolute path, so take both snapshots from checkouts at the same path (e.g. a
`git worktree add /tmp/snap REF` for each side, removed in between).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
STAND_IN_CHART = "tests/fixtures/hyperpod-helm-chart"  # relative to the repository root, as chart_dir resolves it
PINNED_CHART = "chart_dir: build/hyperpod-helm-chart"


def config_files() -> list[Path]:
    return sorted((ROOT / "config").glob("*.yaml")) + sorted((ROOT / "config" / "examples").glob("*.yaml"))


def variants() -> list[tuple[str, Path, dict[str, str]]]:
    """(variant name, config file, extra context) for every config, as written and with shared_fsx flipped."""
    result = []
    for path in config_files():
        stem = path.stem if path.parent.name == "config" else f"examples-{path.stem}"
        flipped = "false" if (yaml.safe_load(path.read_text()) or {}).get("shared_fsx", True) else "true"
        result += [(stem, path, {}), (f"{stem}+shared_fsx={flipped}", path, {"shared_fsx": flipped})]
    return result


def synth(config: Path, context: dict[str, str], out_dir: Path, work: Path) -> None:
    """Templates of one variant into out_dir, or error.txt with what app.py printed when it refused the config."""
    text = config.read_text()
    if PINNED_CHART in text:  # an EKS config: the stand-in chart, which CI has
        config = work / config.name
        config.write_text(text.replace(PINNED_CHART, f"chart_dir: {STAND_IN_CHART}"))
        context = {**context, "allow_chart_stand_in": "true"}
    cdk_out = work / "cdk.out"
    shutil.rmtree(cdk_out, ignore_errors=True)
    full_context = {**json.loads((ROOT / "cdk.json").read_text())["context"], "config": str(config), **context}
    env = {
        **os.environ,
        "CDK_OUTDIR": str(cdk_out),
        "CDK_CONTEXT_JSON": json.dumps(full_context),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    out_dir.mkdir(parents=True)
    if result.returncode:
        (out_dir / "error.txt").write_text(result.stderr.replace(str(work), "<work>").replace(str(ROOT), "<root>"))
        return
    for template in sorted(cdk_out.glob("*.template.json")):
        shutil.copyfile(template, out_dir / template.name)


def compare(after: Path, before: Path, only: Sequence[str] = ()) -> list[str]:
    """Every file that differs, is missing or is new between two snapshots (of the variants in `only`, if given)."""
    problems = []
    names = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    names |= {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    names = {n for n in names if not only or n.parts[0] in only}
    for name in sorted(names):
        old, new = before / name, after / name
        if not old.exists():
            problems.append(f"new: {name}")
        elif not new.exists():
            problems.append(f"missing: {name}")
        elif not filecmp.cmp(old, new, shallow=False):
            problems.append(f"differs: {name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Snapshot before a change, then --compare after it."
    )
    parser.add_argument("out", type=Path, help="directory to write (replaced if it exists)")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="BEFORE",
        help="a snapshot to compare with; exit 1 if any template or error differs",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="VARIANT",
        help="synthesize only these variants (names as printed); for a quick look",
    )
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    templates = errors = 0
    with tempfile.TemporaryDirectory() as work:
        for name, config, context in variants():
            if args.only and name not in args.only:
                continue
            synth(config, context, args.out / name, Path(work))
            written = sorted(p.name for p in (args.out / name).iterdir())
            templates += sum(n.endswith(".template.json") for n in written)
            errors += "error.txt" in written
            print(
                f"{name}: " + ("refused (error.txt)" if "error.txt" in written else f"{len(written)} templates"),
                flush=True,
            )
    print(f"{len(config_files())} configs, {templates} templates, {errors} refused variant(s) in {args.out}")
    if args.compare is None:
        return 0
    problems = compare(args.out, args.compare, args.only)
    for problem in problems:
        print(problem)
    print("identical" if not problems else f"{len(problems)} difference(s) from {args.compare}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
