"""End to end, per-user mode (`shared_fsx: false`): Studio users reach REAL slurmctld with their own auth/jwt token,
never with the munge key.

The "cluster" is munged, slurmctld and configless slurmd on loopback (as in test_studio_slurm_login.py), with the
HyperPod-shaped slurm.conf (`include accounting.conf`). Then, as on the controller:
- the project's configure_slurm_auth.sh (slurm.auth jwt) makes the HS256 key, writes its block into accounting.conf,
  reconfigures, and writes the key to a Secrets Manager secret (moto server);
- publish_slurm_login.sh with SLURM_AUTH=jwt publishes the login settings without a munge key;
- the project's token issuer (lambda/slurm_tokens/issuer.py, called directly against moto) mints each user's token
  into that user's secret.
The Studio side is a private mount namespace in which the munge socket directory is empty: there is no munge key and
no munged, so the only credential a Studio process has is the token it read. Jobs are submitted as the users' uids
(alice 10001:10101, bob 10002:10102), as a Studio IDE runs them. Needs root and Debian's slurm-wlm, slurm-wlm-jwt-plugin, munge.
The cluster and the calls into it are built by tests/e2e/slurm_jwt.py.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_cluster import run, wait_for
from slurm_conf import ACCOUNTING_CONF
from slurm_bundle import hide_system_slurm
from slurm_jwt import (
    CONFIGURE_AUTH,
    REPO,
    TOKEN_PREFIX,
    JwtCluster,
    job_fields,
    running_jwt_cluster,
    sbatch,
    secrets,
)
from slurm_root import SLURM_ROOT, as_user, in_root, plugin_dir, skip_reason
from slurm_root import missing as missing_in_root

import issuer

from platform_config.facts import RESERVED_USER_NAMES, RESERVED_USER_PREFIXES

# What constructs/slurm_token_issuer.py gives the issuer: the reserved system names config validation refuses too.
RESERVED = issuer.Reserved(frozenset(RESERVED_USER_NAMES), tuple(RESERVED_USER_PREFIXES))

REQUIRED = ("munged", "munge", "slurmctld", "slurmd", "sinfo", "sbatch", "scontrol", "setpriv", "python3")
pytestmark = pytest.mark.skipif(
    bool(missing_in_root(REQUIRED)) or not (SLURM_ROOT / plugin_dir() / "auth_jwt.so").exists(),
    reason=skip_reason(REQUIRED) if missing_in_root(REQUIRED) else "the Slurm root lacks slurm-wlm-jwt-plugin",
)


@pytest.fixture(scope="module")
def jwt_cluster(studio_users, moto_url: str) -> Iterator[JwtCluster]:
    with running_jwt_cluster(studio_users, moto_url) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def tokens(jwt_cluster: JwtCluster, studio_users) -> dict[str, str]:
    """The issuer's tokens, read back from each user's own secret."""
    sm = secrets(jwt_cluster.moto_url)
    issued = issuer.issue(
        sm,
        key_secret_id=jwt_cluster.key_secret,
        prefix=TOKEN_PREFIX,
        users=[u.name for u in studio_users],
        lifetime=3600,
        reserved=RESERVED,
    )
    assert sorted(issued) == sorted(u.name for u in studio_users)
    out = {}
    for user in studio_users:
        value = json.loads(sm.get_secret_value(SecretId=TOKEN_PREFIX + user.name)["SecretString"])
        assert value["user"] == user.name and value["expires"] == issued[user.name]
        out[user.name] = value["token"]
    return out


@pytest.fixture(scope="module")
def partitions(jwt_cluster: JwtCluster, studio_users) -> dict[str, Path]:
    """Each user's 0700 partition directory, as lambda/fsx_partitions lays it out."""
    studio = jwt_cluster.base / "fsx" / "studio"
    studio.mkdir(parents=True)
    for d in (studio.parent, studio):
        d.chmod(0o755)
    out = {}
    for user in studio_users:
        d = studio / user.name
        d.mkdir()
        os.chown(d, user.uid, user.gid)
        d.chmod(0o700)
        out[user.name] = d
    return out


def test_controller_settings_in_the_included_file_only(jwt_cluster: JwtCluster):
    c = jwt_cluster
    text = c.accounting.read_text()
    assert text.startswith(ACCOUNTING_CONF), "HyperPod's (the customer's) lines are kept, in order"
    block = text[len(ACCOUNTING_CONF) :].splitlines()
    assert block[0].startswith("# BEGIN hyperpod-platform auth") and block[-1] == "# END hyperpod-platform auth"
    assert block[1:-1] == [
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={c.jwt_key},disable_token_creation,max_token_lifespan=3600",
        "DisableRootJobs=YES",
    ]
    assert "include accounting.conf" in c.conf.read_text().splitlines()
    assert "AuthAlt" not in c.conf.read_text(), "slurm.conf itself is HyperPod's and untouched"
    assert oct(c.jwt_key.stat().st_mode & 0o777) == "0o600" and c.jwt_key.stat().st_uid == 0  # SlurmUser=root here
    assert len(c.jwt_key.read_bytes()) == 32
    show = run(in_root("scontrol", "show", "config"), env=c.env()).stdout
    assert any(line.split() == ["AuthAltTypes", "=", "auth/jwt"] for line in show.splitlines()), show
    # The second run: slurmctld accepts tokens, nothing rewritten, the key not written again.
    second = c.outputs[1]
    assert "slurmctld accepts auth/jwt tokens" in second
    assert "already has the jwt settings" in second and "reconfigured" not in second
    assert "the token issuer already has this key" in second
    value = json.loads(secrets(c.moto_url).get_secret_value(SecretId=c.key_secret)["SecretString"])
    assert base64.b64decode(value["jwt_hs256_key_b64"]) == c.jwt_key.read_bytes()
    assert len(secrets(c.moto_url).list_secret_version_ids(SecretId=c.key_secret)["Versions"]) == 1
    for out in c.outputs:
        assert value["jwt_hs256_key_b64"] not in out


def test_login_secret_carries_no_munge_key_and_the_space_has_none(jwt_cluster: JwtCluster):
    c = jwt_cluster
    assert c.login["auth"] == "jwt"
    assert "munge_key_b64" not in c.login
    assert c.login["slurm_conf_includes"]["accounting.conf"] == c.accounting.read_text()
    # No munged answers in the space, and without a token the client commands cannot authenticate.
    assert run(c.space("munge", "-n", f"--socket={c.munge_socket}")).returncode != 0
    no_token = run(c.space("sinfo"), env=c.env())
    assert no_token.returncode != 0


def test_a_user_acts_only_as_themselves(jwt_cluster: JwtCluster, studio_users, tokens, partitions):
    c = jwt_cluster
    alice, bob = studio_users
    mine, theirs = partitions[alice.name], partitions[bob.name]

    # alice's job, with her token, from her uid: runs as alice and writes her partition.
    result = sbatch(
        c,
        alice,
        tokens[alice.name],
        f"--chdir={mine}",
        f"--output={mine}/slurm-%j.out",
        "--wrap",
        f'echo "uid=$(id -u)" > {mine}/out.txt',
    )
    assert result.returncode == 0, result.stderr
    job = job_fields(c, result.stdout.strip())
    assert job["JobState"] == "COMPLETED" and job["UserId"] == f"{alice.name}({alice.uid})", job
    assert job["GroupId"] == f"{alice.name}({alice.gid})", job
    assert (mine / "out.txt").read_text() == f"uid={alice.uid}\n"
    assert ((mine / "out.txt").stat().st_uid, (mine / "out.txt").stat().st_gid) == (alice.uid, alice.gid)

    # alice's token in a process running as bob's uid, or as root in the space: the job is alice's, whoever runs
    # sbatch. Slurm 22.05's sbatch put the process's uid in the job description and slurmctld refused one that was not
    # the token's ("Invalid user id"); since 23.02 the client leaves it unset (src/common/slurm_opt.c: uid reset to
    # SLURM_AUTH_NOBODY) and slurmctld fills in the authenticated user (src/slurmctld/proc_req.c, _valid_id). Either
    # way the token acts only as alice: her job cannot write bob's partition.
    for runner in (bob, None):
        result = sbatch(
            c,
            runner,
            tokens[alice.name],
            f"--chdir={mine}",
            f"--output={mine}/slurm-%j.out",
            "--wrap",
            f"echo x > {theirs}/intruder.txt",
        )
        assert result.returncode == 0, (runner, result)
        job = job_fields(c, result.stdout.strip())
        assert job["UserId"] == f"{alice.name}({alice.uid})" and job["JobState"] == "FAILED", (runner, job)
        assert "Permission denied" in (mine / f"slurm-{result.stdout.strip()}.out").read_text()
    assert not (theirs / "intruder.txt").exists()

    # Asking for bob explicitly with alice's token is refused (only root and SlurmUser may submit for others).
    refused = sbatch(c, alice, tokens[alice.name], "--uid", bob.name, "--wrap", "true")
    assert refused.returncode != 0

    # bob's token is bob: his job writes his partition and cannot read alice's.
    result = sbatch(
        c,
        bob,
        tokens[bob.name],
        f"--chdir={theirs}",
        f"--output={theirs}/slurm-%j.out",
        "--wrap",
        f"id -u > {theirs}/id.txt; cat {mine}/out.txt",
    )
    assert result.returncode == 0, result.stderr
    job = job_fields(c, result.stdout.strip())
    assert job["UserId"] == f"{bob.name}({bob.uid})" and job["JobState"] == "FAILED", job
    assert (theirs / "id.txt").read_text() == f"{bob.uid}\n"
    assert "Permission denied" in (theirs / f"slurm-{result.stdout.strip()}.out").read_text()


def test_expired_forged_and_privileged_tokens_are_refused(jwt_cluster: JwtCluster, studio_users):
    c = jwt_cluster
    alice, _ = studio_users
    key = c.jwt_key.read_bytes()
    expired = issuer.mint(key, alice.name, now=int(time.time()) - 7200, lifetime=3600, reserved=RESERVED)
    forged = issuer.mint(os.urandom(32), alice.name, now=int(time.time()), lifetime=3600, reserved=RESERVED)
    for token in (expired, forged):
        result = sbatch(c, alice, token, "--wrap", "true")
        assert result.returncode != 0, result.stdout
    log = (c.base / "ctl" / "state" / "slurmctld.log").read_text()
    assert "token expired" in log and "jwt_decode failure" in log
    # The issuer never mints for root or SlurmUser: such a token could name any other user.
    for name in ("root", "slurm"):
        with pytest.raises(ValueError, match="refusing to mint"):
            issuer.mint(key, name, now=int(time.time()), lifetime=3600, reserved=RESERVED)


def test_root_jobs_are_refused_on_the_cluster(jwt_cluster: JwtCluster):
    """DisableRootJobs=YES: even root on a node, with the cluster's munge, cannot run a job as uid 0."""
    log = jwt_cluster.base / "ctl" / "state" / "slurmctld.log"
    before = log.read_text().count("for user root disabled")
    result = run(in_root("sbatch", "--parsable", "--wrap", "true"), env=jwt_cluster.env())
    assert result.returncode != 0 and "Invalid user id" in result.stderr, result
    assert log.read_text().count("for user root disabled") == before + 1


def test_a_user_cannot_mint_tokens_of_their_own(jwt_cluster: JwtCluster, studio_users):
    """disable_token_creation: `scontrol token` (any lifespan) is refused to a cluster user on a node, who
    authenticates with munge there; otherwise they could mint long-lived tokens that outlive their removal.
    slurmctld itself reports both parameters, max_token_lifespan included (the cap if creation were ever allowed)."""
    c = jwt_cluster
    alice, _ = studio_users

    for argv in (["scontrol", "token"], ["scontrol", "token", "lifespan=999999"]):
        result = run(in_root(*as_user(alice.uid, alice.gid), *argv), env=c.env())
        assert result.returncode != 0 and "SLURM_JWT=" not in result.stdout, (argv, result)
        assert "denied" in result.stderr.lower() or "disabled" in result.stderr.lower(), result.stderr
    show = run(in_root("scontrol", "show", "config"), env=c.env()).stdout
    params = next(
        line.split("=", 1)[1].strip() for line in show.splitlines() if line.split("=")[0].strip() == "AuthAltParameters"
    )
    assert params.split(",")[1:] == ["disable_token_creation", "max_token_lifespan=3600"], params
    # 22.05 printed "Yes", 24.11 prints "yes"
    assert any(line.lower().split() == ["disablerootjobs", "=", "yes"] for line in show.splitlines()), show


LCC = REPO / "lifecycle" / "studio" / "slurm_login_node.sh"


def test_studio_script_in_per_user_mode_gives_the_user_their_token_and_no_munge(
    jwt_cluster: JwtCluster, studio_users, tokens, partitions
):
    """The Studio LCC (per-user mode) in alice's space: installs the controller's client bundle, writes her token (0600,
    hers) and client wrappers, no munge key, no munged; her `sbatch` through the wrapper runs as her. The space is a
    stock image: a namespace of its own (inside the cluster's space one) hides the system's Slurm client and munge."""
    c = jwt_cluster
    holder = subprocess.Popen(
        [
            "nsenter",
            "-t",
            str(c.holder.pid),
            "-m",
            "--",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sleep",
            "900",
        ],
        stdin=subprocess.DEVNULL,
    )
    try:
        # nsenter execs unshare, which execs sleep: one process, in a namespace of its own once unshare has run.
        # Until nsenter has entered the space's namespace the process is still in this machine's own: a wait for
        # "not the space's" alone passes then, and the mounts below would land on the machine (it happened: sinfo
        # of the Slurm root hidden for every later test).
        own_ns = os.readlink("/proc/self/ns/mnt")
        space_ns = os.readlink(f"/proc/{c.holder.pid}/ns/mnt")
        wait_for(
            "the stock-image namespace",
            lambda: os.readlink(f"/proc/{holder.pid}/ns/mnt") not in (own_ns, space_ns),
            timeout=10,
            interval=0.05,
        )
        hide_system_slurm(["nsenter", "-t", str(holder.pid), "-m", "--"], c.base / "space-empty")
        _lcc_in_a_stock_space(c, studio_users, tokens, partitions, holder.pid)
    finally:
        holder.kill()
        holder.wait()


def _lcc_in_a_stock_space(c: JwtCluster, studio_users, tokens, partitions, pid: int) -> None:
    def space(*argv: str, uid: int | None = None, gid: int | None = None) -> list[str]:
        prefix = [] if uid is None else as_user(uid, gid)
        return ["nsenter", "-t", str(pid), "-m", "--", *in_root(*prefix, *argv)]

    alice, _ = studio_users
    root, state = c.base / "space" / "root", c.base / "space" / "home" / ".slurm-login"
    token_file = c.base / "space" / "home" / ".slurm" / "token"
    # The space's home is its user's, as in Studio: the token is written there as alice, never by root.
    token_file.parents[1].mkdir(parents=True, exist_ok=True)
    os.chown(token_file.parents[1], alice.uid, alice.gid)
    token_file.parents[1].chmod(0o750)
    env = {
        **c.aws_env,
        "SLURM_LOGIN_SECRET_ARN": c.login_secret,
        "SLURM_LOGIN_FOREGROUND": "1",
        "SLURM_LOGIN_ROOT": str(root),
        "SLURM_LOGIN_STATE_DIR": str(state),
        "SLURM_LOGIN_RETRY_DELAY": "1",
        "SLURM_TOKEN_SECRET_PREFIX": TOKEN_PREFIX,
        "SLURM_STUDIO_PROFILE": alice.name,
        "SLURM_TOKEN_FILE": str(token_file),
        "SLURM_TOKEN_OWNER": alice.name,
        "SLURM_TOKEN_REFRESH_SECONDS": "0",
        "MUNGE_USER": "root",
    }
    first = run(space("bash", str(LCC)), env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "per-user mode: no munge key" in first.stdout and "ready: sbatch" in first.stdout
    assert tokens[alice.name] not in first.stdout + first.stderr
    assert token_file.read_text() == tokens[alice.name] + "\n"
    assert (token_file.stat().st_uid, oct(token_file.stat().st_mode & 0o777)) == (alice.uid, "0o600")
    assert not (root / "etc" / "munge" / "munge.key").exists()
    assert run(space("munge", "-n", f"--socket={c.munge_socket}")).returncode != 0  # still no munged there
    conf = root / "etc" / "slurm" / "slurm.conf"
    client = root / "opt" / "hyperpod-slurm-client"
    assert conf.read_text() == c.login["slurm_conf"] + f"PluginDir={client / 'lib' / 'slurm'}\n"
    assert (client / "lib" / "slurm" / "auth_jwt.so").is_file()

    mine = partitions[alice.name]
    wrapper = root / "usr" / "local" / "bin" / "sbatch"
    user_env = {k: v for k, v in c.env().items()}
    user_env.update(SLURM_CONF=str(conf), SLURM_TOKEN_FILE=str(token_file))
    result = run(
        space(
            str(wrapper),
            "--parsable",
            f"--chdir={mine}",
            f"--output={mine}/lcc-%j.out",
            "--wrap",
            f"id -u > {mine}/lcc.txt",
            uid=alice.uid,
            gid=alice.gid,
        ),
        env=user_env,
    )
    assert result.returncode == 0, result.stderr
    job = job_fields(c, result.stdout.strip())
    assert job["JobState"] == "COMPLETED" and job["UserId"] == f"{alice.name}({alice.uid})", job
    assert (mine / "lcc.txt").read_text() == f"{alice.uid}\n"

    again = run(space("bash", str(LCC)), env=env)
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stdout + again.stderr


def test_shared_mode_keeps_root_jobs_refused(jwt_cluster: JwtCluster):
    """Last in this module: the controller switched to shared mode (munge), where every Studio user holds the munge
    key. The script drops the jwt lines but keeps DisableRootJobs=YES, so root still runs no job."""
    c = jwt_cluster
    params = json.loads(Path(c.script_env["PARAMS_FILE"]).read_text())
    params["slurm"]["auth"] = "munge"
    Path(c.script_env["PARAMS_FILE"]).write_text(json.dumps(params))
    result = run(in_root("bash", str(CONFIGURE_AUTH)), env=c.script_env)
    assert result.returncode == 0, result.stdout + result.stderr
    block = c.accounting.read_text()[len(ACCOUNTING_CONF) :].splitlines()
    assert block[1:-1] == ["DisableRootJobs=YES"], block
    log = c.base / "ctl" / "state" / "slurmctld.log"
    before = log.read_text().count("for user root disabled")
    refused = run(in_root("sbatch", "--parsable", "--wrap", "true"), env=c.env())
    assert refused.returncode != 0 and "Invalid user id" in refused.stderr, refused
    assert log.read_text().count("for user root disabled") == before + 1
