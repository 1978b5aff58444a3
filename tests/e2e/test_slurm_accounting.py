"""End to end: departments, users' associations, coordinators, QoS and fair share from config/examples/
research-institution.yaml, applied by lifecycle/hyperpod/apply_accounting.sh to REAL slurmdbd + MariaDB.

The cluster (tests/e2e/slurm_cluster.py, accounting=True) runs MariaDB, slurmdbd, slurmctld and slurmd on loopback, with
AccountingStorageEnforce=associations,limits,qos and priority/multifactor. The example's users exist on this machine
with their uids (removed afterwards), and submit jobs as themselves (setpriv), so Slurm checks their associations.
The parameters come from the example through the same function the cluster stack uses (accounting_parameters).

Needs root and the Debian packages slurm-wlm, slurmdbd, munge and mariadb-server (CI installs them).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from accounting_env import Env, department, example
from slurm_cluster import ACCOUNTING_BINARIES, SLURM_BINARIES, TERMINAL_JOB_STATES as TERMINAL, SlurmCluster, run
from slurm_root import in_root, missing as missing_in_root, skip_reason
from studio_space import PosixUser, ensure_posix_user, remove_posix_users

from platform_config import parse_config
from platform_config.accounting_plan import accounting_parameters

REPO = Path(__file__).resolve().parents[2]


REQUIRED = (*SLURM_BINARIES, *ACCOUNTING_BINARIES, "setpriv")
pytestmark = pytest.mark.skipif(
    bool(missing_in_root(REQUIRED)) or os.geteuid() != 0, reason=f"needs root; {skip_reason(REQUIRED)}"
)


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    data = example()
    base = Path(tempfile.mkdtemp(prefix="slurm-acct-"))
    base.chmod(0o755)  # munged's socket and slurm.conf must be reachable by the test users
    weights = accounting_parameters(parse_config(data))["priority_weights"]
    cluster = SlurmCluster(base=base, cluster_name="research", accounting=True, priority_weights=weights)
    created: list[tuple[str, bool, bool]] = []
    try:
        for user in data["users"]:
            created.append((user["name"], *ensure_posix_user(PosixUser(user["name"], user["uid"], user["uid"]))))
        cluster.start()
        yield Env(cluster)
    finally:
        cluster.stop()
        remove_posix_users(created)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def applied(env: Env) -> tuple[str, str]:
    """The example applied once, then again."""
    first = env.apply(example())
    second = env.apply(example())
    return first, second


def test_departments_users_coordinators_and_qos_are_in_slurmdbd(env: Env, applied: tuple[str, str]):
    first, _ = applied
    assert "accounting applied:" in first
    assocs = {
        (a, u): (share, sorted(qos.split(",")), dqos)
        for a, u, share, qos, dqos in env.sacctmgr(
            "show", "assoc", "where", "cluster=research", "format=account,user,fairshare,qos,defaultqos"
        )
    }
    data = example()
    for d in data["cluster"]["accounting"]["departments"]:
        assert assocs[(d["name"], "")] == (str(d["fairshare"]), sorted(d["qos"]), d["default_qos"])
        for user in d["users"]:
            assert assocs[(d["name"], user)][1:] == (sorted(d["qos"]), d["default_qos"]), (d["name"], user)
    managed = {(a, u) for a, u in assocs if a != "root"}
    assert managed == {(d["name"], u) for d in data["cluster"]["accounting"]["departments"] for u in [""] + d["users"]}
    coordinators = {a: c for a, c in env.sacctmgr("show", "account", "withcoord", "format=account,coordinators")}
    assert (coordinators["physics"], coordinators["biology"], coordinators["teaching"]) == ("ada", "rosalind", "enrico")
    # enrico is in physics and teaching; physics lists him first, so it is his default account.
    defaults = dict(env.sacctmgr("show", "user", "format=user,defaultaccount"))
    assert (defaults["enrico"], defaults["student1"]) == ("physics", "teaching")
    qos = {
        row[0]: row[1:]
        for row in env.sacctmgr("show", "qos", "format=name,priority,maxwall,maxtrespu,grptres,maxjobspu")
    }
    assert qos["short"] == ["50", "04:00:00", "gres/gpu=4", "", ""]
    assert qos["long"] == ["0", "7-00:00:00", "gres/gpu=8", "gres/gpu=12", "2"]
    assert qos["teaching"] == ["5", "02:00:00", "gres/gpu=1,node=1", "", "2"]


def test_a_second_apply_changes_nothing(applied: tuple[str, str]):
    first, second = applied
    assert "sacctmgr -i" in first
    assert "nothing changed" in second
    assert "sacctmgr -i" not in second


def test_fair_share_appears_in_sshare(env: Env, applied):
    out = run(in_root("sshare", "-a", "-n", "-P", "-o", "account,user,rawshares"), env=env.cluster.env()).stdout
    shares = {(a.strip(), u): s for a, u, s in (line.split("|") for line in out.splitlines())}
    assert (shares[("physics", "")], shares[("biology", "")], shares[("teaching", "")]) == ("40", "40", "20")
    assert ("physics", "ada") in shares and ("teaching", "student1") in shares


def test_a_job_within_limits_runs_and_is_accounted_to_its_department(env: Env, applied):
    rc, job_id, err = env.sbatch("ada", "--account=physics", "--qos=short", "--time=10", "--wrap", "true")
    assert rc == 0, err
    assert env.wait_job(job_id, lambda j: j.get("JobState") in TERMINAL, "the end")["JobState"] == "COMPLETED"
    record = ["physics", "ada", "short", "COMPLETED"]
    assert env.sacct(job_id, record) == record


def test_a_job_over_max_wall_is_held_with_the_qos_reason(env: Env, applied):
    # The example's short QoS allows 240 minutes.
    rc, job_id, err = env.sbatch("ada", "--account=physics", "--qos=short", "--time=300", "--wrap", "true")
    assert rc == 0, err
    job = env.wait_job(
        job_id, lambda j: j.get("Reason") not in (None, "None") or j.get("JobState") in TERMINAL, "a reason"
    )
    run(in_root("scancel", job_id), env=env.cluster.env())
    assert (job["JobState"], job["Reason"]) == ("PENDING", "QOSMaxWallDurationPerJobLimit"), job


def test_a_user_cannot_submit_to_another_departments_account(env: Env, applied):
    rc, _, err = env.sbatch("rosalind", "--account=physics", "--time=10", "--wrap", "true")
    assert rc != 0
    assert "Invalid account or account/partition combination specified" in err
    # ...nor ask for a QoS the department does not have: biology may use normal and short, not long.
    rc, _, err = env.sbatch("rosalind", "--account=biology", "--qos=long", "--time=10", "--wrap", "true")
    assert rc != 0
    assert "Invalid qos specification" in err


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a node with 2 CPUs")
def test_a_changed_limit_is_applied_and_a_job_over_max_tres_per_user_waits(env: Env, applied):
    data = example()
    short = next(q for q in data["cluster"]["accounting"]["qos"] if q["name"] == "short")
    short["max_tres_per_user"] = {"cpu": 1}
    out = env.apply(data)
    assert "modify qos where name=short set MaxTRESPerUser=cpu=1,gres/gpu=-1" in out
    assert "accounting applied: 1 sacctmgr command(s)" in out
    rc, job_id, err = env.sbatch(
        "ada", "--account=physics", "--qos=short", "--cpus-per-task=2", "--time=10", "--wrap", "true"
    )
    assert rc == 0, err
    job = env.wait_job(
        job_id, lambda j: j.get("Reason") not in (None, "None") or j.get("JobState") in TERMINAL, "a reason"
    )
    run(in_root("scancel", job_id), env=env.cluster.env())
    assert (job["JobState"], job["Reason"]) == ("PENDING", "QOSMaxCpuPerUserLimit"), job
    restored = env.apply(example())
    assert "modify qos where name=short set MaxTRESPerUser=cpu=-1,gres/gpu=4" in restored


def test_removing_a_user_removes_the_association_and_keeps_history(env: Env, applied):
    rc, job_id, err = env.sbatch("gregor", "--account=biology", "--time=10", "--wrap", "true")
    assert rc == 0, err
    env.wait_job(job_id, lambda j: j.get("JobState") in TERMINAL, "the end")
    record = ["biology", "gregor", "normal", "COMPLETED"]
    assert env.sacct(job_id, record) == record

    data = copy.deepcopy(example())
    department(data, "biology")["users"].remove("gregor")
    data["users"] = [u for u in data["users"] if u["name"] != "gregor"]
    out = env.apply(data)
    assert "remove user where name=gregor account=biology cluster=research" in out
    assocs = env.sacctmgr("show", "assoc", "where", "cluster=research", "format=account,user")
    assert ["biology", "gregor"] not in assocs and ["biology", "rosalind"] in assocs
    # His job is still in the database, and he can no longer submit.
    assert env.sacct(job_id, record) == record
    rc, _, err = env.sbatch("gregor", "--account=biology", "--time=10", "--wrap", "true")
    assert rc != 0 and "Invalid account" in err
    # Listed again, he is back with the same settings; the history was never gone.
    back = env.apply(example())
    assert "add user gregor Account=biology" in back
    assert env.sacct(job_id, record) == record


def test_users_without_a_department_are_registered_whether_or_not_accounting_is_on(env: Env, applied):
    """lifecycle/node_contract.json, accounting-enforces-associations: with associations enforced, a user Slurm has no
    association for cannot submit; the platform registers every configured user (hyperpod-users), and a user removed
    from the config loses that association again."""
    created = [("newcomer", *ensure_posix_user(PosixUser("newcomer", 64201, 64201)))]
    try:
        rc, _, err = env.sbatch("newcomer", "--time=10", "--wrap", "true")
        assert rc != 0 and "Invalid account" in err, err  # enforced, and no association yet
        data = example()
        data["users"].append({"name": "newcomer", "uid": 64201})
        out = env.apply(data)
        assert "add user newcomer Account=hyperpod-users Cluster=research DefaultAccount=hyperpod-users" in out
        rc, job_id, err = env.sbatch("newcomer", "--time=10", "--wrap", "true")
        assert rc == 0, err
        env.wait_job(job_id, lambda j: j.get("JobState") in TERMINAL, "the end")
        assert env.sacct(job_id, ["hyperpod-users", "newcomer", "normal", "COMPLETED"])[:2] == [
            "hyperpod-users",
            "newcomer",
        ]
        # Accounting off (no departments or QoS in the config then): every user is registered in hyperpod-users,
        # and what the departments made earlier stays as it is.
        data["cluster"]["accounting"] = {"enabled": False}
        off = env.apply(data)
        assert "add user ada,enrico,rosalind,gregor,student1,student2 Account=hyperpod-users" in off.replace("\t", " ")
        assocs = env.sacctmgr("show", "assoc", "where", "cluster=research", "format=account,user")
        assert ["physics", "ada"] in assocs and ["hyperpod-users", "ada"] in assocs
        assert "nothing changed" in env.apply(data)
        # Back to the example (accounting on, no newcomer): his association goes, and the others' extra ones.
        back = env.apply(example())
        assert "remove user where name=newcomer account=hyperpod-users cluster=research" in back
        assocs = env.sacctmgr("show", "assoc", "where", "cluster=research", "format=account,user")
        assert not [a for a in assocs if a[0] == "hyperpod-users" and a[1]], assocs
        rc, _, err = env.sbatch("newcomer", "--time=10", "--wrap", "true")
        assert rc != 0 and "Invalid account" in err
        assert "nothing changed" in env.apply(example())
    finally:
        remove_posix_users(created)
