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
In per-user mode (`shared_fsx: false`) make attach's jwt step turns on auth/jwt at the controller, which had none:
enable_slurm_jwt.sh's plan prints the change and makes none, its apply makes it (backup, key, settings, reconfigure),
the attach step puts the key into the key secret, the project's token issuer (lambda/slurm_tokens) mints each user's
token from it, and slurmctld runs a job under a user's token as that user, and under another user's token as the other.
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

import issuer
import pytest
import yaml
from slurm_bundle import BUNDLE_BUCKET
from slurm_cluster import TERMINAL_JOB_STATES, SlurmCluster, run, wait_for
from slurm_root import SLURM_ROOT, as_user, in_root, missing as missing_in_root, plugin_dir, skip_reason
from studio_space import LCC, MISSING_HOST_BINARIES, REQUIRED_BINARIES, Cluster, s3_client, secrets, aws_environment

from cli import attach
from platform_config import parse_config
from platform_config.facts import RESERVED_USER_NAMES, RESERVED_USER_PREFIXES

REPO = Path(__file__).resolve().parents[2]

# curl: the controller step fetches the tools archive and uploads the hand-over with it (make attach).
REQUIRED = (*REQUIRED_BINARIES, "curl", "tar", "sha256sum")
pytestmark = pytest.mark.skipif(
    bool(MISSING_HOST_BINARIES or missing_in_root(REQUIRED)),
    reason=(
        f"missing on this machine: {', '.join(MISSING_HOST_BINARIES)}"
        if MISSING_HOST_BINARIES
        else skip_reason(REQUIRED)
    ),
)


@pytest.fixture(scope="module")
def cluster(moto_url: str) -> Iterator[Cluster]:
    """A cluster as HyperPod's AMI leaves it, without this project's scripts; moto for S3 and Secrets Manager."""
    base = Path(tempfile.mkdtemp(prefix="slurm-attach-"))
    base.chmod(0o755)
    slurm = SlurmCluster(base=base, cluster_name="foreign")
    try:
        slurm.start()
        aws_env = aws_environment(moto_url, base)
        yield Cluster(
            base=base,
            conf=slurm.conf,
            key=slurm.munge_key,
            munge_socket=slurm.munge_socket,
            aws_env=aws_env,
            moto_url=moto_url,
            spool=slurm.state / "spool",
            script_env={},
            slurm=slurm,
        )
    finally:
        slurm.stop()
        shutil.rmtree(base, ignore_errors=True)


def on_the_controller(cluster: Cluster, command: str, **env: str) -> subprocess.CompletedProcess:
    """A session's command, run by bash as root on the controller (the Slurm root), as Session Manager would run it
    there; SLURM_CONF and MUNGE_KEY point at the harness's files instead of /opt/slurm/etc and /etc/munge."""
    assert command.startswith("sudo bash -c ")
    return run(
        in_root("bash", "-c", command.removeprefix("sudo ")),
        timeout=600,
        env={
            **os.environ,
            "SLURM_CONF": str(cluster.conf),
            "MUNGE_KEY": str(cluster.key),
            "ATTACH_ALLOW_HTTP": "1",
            **env,
        },
    )


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
    made = on_the_controller(
        cluster, attach.remote_command(cfg, attach.config_partitions(cfg)), PROC_MOUNTS=str(mounts)
    )
    assert made.returncode == 0, made.stdout + made.stderr
    mine, theirs = fsx / "data" / "studio" / alice.name, fsx / "data" / "studio" / bob.name
    assert (mine.stat().st_uid, mine.stat().st_gid, mine.stat().st_mode & 0o777) == (alice.uid, alice.gid, 0o700)

    # The Studio space: the lifecycle config reads the secret the attach step wrote and installs the bundle.
    lcc = run(ide.cmd("bash", str(LCC)), env=ide.lcc_env(cluster, arn), timeout=600)
    assert lcc.returncode == 0, lcc.stdout + lcc.stderr
    sinfo = run(ide.cmd("sinfo", "-h", "-o", "%P %T"), env=cluster.slurm_env(ide.conf))
    assert sinfo.returncode == 0 and sinfo.stdout.split() == ["debug*", "idle"], sinfo

    alice_job = ide.sbatch(
        cluster,
        alice,
        f"--chdir={mine}",
        f"--output={mine}/slurm-%j.out",
        "--wrap",
        f'echo "uid=$(id -u)" > {mine}/out.txt',
    )
    job = ide.wait_for_job(cluster, alice, alice_job)
    assert job["JobState"] == "COMPLETED", job
    out = mine / "out.txt"
    assert out.read_text() == f"uid={alice.uid}\n" and (out.stat().st_uid, out.stat().st_gid) == (alice.uid, alice.gid)

    bob_job = ide.sbatch(
        cluster,
        bob,
        f"--chdir={theirs}",
        f"--output={theirs}/slurm-%j.out",
        "--wrap",
        f"echo intruder > {mine}/intruder.txt",
    )
    job = ide.wait_for_job(cluster, bob, bob_job)
    assert job["JobState"] == "FAILED" and job["UserId"] == f"{bob.name}({bob.uid})", job
    assert not (mine / "intruder.txt").exists()
    assert "Permission denied" in (theirs / f"slurm-{bob_job}.out").read_text()


def test_per_user_mode_the_attach_step_turns_on_auth_jwt_and_each_token_acts_as_its_user(studio_users, cluster):
    """A controller without auth/jwt; make attach's jwt step (plan, then apply) turns it on, idempotently; a job run
    with alice's token is alice's and writes her partition, one run with bob's token is bob's and cannot."""
    if not (SLURM_ROOT / plugin_dir() / "auth_jwt.so").exists():
        pytest.skip("the Slurm root lacks slurm-wlm-jwt-plugin (rebuild it: make slurm-root)")
    alice, bob = studio_users
    s3, sm = s3_client(cluster.moto_url), secrets(cluster)
    key_secret = sm.create_secret(Name="studio-front/slurm-jwt-key")["ARN"]
    accounting = cluster.conf.parent / "accounting.conf"
    before = accounting.read_text()
    key_file = cluster.slurm.ctl / "spool" / "jwt_hs256.key"
    env = {"JWT_KEY_FILE": str(key_file), "BACKUP_SUFFIX": "e2e", "RETRY_DELAY": "1"}

    def config_lines() -> list[str]:
        show = run(in_root("scontrol", "show", "config"), env={**os.environ, "SLURM_CONF": str(cluster.conf)})
        return [" ".join(line.split()) for line in show.stdout.splitlines() if line.startswith("AuthAlt")]

    assert config_lines() == ["AuthAltTypes = (null)", "AuthAltParameters = (null)"]  # no jwt on this cluster

    handover = attach.prepare_jwt(s3, BUNDLE_BUCKET)
    plan = on_the_controller(cluster, handover.plan, **env)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    params = f"jwt_key={key_file},disable_token_creation,max_token_lifespan=3600"
    assert f"key: create {key_file}" in plan.stdout
    assert "+AuthAltTypes=auth/jwt" in plan.stdout and f"+AuthAltParameters={params}" in plan.stdout
    assert f"backed up first to {accounting}.before-jwt-e2e" in plan.stdout and "scontrol reconfigure" in plan.stdout
    assert accounting.read_text() == before and not key_file.exists()  # the plan changed nothing

    applied = on_the_controller(cluster, handover.apply, **env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "slurmctld is UP and accepts auth/jwt tokens" in applied.stdout
    assert (accounting.parent / "accounting.conf.before-jwt-e2e").read_text() == before
    assert accounting.read_text().startswith(before) and "AuthAlt" not in cluster.conf.read_text()
    assert oct(accounting.stat().st_mode & 0o777) == "0o644"  # every Slurm command reads it, users' included
    assert (key_file.stat().st_uid, oct(key_file.stat().st_mode & 0o777), key_file.stat().st_size) == (0, "0o600", 32)
    assert config_lines() == ["AuthAltTypes = auth/jwt", f"AuthAltParameters = {params}"]
    assert "version" in attach.finish_jwt(s3, sm, handover, key_secret)
    value = json.loads(sm.get_secret_value(SecretId=key_secret)["SecretString"])
    assert __import__("base64").b64decode(value["jwt_hs256_key_b64"]) == key_file.read_bytes()
    assert value["jwt_hs256_key_b64"] not in plan.stdout + applied.stdout + applied.stderr
    assert not any("jwt_key.json" in o["Key"] for o in s3.list_objects_v2(Bucket=BUNDLE_BUCKET).get("Contents", []))

    # make attach again: nothing changes on the controller, the secret stays.
    written = accounting.read_text()
    again = attach.prepare_jwt(s3, BUNDLE_BUCKET)
    rerun = on_the_controller(cluster, again.apply, **{**env, "BACKUP_SUFFIX": "second"})
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "auth/jwt is already on" in rerun.stdout and accounting.read_text() == written
    assert not (accounting.parent / "accounting.conf.before-jwt-second").exists()
    attach.finish_jwt(s3, sm, again, key_secret)
    assert len(sm.list_secret_version_ids(SecretId=key_secret)["Versions"]) == 1  # the same key: no new version

    # The login step in per-user mode: the value Studio reads names auth jwt, carries the included file with the
    # settings, and no munge key.
    login_secret = sm.create_secret(Name="studio-front/slurm-login-per-user")["ARN"]
    login = attach.prepare_login(s3, BUNDLE_BUCKET, auth="jwt")
    read = on_the_controller(cluster, login.remote)
    assert read.returncode == 0, read.stdout + read.stderr
    assert "secret updated" in attach.finish_login(s3, sm, login, login_secret, auth="jwt")
    value = json.loads(sm.get_secret_value(SecretId=login_secret)["SecretString"])
    assert value["auth"] == "jwt" and "munge_key_b64" not in value
    assert value["slurm_conf_includes"]["accounting.conf"] == written

    # The project's token issuer reads the key secret the attach step wrote; each user's token acts as that user.
    prefix = "studio-front/slurm-token/"
    for user in (alice, bob):
        sm.create_secret(Name=prefix + user.name)
    reserved = issuer.Reserved(frozenset(RESERVED_USER_NAMES), tuple(RESERVED_USER_PREFIXES))
    issuer.issue(
        sm, key_secret_id=key_secret, prefix=prefix, users=[alice.name, bob.name], lifetime=3600, reserved=reserved
    )
    tokens = {
        u.name: json.loads(sm.get_secret_value(SecretId=prefix + u.name)["SecretString"])["token"] for u in (alice, bob)
    }
    studio = cluster.base / "jwt-fsx" / "studio"
    studio.mkdir(parents=True)
    studio.parent.chmod(0o755)
    studio.chmod(0o755)
    dirs = {}
    for user in (alice, bob):
        dirs[user.name] = studio / user.name
        dirs[user.name].mkdir(mode=0o700)
        os.chown(dirs[user.name], user.uid, user.gid)
    mine, theirs = dirs[alice.name], dirs[bob.name]

    def submit(token: str, *args: str, runner=None) -> subprocess.CompletedProcess:
        """sbatch with SLURM_JWT=token, run as `runner`'s uid (root when None): the token, not the uid, names the
        job's user (Slurm 24.11's client leaves the uid to slurmctld, which takes the authenticated one)."""
        prefix_argv = as_user(runner.uid, runner.gid) if runner else []
        env = {**os.environ, "SLURM_CONF": str(cluster.conf), "SLURM_JWT": token}
        return run(in_root(*prefix_argv, "sbatch", "--parsable", *args), env=env)

    def ended(job_id: str) -> dict[str, str]:
        def check():
            out = run(in_root("scontrol", "show", "job", job_id), env={**os.environ, "SLURM_CONF": str(cluster.conf)})
            fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
            return fields if fields.get("JobState") in TERMINAL_JOB_STATES else None

        return wait_for(f"job {job_id} to end", check, timeout=60)

    result = submit(
        tokens[alice.name],
        f"--chdir={mine}",
        f"--output={mine}/slurm-%j.out",
        "--wrap",
        f'echo "uid=$(id -u)" > {mine}/out.txt',
    )
    assert result.returncode == 0, result.stderr
    job = ended(result.stdout.strip())
    assert job["JobState"] == "COMPLETED" and job["UserId"] == f"{alice.name}({alice.uid})", job
    assert (mine / "out.txt").read_text() == f"uid={alice.uid}\n" and (mine / "out.txt").stat().st_uid == alice.uid

    # bob's token, even run from alice's uid, is bob: his job cannot write her partition.
    result = submit(
        tokens[bob.name],
        f"--chdir={theirs}",
        f"--output={theirs}/slurm-%j.out",
        "--wrap",
        f"echo intruder > {mine}/intruder.txt",
        runner=alice,
    )
    assert result.returncode == 0, result.stderr
    job = ended(result.stdout.strip())
    assert job["JobState"] == "FAILED" and job["UserId"] == f"{bob.name}({bob.uid})", job
    assert not (mine / "intruder.txt").exists()
    # A token not signed with the controller's key is refused.
    forged = issuer.mint(
        os.urandom(32), alice.name, now=int(__import__("time").time()), lifetime=3600, reserved=reserved
    )
    assert submit(forged, "--wrap", "true").returncode != 0
