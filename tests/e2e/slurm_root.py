"""The Debian 13 (trixie) root the e2e tests run Slurm in: Slurm 24.11, the release HyperPod's AMI runs, on a Debian 12
host as on a Debian 13 one.

tools/build_slurm_root.sh builds it once per machine (debootstrap from the machine's own Debian mirror) into
`SLURM_ROOT`, outside the checkout; `make test` builds it when it is missing (target `slurm-root`). Every Slurm daemon
(slurmctld, slurmd, slurmdbd, munged, MariaDB), every Slurm and munge command, pamtester with pam_slurm_adopt and the
lifecycle scripts that drive them run inside it through `in_root(...)`, which is a command line for
enter_slurm_root.sh with the fstab it mounts: a mount namespace of its own per command, this machine's /proc, /dev and
/sys, the temporary directories and the checkout at the same paths as outside, and this machine's users (the root's
passwd and group are links to the machine's). So a test names the same paths inside and outside, and the nodes it
plays (controller, compute, a Studio space) all run Debian 13's Slurm. What is not Slurm stays on the machine: pytest, moto server,
Prometheus, slapd and sssd.

Standard library only.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The Makefile's SLURM_ROOT, where `make test` builds it; HYPERPOD_SLURM_ROOT points the tests at another one.
SLURM_ROOT = Path(os.environ.get("HYPERPOD_SLURM_ROOT", "/var/cache/hyperpod-platform-tests/slurm-24.11-trixie"))
BUILT = SLURM_ROOT / ".slurm-root-built"  # the Slurm version, written last by tools/build_slurm_root.sh
# slurmdbd's MariaDB server: Debian 12's 10.11 in a root of its own inside the Slurm root (tools/build_slurm_root.sh
# says why not Debian 13's 11.8).
DATABASE_ROOT = SLURM_ROOT / "opt" / "mariadb-bookworm"
ENTER = Path(__file__).resolve().with_name("enter_slurm_root.sh")
# The Slurm release HyperPod's AMI runs (AWS's Studio sample pins 24.11.3; Debian 13 ships 24.11.5).
SLURM_RELEASE = "24.11"
SYSTEM_DIRS = ("usr/sbin", "usr/bin", "sbin", "bin")


def shared_dirs() -> list[str]:
    """The directories a node sees at the same path as the tests: the temporary directories and the checkout."""
    dirs = sorted({"/tmp", os.path.realpath(tempfile.gettempdir()), str(REPO)})
    return [d for d in dirs if not any(d != o and d.startswith(o.rstrip("/") + "/") for o in dirs)]


def in_root(*argv: str, binds: Iterable[tuple[Path | str, str]] = (), root: Path = SLURM_ROOT) -> list[str]:
    """argv run inside the root; each (source, target) of `binds` is mounted at target inside the root for it."""
    mounts = [(d, d) for d in shared_dirs()] + [(str(s), t) for s, t in binds]
    return ["/bin/sh", str(ENTER), str(root), str(_fstab(root, mounts)), "--", *argv]


_fstab_dir: Path | None = None


def _fstab(root: Path, mounts: list[tuple[str, str]]) -> Path:
    """The fstab(5) enter_slurm_root.sh mounts in a command's namespace: /proc, /dev and /sys (rbind), the machine's
    /etc at /host-etc (bind), then each (source, target) of `mounts` at target inside `root` (rbind, the target
    directory made when missing). Written once per set of mounts, in a directory of this process's removed at exit."""
    global _fstab_dir

    def field(path: str) -> str:  # fstab(5): a space, tab, newline or backslash in a field is written in octal
        return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)

    lines = [f"{field(d)} {field(f'{root}{d}')} none rbind 0 0" for d in ("/proc", "/dev", "/sys")]
    lines.append(f"/etc {field(f'{root}/host-etc')} none bind 0 0")
    lines += [f"{field(s)} {field(f'{root}{t}')} none rbind,X-mount.mkdir 0 0" for s, t in mounts]
    text = "\n".join(lines) + "\n"
    if _fstab_dir is None:
        _fstab_dir = Path(tempfile.mkdtemp(prefix="slurm-root-fstab-"))
        atexit.register(shutil.rmtree, _fstab_dir, ignore_errors=True)
    path = _fstab_dir / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.fstab"
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.write_text(text)
        partial.rename(path)
    return path


def as_user(uid: int, gid: int, *, init_groups: bool = False) -> list[str]:
    """The prefix that runs a command as uid/gid inside the root: in_root(*as_user(...), "sbatch", ...)."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups" if init_groups else "--clear-groups", "--"]


def missing(commands: Iterable[str]) -> list[str]:
    """The commands neither the root nor its database root has (all of them when it is not built)."""
    if not BUILT.exists():
        return list(commands)
    return [
        c
        for c in commands
        if not any(exists_in(root, f"{d}/{c}") for root in (SLURM_ROOT, DATABASE_ROOT) for d in SYSTEM_DIRS)
    ]


def exists_in(root: Path, path: str) -> bool:
    """Whether `path` exists inside `root` as a process chrooted there sees it: a symbolic link's absolute target is
    read from the root, not from this machine (Debian's alternatives link /usr/sbin/slurmctld to
    /etc/alternatives/slurmctld, then to /usr/sbin/slurmctld-wlm, which a host without Slurm does not have)."""
    current, parts, hops = root, list(reversed(Path(path).parts)), 0
    while parts:
        part = parts.pop()
        if part in ("/", "."):
            continue
        if part == "..":
            current = current.parent if current != root else root
            continue
        candidate = current / part
        if not candidate.is_symlink():
            current = candidate
            continue
        hops += 1
        if hops > 40:  # the kernel's own limit (ELOOP)
            return False
        target = Path(os.readlink(candidate))
        if target.is_absolute():
            current = root
        parts.extend(reversed(target.parts))
    return current.exists()


def skip_reason(commands: Iterable[str]) -> str:
    lacking = missing(commands)
    if not BUILT.exists():
        return f"no Slurm root at {SLURM_ROOT}: `make slurm-root` (tools/build_slurm_root.sh) builds it"
    return f"the Slurm root at {SLURM_ROOT} lacks {', '.join(lacking)}: rebuild it (remove it, `make slurm-root`)"


def plugin_dir() -> Path:
    """Slurm's plugin directory inside the root (Debian's pkglibdir)."""
    return next(p.relative_to(SLURM_ROOT) for p in (SLURM_ROOT / "usr" / "lib").glob("*-linux-gnu/slurm-wlm"))


AWS_SHIM = Path(__file__).resolve().with_name("aws_shim.py")
_aws_servers: dict[bool, tuple[subprocess.Popen, str]] = {}  # on_host → (server, socket name)


def write_aws_command(directory: Path, *, on_host: bool = False) -> Path:
    """`aws` for the scripts under test: tests/e2e/aws_shim.py against whatever AWS_ENDPOINT_URL the caller's
    environment names (the root has no AWS CLI). Returns the directory for PATH.

    One warm shim server per process does the calls (`aws_shim.py --serve`: boto3 and the services' models loaded
    once, a fork per call that becomes the caller: its root and working directory, user, groups, umask, environment
    and standard streams), started with the first command written: on the root's Python and boto3 for scripts run
    inside the root, or with `on_host` on this process's Python for scripts run on this machine. A call costs ~0.08 s
    of CPU (the `aws` command's Python without site, the fork's client and request), where a Python and boto3 start
    of its own cost ~0.4 s."""
    directory.mkdir(parents=True, exist_ok=True)
    python = sys.executable if on_host else "python3"
    aws = directory / "aws"
    aws.write_text(f'#!/bin/sh\nexec {python} -I -S {AWS_SHIM} --call {_aws_server(on_host)} "$@"\n')
    aws.chmod(0o755)
    return directory


def _aws_server(on_host: bool) -> str:
    """The socket name of this process's shim server (on this machine or in the root), started when missing."""
    if on_host in _aws_servers and _aws_servers[on_host][0].poll() is None:
        return _aws_servers[on_host][1]
    name = f"hyperpod-e2e-aws-{os.getpid()}-{'host' if on_host else 'root'}-{secrets.token_hex(4)}"
    serve = [str(AWS_SHIM), "--serve", name]
    log = tempfile.TemporaryFile()
    server = subprocess.Popen(
        [sys.executable, *serve] if on_host else in_root("python3", *serve),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
    )
    assert server.stdout is not None
    ready = select.select([server.stdout], [], [], 120)[0] and server.stdout.readline() == b"ready\n"
    if not ready:
        server.kill()
        server.wait()
        log.seek(0)
        raise AssertionError(f"the aws shim server did not start: {log.read().decode(errors='replace')}")
    _aws_servers[on_host] = (server, name)
    atexit.register(_stop, server)
    return name


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(timeout=30)


def version(command: str = "slurmctld", flag: str = "-V") -> str:
    """What a Slurm command inside the root says its version is (`slurmctld -V`: "slurm 24.11.5")."""
    result = subprocess.run(
        in_root(command, flag), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[1]
