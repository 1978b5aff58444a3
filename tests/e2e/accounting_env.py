"""The research-institution example's accounting applied to a real slurmdbd, and the jobs its users submit: what the
accounting tests (test_slurm_accounting.py, test_slurm_gres_adopt.py) drive the cluster with."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import yaml
from slurm_cluster import SlurmCluster, run
from slurm_root import in_root

from platform_config import PlatformConfig, parse_config
from platform_config.accounting_plan import accounting_parameters

REPO = Path(__file__).resolve().parents[2]
APPLY = REPO / "lifecycle" / "hyperpod" / "apply_accounting.sh"
EXAMPLE = REPO / "config" / "examples" / "research-institution.yaml"


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def department(data: dict, name: str) -> dict:
    return next(d for d in data["cluster"]["accounting"]["departments"] if d["name"] == name)


class Env:
    def __init__(self, cluster: SlurmCluster):
        self.cluster = cluster
        self.params = cluster.base / "platform_parameters.json"

    def apply(self, data: dict) -> str:
        """Writes the parameters the stack would upload for `data` and runs the project's script as on the controller."""
        config: PlatformConfig = parse_config(data, str(EXAMPLE))
        users = [{"name": u.name, "uid": u.uid, "gid": u.group_id, "sudo": u.sudo} for u in config.users]
        self.params.write_text(json.dumps({"version": 1, "users": users, "accounting": accounting_parameters(config)}))
        env = {**self.cluster.env(), "PARAMS_FILE": str(self.params), "RETRY_DELAY": "1", "SLURM_WAIT_ATTEMPTS": "5"}
        result = run(in_root("bash", str(APPLY)), env=env, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def sacctmgr(self, *args: str) -> list[list[str]]:
        result = run(in_root("sacctmgr", "-n", "-P", *args), env=self.cluster.env())
        assert result.returncode == 0, result.stderr
        return [line.split("|") for line in result.stdout.splitlines()]

    def sbatch(self, user: str, *args: str) -> tuple[int, str, str]:
        uid = os.popen(f"id -u {user}").read().strip()
        gid = os.popen(f"id -g {user}").read().strip()
        result = run(
            in_root(
                "setpriv",
                f"--reuid={uid}",
                f"--regid={gid}",
                "--clear-groups",
                "sbatch",
                "--parsable",
                "--chdir=/tmp",
                "--output=/dev/null",
                *args,
            ),
            env=self.cluster.env(),
        )
        return result.returncode, result.stdout.strip(), result.stderr

    def job(self, job_id: str) -> dict[str, str]:
        out = run(in_root("scontrol", "show", "job", job_id), env=self.cluster.env()).stdout
        return dict(f.split("=", 1) for f in out.split() if "=" in f)

    def wait_job(self, job_id: str, until, what: str, timeout: float = 30) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            fields = self.job(job_id)
            if until(fields):
                return fields
            assert time.monotonic() < deadline, f"job {job_id}: timed out waiting for {what}: {fields}"
            time.sleep(0.3)

    def sacct(self, job_id: str, expected: list[str], timeout: float = 30) -> list[str]:
        """The job's record in the accounting database. slurmctld sends it to slurmdbd asynchronously, in several
        messages (a record written from the end message alone has no QoS yet), so wait for the expected one."""
        deadline = time.monotonic() + timeout
        while True:
            out = run(
                in_root("sacct", "-n", "-P", "-X", "-j", job_id, "-o", "account,user,qos,state"), env=self.cluster.env()
            ).stdout.split()
            record = out[0].split("|") if out else []
            if record == expected or time.monotonic() > deadline:
                return record
            time.sleep(0.2)
