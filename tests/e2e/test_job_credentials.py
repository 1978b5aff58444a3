"""End to end on REAL Slurm: a Slurm job reaches AWS as the Slurm job role, and nothing outside a job does.

install_job_credentials.sh installs the broker (lifecycle/hyperpod/lib/job_credentials.py) as it would on a login or
compute node: the broker is then started with the exact ExecStart of the unit it wrote (there is no systemd here; a
stand-in `systemctl` records the calls), as root, beside the loopback cluster of tests/e2e/slurm_cluster.py. The node
is the Debian 13 root with Slurm 24.11 (tests/e2e/slurm_root.py: `in_root`): the installer, the broker (which must
see the jobs' processes and ask slurmctld about them, as on a node), the jobs and the user's commands all run there.
STS is a moto server (the node's own credentials are moto's test keys), reached through tests/e2e/aws_shim.py, the
root's stand-in for the AWS CLI. An unprivileged user:
- in a job, asks through the AWS config the installer wrote (profile slurm-job, credential_process) with a real AWS
  SDK, and is the assumed job role, session slurm-<job>-<user>: exactly the broker's credentials;
- outside any job gets nothing; with another running job's SLURM_JOB_ID in its environment, still nothing;
- the broker never hands out the credentials it holds for a job to a process outside it.

Needs root, the Slurm root (`make slurm-root`; `make test` builds it), and moto[server] and boto3
(requirements-dev.txt).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurm_cluster import SLURM_BINARIES, SlurmCluster, run, wait_for
from studio_space import PosixUser, ensure_posix_user, remove_posix_users
from slurm_root import as_user, in_root, missing as missing_in_root, skip_reason, write_aws_command

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

HYPERPOD = REPO / "lifecycle" / "hyperpod"
REGION = "us-east-1"
ROLE_NAME = "ml-cluster-slurm-job-us-east-1"
ROLE_ARN = f"arn:aws:iam::123456789012:role/{ROLE_NAME}"
USER = ("hpjobcred", 61234)

REQUIRED = (*SLURM_BINARIES, "setpriv", "python3")
pytestmark = pytest.mark.skipif(
    bool(missing_in_root(REQUIRED)) or os.geteuid() != 0, reason=f"needs root; {skip_reason(REQUIRED)}"
)


@dataclass
class Node:
    cluster: SlurmCluster
    moto_url: str
    socket: Path
    aws_config: Path
    work: Path  # the user's directory for job output

    def as_user(self, *argv: str, **env: str):
        base = {k: v for k, v in self.cluster.env().items() if not k.startswith("AWS_")}
        return run(in_root(*as_user(USER[1], USER[1]), *argv), env={**base, **env})

    def sbatch(self, script: str) -> str:
        result = self.as_user(
            "sbatch", "--parsable", f"--chdir={self.work}", f"--output={self.work}/%j.out", "--wrap", script
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().split(";")[0]

    def end_state(self, job_id: str) -> str | None:
        """The state the job ended in, None while it has not ended."""
        out = run(in_root("scontrol", "show", "job", "-o", job_id), env=self.cluster.env()).stdout
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        return (
            fields.get("JobState") if fields.get("JobState") not in ("PENDING", "RUNNING", "COMPLETING", None) else None
        )

    def wait_done(self, job_id: str) -> str:
        assert wait_for(f"job {job_id} to end", lambda: self.end_state(job_id), timeout=60) == "COMPLETED", (
            self.work / f"{job_id}.out"
        ).read_text()
        return (self.work / f"{job_id}.out").read_text()


@pytest.fixture(scope="module")
def node(moto_url: str) -> Iterator[Node]:
    base = Path(tempfile.mkdtemp(prefix="slurm-jobcred-"))
    base.chmod(0o755)
    cluster = SlurmCluster(base=base, cluster_name="jobcred")
    created = []
    try:
        created.append((USER[0], *ensure_posix_user(PosixUser(USER[0], USER[1], USER[1]))))
        cluster.start()
        yield install_and_start(cluster, moto_url)
    finally:
        cluster.stop()
        remove_posix_users(created)
        shutil.rmtree(base, ignore_errors=True)


def install_and_start(cluster: SlurmCluster, moto_url: str) -> Node:
    base = cluster.base
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(
        f'#!/bin/sh\necho "systemctl $*" >>{base}/systemctl.calls\n[ "$1" != is-active ]\n'
    )
    aws_env = {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_PAGER": "",
    }
    write_aws_command(bin_dir)  # the root has no AWS CLI
    (bin_dir / "systemctl").chmod(0o755)
    params = base / "platform_parameters.json"
    params.write_text(json.dumps({"version": 1, "job_credentials": {"role_arn": ROLE_ARN, "region": REGION}}))
    socket_path = base / "run" / "broker.sock"
    aws_config = base / "etc" / "aws-config"
    env = {
        **cluster.env(),
        "PATH": f"{bin_dir}:{cluster.env()['PATH']}",
        "PARAMS_FILE": str(params),
        "PLATFORM_DIR": str(base / "platform"),
        "SYSTEMD_DIR": str(base / "systemd"),
        "AWS_JOB_CONFIG": str(aws_config),
        "BROKER_SOCKET": str(socket_path),
        "LOG_DIR": str(base / "log"),
    }
    result = run(in_root("bash", str(HYPERPOD / "install_job_credentials.sh")), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = (base / "systemctl.calls").read_text().splitlines()
    assert calls[-1] == "systemctl restart hyperpod-job-credentials.service", calls
    unit = (base / "systemd" / "hyperpod-job-credentials.service").read_text()
    (exec_start,) = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStart=")]
    argv = shlex.split(exec_start)
    assert argv[:3] == ["/usr/bin/python3", "-S", str(base / "platform" / "job_credentials.py")], argv
    (base / "run").mkdir(mode=0o755)  # systemd's RuntimeDirectory=
    broker_env = [f"{k}={v}" for k, v in {**aws_env, "PATH": env["PATH"], "SLURM_CONF": str(cluster.conf)}.items()]
    cluster.spawn("job-credentials", in_root("env", *broker_env, *argv))
    wait_for("the broker's socket", socket_path.exists, timeout=20)
    work = base / "work"
    work.mkdir()
    os.chown(work, USER[1], USER[1])
    return Node(cluster, moto_url, socket_path, aws_config, work)


def caller_identity(node: Node, credentials: dict) -> str:
    import boto3

    sts = boto3.client(
        "sts",
        region_name=REGION,
        endpoint_url=node.moto_url,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )
    return sts.get_caller_identity()["Arn"]


def test_a_job_gets_the_job_role_through_the_platform_s_aws_profile(node: Node):
    """The job runs the slurm-job profile's credential_process, as an AWS SDK does (this machine's boto3 is in a
    virtualenv the test user cannot read; any SDK reads the same file): the credentials it prints are the job role's
    session for this job and user, checked with STS."""
    import configparser

    config = configparser.ConfigParser()
    config.read(node.aws_config)
    assert config["profile slurm-job"]["region"] == REGION
    process = config["profile slurm-job"]["credential_process"]
    assert process.startswith("/usr/bin/python3 -S ")
    job_id = node.sbatch(process)
    credentials = json.loads(node.wait_done(job_id).strip().splitlines()[-1])
    assert credentials["Version"] == 1
    assert (
        caller_identity(node, credentials)
        == f"arn:aws:sts::123456789012:assumed-role/{ROLE_NAME}/slurm-{job_id}-{USER[0]}"
    )
    log = (node.cluster.ctl / "job-credentials.stdout").read_text()
    assert f"job {job_id}: credentials of {ROLE_ARN} for pid" in log


def test_the_broker_answers_a_job_with_exactly_the_role_s_credentials(node: Node):
    job_id = node.sbatch(f"/usr/bin/python3 -S {HYPERPOD / 'lib' / 'job_credentials.py'} fetch --socket {node.socket}")
    credentials = json.loads(node.wait_done(job_id).strip().splitlines()[-1])
    assert set(credentials) == {"Version", "AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration"}
    assert (
        caller_identity(node, credentials)
        == f"arn:aws:sts::123456789012:assumed-role/{ROLE_NAME}/slurm-{job_id}-{USER[0]}"
    )


def test_a_user_s_process_outside_a_job_gets_nothing_even_naming_a_running_job(node: Node):
    fetch = [
        "/usr/bin/python3",
        "-S",
        str(HYPERPOD / "lib" / "job_credentials.py"),
        "fetch",
        "--socket",
        str(node.socket),
    ]
    result = node.as_user(*fetch)
    assert result.returncode == 1 and result.stdout == ""
    assert "is not in a running Slurm job on this node" in result.stderr
    # A job of the same user is running, and the process claims to be part of it: the environment proves nothing.
    sleeper = node.sbatch(
        f"/usr/bin/python3 -S {HYPERPOD / 'lib' / 'job_credentials.py'} fetch --socket {node.socket} && sleep 60"
    )
    try:
        wait_for(
            "the sleeping job to hold credentials",
            lambda: (
                (node.work / f"{sleeper}.out").exists() and "AccessKeyId" in (node.work / f"{sleeper}.out").read_text()
            ),
            timeout=60,
        )
        forged = node.as_user(*fetch, SLURM_JOB_ID=sleeper, SLURM_JOBID=sleeper, SLURM_STEP_ID="0")
        assert forged.returncode == 1 and forged.stdout == "", forged.stdout
        assert "is not in a running Slurm job on this node" in forged.stderr
        assert "AccessKeyId" not in forged.stdout + forged.stderr
        # root outside a job is refused too: the broker gives the job role to jobs only
        as_root = run(in_root(*fetch), env=node.cluster.env())
        assert as_root.returncode == 1 and "not in a running Slurm job" in as_root.stderr
    finally:
        run(in_root("scancel", sleeper), env=node.cluster.env())
        # Ended before the module stops the cluster: a slurmstepd still ending the job when slurmd stops outlives it.
        wait_for(f"job {sleeper} to end", lambda: node.end_state(sleeper), timeout=60)
