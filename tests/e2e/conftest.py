"""The e2e tests change the machine (POSIX users and groups, /etc/pam.d, /run/munge) and copy /etc into their
namespaces. Within one run they keep to one xdist worker (tests/conftest.py); this lock also keeps two runs on one
machine (two worktrees, two developers) from doing so at once: each module holds it from its first fixture to its
last teardown."""
from __future__ import annotations

import fcntl
import tempfile
from pathlib import Path

import pytest

MACHINE_LOCK = Path(tempfile.gettempdir()) / "hyperpod-platform-e2e.lock"


@pytest.fixture(scope="module", autouse=True)
def one_e2e_module_at_a_time_on_this_machine():
    with open(MACHINE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the module is done, or when this process dies
        yield
