"""pytest plugin for `make bench-test` (tools/time_test_suite.sh): the CPU seconds (user + system) of each test's
set-up, call and teardown, its own process's, those of every child process it waited for (getrusage SELF and
CHILDREN) and those of its live descendants (/proc: the jsii Node.js kernel of aws_cdk), one JSON line per test into $PYTEST_CPU_DIR/<worker>.jsonl. A module fixture's cost lands on the test that
set it up and the one that tore it down; `.venv/bin/python tools/pytest_cpu.py DIR` sums them by module and lists the costliest.

    PYTEST_CPU_DIR=build/test-cpu .venv/bin/python -m pytest -p tools.pytest_cpu ...
"""

from __future__ import annotations

import json
import os
import resource
import sys
from collections import defaultdict
from pathlib import Path

import pytest


TICK = os.sysconf("SC_CLK_TCK")


def _live_children_cpu(pid: int) -> float:
    """CPU of the live descendants of `pid` (and of the children they reaped): a process not yet waited for, such as
    the jsii Node.js kernel that does aws_cdk's synthesis and lives as long as the worker, is in no getrusage."""
    total = 0.0
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids = children.read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                fields = Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += sum(int(v) for v in fields[11:15]) / TICK + _live_children_cpu(int(kid))
    return total


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + _live_children_cpu(os.getpid())


_phases: dict[str, dict[str, float]] = defaultdict(dict)


def _record(item, phase: str, seconds: float) -> None:
    _phases[item.nodeid][phase] = _phases[item.nodeid].get(phase, 0.0) + seconds


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item._cpu_start = _cpu()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    _record(item, "setup", _cpu() - item._cpu_start)
    item._cpu_start = _cpu()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    _record(item, "call", _cpu() - item._cpu_start)
    item._cpu_start = _cpu()


def pytest_runtest_logfinish(nodeid, location):
    directory = os.environ.get("PYTEST_CPU_DIR")
    if not directory or nodeid not in _phases:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(directory).mkdir(parents=True, exist_ok=True)
    with open(Path(directory) / f"{worker}.jsonl", "a") as out:
        out.write(json.dumps({"test": nodeid, **_phases.pop(nodeid)}) + "\n")


def pytest_runtest_makereport(item, call):
    if call.when == "teardown" and hasattr(item, "_cpu_start"):
        _record(item, "teardown", _cpu() - item._cpu_start)
        del item._cpu_start


def report(directory: Path, top: int = 40) -> None:
    tests = [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines()]
    total = lambda t: sum(v for k, v in t.items() if k != "test")  # noqa: E731
    modules: dict[str, float] = defaultdict(float)
    for test in tests:
        modules[test["test"].split("::")[0]] += total(test)
    print(
        f"pytest CPU by test module ({len(tests)} tests, {sum(modules.values()):.0f} s in the tests; collection and"
        " start-up apart):"
    )
    for module, seconds in sorted(modules.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{seconds:8.1f} s  {module}")
    print("costliest tests (CPU s: set-up, call, teardown):")
    for test in sorted(tests, key=lambda t: -total(t))[:top]:
        print(
            f"{total(test):8.1f} s  ({test.get('setup', 0):.1f}, {test.get('call', 0):.1f}, "
            f"{test.get('teardown', 0):.1f})  {test['test']}"
        )


if __name__ == "__main__":
    report(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3]))
