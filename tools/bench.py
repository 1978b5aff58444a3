"""`make bench`: wall time of `cdk synth` for a config against a trivial one-bucket app, and their ratio.

Targets: the default config <= 1.5x the trivial app, the EKS example <= 1.8x, and 1,000 users <= 1.5x 10 users
(per-user mode: each user a profile and a partition).

Both go through the same pinned CLI and Python, so the ratio measures this project's own synthesis cost
(stacks, nag, asset hashing) over the fixed cost of starting CDK. Runs alternate; the median of each is used.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CDK = str(ROOT / "node_modules" / ".bin" / "cdk")
PY = str(ROOT / ".venv" / "bin" / "python")
TARGET_RATIO = 1.5          # default config over the trivial app; 1,000 users over 10 users
EKS_TARGET_RATIO = 1.8      # the EKS example over the trivial app


def synth_seconds(app: str | None, out: Path, context: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [CDK, "synth", "--quiet", "--no-notices", "-o", str(out)] + (["-a", app] if app else [])
    for item in context:
        cmd += ["-c", item]
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stderr}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--config", action="append", default=None,
                        help="config file(s) to time (default: config/default.yaml)")
    args = parser.parse_args()
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    bench = ROOT / ".bench"
    bench.mkdir(exist_ok=True)
    configs = args.config or ["config/default.yaml", eks_config(bench), users_config(bench, 10),
                              users_config(bench, 1000)]
    times: dict[str, list[float]] = {"trivial one-bucket app": []}
    for _ in range(args.runs):
        times["trivial one-bucket app"].append(synth_seconds(f"{PY} tools/trivial_app.py", bench / "trivial", []))
        for config in configs:
            # The EKS example synthesizes against the test stand-in chart (its template then cannot deploy).
            times.setdefault(config, []).append(synth_seconds(None, bench / "platform", [
                f"config={config}", *(["allow_chart_stand_in=true"] if config.endswith("/eks.yaml") else [])]))
    baseline = statistics.median(times["trivial one-bucket app"])
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    print(f"cdk synth wall time, median of {args.runs} alternating runs (aws-cdk CLI {cli_version()}):")
    for name, samples in times.items():
        median = statistics.median(samples)
        ratio = median / baseline
        line = f"  {name:<40} {median:6.2f} s   ratio {ratio:4.2f}x"
        target = EKS_TARGET_RATIO if name.endswith("/eks.yaml") else None if "/users-" in name else TARGET_RATIO
        if name != "trivial one-bucket app" and target is not None:
            line += "  (target <= %.1fx: %s)" % (target, "met" if ratio <= target else "MISSED")
        print(line)
    ten, thousand = (str(bench / f"users-{n}.yaml") for n in (10, 1000))
    if ten in medians and thousand in medians:
        ratio = medians[thousand] / medians[ten]
        print(f"  1,000 users vs 10 users (per-user FSx partitions): {ratio:4.2f}x  "
              f"(target <= {TARGET_RATIO:.1f}x: {'met' if ratio <= TARGET_RATIO else 'MISSED'})")
    return 0  # a benchmark reports; it does not gate CI


def users_config(bench: Path, count: int) -> str:
    """The default config with `count` users in per-user mode (each a profile and a partition)."""
    path = bench / f"users-{count}.yaml"
    lines = (ROOT / "config" / "default.yaml").read_text().replace("shared_fsx: true", "shared_fsx: false")
    lines = lines.replace("users: []", "users:\n" + "".join(f"  - {{name: user{i}, uid: {10000 + i}}}\n"
                                                            for i in range(count)))
    path.write_text(lines)
    return str(path)


def eks_config(bench: Path) -> str:
    """config/examples/eks.yaml against the test stand-in chart (`make hyperpod-chart` needs GitHub)."""
    path = bench / "eks.yaml"
    stand_in = ROOT / "tests" / "fixtures" / "hyperpod-helm-chart"
    path.write_text((ROOT / "config" / "examples" / "eks.yaml").read_text()
                    .replace("chart_dir: build/hyperpod-helm-chart", f"chart_dir: {stand_in}"))
    return str(path)


def cli_version() -> str:
    return subprocess.run([CDK, "--version"], capture_output=True, text=True, cwd=ROOT).stdout.split()[0]


if __name__ == "__main__":
    sys.exit(main())
