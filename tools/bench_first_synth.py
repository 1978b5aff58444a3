"""A new user's first `make synth` on this machine, phase by phase, and the second one: wall time and CPU time (user +
system of everything each phase ran), against the targets (first <= 120 s, second <= 20 s on 2 cores).

    python tools/bench_first_synth.py [--config config/default.yaml] [--keep]     # or: make bench-first-synth

It clones the committed tree (HEAD) into a new directory under /tmp and runs there, with empty pip and npm caches of
its own (a fresh machine has none), `make synth` in two timed steps: `make synth-inputs` (the venv from
requirements.lock, `npm ci` and the Studio tools bundle when the config ships it, side by side, as `make synth` makes
them), then `make synth` (cdk synth and the summary, nothing left to install). With --phases it makes the inputs one
make target at a time instead, for what each costs alone (their sum is not what a user waits). The packages come
from PyPI and the npm registry, so the network counts too. Run it on a quiet machine: the CPU column is what it
costs whatever the load, the wall column is what a user waits. The clone is deleted unless --keep.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_TARGET_SECONDS, SECOND_TARGET_SECONDS = 120.0, 20.0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    wall, cpu = time.monotonic(), children_cpu()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, check=False, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        raise SystemExit(f"bench-first-synth: `{' '.join(command)}` failed ({done.returncode}); see {log}")
    return time.monotonic() - wall, children_cpu() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/default.yaml")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    parser.add_argument("--phases", action="store_true", help="make the inputs one at a time, each timed")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="first-synth-"))
    clone, log = work / "clone", work / "log.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "npm_config_cache")}
    env |= {
        "PIP_CACHE_DIR": str(work / "pip-cache"),
        "npm_config_cache": str(work / "npm-cache"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    make = ["make", "--no-print-directory", f"CONFIG={args.config}"]
    phases = [
        ("venv from requirements.lock", make + [".venv/.installed"]),
        ("npm ci (the pinned CDK CLI)", make + ["node_modules/.installed"]),
        ("Studio tools bundle, if the config ships it", make + ["studio-tools-if-wanted"]),
    ]
    if not args.phases:
        phases = [("venv, npm ci and the bundle, side by side", make + ["synth-inputs"])]
    phases.append(("cdk synth and the summary", make + ["synth"]))
    rows = []
    try:
        for name, command in phases:
            rows.append((name, *timed(command, clone, env, log)))
        second = timed(make + ["synth"], clone, env, log)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    first_wall, first_cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(
        f"First `make synth` of a fresh clone ({args.config}), {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end:"
    )
    for name, wall, cpu in rows:
        print(f"  {name:<46} {wall:7.1f} s wall {cpu:7.1f} s CPU")
    verdict = "ok" if first_wall <= FIRST_TARGET_SECONDS else "OVER"
    print(
        f"  {'first synth, total':<46} {first_wall:7.1f} s wall {first_cpu:7.1f} s CPU  "
        f"(target {FIRST_TARGET_SECONDS:.0f} s: {verdict})"
    )
    verdict = "ok" if second[0] <= SECOND_TARGET_SECONDS else "OVER"
    print(
        f"  {'second synth':<46} {second[0]:7.1f} s wall {second[1]:7.1f} s CPU  "
        f"(target {SECOND_TARGET_SECONDS:.0f} s: {verdict})"
    )
    if args.keep:
        print(f"clone and log kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
