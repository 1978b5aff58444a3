"""The Studio side of the real-Slurm tests: Studio users as POSIX accounts on this machine (what a profile's
CustomPosixUserConfig and create_users.sh give them), the moto server the node scripts publish to, and the IDE: a
sandboxed Studio space in its own mount namespace (tests/e2e/test_studio_slurm_login.py's docstring says how).
The fixtures that use these (studio_users, ide) are in tests/e2e/conftest.py."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from slurm_bundle import BUNDLE_BUCKET
from slurm_cluster import TERMINAL_JOB_STATES, SlurmCluster, run, wait_for
from slurm_root import as_user, in_root, write_aws_command

from support.moto_server import client, environment

REPO = Path(__file__).resolve().parents[2]
PUBLISH = REPO / "lifecycle" / "hyperpod" / "publish_slurm_login.sh"
PARAMS_FIXTURE = REPO / "tests" / "lifecycle" / "fixtures" / "platform_parameters.json"
LCC = REPO / "lifecycle" / "studio" / "slurm_login_node.sh"
REGION = "us-east-1"
REQUIRED_BINARIES = ("munged", "munge", "slurmctld", "slurmd", "sinfo", "sbatch", "scontrol", "setpriv", "python3")
HOST_BINARIES = ("useradd", "userdel", "groupadd", "groupdel", "unshare", "nsenter")
MISSING_HOST_BINARIES = [
    b for b in HOST_BINARIES if shutil.which(b) is None and shutil.which(b, path="/usr/sbin:/sbin") is None
]


@dataclass(frozen=True)
class PosixUser:
    """A Studio user profile's POSIX identity (CustomPosixUserConfig), also present on the cluster."""

    name: str
    uid: int
    gid: int


# Marks the accounts this test creates, so a run that died before its teardown is cleaned up by the next one.
TEST_USER_COMMENT = "slurm e2e test user (tests/e2e), safe to delete"


def ensure_posix_user(user: PosixUser) -> tuple[bool, bool]:
    """Creates the group and user with fixed ids unless they exist; returns (user is ours, group is ours).

    Like create_users.sh on the cluster, but without a home directory, sudo or shared group.
    """
    try:
        existing = pwd.getpwuid(user.uid)
    except KeyError:
        existing = None
    if existing is not None:  # already there (another test run, or the machine has it): use it as it is
        if existing.pw_name != user.name or existing.pw_gid != user.gid:
            pytest.fail(
                f"uid {user.uid} exists as {existing.pw_name} with gid {existing.pw_gid}, "
                f"expected {user.name} with gid {user.gid}"
            )
        ours = existing.pw_gecos == TEST_USER_COMMENT
        return ours, ours and any(g.gr_gid == user.gid and g.gr_name == user.name for g in grp.getgrall())
    group_ours = False
    try:
        grp.getgrgid(user.gid)
    except KeyError:
        result = run(["groupadd", "--gid", str(user.gid), user.name])
        assert result.returncode == 0, result.stderr
        group_ours = True
    # --system: no /etc/subuid range and no mail spool; no home either (jobs run in their --chdir).
    result = run(
        [
            "useradd",
            "--system",
            "--uid",
            str(user.uid),
            "--gid",
            str(user.gid),
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            "--comment",
            TEST_USER_COMMENT,
            user.name,
        ]
    )
    if result.returncode != 0:
        if group_ours:
            run(["groupdel", user.name])
        pytest.fail(f"useradd {user.name} ({user.uid}:{user.gid}) failed: {result.stderr}")
    return True, group_ours


def remove_posix_users(created: list[tuple[str, bool, bool]]) -> list[str]:
    """Undoes ensure_posix_user for (name, user is ours, group is ours), newest first; returns the errors."""
    errors = []
    for name, user_ours, group_ours in reversed(created):
        if user_ours:
            result = run(["userdel", name])
            errors += [result.stderr] if result.returncode else []
        # userdel already removes a primary group named after the user when USERGROUPS_ENAB is on.
        if group_ours and run(["getent", "group", name]).returncode == 0:
            result = run(["groupdel", name])
            errors += [result.stderr] if result.returncode else []
    return errors


def aws_environment(moto_url: str, base: Path) -> dict[str, str]:
    """The bundle bucket made in the module's empty moto server (conftest.py `moto_url`), acting as S3 and Secrets
    Manager; and the environment that points the AWS CLI stand-in at it. The nodes (the root) have no AWS CLI: a boto3
    stand-in for the calls the scripts make comes first on PATH."""
    s3_client(moto_url).create_bucket(Bucket=BUNDLE_BUCKET)
    aws_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    aws_env.update(environment(moto_url, REGION), AWS_PAGER="")
    aws_env["PATH"] = f"{write_aws_command(base / 'bin')}:{aws_env['PATH']}"
    return aws_env


@dataclass
class Cluster:
    base: Path
    conf: Path
    key: Path
    munge_socket: Path
    aws_env: dict[str, str]
    moto_url: str
    spool: Path
    script_env: dict[str, str]
    slurm: SlurmCluster

    def slurm_env(self, conf: Path | None = None) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(conf or self.conf)}


def s3_client(url: str):
    return client(url, "s3", REGION)


def secrets(cluster: Cluster):
    return client(cluster.moto_url, "secretsmanager", REGION)


@dataclass
class Ide:
    """A sandboxed Studio space: own root prefix and state dir, own view of the munge socket directory."""

    root: Path
    state: Path
    holder: subprocess.Popen

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm" / "slurm.conf"

    @property
    def bin(self) -> Path:
        """Where the LCC puts the bundle's commands on users' PATH (WRAPPER_DIR: <root>/usr/local/bin)."""
        return self.root / "usr" / "local" / "bin"

    def cmd(self, *argv: str, user: PosixUser | None = None) -> list[str]:
        """argv inside the sandbox (the Slurm root as a Studio image, its own Slurm hidden), as root (the LCC) or, like
        the IDE's processes, as a Studio user. A Slurm command name runs from the installed bundle."""
        prefix = [] if user is None else as_user(user.uid, user.gid, init_groups=True)
        if argv and (self.bin / argv[0]).exists():
            argv = (str(self.bin / argv[0]), *argv[1:])
        return self.host(*in_root(*prefix, *argv))

    def host(self, *argv: str) -> list[str]:
        """argv in the sandbox's mount namespace on this machine: mounts made there are the sandbox's."""
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--", *argv]

    def user_env(self, cluster: Cluster, user: PosixUser) -> dict[str, str]:
        """The environment of a user's IDE terminal, pointed at the slurm.conf the LCC wrote."""
        home = pwd.getpwuid(user.uid).pw_dir
        return {**cluster.slurm_env(self.conf), "USER": user.name, "LOGNAME": user.name, "HOME": home}

    def sbatch(self, cluster: Cluster, user: PosixUser, *args: str) -> str:
        """Submits a batch job as `user` from the IDE; returns the job id."""
        result = run(self.cmd("sbatch", "--parsable", *args, user=user), env=self.user_env(cluster, user))
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().split(";")[0]

    def wait_for_job(self, cluster: Cluster, user: PosixUser, job_id: str) -> dict[str, str]:
        """Waits, asking slurmctld as `user`, until the job ends; returns its `scontrol show job` fields."""

        def finished() -> dict[str, str] | None:
            out = run(self.cmd("scontrol", "show", "job", job_id, user=user), env=self.user_env(cluster, user))
            assert out.returncode == 0, out.stderr
            fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
            return fields if fields.get("JobState") in TERMINAL_JOB_STATES else None

        return wait_for(f"job {job_id} of {user.name} to end", finished, timeout=60)

    def lcc_env(self, cluster: Cluster, arn: str) -> dict[str, str]:
        return {
            **cluster.aws_env,
            "SLURM_LOGIN_SECRET_ARN": arn,
            "SLURM_LOGIN_FOREGROUND": "1",
            "SLURM_LOGIN_ROOT": str(self.root),
            "SLURM_LOGIN_STATE_DIR": str(self.state),
            "MUNGE_USER": "root",
            "SLURM_LOGIN_RETRY_DELAY": "1",
        }
