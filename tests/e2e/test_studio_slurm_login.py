"""End to end: a Studio space becomes a Slurm login node, against REAL Slurm daemons.

On loopback this starts munged, slurmctld and slurmd (the "cluster") as HyperPod starts them: slurmctld with a
HyperPod-shaped /opt/slurm/etc (enable_configless, `include accounting.conf`) and slurmd configless
(`--conf-server`). The project's configure_slurm.sh then runs as on the controller and on a compute node (an
optional pyxis entry, `scontrol reconfigure` pushed to slurmd), and moto server acts as Secrets Manager.
publish_slurm_login.sh publishes the cluster's real munge key, slurm.conf and its includes; then the
Studio LCC script runs in a sandbox (its own root prefix and state dir) inside a private mount
namespace in which the munge socket directory named by slurm.conf is a different, empty directory.
So the "IDE" side runs its own munged with the key the LCC wrote, and a job it submits is accepted
only if that key is the cluster's. The controller side also builds its client bundle from its Slurm
(build_slurm_client_bundle.sh) and uploads it to moto's S3; in the IDE namespace the root's Slurm client, munge and
their libraries are hidden (bind mounts, tests/e2e/slurm_bundle.py), so sinfo, sbatch, squeue, scontrol, sacct and
munged there run from the installed bundle alone.

Every node here (controller, compute, the Studio space) is the Debian 13 root with Slurm 24.11, HyperPod's release
(tests/e2e/slurm_root.py): the daemons, the project's scripts and every Slurm command run inside it (`in_root`), with
the test's files at the same paths. The Studio space is that root with its Slurm hidden: a Studio image whose glibc
is at least the controller's, as the bundle requires.

Jobs are submitted as the Studio users, not as root: in Studio the IDE runs as the profile's POSIX
identity (CustomPosixUserConfig Uid/Gid), and on the cluster create_users.sh creates the same uid/gid.
The `studio_users` fixture creates two such users on this machine (alice 10001:10101, bob 10002:10102,
as in config/examples) and removes them afterwards. Their partition directories are owned by them with
mode 0700, as lambda/fsx_partitions lays them out. Each user runs sbatch inside the IDE sandbox under
setpriv, so munge credentials the job with that uid; the test then checks that the job ran as that uid
(`id -u` in the job, owner of the file it wrote, UserId in slurmctld) and that another user's job can
neither read nor write the first user's partition.

Needs root, useradd/groupadd, and the Slurm root (`make slurm-root`; `make test` builds it).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import TERMINAL_JOB_STATES, SlurmCluster, run, wait_for
from slurm_conf import ACCOUNTING_CONF
from slurm_bundle import BUNDLE_BUCKET, BUNDLE_PREFIX
from slurm_root import SLURM_RELEASE, in_root, skip_reason
from slurm_root import version as slurm_version
from slurm_root import missing as missing_in_root
from studio_space import (
    LCC,
    MISSING_HOST_BINARIES,
    PARAMS_FIXTURE,
    PUBLISH,
    REPO,
    REQUIRED_BINARIES,
    Cluster,
    Ide,
    PosixUser,
    ensure_posix_user,
    remove_posix_users,
    s3_client,
    secrets,
    aws_environment,
)

CONFIGURE = REPO / "lifecycle" / "hyperpod" / "configure_slurm.sh"
# A pyxis build that does not match the running Slurm, as the package's pyxis.conf names it. configure_slurm.sh makes
# its SPANK entry optional; were it `required`, every job step would fail to start.
MISMATCHED_PYXIS = "/nonexistent/slurm-other-release/spank_pyxis.so"

pytestmark = pytest.mark.skipif(
    bool(MISSING_HOST_BINARIES or missing_in_root(REQUIRED_BINARIES)),
    reason=(
        f"missing on this machine: {', '.join(MISSING_HOST_BINARIES)}"
        if MISSING_HOST_BINARIES
        else skip_reason(REQUIRED_BINARIES)
    ),
)


@pytest.fixture(scope="module")
def cluster(moto_url: str) -> Iterator[Cluster]:
    # Not pytest's tmp_path: its parents are mode 0700 and munged wants a socket path everyone can reach,
    # and a unix socket path must stay under 108 bytes.
    base = Path(tempfile.mkdtemp(prefix="slurm-e2e-"))
    base.chmod(0o755)
    slurm = SlurmCluster(base=base, cluster_name="e2e")
    try:
        slurm.start()
        ctl, etc, conf, key, sock = slurm.ctl, slurm.etc, slurm.conf, slurm.munge_key, slurm.munge_socket

        # The project's OnInitComplete steps for Slurm, on the controller and then on the compute node (the same
        # machine here), with the container runtime on and a mismatched pyxis build installed.
        params = json.loads(PARAMS_FIXTURE.read_text())
        params["container_runtime"]["enabled"] = True
        params["slurm"]["auto_resume"] = False  # HyperPod's plugin: not in Debian's Slurm
        (ctl / "platform_parameters.json").write_text(json.dumps(params))
        pyxis_conf = ctl / "pyxis" / "pyxis.conf"
        pyxis_conf.parent.mkdir()
        pyxis_conf.write_text(f"required {MISMATCHED_PYXIS}\n")
        # slurmctld is a systemd unit on HyperPod; here it is our child process, so `systemctl is-active` says so.
        shim = base / "systemd-shim"
        shim.mkdir()
        (shim / "systemctl").write_text('#!/bin/sh\n[ "$1" = is-active ] && [ "$(basename "$3")" = slurmctld ]\n')
        (shim / "systemctl").chmod(0o755)
        script_env = {
            **os.environ,
            "PATH": f"{shim}:{os.environ['PATH']}",
            "PARAMS_FILE": str(ctl / "platform_parameters.json"),
            "SLURM_CONF": str(conf),
            "SLURM_CONF_DIR": str(etc),
            "LOG_DIR": str(ctl / "provision"),
            "PYXIS_CONF": str(pyxis_conf),
            "LOGROTATE_CONF": str(ctl / "logrotate.d" / "hyperpod-slurm"),
            "RETRY_DELAY": "1",
        }
        outputs = {}
        for node_type in ("controller", "compute"):
            result = run(in_root("bash", str(CONFIGURE), node_type), env=script_env)
            assert result.returncode == 0, result.stdout + result.stderr
            outputs[node_type] = result.stdout
        assert "slurmctld reconfigured" in outputs["controller"]
        assert "reconfigure" not in outputs["compute"]

        aws_env = aws_environment(moto_url, base)
        yield Cluster(
            base=base,
            conf=conf,
            key=key,
            munge_socket=sock,
            aws_env=aws_env,
            moto_url=moto_url,
            spool=slurm.state / "spool",
            script_env=script_env,
            slurm=slurm,
        )
    finally:
        slurm.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def published(cluster: Cluster) -> tuple[str, dict]:
    """The secret as the CDK stack creates it (no value), then filled by publish_slurm_login.sh."""
    arn = secrets(cluster).create_secret(Name="hyperpod/slurm-login")["ARN"]
    env = {
        **cluster.aws_env,
        "SLURM_CONF": str(cluster.conf),
        "MUNGE_KEY": str(cluster.key),
        "LOG_DIR": str(cluster.base / "provision"),
        "SLURM_CONF_DIR": str(cluster.conf.parent),
        "SLURM_CLIENT_BUNDLE_S3_PREFIX": BUNDLE_PREFIX,
        "RETRY_DELAY": "1",
    }
    result = run(in_root("bash", str(PUBLISH), arn), env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    key_b64 = base64.b64encode(cluster.key.read_bytes()).decode()
    assert key_b64 not in result.stdout + result.stderr
    assert "published" in result.stdout and "uploaded the Slurm client bundle" in result.stdout
    objects = s3_client(cluster.moto_url).list_objects_v2(Bucket=BUNDLE_BUCKET)["Contents"]
    assert len(objects) == 1 and objects[0]["Key"].startswith("slurm-client/slurm-client-")

    # A second run on the same controller changes nothing: same build, same sha256, no upload, no new version.
    again = run(in_root("bash", str(PUBLISH)), env={**env, "SLURM_LOGIN_SECRET_ARN": arn}, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to publish" in again.stdout and "is already published" in again.stdout
    assert "uploaded" not in again.stdout
    assert s3_client(cluster.moto_url).list_objects_v2(Bucket=BUNDLE_BUCKET)["Contents"] == objects
    versions = secrets(cluster).list_secret_version_ids(SecretId=arn)["Versions"]
    assert len(versions) == 1
    return arn, json.loads(secrets(cluster).get_secret_value(SecretId=arn)["SecretString"])


def test_studio_space_becomes_a_login_node(
    studio_users: tuple[PosixUser, PosixUser], cluster: Cluster, published: tuple[str, dict], ide: Ide
):
    alice, bob = studio_users
    arn, secret = published
    assert secret["cluster_name"] == "e2e"
    assert secret["slurm_conf"] == cluster.conf.read_text()
    assert "include accounting.conf" in secret["slurm_conf"].splitlines()
    assert secret["slurm_conf_includes"] == {"accounting.conf": ACCOUNTING_CONF}
    assert base64.b64decode(secret["munge_key_b64"]) == cluster.key.read_bytes()
    assert secret["slurmctld_port"] == int(
        next(line.split("=")[1] for line in secret["slurm_conf"].splitlines() if line.startswith("SlurmctldPort="))
    )
    assert secret["controller_addr"] == "127.0.0.1"
    sinfo_version = run(in_root("sinfo", "--version"), env=cluster.slurm_env()).stdout.split()[1]
    assert secret["slurm_version"] == sinfo_version

    # Before the LCC runs, the IDE has no munged of its own: its view of the socket directory is empty. Nor has it
    # a Slurm client or munge: the system's are hidden there, as on a stock Studio image.
    assert run(ide.cmd("munge", "-n", f"--socket={cluster.munge_socket}")).returncode != 0
    for hidden in ("sinfo", "sbatch", "squeue", "sacct", "munged"):
        probe = run(ide.cmd("sh", "-c", f"command -v {hidden} >/dev/null || exit 0; exec {hidden} --version"))
        assert probe.returncode != 0 or probe.stdout == "", (hidden, probe.stdout)
    bundle = secret["client_bundle"]
    assert bundle["s3_uri"].startswith(BUNDLE_PREFIX) and bundle["sha256"] in bundle["s3_uri"]

    first = run(ide.cmd("bash", str(LCC)), env=ide.lcc_env(cluster, arn))
    assert first.returncode == 0, first.stdout + first.stderr
    assert secret["munge_key_b64"] not in first.stdout + first.stderr
    assert "changed: client bundle commands on PATH munge key slurm.conf accounting.conf munged" in first.stdout, (
        first.stdout
    )
    client = ide.root / "opt" / "hyperpod-slurm-client"
    assert (client / ".sha256").read_text() == bundle["sha256"] + "\n"
    assert (client / "VERSION").read_text().strip() == secret["slurm_version"]
    key = ide.root / "etc" / "munge" / "munge.key"
    assert key.read_bytes() == cluster.key.read_bytes()
    assert stat.S_IMODE(key.stat().st_mode) == 0o400
    # The published slurm.conf, with the bundle's plugin directory.
    assert ide.conf.read_text() == secret["slurm_conf"] + f"PluginDir={client / 'lib' / 'slurm'}\n"
    assert (ide.conf.parent / "accounting.conf").read_text() == ACCOUNTING_CONF
    log = (ide.state / "setup.log").read_text()
    assert "ready: sbatch" in log

    sinfo = run(ide.cmd("sinfo", "-h", "-o", "%P %T"), env=cluster.slurm_env(ide.conf))
    assert sinfo.returncode == 0, sinfo.stderr
    assert sinfo.stdout.split() == ["debug*", "idle"]
    version = run(ide.cmd("sinfo", "--version"), env=cluster.slurm_env(ide.conf))
    assert version.stdout.split()[1] == secret["slurm_version"], version  # Debian's says "slurm-wlm 24.11.5"
    # The bundle's commands load the bundle's libraries only: nothing from the hidden system directories. squeue -i 1
    # keeps running; its maps are read once it has loaded the auth plugin (for its first request), and libmunge with it.
    watch = (
        f'{ide.bin}/squeue -h -i 1 & p=$!; n=0; until grep -q auth_munge "/proc/$p/maps" 2>/dev/null || '
        '[ $n -ge 300 ]; do sleep 0.05; n=$((n + 1)); done; cat "/proc/$p/maps"; kill $p'
    )
    maps = run(ide.cmd("sh", "-c", watch), env=cluster.slurm_env(ide.conf))
    loaded = {line.split()[-1] for line in maps.stdout.splitlines() if ".so" in line}
    assert any(p.startswith(f"{client}/lib/slurm/libslurmfull") for p in loaded), maps.stdout[-2000:]
    assert any(p.startswith(f"{client}/lib/slurm/auth_munge") for p in loaded), maps.stdout[-2000:]
    assert any(p.startswith(f"{client}/lib/libmunge") for p in loaded), maps.stdout[-2000:]
    assert not any("slurm-wlm" in p or "libmunge" in p and not p.startswith(str(client)) for p in loaded), loaded
    # sacct loads the cluster's accounting plugin from the bundle; this cluster keeps no accounting (storage none).
    sacct = run(ide.cmd("sacct", "-n", "-X"), env=cluster.slurm_env(ide.conf))
    assert "accounting storage is disabled" in sacct.stderr.lower() or sacct.returncode == 0, sacct

    # Each user's partition is theirs alone, as lambda/fsx_partitions creates it: owner uid:gid, mode 0700.
    studio = cluster.base / "fsx" / "studio"
    studio.mkdir(parents=True)
    for d in (studio.parent, studio):
        d.chmod(0o755)
    mine, theirs = studio / alice.name, studio / bob.name
    for user, partition in ((alice, mine), (bob, theirs)):
        partition.mkdir()
        os.chown(partition, user.uid, user.gid)
        partition.chmod(0o700)

    # alice submits a job from her IDE, as her uid; the IDE's munged credentials it, slurmd runs it as her.
    alice_job = ide.sbatch(
        cluster,
        alice,
        f"--chdir={mine}",
        f"--output={mine}/slurm-%j.out",
        "--wrap",
        f'echo "hello-from-slurm uid=$(id -u) gid=$(id -g)" > {mine}/out.txt; '
        f'echo "LD_LIBRARY_PATH=${{LD_LIBRARY_PATH:-}}" > {mine}/env.txt',
    )
    job = ide.wait_for_job(cluster, alice, alice_job)
    assert job["JobState"] == "COMPLETED", job
    assert job["UserId"] == f"{alice.name}({alice.uid})" and job["GroupId"] == f"{alice.name}({alice.gid})", job
    out = mine / "out.txt"
    assert out.read_text() == f"hello-from-slurm uid={alice.uid} gid={alice.gid}\n"
    assert (out.stat().st_uid, out.stat().st_gid) == (alice.uid, alice.gid)
    assert (mine / f"slurm-{alice_job}.out").stat().st_uid == alice.uid

    # bob's job runs as bob (it writes his own partition) but can neither read nor write alice's.
    bob_job = ide.sbatch(
        cluster,
        bob,
        f"--chdir={theirs}",
        f"--output={theirs}/slurm-%j.out",
        "--wrap",
        f"id -u > {theirs}/id.txt; cat {mine}/out.txt > {theirs}/stolen.txt; echo intruder > {mine}/intruder.txt",
    )
    job = ide.wait_for_job(cluster, bob, bob_job)
    assert job["JobState"] == "FAILED" and job["UserId"] == f"{bob.name}({bob.uid})", job
    assert (theirs / "id.txt").read_text() == f"{bob.uid}\n"
    assert (theirs / "id.txt").stat().st_uid == bob.uid
    assert (theirs / "stolen.txt").read_text() == ""
    assert not (mine / "intruder.txt").exists()
    assert "Permission denied" in (theirs / f"slurm-{bob_job}.out").read_text()
    assert sorted(p.name for p in mine.iterdir()) == sorted(["out.txt", "env.txt", f"slurm-{alice_job}.out"])
    # The wrappers hand the bundle's libraries to the loader, not to the job's environment.
    assert (mine / "env.txt").read_text() == "LD_LIBRARY_PATH=\n"

    # slurmctld knows whose job is whose: alice's `squeue --me` lists hers, not bob's.
    squeue = run(
        ide.cmd("squeue", "--me", "--states=all", "-h", "-o", "%i %u", user=alice), env=ide.user_env(cluster, alice)
    )
    assert squeue.returncode == 0, squeue.stderr
    assert squeue.stdout.splitlines() == [f"{alice_job} {alice.name}"]

    # sbatch copies the IDE's environment into the job (--export=ALL), SLURM_CONF too, whose path exists only in the
    # space. Here it is one only the IDE's mount namespace sees. The batch script and its srun step still read the
    # cluster's config: slurmd puts its own slurm.conf (configless: its conf-cache) in every job's SLURM_CONF.
    studio_only = cluster.base / "ide" / "studio-only-etc"
    studio_only.mkdir()
    bind = run(ide.host("mount", "--bind", str(ide.conf.parent), str(studio_only)))
    assert bind.returncode == 0, bind.stderr
    studio_conf = studio_only / "slurm.conf"
    assert not studio_conf.exists() and run(ide.cmd("test", "-f", str(studio_conf))).returncode == 0
    submit = run(
        ide.cmd(
            "sbatch",
            "--parsable",
            f"--chdir={mine}",
            f"--output={mine}/slurm-%j.out",
            "--wrap",
            f'echo "batch $SLURM_CONF" > {mine}/conf.txt; '
            f'srun --ntasks=1 sh -c \'echo "step $SLURM_CONF"; test -f "$SLURM_CONF" && echo found\' '
            f">> {mine}/conf.txt",
            user=alice,
        ),
        env={**ide.user_env(cluster, alice), "SLURM_CONF": str(studio_conf)},
    )
    assert submit.returncode == 0, submit.stderr
    conf_job = submit.stdout.strip().split(";")[0]
    job = ide.wait_for_job(cluster, alice, conf_job)
    cached = cluster.spool / "conf-cache" / "slurm.conf"
    assert job["JobState"] == "COMPLETED", (job, (mine / f"slurm-{conf_job}.out").read_text())
    assert (mine / "conf.txt").read_text().splitlines() == [f"batch {cached}", f"step {cached}", "found"]

    # Every app start runs the LCC again: a second run changes nothing.
    second = run(ide.cmd("bash", str(LCC)), env=ide.lcc_env(cluster, arn))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing changed" in second.stdout
    assert "nothing changed" in (ide.state / "setup.log").read_text()


FS_ID = "fs-0123456789abcdef0"


def test_sbatch_from_a_studio_directory_runs_there_on_the_cluster(
    cluster: Cluster, published: tuple[str, dict], ide: Ide
):
    """One path everywhere. The cluster mounts FSx at <base>/fsx (storage.lustre.mount_path); dora's partition is
    <base>/fsx/data/studio/dora there. Her space mounts only that partition, at Studio's own mount point
    (<base>/ide/mnt/custom-file-systems/fsx_lustre/<fs id>, a bind mount standing in for Studio's Lustre mount), and
    does not have the cluster's <base>/fsx at all (an empty directory over it). She works under Studio's mount, whose
    path no node has, and submits without --chdir: the job runs in the same directory on the cluster, reads what she
    wrote there and writes what she then reads in Studio. The cluster's path works in the space too (the LCC's link)."""
    arn, _ = published
    dora = PosixUser("dora", 10021, 10121)  # this test's own user (other e2e runs on the host use other ids)
    created = [(dora.name, *ensure_posix_user(dora))]
    fsx_root = cluster.base / "fsx"
    partition = fsx_root / "data" / "studio" / dora.name
    studio_mount = cluster.base / "ide" / "mnt" / "custom-file-systems" / "fsx_lustre" / FS_ID
    no_fsx = cluster.base / "ide" / "no-fsx"
    mounts: list[Path] = []
    try:
        for d in (fsx_root, fsx_root / "data", fsx_root / "data" / "studio"):
            d.mkdir(exist_ok=True)
            d.chmod(0o755)
        partition.mkdir()
        os.chown(partition, dora.uid, dora.gid)
        partition.chmod(0o700)  # as lambda/fsx_partitions creates it
        studio_mount.mkdir(parents=True)
        no_fsx.mkdir()
        for source, target in ((partition, studio_mount), (no_fsx, fsx_root)):
            bind = run(ide.host("mount", "--bind", str(source), str(target)))
            assert bind.returncode == 0, bind.stderr
            mounts.insert(0, target)
        assert run(ide.cmd("test", "-e", str(partition))).returncode != 0  # the space has no cluster FSx path
        assert str(studio_mount) != str(partition)

        lcc = run(
            ide.cmd("bash", str(LCC)),
            env={
                **ide.lcc_env(cluster, arn),
                "FSX_FILE_SYSTEM_ID": FS_ID,
                "FSX_CLUSTER_MOUNT_PATH": str(fsx_root),
                "FSX_PARTITION_PARENT": "/data/studio",
                "FSX_SHARED_MODE": "False",
                "STUDIO_FSX_ROOT": str(studio_mount.parent),
                "STUDIO_PROFILE": dora.name,
            },
        )
        assert lcc.returncode == 0, lcc.stdout + lcc.stderr
        assert f"FSx: {partition} here is {studio_mount}" in lcc.stdout, lcc.stdout
        link = run(ide.cmd("readlink", str(partition)))
        assert link.stdout.strip() == str(studio_mount)

        def as_dora(script: str) -> subprocess.CompletedProcess:
            return run(
                ide.cmd("sh", "-c", script, user=dora),
                env={**ide.user_env(cluster, dora), "PATH": f"{ide.bin}:{os.environ['PATH']}"},
            )

        project = studio_mount / "project"
        job_script = (
            '#!/bin/sh\ntr a-z A-Z < input.txt > output.txt\npwd -P > pwd.txt\necho "$SLURM_SUBMIT_DIR" > submit.txt\n'
        )
        wrote = as_dora(f"mkdir {project} && cd {project} && echo hello > input.txt && printf '{job_script}' > job.sh")
        assert wrote.returncode == 0, wrote.stderr
        submit = as_dora(f"cd {project} && sbatch --parsable job.sh")
        assert submit.returncode == 0, submit.stderr
        job_id = submit.stdout.strip().split(";")[0]
        job = ide.wait_for_job(cluster, dora, job_id)
        on_cluster = partition / "project"
        assert job["JobState"] == "COMPLETED", job
        assert job["WorkDir"] == str(on_cluster), job
        # Back in Studio, at Studio's path: what the job wrote, owned by dora; the job ran at the cluster's path.
        # SLURM_SUBMIT_DIR is sbatch's getcwd(), Studio's path, whatever the wrapper exports (studio_workdir.sh says
        # so; this is the fact behind that note).
        seen = as_dora(
            f"cd {project} && cat output.txt pwd.txt submit.txt && stat -c %u output.txt && ls slurm-{job_id}.out"
        )
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.splitlines() == [
            "HELLO",
            str(on_cluster),
            str(project),
            str(dora.uid),
            f"slurm-{job_id}.out",
        ]

        # The cluster's path is a path in the space as well: working there and submitting gives the same directory.
        again = as_dora(f"cd {partition}/project && pwd && sbatch --parsable --wrap 'echo again > again.txt'")
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[0] == str(on_cluster)
        job = ide.wait_for_job(cluster, dora, again.stdout.splitlines()[1].split(";")[0])
        assert job["JobState"] == "COMPLETED" and job["WorkDir"] == str(on_cluster), job
        assert (on_cluster / "again.txt").read_text() == "again\n"
        # From the home volume, which no node has: sbatch says so.
        home = as_dora("cd / && sbatch --test-only --wrap true")
        assert "/ is not on the cluster's FSx" in home.stderr and str(partition) in home.stderr, home.stderr
    finally:
        for target in mounts:
            run(ide.host("umount", str(target)))
        errors = remove_posix_users(created)
        assert not errors, errors


def test_the_cluster_runs_hyperpods_slurm_release(cluster: Cluster):
    """The daemons the e2e tests start are Slurm 24.11, HyperPod's release, whatever Debian this machine runs: asked of
    the running slurmctld (`scontrol show config`) and slurmd (the version it registered with), and of the binaries
    (`slurmctld -V`, `scontrol version`) in the root they run from."""
    config = run(in_root("scontrol", "show", "config"), env=cluster.slurm_env())
    assert config.returncode == 0, config.stderr
    daemon = next(
        line.split("=", 1)[1].strip()
        for line in config.stdout.splitlines()
        if line.split("=")[0].strip() == "SLURM_VERSION"
    )
    node = run(in_root("scontrol", "show", "node"), env=cluster.slurm_env()).stdout
    registered = next(f.split("=", 1)[1] for f in node.split() if f.startswith("Version="))
    client = run(in_root("scontrol", "version"), env=cluster.slurm_env()).stdout.split()[1]
    assert {
        daemon.rsplit(".", 1)[0],
        registered.rsplit(".", 1)[0],
        client.rsplit(".", 1)[0],
        slurm_version("slurmctld", "-V").rsplit(".", 1)[0],
    } == {SLURM_RELEASE}, (daemon, registered, client)


def test_hyperpod_shaped_cluster_runs_jobs_after_the_project_scripts(cluster: Cluster):
    """configure_slurm.sh on the controller added our pyxis.conf to plugstack.conf and reconfigured; the configless
    slurmd received it; a batch job with an srun step still runs although the pyxis build does not load."""
    etc = cluster.conf.parent
    include = f"include {etc / 'plugstack.conf.d' / 'pyxis.conf'}"
    assert (etc / "plugstack.conf").read_text().splitlines() == [include]
    assert (etc / "plugstack.conf.d" / "pyxis.conf").read_text() == f"optional {MISMATCHED_PYXIS}\n"
    cached = cluster.spool / "conf-cache"
    wait_for(
        "slurmd to cache the reconfigured plugstack.conf",
        lambda: (cached / "plugstack.conf").exists() and include in (cached / "plugstack.conf").read_text(),
        timeout=30,
    )
    assert (cached / "slurm.conf").read_text() == cluster.conf.read_text()
    out = cluster.base / "step.out"
    result = run(
        in_root("sbatch", "--parsable", f"--output={out}", "--wrap", "srun echo step-ran"), env=cluster.slurm_env()
    )
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()

    def done():
        fields = run(in_root("scontrol", "show", "job", job_id), env=cluster.slurm_env()).stdout
        state = next((f.split("=", 1)[1] for f in fields.split() if f.startswith("JobState=")), "")
        return state if state in TERMINAL_JOB_STATES else None

    assert wait_for(f"job {job_id}", done, timeout=60) == "COMPLETED", out.read_text() if out.exists() else ""
    assert "step-ran" in out.read_text()
    # The scripts left HyperPod's slurm.conf and its include exactly as they were.
    assert "include accounting.conf" in cluster.conf.read_text().splitlines()
    assert (etc / "accounting.conf").read_text() == ACCOUNTING_CONF


def _bad_secret(cluster: Cluster, secret: dict, name: str, **changes) -> str:
    return secrets(cluster).create_secret(
        Name=f"hyperpod/slurm-login-{name}", SecretString=json.dumps({**secret, **changes})
    )["ARN"]


def _nothing_installed(root: Path) -> None:
    assert not (root / "etc" / "munge" / "munge.key").exists()
    assert not (root / "etc" / "slurm" / "slurm.conf").exists()
    assert not (root / "opt" / "hyperpod-slurm-client").exists()
    assert not (root / "usr" / "local" / "bin").exists()


def test_version_mismatch_fails_with_both_versions(cluster: Cluster, published: tuple[str, dict], ide: Ide):
    """The secret says another Slurm than the bundle it names: nothing is installed."""
    _, secret = published
    arn = _bad_secret(cluster, secret, "mismatch", slurm_version="99.1.0")
    sandbox = Ide(
        root=cluster.base / "ide-mismatch" / "root", state=cluster.base / "ide-mismatch" / "state", holder=ide.holder
    )
    result = run(sandbox.cmd("bash", str(LCC)), env=sandbox.lcc_env(cluster, arn))
    assert result.returncode != 0
    assert "Slurm version mismatch: the cluster runs Slurm 99.1.0 (99.1)" in result.stdout
    assert f"the client bundle is {secret['slurm_version']}" in result.stdout, result.stdout
    _nothing_installed(sandbox.root)


def test_a_bundle_whose_sinfo_reports_another_version_is_refused(
    cluster: Cluster, published: tuple[str, dict], ide: Ide
):
    """A bundle whose VERSION file claims the cluster's version but whose sinfo is another build (re-packed, with a
    matching sha256): the real `sinfo --version` check refuses it."""
    _, secret = published
    s3 = s3_client(cluster.moto_url)
    key = secret["client_bundle"]["s3_uri"].removeprefix(f"s3://{BUNDLE_BUCKET}/")
    work = cluster.base / "repack"
    work.mkdir()
    (work / "in.tar.gz").write_bytes(s3.get_object(Bucket=BUNDLE_BUCKET, Key=key)["Body"].read())
    assert run(["tar", "-xzf", str(work / "in.tar.gz"), "-C", str(work)]).returncode == 0
    (work / "slurm-client" / "VERSION").write_text("99.1.0\n")
    # A gzip stream of stored (level 0) deflate blocks: any level would do, only the checksum and the contents are
    # checked, and this one costs no compression here nor inflation in the LCC's two extractions.
    repack = run(["tar", "-cf", str(work / "out.tar"), "-C", str(work), "slurm-client"])
    assert repack.returncode == 0, repack.stderr
    data = gzip.compress((work / "out.tar").read_bytes(), compresslevel=0)
    sha = hashlib.sha256(data).hexdigest()
    s3.put_object(Bucket=BUNDLE_BUCKET, Key=f"slurm-client/slurm-client-99.1.0-{sha}.tar.gz", Body=data)
    arn = _bad_secret(
        cluster,
        secret,
        "relabelled",
        slurm_version="99.1.0",
        client_bundle={"s3_uri": f"s3://{BUNDLE_BUCKET}/slurm-client/slurm-client-99.1.0-{sha}.tar.gz", "sha256": sha},
    )
    sandbox = Ide(
        root=cluster.base / "ide-relabelled" / "root",
        state=cluster.base / "ide-relabelled" / "state",
        holder=ide.holder,
    )
    result = run(sandbox.cmd("bash", str(LCC)), env=sandbox.lcc_env(cluster, arn))
    assert result.returncode != 0
    assert (
        "Slurm version mismatch: the cluster runs Slurm 99.1.0 (99.1) but the installed client "
        f"(sinfo --version) is {secret['slurm_version']}"
    ) in result.stdout, result.stdout
    assert not (sandbox.root / "etc" / "munge" / "munge.key").exists()


def test_a_bundle_with_another_checksum_is_refused(cluster: Cluster, published: tuple[str, dict], ide: Ide):
    """The object in S3 is not the one the cluster published (its sha256 differs from the secret's): refused
    before anything is unpacked."""
    _, secret = published
    arn = _bad_secret(cluster, secret, "checksum", client_bundle={**secret["client_bundle"], "sha256": "0" * 64})
    sandbox = Ide(
        root=cluster.base / "ide-checksum" / "root", state=cluster.base / "ide-checksum" / "state", holder=ide.holder
    )
    result = run(sandbox.cmd("bash", str(LCC)), env=sandbox.lcc_env(cluster, arn))
    assert result.returncode != 0
    assert (
        f"has sha256 {secret['client_bundle']['sha256']}, but the cluster published {'0' * 64}: refusing to install it"
    ) in result.stdout, result.stdout
    _nothing_installed(sandbox.root)


# The Slurm examples and the fine-tuning example's batch script (run as `bash finetune.sbatch`, it submits itself;
# its #SBATCH lines are what sbatch reads).
SLURM_EXAMPLES = [
    *sorted((REPO / "examples" / "slurm").glob("*.sbatch")),
    REPO / "examples" / "finetune" / "finetune.sbatch",
]
# What `sbatch --test-only` here does not exercise, and why:
# - The loopback cluster has one node with this machine's CPUs, so every example is submitted with
#   --nodes=1 --ntasks-per-node=1 on the command line (which overrides the #SBATCH lines); the examples' own counts
#   are checked against what they say in their usage line instead.
# - --test-only validates the #SBATCH directives and finds a node; it runs nothing. The srun lines, with HyperPod's
#   --auto-resume (its SPANK plugin) and pyxis's --container-image (not loadable in Debian's Slurm), are not run.
#   They are only syntax-checked (bash -n) here and shellchecked in tests/test_slurm_examples.py.
ONE_NODE = ("--nodes=1", "--ntasks-per-node=1")


@pytest.mark.parametrize("script", SLURM_EXAMPLES, ids=[s.name for s in SLURM_EXAMPLES])
def test_slurm_examples_pass_sbatch_test_only(cluster: Cluster, script: Path):
    assert run(["bash", "-n", str(script)]).returncode == 0
    result = run(in_root("sbatch", "--test-only", *ONE_NODE, str(script)), env=cluster.slurm_env())
    assert result.returncode == 0, result.stderr
    assert "to start at" in result.stderr


def test_a_broken_directive_fails_sbatch_test_only(cluster: Cluster):
    """The check above can fail: the same example with one misspelt directive is refused."""
    broken = cluster.base / "broken.sbatch"
    text = (REPO / "examples" / "slurm" / "nccl-all-reduce.sbatch").read_text()
    broken.write_text(text.replace("#SBATCH --exclusive", "#SBATCH --exclusiv-nodes"))
    result = run(in_root("sbatch", "--test-only", *ONE_NODE, str(broken)), env=cluster.slurm_env())
    assert result.returncode != 0
    assert "exclusiv-nodes" in result.stderr
