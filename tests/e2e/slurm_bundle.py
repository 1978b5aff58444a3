"""Helpers for the e2e tests of the Slurm client bundle (lifecycle/hyperpod/build_slurm_client_bundle.sh).

`hide_system_slurm` makes a "stock Studio image" out of the Slurm root (tests/e2e/slurm_root.py) inside a mount
namespace: every Slurm client command, munge's commands, Slurm's plugin directory (with libslurmfull.so) and libmunge
of the root are covered by bind mounts (/dev/null over files, an empty directory over directories), so whatever runs
there (`in_root(...)` from that namespace) can only be the bundle's. The root's glibc is the image's, as new as the
controller's: the bundle carries no glibc of its own.
"""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

from slurm_root import SLURM_ROOT

BUNDLE_BUCKET = "e2e-lifecycle"
BUNDLE_PREFIX = f"s3://{BUNDLE_BUCKET}/slurm-client/"
CLIENT_COMMANDS = (
    "sinfo",
    "sbatch",
    "squeue",
    "scancel",
    "sacct",
    "scontrol",
    "srun",
    "salloc",
    "sacctmgr",
    "sattach",
    "sbcast",
    "sdiag",
    "sprio",
    "sreport",
    "sshare",
    "sstat",
    "strigger",
)


def system_slurm_paths(root: Path = SLURM_ROOT) -> list[Path]:
    """What Debian's slurm-client, slurm-wlm-basic-plugins, munge and libmunge2 install under `root` that a client
    would load (paths on this machine)."""
    paths = [root / "usr" / "bin" / c for c in CLIENT_COMMANDS]
    paths += [root / "usr" / "bin" / "munge", root / "usr" / "bin" / "unmunge", root / "usr" / "sbin" / "munged"]
    for pattern in (
        "usr/lib/*-linux-gnu/slurm-wlm",
        "usr/lib/*-linux-gnu/libmunge.so*",
        "usr/lib/*-linux-gnu/libslurm*.so*",
    ):
        paths += [Path(p) for p in glob.glob(str(root / pattern))]
    return [p for p in paths if p.exists() and not p.is_symlink()]


def hide_system_slurm(nsenter: list[str], empty_dir: Path) -> list[Path]:
    """Covers system_slurm_paths() inside the namespace `nsenter` enters; returns what it hid."""
    target = subprocess.run([*nsenter, "readlink", "/proc/self/ns/mnt"], capture_output=True, text=True).stdout.strip()
    assert target and target != os.readlink("/proc/self/ns/mnt"), (
        "refusing to hide the system Slurm in this machine's own mount namespace"
    )
    empty_dir.mkdir(parents=True, exist_ok=True)
    hidden = system_slurm_paths()
    for path in hidden:
        source = str(empty_dir) if path.is_dir() else "/dev/null"
        result = subprocess.run([*nsenter, "mount", "--bind", source, str(path)], capture_output=True, text=True)
        assert result.returncode == 0, f"cannot hide {path}: {result.stderr}"
    assert any(p.name == "sinfo" for p in hidden), "this machine has no system sinfo to hide"
    return hidden
