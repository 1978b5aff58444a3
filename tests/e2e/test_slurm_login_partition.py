"""End to end on REAL Slurm: a login node takes no job from the default partition (configure_slurm.sh login).

HyperPod registers login nodes as slurmd nodes in its catch-all default partition (`PartitionName=dev Nodes=ALL`,
awsome-distributed-ai@95b939cd hyperpod-mental-model.md), and its API has no default-partition setting. The node of
tests/e2e/slurm_cluster.py stands for the login node: it is in the default partition (Default=YES), as HyperPod's
login node is. The script runs as on the node, against the real slurmctld; a job submitted without -p must not run
there, and runs once the node is resumed, so the drain is what kept it off.

The script, the daemons and every Slurm command run in the Slurm 24.11 root (tests/e2e/slurm_root.py: `in_root`).

Needs root and the Slurm root (`make slurm-root`; `make test` builds it).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_cluster import SLURM_BINARIES, SlurmCluster, run
from slurm_root import in_root, missing as missing_in_root, skip_reason

REPO = Path(__file__).resolve().parents[2]

SCRIPT = REPO / "lifecycle" / "hyperpod" / "configure_slurm.sh"
REASON = "login node: jobs run on the compute partitions (hyperpod platform)"

pytestmark = pytest.mark.skipif(
    bool(missing_in_root(SLURM_BINARIES)) or os.geteuid() != 0, reason=f"needs root; {skip_reason(SLURM_BINARIES)}"
)


class Login:
    def __init__(self, cluster: SlurmCluster):
        self.cluster = cluster
        self.node = cluster.controllers[0][0]  # the harness's one slurmd node
        self.params = cluster.base / "platform_parameters.json"
        self.params.write_text(
            json.dumps({"version": 1, "container_runtime": {"enabled": False}, "slurm": {"auto_resume": False}})
        )

    def script(self, node_type: str) -> str:
        env = {
            **self.cluster.env(),
            "PARAMS_FILE": str(self.params),
            "SLURM_CONF_DIR": str(self.cluster.etc),
            "LOG_DIR": str(self.cluster.base / "log"),
            "LOGROTATE_CONF": str(self.cluster.base / "logrotate.conf"),
            "SLURM_NODE_NAME": self.node,
        }
        result = run(in_root("bash", str(SCRIPT), node_type), env=env, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout + result.stderr

    def node_fields(self) -> dict[str, str]:
        out = run(in_root("scontrol", "show", "node", self.node), env=self.cluster.env()).stdout
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        reason = [line.strip() for line in out.splitlines() if line.strip().startswith("Reason=")]
        fields["Reason"] = reason[0].removeprefix("Reason=").split(" [")[0] if reason else ""
        return fields

    def scontrol(self, *args: str) -> None:
        result = run(in_root("scontrol", *args), env=self.cluster.env())
        assert result.returncode == 0, result.stderr

    def job_state(self, job_id: str) -> dict[str, str]:
        out = run(in_root("scontrol", "show", "job", job_id), env=self.cluster.env()).stdout
        return dict(f.split("=", 1) for f in out.split() if "=" in f)


@pytest.fixture(scope="module")
def login() -> Iterator[Login]:
    base = Path(tempfile.mkdtemp(prefix="slurm-login-"))
    base.chmod(0o755)
    cluster = SlurmCluster(base=base, cluster_name="login")
    try:
        cluster.start()
        yield Login(cluster)
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_a_compute_node_is_left_in_service(login: Login):
    out = login.script("compute")
    assert "drained" not in out
    assert login.node_fields()["State"] == "IDLE"


def test_a_login_node_drains_itself_and_a_job_without_partition_never_runs_there(login: Login):
    out = login.script("login")
    assert f"login node {login.node} drained: no job lands on it, in any partition" in out
    fields = login.node_fields()
    assert "DRAIN" in fields["State"] and fields["Reason"] == REASON, fields
    assert "Action:" not in fields["Reason"]  # HyperPod's node recovery acts on Action:Replace / Action:Reboot

    submitted = run(
        in_root("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "--wrap", "true"), env=login.cluster.env()
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    try:
        time.sleep(5)  # several scheduling passes: the job must still wait
        job = login.job_state(job_id)
        assert job["JobState"] == "PENDING" and job["Partition"] == login.cluster.partition, job
        # The drain alone kept it off: resumed, the node runs it.
        login.scontrol("update", f"NodeName={login.node}", "State=RESUME")
        deadline = time.monotonic() + 30
        while login.job_state(job_id)["JobState"] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            assert time.monotonic() < deadline, login.job_state(job_id)
            time.sleep(0.3)
        assert login.job_state(job_id)["JobState"] == "COMPLETED"
    finally:
        run(in_root("scancel", job_id), env=login.cluster.env())


def test_running_again_keeps_one_drain_and_someone_else_s_drain_is_left(login: Login):
    login.script("login")
    assert "drained for jobs already" in login.script("login")
    login.scontrol("update", f"NodeName={login.node}", "State=RESUME")
    login.scontrol("update", f"NodeName={login.node}", "State=DRAIN", "Reason=disk check by the admins")
    out = login.script("login")
    assert "is drained by someone else (Reason=disk check by the admins): left as it is" in out
    assert login.node_fields()["Reason"] == "disk check by the admins"
    login.scontrol("update", f"NodeName={login.node}", "State=RESUME")
