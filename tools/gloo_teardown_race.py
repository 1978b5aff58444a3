"""Run examples/train_elastic.py under torchrun (2 CPU ranks, gloo, as tests/test_train_elastic.py does) with the
teardown race it once lost forced open, and say whether the run ended.

The race (see train_elastic.exit_without_finalizing): a gloo worker thread (`pt_gloo_runloop`) finishes a collective,
the rank's main thread returns from wait() and runs on, and the worker drops the finished work only later. If the
process group is freed with the GIL held in between, the rank deadlocks. Here every worker thread runs SCHED_IDLE and
each rank is pinned to CPU 0, set from outside while the run goes, so the main thread always gets there first: the
example before the fix hung 4 runs of 4 this way (about 1 in 17 without this, with two CPU burners beside it).

    .venv/bin/python tools/gloo_teardown_race.py [--runs N] [--script PATH]

Needs root (or CAP_SYS_NICE) and the training venv; a hung run is killed after --timeout seconds, and with gdb
installed its ranks' native stacks are printed first.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def descendants(pid: int) -> list[int]:
    try:
        below = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return below + [d for child in below for d in descendants(child)]


def threads(pid: int) -> dict[int, str]:
    names = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the thread has ended
            names[int(task.name)] = (task / "comm").read_text().strip()
    return names


def starve_gloo_workers(launcher: int, stop: threading.Event) -> None:
    """Until stop: each rank with gloo worker threads pinned to CPU 0, those threads SCHED_IDLE."""
    while not stop.wait(0.05):
        for pid in descendants(launcher):
            try:
                names = threads(pid)
            except OSError:
                continue
            if "pt_gloo_runloop" not in names.values():
                continue
            for tid, name in names.items():
                try:
                    os.sched_setaffinity(tid, {0})
                    if name == "pt_gloo_runloop":
                        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                except OSError:
                    pass  # the thread has ended


def run_once(script: Path, timeout: float) -> bool:
    """True when the run ended with status 0 in time; a failure or a hang is printed."""
    work = Path(tempfile.mkdtemp(prefix="gloo-race-"))
    env = os.environ | {
        "MLFLOW_TRACKING_URI": (work / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [str(ROOT / ".venv-train" / "bin" / "python"), "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc-per-node=2", str(script), "--checkpoint-dir", str(work / "ckpt"), "--global-batch-size", "4"]
    cmd += ["--steps", "4", "--checkpoint-every", "2", "--features", "4"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stop = threading.Event()
    forcer = threading.Thread(target=starve_gloo_workers, args=(proc.pid, stop))
    forcer.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
        ok = proc.returncode == 0
        if not ok:
            print(out[-3000:])
        return ok
    except subprocess.TimeoutExpired:
        tree = [proc.pid, *descendants(proc.pid)]
        print(f"hung after {timeout} s")
        if shutil.which("gdb"):
            for pid in tree[1:]:
                stacks = subprocess.run(
                    ["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                    check=False,
                    capture_output=True,
                    text=True,
                )
                print(f"--- pid {pid}\n" + "\n".join(line for line in stacks.stdout.splitlines() if "#" in line))
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.communicate()
        return False
    finally:
        stop.set()
        forcer.join()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--script", type=Path, default=ROOT / "examples" / "train_elastic.py")
    args = parser.parse_args()
    ended = 0
    for run in range(1, args.runs + 1):
        started = time.monotonic()
        ok = run_once(args.script, args.timeout)
        ended += ok
        print(f"run {run}: {'ended' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s", flush=True)
    print(f"{ended} of {args.runs} runs ended")
    return 0 if ended == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
