"""`make bench`: CPU and wall time of `cdk synth` for a config against a trivial one-bucket app, and their ratios.

Targets (issue 24 re-based the first two on aws-cdk-lib's template validation, which every app pays alike): the
default config <= 2.0x the trivial app, the EKS example <= 2.15x, and, in per-user mode (each user a profile, a
partition, a token secret, its policy and a role), 1,000 users <= 1.5x and 5,000 users <= 3.0x 10 users.

Both go through the same pinned CLI and Python, so the ratio measures this project's own synthesis cost
(stacks, nag, validation, asset hashing) over the fixed cost of starting CDK. Runs alternate; the median of each
is used.

Two more rows explain the ratios: the floor (tools/floor_app.py, the default config's network stack alone), and, for
the trivial app, the floor, the default config and the EKS example, the same synth with `--no-validation`, which
splits each time into CDK's built-in CloudFormation template validation and everything else.

The targets are judged on CPU time: user + system seconds of the CLI and everything it waits for (the Python app
and the jsii Node kernel), from `getrusage(RUSAGE_CHILDREN)`. On a machine whose cores are shared with other work,
wall time measures the neighbours as much as the synth (the same trivial app took 5.7 s and, an hour later,
10.6 s), while CPU time is steadier (on a quiet machine runs agree within ~0.5 s; under heavy load it grows
too, but for both sides of a ratio alike). Wall time is printed alongside.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CDK = str(ROOT / "node_modules" / ".bin" / "cdk")
PY = str(ROOT / ".venv" / "bin" / "python")
TARGET_RATIO = 2.0  # default config over the trivial app
EKS_TARGET_RATIO = 2.15  # the EKS example over the trivial app
USERS_TARGETS = {1000: 1.5, 5000: 3.0}  # per-user mode, over 10 users
TRIVIAL = "trivial one-bucket app"
FLOOR = "floor: network stack alone"


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def synth_seconds(app: str | None, out: Path, context: list[str], *, validation: bool = True) -> tuple[float, float]:
    """(wall, CPU) seconds of one `cdk synth`; `validation=False` skips CDK's built-in template validation."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [CDK, "synth", "--quiet", "--no-notices", "-o", str(out)] + (["-a", app] if app else [])
    cmd += [] if validation else ["--no-validation"]
    for item in context:
        cmd += ["-c", item]
    cpu_start, start = children_cpu_seconds(), time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if result.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stderr}")
    return wall, children_cpu_seconds() - cpu_start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--config", action="append", default=None, help="config file(s) to time (default: config/default.yaml)"
    )
    args = parser.parse_args()
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    bench = ROOT / ".bench"
    bench.mkdir(exist_ok=True)
    configs = args.config or [
        "config/default.yaml",
        eks_config(bench),
        users_config(bench, 10),
        *(users_config(bench, count) for count in USERS_TARGETS),
    ]
    # name -> (the app command, or None for app.py through the CDK CLI; its context)
    apps: dict[str, tuple[str | None, list[str]]] = {
        TRIVIAL: (f"{PY} tools/trivial_app.py", []),
        FLOOR: (f"{PY} tools/floor_app.py", []),
    }
    for config in configs:
        # The EKS example synthesizes against the test stand-in chart (its template then cannot deploy).
        apps[config] = (
            None,
            [f"config={config}", *(["allow_chart_stand_in=true"] if config.endswith("/eks.yaml") else [])],
        )
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in apps}
    unvalidated: dict[str, list[tuple[float, float]]] = {name: [] for name in apps if "/users-" not in name}
    for _ in range(args.runs):
        for name, (app, context) in apps.items():
            runs[name].append(synth_seconds(app, bench / "out", context))
            if name in unvalidated:
                unvalidated[name].append(synth_seconds(app, bench / "out", context, validation=False))
    print(
        f"cdk synth, median of {args.runs} alternating runs (aws-cdk CLI {cli_version()}); targets judged on CPU time:"
    )
    ten, *many = (
        next((c for c in configs if (ROOT / c).resolve() == bench / f"users-{count}.yaml"), "")
        for count in (10, *USERS_TARGETS)
    )
    for line in report(runs, ten, dict(zip(USERS_TARGETS, many, strict=True))):
        print(line)
    for line in validation_report(runs, unvalidated):
        print(line)
    return 0  # a benchmark reports; it does not gate CI


def report(runs: dict[str, list[tuple[float, float]]], ten: str, many: dict[int, str]) -> list[str]:
    """One line per app: median CPU and wall seconds, their ratios to the trivial app, and the verdict on CPU; then
    each of `many` ({user count: config}) against `ten`, the 10-user config."""
    cpu = {name: statistics.median(c for _, c in samples) for name, samples in runs.items()}
    wall = {name: statistics.median(w for w, _ in samples) for name, samples in runs.items()}
    lines = []
    for name in runs:
        line = (
            f"  {name:<40} CPU {cpu[name]:6.2f} s ({cpu[name] / cpu[TRIVIAL]:4.2f}x)   "
            f"wall {wall[name]:6.2f} s ({wall[name] / wall[TRIVIAL]:4.2f}x)"
        )
        target = target_of(name)
        if target is not None:
            line += f"  (target <= {target:.2f}x: {verdict(cpu[name] / cpu[TRIVIAL], target)})"
        lines.append(line)
    for count, config in many.items():
        if ten in cpu and config in cpu:
            target = USERS_TARGETS[count]
            lines.append(
                f"  {count:,} users vs 10 users (per-user mode): CPU {cpu[config] / cpu[ten]:4.2f}x   "
                f"wall {wall[config] / wall[ten]:4.2f}x  "
                f"(target <= {target:.2f}x: {verdict(cpu[config] / cpu[ten], target)})"
            )
    return lines


def validation_report(
    runs: dict[str, list[tuple[float, float]]], unvalidated: dict[str, list[tuple[float, float]]]
) -> list[str]:
    """Each app's CPU median split into CDK's built-in template validation (with minus without) and the rest, both
    as extra seconds over the trivial app's, against the extra seconds its target allows."""
    cpu = {name: statistics.median(c for _, c in samples) for name, samples in runs.items()}
    rest = {name: statistics.median(c for _, c in samples) for name, samples in unvalidated.items()}
    lines = ["CPU over the trivial app's, split with `cdk synth --no-validation`:"]
    for name in unvalidated:
        validation = cpu[name] - rest[name]
        line = f"  {name:<40} validation {validation:5.2f} s, the rest {rest[name]:5.2f} s"
        if name != TRIVIAL:
            line += (
                f"  ({validation - (cpu[TRIVIAL] - rest[TRIVIAL]):+.2f} s and {rest[name] - rest[TRIVIAL]:+.2f} s"
                " over the trivial app's"
            )
            target = target_of(name)
            line += f"; target allows +{(target - 1) * cpu[TRIVIAL]:.2f} s in all)" if target else ")"
        lines.append(line)
    return lines


def target_of(name: str) -> float | None:
    if name.endswith("/eks.yaml"):
        return EKS_TARGET_RATIO
    return None if name in (TRIVIAL, FLOOR) or "/users-" in name else TARGET_RATIO


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio <= target else "MISSED"


def users_config(bench: Path, count: int) -> str:
    """The default config with `count` users in per-user mode (each a profile and a partition)."""
    path = bench / f"users-{count}.yaml"
    lines = (ROOT / "config" / "default.yaml").read_text().replace("shared_fsx: true", "shared_fsx: false")
    lines = lines.replace(
        "users: []", "users:\n" + "".join(f"  - {{name: user{i}, uid: {10000 + i}}}\n" for i in range(count))
    )
    path.write_text(lines)
    return str(path)


def eks_config(bench: Path) -> str:
    """config/examples/eks.yaml against the test stand-in chart (`make hyperpod-chart` needs GitHub)."""
    path = bench / "eks.yaml"
    stand_in = ROOT / "tests" / "fixtures" / "hyperpod-helm-chart"
    path.write_text(
        (ROOT / "config" / "examples" / "eks.yaml")
        .read_text()
        .replace("chart_dir: build/hyperpod-helm-chart", f"chart_dir: {stand_in}")
    )
    return str(path)


def cli_version() -> str:
    return subprocess.run([CDK, "--version"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()[0]


if __name__ == "__main__":
    sys.exit(main())
