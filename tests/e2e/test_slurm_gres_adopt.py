"""End to end on REAL Slurm: GPUs as GRES (check_gres.sh, --gres=gpu:N, QoS gpu limits) and pam_slurm_adopt
(configure_pam_adopt.sh) on the loopback accounting cluster of tests/e2e/slurm_cluster.py.

The node is a GPU node as HyperPod writes it (GresTypes=gpu, Gres=gpu:a10g:4 on its NodeName line, a gres.conf
beside slurm.conf), with empty files standing in for the GPU devices. The departments, users and QoS are the
research-institution example's, applied by apply_accounting.sh; the GPU count the controller expects comes from
the example's instance type through the same function the cluster stack uses (worker_groups).

pam_slurm_adopt is Debian's libpam-slurm-adopt, built for the same Slurm (24.11) as the daemons, in the Slurm root
(tests/e2e/slurm_root.py); the PAM stack is a real one, the root's /etc/pam.d with a service of its own (a copy of
that directory in the test's own, mounted over it for pamtester), exercised with pamtester's acct_mgmt, the
account phase sshd runs after authentication. slurmd runs proctrack/cgroup, Slurm 24.11's default and what
pam_slurm_adopt needs to contain a session (slurm.conf(5)): an adopted session's processes, a daemonized one
included, end with the job.

Needs root and the Debian packages slurm-wlm, slurmdbd, munge, mariadb-server, libpam-slurm-adopt and pamtester.
"""

from __future__ import annotations

import copy
import json
import os
import pwd
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from accounting_env import Env, example
from slurm_cluster import ACCOUNTING_BINARIES, SLURM_BINARIES, SlurmCluster, exited, run, wait_for
from slurm_cluster import TERMINAL_JOB_STATES as TERMINAL
from slurm_root import SLURM_ROOT, in_root, missing as missing_in_root, skip_reason
from studio_space import PosixUser, ensure_posix_user, remove_posix_users

from platform_config import parse_config
from platform_config.accounting_plan import accounting_parameters, worker_groups

REPO = Path(__file__).resolve().parents[2]

HYPERPOD = REPO / "lifecycle" / "hyperpod"
# Where Debian 13's libpam-slurm-adopt installs it (Debian 12's was /lib/security/pam_slurm_adopt.so)
PAM_MODULE = Path("/usr/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so")
PAM_SERVICE = "hyperpod-e2e-sshd"

REQUIRED = (*SLURM_BINARIES, *ACCOUNTING_BINARIES, "setpriv", "pamtester")
pytestmark = pytest.mark.skipif(
    bool(missing_in_root(REQUIRED)) or os.geteuid() != 0 or not (SLURM_ROOT / PAM_MODULE.relative_to("/")).exists(),
    reason="needs root; "
    + (skip_reason(REQUIRED) if missing_in_root(REQUIRED) else f"the Slurm root lacks {PAM_MODULE}"),
)

ADMIN = "ada"  # sudo: true in the parameters this test writes


class GresEnv(Env):
    def __init__(self, cluster: SlurmCluster, data: dict):
        super().__init__(cluster)
        self.data = data
        config = parse_config(data)
        self.platform = cluster.base / "platform_parameters.full.json"
        users = [
            {"name": u["name"], "uid": u["uid"], "gid": u["uid"], "sudo": u["name"] == ADMIN} for u in data["users"]
        ]
        self.write_params(worker_groups=worker_groups(config), users=users)

    def write_params(self, **changes) -> None:
        params = {"version": 1, "slurm": {"pam_slurm_adopt": True}, **changes}
        if self.platform.exists():
            params = {**json.loads(self.platform.read_text()), **changes}
        self.platform.write_text(json.dumps(params))

    def script(self, name: str, *args: str, **env: str) -> str:
        etc = self.cluster.conf.parent
        full = {
            **self.cluster.env(),
            "PARAMS_FILE": str(self.platform),
            "SLURM_CONF_DIR": str(etc),
            "LOG_DIR": str(self.cluster.base / "log"),
            "SLURM_WAIT_ATTEMPTS": "5",
            **env,
        }
        result = run(in_root("bash", str(HYPERPOD / name), *args), env=full, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout + result.stderr

    @property
    def pam_dir(self) -> Path:
        """The node's /etc/pam.d: a copy of the root's, mounted over it for pamtester."""
        return self.cluster.base / "pam.d"

    def pamtester(self, user: str) -> tuple[int, str]:
        result = run(
            in_root("pamtester", "-v", PAM_SERVICE, user, "acct_mgmt", binds=[(self.pam_dir, "/etc/pam.d")]),
            env=self.cluster.env(),
        )
        return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def env() -> Iterator[GresEnv]:
    data = example()
    config = parse_config(data)
    group = next(g for g in config.cluster.instance_groups if g.role == "compute")
    base = Path(tempfile.mkdtemp(prefix="slurm-gres-"))
    base.chmod(0o755)
    weights = accounting_parameters(config)["priority_weights"]
    cluster = SlurmCluster(
        base=base,
        cluster_name="research",
        accounting=True,
        priority_weights=weights,
        partition=group.partitions[0],
        gpus=4,
        proctrack_type="proctrack/cgroup",
    )
    created: list[tuple[str, bool, bool]] = []
    try:
        for user in data["users"]:
            created.append((user["name"], *ensure_posix_user(PosixUser(user["name"], user["uid"], user["uid"]))))
        cluster.start()
        gres_env = GresEnv(cluster, data)
        gres_env.params = base / "platform_parameters.json"
        gres_env.apply(data)
        yield gres_env
    finally:
        cluster.stop()
        remove_posix_users(created)
        shutil.rmtree(base, ignore_errors=True)


def pending_reason(env: GresEnv, job_id: str) -> tuple[str, str]:
    job = env.wait_job(
        job_id, lambda j: j.get("Reason") not in (None, "None") or j.get("JobState") in TERMINAL, "a reason"
    )
    run(in_root("scancel", job_id), env=env.cluster.env())
    return job["JobState"], job["Reason"]


# ------------------------------------------------------------------------------------------------------------ GRES
def test_the_node_s_gpus_match_its_instance_type(env: GresEnv):
    out = env.script("check_gres.sh")
    # research-gpus is ml.g5.12xlarge: 4 GPUs, and the node shows gpu:a10g:4.
    assert "research-gpus (partition gpu): 1 node(s) checked for gpu:4" in out
    assert "GPU GRES match the instance types" in out
    assert "WARNING" not in out


def test_a_node_with_other_gpus_than_its_instance_type_is_reported(env: GresEnv):
    config = parse_config(example())
    groups = copy.deepcopy(worker_groups(config))
    groups[0]["gpus"] = 8  # as if the group were ml.g5.48xlarge
    env.write_params(worker_groups=groups)
    try:
        out = env.script("check_gres.sh")
    finally:
        env.write_params(worker_groups=worker_groups(config))
    assert "WARNING: node" in out and "of research-gpus (partition gpu) has 4 GPU GRES" in out
    assert "its instance type has 8" in out
    assert "1 GPU GRES warning(s)" in out


def test_a_job_asking_for_one_gpu_runs_with_it(env: GresEnv):
    rc, job_id, err = env.sbatch(
        "ada", "--account=physics", "--partition=gpu", "--gres=gpu:1", "--time=10", "--wrap", "true"
    )
    assert rc == 0, err
    job = env.wait_job(job_id, lambda j: j.get("JobState") in TERMINAL, "the end")
    assert job["JobState"] == "COMPLETED", job

    # slurmdbd gets the record from slurmctld asynchronously: wait for it rather than read it once.
    def alloc_tres() -> str:
        return run(in_root("sacct", "-n", "-P", "-X", "-j", job_id, "-o", "alloctres"), env=env.cluster.env()).stdout

    wait_for(f"job {job_id}'s GPU TRES in slurmdbd", lambda: "gres/gpu=" in alloc_tres(), timeout=60)
    assert "gres/gpu=1" in alloc_tres(), alloc_tres()


def test_a_job_asking_for_more_gpus_than_a_node_has_is_refused(env: GresEnv):
    rc, _, err = env.sbatch(
        "ada", "--account=physics", "--partition=gpu", "--gres=gpu:99", "--time=10", "--wrap", "true"
    )
    assert rc != 0
    assert "Requested node configuration is not available" in err


def test_a_job_over_the_qos_gpu_limit_waits_with_the_qos_reason(env: GresEnv):
    # The example's teaching QoS allows each user 1 GPU; enrico is in teaching.
    rc, job_id, err = env.sbatch(
        "enrico",
        "--account=teaching",
        "--qos=teaching",
        "--partition=gpu",
        "--gres=gpu:2",
        "--time=10",
        "--wrap",
        "true",
    )
    assert rc == 0, err
    assert pending_reason(env, job_id) == ("PENDING", "QOSMaxGRESPerUser")


# ------------------------------------------------------------------------------------------------- pam_slurm_adopt
@pytest.fixture(scope="module")
def adopt(env: GresEnv) -> tuple[str, str]:
    """The controller step (PrologFlags=Contain, reconfigure), then the compute step on a PAM service of its own."""
    controller = env.script(
        "configure_pam_adopt.sh", "controller", INCLUDED_CONF=str(env.cluster.conf.parent / "accounting.conf")
    )
    shutil.copytree(SLURM_ROOT / "etc" / "pam.d", env.pam_dir, symlinks=True)
    pam_file = env.pam_dir / PAM_SERVICE
    pam_file.write_text("account required pam_unix.so\n")  # sshd's common-account, in short
    compute_env = {
        "PAM_SSHD": str(pam_file),
        "ACCESS_FILE": str(env.cluster.base / "admins.conf"),
        "PAM_SLURM_ADOPT_CANDIDATES": str(PAM_MODULE),
    }
    env.compute_env = compute_env
    compute = env.script("configure_pam_adopt.sh", "compute", **compute_env)
    return controller, compute


def test_the_controller_adds_prolog_flags_contain_and_slurmctld_uses_it(env: GresEnv, adopt):
    controller, _ = adopt
    assert "wrote the pam_slurm_adopt settings (PrologFlags=Contain)" in controller
    out = run(in_root("scontrol", "show", "config"), env=env.cluster.env()).stdout
    assert any(line.split("=")[0].strip() == "PrologFlags" and "Contain" in line for line in out.splitlines()), out
    # The daemons track processes by cgroup, so the controller step has nothing to warn about.
    assert any(
        line.split("=")[0].strip() == "ProctrackType" and line.split("=")[1].strip() == "proctrack/cgroup"
        for line in out.splitlines()
    ), out
    assert "ProctrackType" not in controller
    again = env.script(
        "configure_pam_adopt.sh", "controller", INCLUDED_CONF=str(env.cluster.conf.parent / "accounting.conf")
    )
    assert "already has the pam_slurm_adopt settings" in again


def test_a_user_without_a_job_on_the_node_is_denied(env: GresEnv, adopt):
    rc, out = env.pamtester("gregor")
    assert rc != 0, out
    assert "no active jobs on this node" in out or "Permission denied" in out, out


def test_a_user_with_a_running_job_is_allowed_and_an_admin_always(env: GresEnv, adopt):
    rc, job_id, err = env.sbatch("rosalind", "--account=biology", "--partition=gpu", "--time=10", "--wrap", "sleep 120")
    assert rc == 0, err
    try:
        env.wait_job(job_id, lambda j: j.get("JobState") == "RUNNING", "RUNNING")
        # slurmctld says RUNNING before the node's slurmstepd for the batch step is up, and pam_slurm_adopt asks
        # the node's stepds: wait for the step's processes there (`scontrol listpids` asks the same stepds).
        wait_for(
            f"job {job_id}'s batch step on the node",
            lambda: any(
                line.split()[1:3] == [job_id, "batch"]
                for line in run(in_root("scontrol", "listpids", job_id), env=env.cluster.env()).stdout.splitlines()[1:]
            ),
            timeout=30,
            interval=0.2,
        )
        rc, out = env.pamtester("rosalind")
        assert rc == 0, out
        # Someone else still has no job here.
        assert env.pamtester("gregor")[0] != 0
    finally:
        run(in_root("scancel", job_id), env=env.cluster.env())
    rc, out = env.pamtester(ADMIN)
    assert rc == 0, out
    # Her job over, rosalind is refused again.
    env.wait_job(job_id, lambda j: j.get("JobState") in TERMINAL, "the end")
    assert env.pamtester("rosalind")[0] != 0


def running_job(env: GresEnv, user: str, account: str) -> str:
    """A job of `user` running on the node, its batch step's slurmstepd up (pam_slurm_adopt asks the node's stepds;
    slurmctld says RUNNING before they are: `scontrol listpids` asks the same stepds)."""
    rc, job_id, err = env.sbatch(user, f"--account={account}", "--partition=gpu", "--time=10", "--wrap", "sleep 120")
    assert rc == 0, err
    env.wait_job(job_id, lambda j: j.get("JobState") == "RUNNING", "RUNNING")
    wait_for(
        f"job {job_id}'s batch step on the node",
        lambda: any(
            line.split()[1:3] == [job_id, "batch"]
            for line in run(in_root("scontrol", "listpids", job_id), env=env.cluster.env()).stdout.splitlines()[1:]
        ),
        timeout=30,
        interval=0.2,
    )
    return job_id


def test_an_adopted_session_ends_with_the_job(env: GresEnv, adopt):
    """What sshd does after the account phase, in short: the session's process (started by the PAM stack once
    pam_slurm_adopt has moved the login into the job) detaches as a daemon would, and lives in the job's extern step
    until the job ends; then proctrack/cgroup kills it. With proctrack/linuxproc it survives the job."""
    pid_file = env.cluster.base / "adopted-session.pid"
    session = env.cluster.base / "adopted-session.sh"
    # pam_exec(8) gives the script PAM_USER and PAM_TYPE; the subshell exits at once, so the sleep's parent is init.
    session.write_text(f"""#!/bin/sh
[ "$PAM_TYPE" = open_session ] || exit 0
uid=$(id -u "$PAM_USER") gid=$(id -g "$PAM_USER")
( setsid sh -c 'echo $$ >{pid_file}; exec setpriv --reuid='$uid' --regid='$gid' --clear-groups sleep 600' \
  </dev/null >/dev/null 2>&1 & )
""")
    session.chmod(0o755)
    pam_file = env.pam_dir / PAM_SERVICE
    configured = pam_file.read_text()
    pam_file.write_text(configured + f"session optional pam_exec.so {session}\n")
    pid = None
    job_id = running_job(env, "rosalind", "biology")
    try:
        try:
            result = run(
                in_root(
                    "pamtester",
                    "-v",
                    PAM_SERVICE,
                    "rosalind",
                    "acct_mgmt",
                    "open_session",
                    binds=[(env.pam_dir, "/etc/pam.d")],
                ),
                env=env.cluster.env(),
            )
            assert result.returncode == 0, result.stdout + result.stderr
            pid = int(
                wait_for(
                    "the session's process",
                    lambda: pid_file.exists() and pid_file.read_text().strip(),
                    timeout=10,
                    interval=0.05,
                )
            )
            wait_for(
                "the session's sleep",
                lambda: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0"),
                timeout=10,
                interval=0.05,
            )
            # Adopted: in the job's extern step (cgroup v1: .../job_<id>/step_extern; v2: .../job_<id>/step_extern/
            # ...), as the user, and no child of any Slurm process.
            cgroups = Path(f"/proc/{pid}/cgroup").read_text()
            assert f"/job_{job_id}/step_extern" in cgroups, cgroups
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            uid_line = next(line for line in status if line.startswith("Uid:"))
            assert uid_line.split()[1] == str(pwd.getpwnam("rosalind").pw_uid), uid_line
            assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1] == "1", "not detached"
        finally:
            run(in_root("scancel", job_id), env=env.cluster.env())
            pam_file.write_text(configured)
        env.wait_job(job_id, lambda j: j.get("JobState") in TERMINAL, "the end")
        wait_for(f"the adopted session {pid} to end with job {job_id}", lambda: exited(pid), timeout=30)
    finally:  # a failed run leaves no session behind
        if pid is not None and not exited(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_member_of_a_directory_admin_group_is_allowed_without_a_job(env: GresEnv, adopt):
    # A local group stands in for the directory's: pam_access asks NSS for membership either way (sss or files).
    group = f"e2e-admins-{os.getpid()}"
    assert run(["groupadd", group]).returncode == 0
    try:
        assert run(["gpasswd", "-a", "enrico", group]).returncode == 0
        assert env.pamtester("enrico")[0] != 0  # no job, not yet an admin
        env.write_params(directory={"admin_groups": [group]})
        env.script("configure_pam_adopt.sh", "compute", **env.compute_env)
        rc, out = env.pamtester("enrico")
        assert rc == 0, out
        assert env.pamtester("gregor")[0] != 0  # not in the group: still refused
    finally:
        env.write_params(directory=None)
        env.script("configure_pam_adopt.sh", "compute", **env.compute_env)
        run(["groupdel", group])
    assert env.pamtester("enrico")[0] != 0


def test_turning_it_off_restores_the_pam_stack(env: GresEnv, adopt):
    pam_file = env.pam_dir / PAM_SERVICE
    env.write_params(slurm={"pam_slurm_adopt": False})
    try:
        out = env.script("configure_pam_adopt.sh", "compute", **env.compute_env)
        assert "removed pam_slurm_adopt" in out
        assert pam_file.read_text() == "account required pam_unix.so\n"
        assert env.pamtester("gregor")[0] == 0
    finally:
        env.write_params(slurm={"pam_slurm_adopt": True})
        env.script("configure_pam_adopt.sh", "compute", **env.compute_env)
