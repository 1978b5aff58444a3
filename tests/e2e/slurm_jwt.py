"""The machinery of tests/e2e/test_slurm_jwt.py: the per-user-mode cluster (munged, slurmctld and slurmd on loopback,
auth/jwt set up by the project's configure_slurm_auth.sh, the login settings published by publish_slurm_login.sh) with
a "Studio space" mount namespace that has no munge, and the calls the tests make into it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from slurm_cluster import TERMINAL_JOB_STATES, SlurmCluster, run, wait_for
from slurm_bundle import BUNDLE_PREFIX
from slurm_root import as_user, in_root
from studio_space import PARAMS_FIXTURE, REGION, PosixUser, aws_environment

from support.moto_server import client

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

CONFIGURE_AUTH = REPO / "lifecycle" / "hyperpod" / "configure_slurm_auth.sh"
PUBLISH = REPO / "lifecycle" / "hyperpod" / "publish_slurm_login.sh"
TOKEN_PREFIX = "e2e/slurm-token/"


@dataclass
class JwtCluster:
    base: Path
    conf: Path
    munge_socket: Path
    accounting: Path
    jwt_key: Path
    key_secret: str
    login_secret: str
    login: dict
    moto_url: str
    aws_env: dict[str, str]
    script_env: dict[str, str]
    outputs: list[str]
    holder: subprocess.Popen  # a process in the "Studio space" mount namespace

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
        return {**env, "SLURM_CONF": str(self.conf), **extra}

    def space(self, *argv: str, uid: int | None = None, gid: int | None = None) -> list[str]:
        """argv inside the Studio space's namespace (no munge there), as root or as a user's uid/gid."""
        prefix = [] if uid is None else as_user(uid, gid)
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--", *in_root(*prefix, *argv)]


def secrets(url: str):
    return client(url, "secretsmanager", REGION)


@contextmanager
def running_jwt_cluster(studio_users, moto_url: str) -> Iterator[JwtCluster]:
    """The cluster for `studio_users`, each with a token secret under TOKEN_PREFIX; stopped and removed on exit."""
    base = Path(tempfile.mkdtemp(prefix="slurm-jwt-"))
    base.chmod(0o755)
    slurm = SlurmCluster(base=base, cluster_name="jwt")
    holder = None
    try:
        slurm.start()
        ctl, etc, conf, munge_key, sock = slurm.ctl, slurm.etc, slurm.conf, slurm.munge_key, slurm.munge_socket

        sm = secrets(moto_url)
        key_secret = sm.create_secret(Name="e2e/slurm-jwt-key")["ARN"]
        login_secret = sm.create_secret(Name="e2e/slurm-login")["ARN"]
        for user in studio_users:
            sm.create_secret(Name=TOKEN_PREFIX + user.name)
        aws_env = aws_environment(moto_url, base)  # the bundle bucket too; the nodes have no AWS CLI

        params = json.loads(PARAMS_FIXTURE.read_text())
        params["slurm"].update(auth="jwt", jwt_key_secret_arn=key_secret)
        (ctl / "platform_parameters.json").write_text(json.dumps(params))
        jwt_key = ctl / "spool" / "jwt_hs256.key"
        script_env = {
            **aws_env,
            "PARAMS_FILE": str(ctl / "platform_parameters.json"),
            "SLURM_CONF": str(conf),
            "SLURM_CONF_DIR": str(etc),
            "LOG_DIR": str(ctl / "provision"),
            "JWT_KEY_FILE": str(jwt_key),
            "RETRY_DELAY": "1",
        }
        outputs = []
        first = run(in_root("bash", str(CONFIGURE_AUTH)), env=script_env)
        assert first.returncode == 0, first.stdout + first.stderr
        outputs.append(first.stdout)
        # Since 23.11 `scontrol reconfigure` starts slurmctld anew (scontrol(1), 24.11), which loads the new
        # AuthAltTypes: tokens work after the first run, no restart (22.05 needed one, and the script said so).
        assert "slurmctld accepts auth/jwt tokens" in first.stdout, first.stdout
        again = run(in_root("bash", str(CONFIGURE_AUTH)), env=script_env)
        assert again.returncode == 0, again.stdout + again.stderr
        outputs.append(again.stdout)

        publish = run(
            in_root("bash", str(PUBLISH), login_secret),
            env={
                **aws_env,
                "SLURM_CONF": str(conf),
                "SLURM_AUTH": "jwt",
                "MUNGE_KEY": str(munge_key),
                "LOG_DIR": str(ctl / "provision"),
                "SLURM_CONF_DIR": str(etc),
                "SLURM_CLIENT_BUNDLE_S3_PREFIX": BUNDLE_PREFIX,
            },
            timeout=600,
        )
        assert publish.returncode == 0, publish.stdout + publish.stderr
        login = json.loads(sm.get_secret_value(SecretId=login_secret)["SecretString"])
        slurm.wait_node_idle()

        # The Studio space: its own mount namespace whose munge socket directory is empty.
        empty = base / "space-munge"
        empty.mkdir()
        empty.chmod(0o755)
        holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sleep", "900"], stdin=subprocess.DEVNULL
        )
        own_ns = os.readlink("/proc/self/ns/mnt")
        wait_for(
            "the mount namespace",
            lambda: os.readlink(f"/proc/{holder.pid}/ns/mnt") != own_ns,
            timeout=10,
            interval=0.05,
        )
        bind = run(["nsenter", "-t", str(holder.pid), "-m", "--", "mount", "--bind", str(empty), str(sock.parent)])
        assert bind.returncode == 0, bind.stderr
        yield JwtCluster(
            base=base,
            conf=conf,
            munge_socket=sock,
            accounting=etc / "accounting.conf",
            jwt_key=jwt_key,
            key_secret=key_secret,
            login_secret=login_secret,
            login=login,
            moto_url=moto_url,
            aws_env=aws_env,
            script_env=script_env,
            outputs=outputs,
            holder=holder,
        )
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        slurm.stop()
        shutil.rmtree(base, ignore_errors=True)


def sbatch(c: JwtCluster, user: PosixUser | None, token: str | None, *args: str) -> subprocess.CompletedProcess:
    """sbatch from the Studio space as `user`'s uid (root when None), with SLURM_JWT=token when given."""
    env = c.env(**({"SLURM_JWT": token} if token else {}))
    argv = c.space("sbatch", "--parsable", *args, **({"uid": user.uid, "gid": user.gid} if user else {}))
    return run(argv, env=env)


def job_fields(c: JwtCluster, job_id: str) -> dict[str, str]:
    def finished() -> dict[str, str] | None:
        out = run(in_root("scontrol", "show", "job", job_id), env=c.env())
        assert out.returncode == 0, out.stderr
        fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
        return fields if fields.get("JobState") in TERMINAL_JOB_STATES else None

    return wait_for(f"job {job_id} to end", finished, timeout=60)
