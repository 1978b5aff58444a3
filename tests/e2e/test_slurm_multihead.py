"""End to end: a Studio space keeps submitting jobs when the primary of two REAL slurmctld stops (HyperPod multi-head).

A HyperPod Slurm cluster may have several controllers: "one serving as the primary controller node and the others
serving as backup controller nodes ... If the primary controller node fails or becomes unresponsive, one of the backup
controller nodes will automatically take over" (https://docs.aws.amazon.com/sagemaker/latest/dg/
sagemaker-hyperpod-multihead.html). Here two slurmctld share one StateSaveLocation, as Slurm requires of a backup, each
in a network namespace of its own (tests/e2e/slurm_cluster.py, `backup_controllers`), with a configless slurmd.

publish_slurm_login.sh runs as each controller would at its creation (the second one in its own host name): one
value, every controller in it, the second run writing nothing. The Studio LCC then turns a sandbox into a login node
(tests/e2e/test_studio_slurm_login.py has the sandbox: own root prefix and munged, the system's Slurm hidden, the
controller's client bundle installed); a Studio user's sbatch runs; the primary is stopped; sbatch, squeue and the job
still work, through the backup the published slurm.conf names.

Needs root, iproute2 (ip), useradd, and the Slurm root (`make slurm-root`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_bundle import BUNDLE_PREFIX, hide_system_slurm
from slurm_cluster import BATCH_SCHEDULING, TERMINAL_JOB_STATES, SlurmCluster, run, wait_for
from slurm_root import in_root, missing as missing_in_root, skip_reason
from studio_space import (
    LCC,
    PUBLISH,
    REGION,
    Ide,
    PosixUser,
    aws_environment,
    ensure_posix_user,
    remove_posix_users,
)

from support.moto_server import client

REQUIRED = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "setpriv", "python3")
HOST = ("ip", "nsenter", "unshare", "useradd", "hostname")
missing = [b for b in HOST if shutil.which(b) is None and shutil.which(b, path="/usr/sbin:/sbin") is None]
pytestmark = pytest.mark.skipif(
    bool(missing or missing_in_root(REQUIRED)),
    reason=f"missing {', '.join(missing)}: apt-get install iproute2" if missing else skip_reason(REQUIRED),
)
# Seconds a backup waits for a silent primary before taking over (SlurmctldTimeout; HyperPod's is its own). Measured
# on Slurm 22.05 (the 24.11 of tests/e2e/slurm_root.py passes with the same value). 22.05's rules on both sides (src/slurmctld/backup.c, src/common/slurm_protocol_api.c): the backup pings the primary
# every TAKEOVER/3 s and takes over once more than TAKEOVER s have passed since its last answer; a client told
# "standby" sleeps TAKEOVER/2 s (whole seconds) and tries again while less than 1.5 x TAKEOVER s have passed since
# its first try. Measured here (several runs each), from the primary's stop: with 5 the takeover comes at 6.0 s and
# the client tries at 0, 2, 4, 6 (a race with the takeover) and last at 8; with 7, 9.0 s and 0, 3, 6, 9 (a race) and
# last at 12, which an sbatch in a loaded full run needed; with 9, 11.0 s and 0, 4, 8, 12 and last at 16: the job is
# accepted 12 s after the stop, and the takeover may come 5 s late before a client gives up ("Slurm backup controller
# in standby mode", which a run with 5 once ended with).
TAKEOVER = 9
# The job submitted during the takeover is evaluated at once, before slurmd has registered with the new controller
# (it asks ~4 s after taking over), so it waits for a scheduling pass; without a main-scheduler trigger after the
# registration, that is the backfill pass, every bf_interval (30 s by default; here 1 s).
SCHEDULER_PARAMETERS = f"{BATCH_SCHEDULING},bf_interval=1"


class HaCluster:
    def __init__(self, slurm: SlurmCluster, aws_env: dict[str, str], moto_url: str):
        self.slurm, self.aws_env, self.moto_url = slurm, aws_env, moto_url
        self.base, self.conf = slurm.base, slurm.conf

    def slurm_env(self, conf: Path | None = None) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(conf or self.conf)}

    def secrets(self):
        return client(self.moto_url, "secretsmanager", REGION)


@pytest.fixture(scope="module")
def ha(moto_url: str) -> Iterator[HaCluster]:
    base = Path(tempfile.mkdtemp(prefix="slurm-ha-"))  # munged wants a socket path everyone can reach
    base.chmod(0o755)
    slurm = SlurmCluster(
        base=base,
        cluster_name="e2e-ha",
        backup_controllers=1,
        slurmctld_timeout=TAKEOVER,
        scheduler_parameters=SCHEDULER_PARAMETERS,
    )
    try:
        slurm.start()
        url = moto_url
        yield HaCluster(slurm, aws_environment(url, base), url)  # the bundle bucket too; the nodes have no AWS CLI
    finally:
        slurm.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def published(ha: HaCluster) -> tuple[str, dict]:
    """publish_slurm_login.sh on the primary, then on the backup (its own host name, same slurm.conf)."""
    arn = ha.secrets().create_secret(Name="hyperpod/slurm-login-ha")["ARN"]
    env = {
        **ha.aws_env,
        "SLURM_CONF": str(ha.conf),
        "MUNGE_KEY": str(ha.slurm.munge_key),
        "LOG_DIR": str(ha.base / "provision"),
        "SLURM_CONF_DIR": str(ha.conf.parent),
        "SLURM_CLIENT_BUNDLE_S3_PREFIX": BUNDLE_PREFIX,
        "RETRY_DELAY": "1",
    }
    primary = run(in_root("bash", str(PUBLISH), arn), env=env, timeout=600)
    assert primary.returncode == 0, primary.stdout + primary.stderr
    backup_name = ha.slurm.controllers[1][0]
    backup = run(
        [
            "unshare",
            "--uts",
            "sh",
            "-c",
            f'hostname {backup_name} && exec "$@"',
            "publish",
            *in_root("bash", str(PUBLISH), arn),
        ],
        env=env,
        timeout=600,
    )
    assert backup.returncode == 0, backup.stdout + backup.stderr
    assert "nothing to publish" in backup.stdout, backup.stdout
    assert len(ha.secrets().list_secret_version_ids(SecretId=arn)["Versions"]) == 1
    return arn, json.loads(ha.secrets().get_secret_value(SecretId=arn)["SecretString"])


@pytest.fixture(scope="module")
def alice() -> Iterator[PosixUser]:
    user = PosixUser("alice", 10001, 10001)  # a Studio profile's POSIX identity, also on the cluster
    created = [(user.name, *ensure_posix_user(user))]
    try:
        yield user
    finally:
        assert not remove_posix_users(created)


@pytest.fixture(scope="module")
def ide(ha: HaCluster) -> Iterator[Ide]:
    shadow = ha.base / "ide" / "munge-run"
    shadow.mkdir(parents=True)
    shadow.chmod(0o755)
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sleep", "600"], stdin=subprocess.DEVNULL
    )
    sandbox = Ide(root=ha.base / "ide" / "root", state=ha.base / "ide" / "home" / ".slurm-login", holder=holder)
    try:
        own = os.readlink("/proc/self/ns/mnt")
        wait_for(
            "the mount namespace", lambda: os.readlink(f"/proc/{holder.pid}/ns/mnt") != own, timeout=10, interval=0.05
        )
        bind = run(sandbox.host("mount", "--bind", str(shadow), str(ha.slurm.munge_socket.parent)))
        assert bind.returncode == 0, bind.stderr
        hide_system_slurm(sandbox.host(), ha.base / "ide" / "empty")
        yield sandbox
    finally:
        # The sandbox's munged (the LCC's MUNGE_PID_FILE) stops with the cluster, beside the cluster's own.
        ha.slurm.adopt(sandbox.root / "run" / "munge" / "munged.pid", "munged")
        holder.kill()
        holder.wait()


def submit(ide: Ide, ha: HaCluster, user: PosixUser, out: Path, tag: str) -> str:
    result = run(
        ide.cmd(
            "sbatch",
            "--parsable",
            f"--output={out}/slurm-%j.out",
            f"--chdir={out}",
            "--wrap",
            f"echo {tag} uid=$(id -u) > {out}/{tag}.txt",
            user=user,
        ),
        env=ide.user_env(ha, user),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split(";")[0]


def finished(ide: Ide, ha: HaCluster, user: PosixUser, job: str) -> dict[str, str]:
    def state():
        out = run(ide.cmd("scontrol", "show", "job", job, user=user), env=ide.user_env(ha, user), timeout=60)
        fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
        return fields if fields.get("JobState") in TERMINAL_JOB_STATES else None

    return wait_for(f"job {job}", state, timeout=90)


def test_every_controller_is_published_and_both_controllers_publish_the_same(
    ha: HaCluster, published: tuple[str, dict]
):
    _, secret = published
    (primary, p_addr), (backup, b_addr) = ha.slurm.controllers
    assert secret["controllers"] == [{"host": primary, "addr": p_addr}, {"host": backup, "addr": b_addr}]
    assert (secret["controller_host"], secret["controller_addr"]) == (primary, p_addr)
    assert secret["slurm_conf"] == ha.conf.read_text()
    assert [line for line in secret["slurm_conf"].splitlines() if line.startswith("SlurmctldHost=")] == [
        f"SlurmctldHost={primary}({p_addr})",
        f"SlurmctldHost={backup}({b_addr})",
    ]


def test_studio_keeps_submitting_when_the_primary_controller_stops(
    ha: HaCluster, published: tuple[str, dict], ide: Ide, alice: PosixUser
):
    arn, _ = published
    setup = run(ide.cmd("bash", str(LCC)), env=ide.lcc_env(ha, arn), timeout=300)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "ready: sbatch" in setup.stdout
    backup, b_addr = ha.slurm.controllers[1]
    # The backup's name resolves nowhere here: the LCC wrote it into the space's hosts file.
    assert f"{b_addr} {backup}" in (ide.root / "etc" / "hosts").read_text().splitlines()

    out = ha.base / "jobs"
    out.mkdir()
    os.chown(out, alice.uid, alice.gid)
    before = submit(ide, ha, alice, out, "before")
    assert finished(ide, ha, alice, before)["JobState"] == "COMPLETED"

    ha.slurm.stop_primary()
    ping = run(in_root("scontrol", "ping"), env=ha.slurm_env())
    assert "(primary) at" in ping.stdout and "is DOWN" in ping.stdout.splitlines()[0], ping.stdout
    # sbatch from the space waits while the backup takes over (SlurmctldTimeout), then the backup accepts the job.
    after = submit(ide, ha, alice, out, "after")
    job = finished(ide, ha, alice, after)
    assert job["JobState"] == "COMPLETED", job
    assert (out / "after.txt").read_text() == f"after uid={alice.uid}\n"
    assert (out / "after.txt").stat().st_uid == alice.uid
    queue = run(ide.cmd("squeue", "--me", "--states=all", "-h", "-o", "%i", user=alice), env=ide.user_env(ha, alice))
    assert queue.returncode == 0 and after in queue.stdout.split(), queue
    ping = run(in_root("scontrol", "ping"), env=ha.slurm_env())
    assert f"(backup) at {backup} is UP" in ping.stdout, ping.stdout
