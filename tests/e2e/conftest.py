"""Fixtures of the real-Slurm tests that several modules use; the helpers behind them are in studio_space.py."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from slurm_bundle import hide_system_slurm
from slurm_cluster import run, wait_for
from studio_space import Cluster, Ide, PosixUser, ensure_posix_user, remove_posix_users

from support.moto_server import reset


@pytest.fixture(scope="module")
def studio_users() -> Iterator[tuple[PosixUser, PosixUser]]:
    """Two Studio users with their profiles' uid/gid, created on this machine (the "cluster") for the module."""
    # gid != uid: a script that passed the uid as the gid would show in the jobs' GroupId and files' group.
    users = (PosixUser("alice", 10001, 10101), PosixUser("bob", 10002, 10102))
    created: list[tuple[str, bool, bool]] = []
    try:
        for user in users:
            created.append((user.name, *ensure_posix_user(user)))
        yield users
    finally:
        errors = remove_posix_users(created)
        assert not errors, errors


@pytest.fixture(scope="module")
def moto_url(moto_endpoint: str) -> str:
    """The worker's moto server (tests/conftest.py `moto_endpoint`), emptied for this module: each module starts from
    an empty account as it did with a server of its own, without starting one (~1.3 s of CPU with its first S3,
    Secrets Manager and STS calls) per module."""
    reset(moto_endpoint)
    return moto_endpoint


@pytest.fixture(scope="module")
def ide(cluster: Cluster) -> Iterator[Ide]:
    root, state = cluster.base / "ide" / "root", cluster.base / "ide" / "home" / ".slurm-login"
    shadow = cluster.base / "ide" / "munge-run"
    shadow.mkdir(parents=True)
    shadow.chmod(0o755)
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sleep", "600"], stdin=subprocess.DEVNULL
    )
    ide = Ide(root=root, state=state, holder=holder)
    try:
        own_ns = os.readlink("/proc/self/ns/mnt")
        wait_for(
            "the mount namespace",
            lambda: os.readlink(f"/proc/{holder.pid}/ns/mnt") != own_ns,
            timeout=10,
            interval=0.05,
        )
        bind = run(ide.host("mount", "--bind", str(shadow), str(cluster.munge_socket.parent)))
        assert bind.returncode == 0, bind.stderr
        hide_system_slurm(ide.host(), cluster.base / "ide" / "empty")
        yield ide
    finally:
        # The sandbox's munged (the LCC's MUNGE_PID_FILE) stops with the cluster, beside the cluster's own.
        cluster.slurm.adopt(root / "run" / "munge" / "munged.pid", "munged")
        holder.kill()
        holder.wait()
