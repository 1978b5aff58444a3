"""The processes under a process, from /proc (Linux): for tests that signal a launcher's workers, which may have left
its process group or session (torchrun starts each worker in a session of its own)."""

from __future__ import annotations

from pathlib import Path


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
