"""End to end, attach mode: a Studio space becomes a login node of a Slurm cluster whose controller ran NONE of this
project's lifecycle scripts, through `make attach`'s steps, against REAL Slurm daemons.

The cluster is the harness's HyperPod-shaped one (tests/e2e/slurm_cluster.py: /opt/slurm/etc-style slurm.conf with
enable_configless and `include accounting.conf`, configless slurmd, munged), started as HyperPod's AMI starts it and
nothing more: no configure_slurm.sh, no publish_slurm_login.sh. moto server acts as S3 and Secrets Manager. Then, as
`make attach` does it (cli/attach.py), with the controller's side run by bash where Session Manager would run it:
- the login step: the tools archive in the lifecycle bucket, read_slurm_login.sh on the controller handing over the
  login value and the controller's own client bundle (built from this machine's Debian Slurm) through presigned URLs,
  and finish_login checking them and writing the secret;
- the partition step: make_partitions.sh as root on a directory the mount table lists as Lustre, without any S3 link.
The Studio lifecycle config then runs in the sandbox of tests/e2e/test_studio_slurm_login.py (its own root, the
root's Slurm and munge hidden, its own munged), and alice submits a job that writes in her partition, as her; bob's
job is refused her partition. The controller, the Studio space and every Slurm command are the Debian 13 root with
Slurm 24.11 (tests/e2e/slurm_root.py: `in_root`).

Needs root, useradd/groupadd, and the Slurm root with curl (`make slurm-root`; `make test` builds it).
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
import yaml
from slurm_bundle import BUNDLE_BUCKET
from slurm_cluster import SlurmCluster, run
from slurm_root import in_root, missing as missing_in_root, skip_reason
from studio_space import (LCC, MISSING_HOST_BINARIES, REQUIRED_BINARIES, Cluster, s3_client, secrets,
                          start_moto)

from cli import attach
from platform_config import parse_config

REPO = Path(__file__).resolve().parents[2]

# curl: the controller step fetches the tools archive and uploads the hand-over with it (make attach).
REQUIRED = (*REQUIRED_BINARIES, "curl", "tar", "sha256sum")
pytestmark = pytest.mark.skipif(
    bool(MISSING_HOST_BINARIES or missing_in_root(REQUIRED)),
    reason=(f"missing on this machine: {', '.join(MISSING_HOST_BINARIES)}" if MISSING_HOST_BINARIES
            else skip_reason(REQUIRED)))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster as HyperPod's AMI leaves it, without this project's scripts; moto for S3 and Secrets Manager."""
    base = Path(tempfile.mkdtemp(prefix="slurm-attach-"))
    base.chmod(0o755)
    slurm = SlurmCluster(base=base, cluster_name="foreign")
    try:
        slurm.start()
        moto_url, aws_env = start_moto(slurm, base)
        yield Cluster(base=base, conf=slurm.conf, key=slurm.munge_key, munge_socket=slurm.munge_socket,
                      aws_env=aws_env, moto_url=moto_url, spool=slurm.state / "spool", script_env={}, slurm=slurm)
    finally:
        slurm.stop()
        shutil.rmtree(base, ignore_errors=True)


def on_the_controller(cluster: Cluster, command: str, **env: str) -> subprocess.CompletedProcess:
    """A session's command, run by bash as root on the controller (the Slurm root), as Session Manager would run it
    there; SLURM_CONF and MUNGE_KEY point at the harness's files instead of /opt/slurm/etc and /etc/munge."""
    assert command.startswith("sudo bash -c ")
    return run(in_root("bash", "-c", command.removeprefix("sudo ")), timeout=600, env={
        **os.environ, "SLURM_CONF": str(cluster.conf), "MUNGE_KEY": str(cluster.key), "ATTACH_ALLOW_HTTP": "1", **env})


def test_a_studio_space_becomes_a_login_node_of_a_cluster_this_project_did_not_build(studio_users, cluster, ide):
    alice, bob = studio_users
    s3 = s3_client(cluster.moto_url)
    arn = secrets(cluster).create_secret(Name="studio-front/slurm-login")["ARN"]
    assert not (cluster.slurm.ctl / "platform_parameters.json").exists()  # nothing of this project ran there

    # make attach, login step.
    handover = attach.prepare_login(s3, BUNDLE_BUCKET)
    read = on_the_controller(cluster, handover.remote)
    assert read.returncode == 0, read.stdout + read.stderr
    assert "handed over Slurm" in read.stdout + read.stderr
    summary = attach.finish_login(s3, secrets(cluster), handover, arn)
    assert "secret updated" in summary
    value = json.loads(secrets(cluster).get_secret_value(SecretId=arn)["SecretString"])
    assert value["cluster_name"] == "foreign" and value["slurm_conf"] == cluster.conf.read_text()
    assert value["munge_key_b64"] not in read.stdout + read.stderr

    # make attach, partition step: the file system has no S3 link.
    fsx = cluster.base / "fsx"
    fsx.mkdir(mode=0o755)
    mounts = cluster.base / "mounts"
    mounts.write_text(f"10.0.0.5@tcp:/abcdefgh {fsx} lustre rw 0 0\n")
    data = yaml.safe_load((REPO / "config" / "examples" / "attach-existing-slurm.yaml").read_text())
    data.update(shared_fsx=False, users=[{"name": u.name, "uid": u.uid, "gid": u.gid} for u in (alice, bob)])
    data["storage"]["lustre"]["mount_path"] = str(fsx)
    cfg = parse_config(data)
    made = on_the_controller(cluster, attach.remote_command(cfg, attach.config_partitions(cfg)),
                             PROC_MOUNTS=str(mounts))
    assert made.returncode == 0, made.stdout + made.stderr
    mine, theirs = fsx / "data" / "studio" / alice.name, fsx / "data" / "studio" / bob.name
    assert (mine.stat().st_uid, mine.stat().st_gid, mine.stat().st_mode & 0o777) == (alice.uid, alice.gid, 0o700)

    # The Studio space: the lifecycle config reads the secret the attach step wrote and installs the bundle.
    lcc = run(ide.cmd("bash", str(LCC)), env=ide.lcc_env(cluster, arn), timeout=600)
    assert lcc.returncode == 0, lcc.stdout + lcc.stderr
    sinfo = run(ide.cmd("sinfo", "-h", "-o", "%P %T"), env=cluster.slurm_env(ide.conf))
    assert sinfo.returncode == 0 and sinfo.stdout.split() == ["debug*", "idle"], sinfo

    alice_job = ide.sbatch(cluster, alice, f"--chdir={mine}", f"--output={mine}/slurm-%j.out",
                           "--wrap", f'echo "uid=$(id -u)" > {mine}/out.txt')
    job = ide.wait_for_job(cluster, alice, alice_job)
    assert job["JobState"] == "COMPLETED", job
    out = mine / "out.txt"
    assert out.read_text() == f"uid={alice.uid}\n" and (out.stat().st_uid, out.stat().st_gid) == (alice.uid, alice.gid)

    bob_job = ide.sbatch(cluster, bob, f"--chdir={theirs}", f"--output={theirs}/slurm-%j.out", "--wrap",
                         f"echo intruder > {mine}/intruder.txt")
    job = ide.wait_for_job(cluster, bob, bob_job)
    assert job["JobState"] == "FAILED" and job["UserId"] == f"{bob.name}({bob.uid})", job
    assert not (mine / "intruder.txt").exists()
    assert "Permission denied" in (theirs / f"slurm-{bob_job}.out").read_text()
