"""The processes under a process, from /proc (Linux): for tests that signal a launcher's workers, which may have left
its process group or session (torchrun starts each worker in a session of its own)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest


def children(pid: int) -> list[int]:
    """pid's child processes; none once pid is gone."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def descendants(pid: int) -> list[int]:
    """Every process under pid, children first."""
    below = children(pid)
    return below + [d for child in below for d in descendants(child)]


def run_or_dump_stacks(
    cmd: list[str], env: dict[str, str], timeout: float, also_under: tuple[int, ...] = ()
) -> subprocess.CompletedProcess:
    """cmd to its end, or after `timeout` a failure showing where every Python process of it was: SIGABRT to it and
    every process under it (torchrun starts each worker in a session of its own) and under the processes `also_under`
    (a warm server whose children do cmd's work: tests/support/warm_python.py), whose Python processes
    (PYTHONFAULTHANDLER) print every thread's stack before they die."""
    proc = subprocess.Popen(
        cmd, env={**env, "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = [proc.pid, *descendants(proc.pid)]  # before any dies: orphans would no longer be found
        tree += [pid for server in also_under for pid in descendants(server)]
        for sig in (signal.SIGABRT, signal.SIGKILL):
            for pid in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            try:
                out, err = proc.communicate(timeout=30)
                break
            except subprocess.TimeoutExpired:
                out = err = ""
        pytest.fail(f"{cmd[2:5]} did not end within {timeout} s; its stacks:\n{err[-12000:]}\n{out[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
