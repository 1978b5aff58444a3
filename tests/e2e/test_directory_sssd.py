"""End to end on a REAL directory: lifecycle/hyperpod/configure_sssd.sh against Debian's OpenLDAP server (slapd) on
loopback over ldaps://, with real sssd, NSS, PAM (pamtester) and sudo.

The host is left alone: the script and sssd run in a mount namespace of their own (unshare), where /etc (so
/etc/sssd, /etc/nsswitch.conf, /etc/pam.d, /etc/sudoers.d, /etc/passwd), /var/lib/pam, /var/lib/sss, /var/log/sssd
and /run are private copies.
Secrets Manager is a moto server reached through tests/e2e/aws_shim.py; `systemctl` is a stand-in that starts sssd
in that namespace (there is no systemd here). The scripts run from a copy of lifecycle/hyperpod with the CA beside
them, as HyperPod lays out the lifecycle prefix on a node.
The certificates, slapd and the node's namespace are built by tests/e2e/sssd_directory.py.

Needs root and the Debian packages slapd, ldap-utils, sssd, sssd-ldap, libnss-sss, libpam-sss, pamtester and sudo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_root import write_aws_command
from sssd_directory import (
    BIND_PASSWORD,
    PAM_SERVICE,
    PASSWORDS,
    SYSTEMCTL,
    WRITTEN,
    Directory,
    Slapd,
    make_ca,
    make_server_cert,
    run,
)

SSS_PROVIDER = Path("/usr/lib/x86_64-linux-gnu/sssd/libsss_ldap.so")
COMMANDS = (
    "slapd",
    "slapadd",
    "slappasswd",
    "sssd",
    "pamtester",
    "sudo",
    "unshare",
    "nsenter",
    "openssl",
    "pam-auth-update",
)

missing = [c for c in COMMANDS if shutil.which(c, path=os.environ.get("PATH", "") + ":/usr/sbin") is None]
pytestmark = pytest.mark.skipif(
    bool(missing) or os.geteuid() != 0 or not SSS_PROVIDER.exists(),
    reason=f"needs root, slapd and sssd (missing {', '.join(missing) or 'nothing'}): apt-get install slapd ldap-utils "
    "sssd sssd-ldap libnss-sss libpam-sss pamtester sudo",
)


@pytest.fixture(scope="module")
def world(moto_url: str) -> Iterator[dict]:
    import boto3

    base = Path(tempfile.mkdtemp(prefix="sssd-e2e-"))
    base.chmod(0o755)
    ca_key, ca = make_ca(base, "directory-ca")
    rogue_key, rogue_ca = make_ca(base, "rogue-ca")
    good = Slapd(base / "slapd-good", *make_server_cert(base, "server", ca_key, ca))
    rogue = Slapd(base / "slapd-rogue", *make_server_cert(base, "rogue-server", rogue_key, rogue_ca))
    shim = base / "bin"
    shim.mkdir()
    (shim / "systemctl").write_text(SYSTEMCTL)
    (shim / "systemctl").chmod(0o755)
    write_aws_command(shim, on_host=True)
    try:
        url = moto_url
        env = {
            "PATH": f"{shim}:/usr/sbin:/usr/bin:/sbin:/bin",
            "AWS_ENDPOINT_URL": url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        client = boto3.client(
            "secretsmanager",
            region_name="us-east-1",
            endpoint_url=url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        arn = client.create_secret(Name="directory-bind", SecretString=BIND_PASSWORD)["ARN"]
        yield {"base": base, "good": good, "rogue": rogue, "ca": ca, "rogue_ca": rogue_ca, "arn": arn, "env": env}
    finally:
        good.stop()
        rogue.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def node(world) -> Iterator[Directory]:
    directory = Directory(world["base"] / "node", world["good"], world["ca"], world["arn"], world["env"])
    try:
        directory.first = directory.script("configure_sssd.sh")
        yield directory
    finally:
        directory.node.stop()


def wait_for_text(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"no '{text}' in {path} after {timeout}s"
        time.sleep(0.2)


def test_the_script_configures_sssd_and_the_directory_answers(node: Directory):
    out = node.first.stdout + node.first.stderr
    assert node.first.returncode == 0, out
    assert "directory reachable: group 'hpc-users' is hpc-users:30000" in out
    # The same TLS settings as the rogue node's below, with the right CA: the handshake succeeds.
    log = node.base / "root" / "var" / "log" / "sssd" / "sssd_directory.log"
    assert "ldap_install_tls failed" not in log.read_text()
    assert BIND_PASSWORD not in out  # never logged
    conf = node.node.run("stat", "-c", "%a %U", "/etc/sssd/sssd.conf").stdout.split()
    assert conf == ["600", "root"]
    assert "ldap_tls_reqcert = demand" in node.node.read("/etc/sssd/sssd.conf")


def test_getent_returns_the_directory_uid_and_id_its_groups(node: Directory):
    passwd = node.node.run("getent", "passwd", "alice").stdout.strip()
    assert passwd.split(":")[2:4] == ["20001", "20001"], passwd
    # The platform's home root (here /home: no FSx), not the directory's /users.
    assert passwd.split(":")[5] == "/home/alice", passwd
    groups = node.node.run("id", "-Gn", "bob").stdout.split()
    assert {"bob", "hpc-users", "hpc-admins"} <= set(groups), groups
    # The host itself knows nothing of the directory's alice.
    assert run(["getent", "-s", "files", "passwd", "20001"]).returncode != 0


def test_directory_entries_with_a_system_id_are_ignored(node: Directory):
    """min_id: a directory user with ubuntu's uid or a system uid does not exist on the node, and a directory group
    with the sudo group's gid gives its members nothing."""
    for name in ("eve", "trudy"):
        assert node.node.run("getent", "-s", "sss", "passwd", name).returncode != 0, name
    assert node.node.run("getent", "-s", "sss", "group", "wheel").returncode != 0
    assert "27" not in node.node.run("id", "-G", "alice").stdout.split()
    assert "min_id = 1001" in node.node.read("/etc/sssd/sssd.conf").splitlines()


def pamtester(node: Directory, user: str, *operations: str, password: str = "") -> subprocess.CompletedProcess:
    return node.node.run("pamtester", "-v", PAM_SERVICE, user, *operations, input=password + "\n")


def test_a_directory_user_authenticates_with_the_right_password_only(node: Directory):
    ok = pamtester(node, "alice", "authenticate", password=PASSWORDS["alice"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = pamtester(node, "alice", "authenticate", password="not-her-password")
    assert wrong.returncode != 0, wrong.stdout + wrong.stderr
    assert "Authentication failure" in wrong.stdout + wrong.stderr


def test_a_user_outside_the_access_groups_is_denied_at_the_account_stage(node: Directory):
    allowed = pamtester(node, "alice", "acct_mgmt")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    # mallory's password is right, but she is in no access group.
    auth = pamtester(node, "mallory", "authenticate", password=PASSWORDS["mallory"])
    assert auth.returncode == 0, auth.stdout + auth.stderr
    denied = pamtester(node, "mallory", "acct_mgmt")
    assert denied.returncode != 0, denied.stdout + denied.stderr
    assert "Permission denied" in denied.stdout + denied.stderr


def test_an_admin_group_member_gets_sudo_and_others_do_not(node: Directory):
    assert node.node.read("/etc/sudoers.d/91-hyperpod-directory") == "%hpc-admins ALL=(ALL) NOPASSWD:ALL\n"
    bob = node.node.run("sudo", "-l", "-U", "bob")
    assert "(ALL) NOPASSWD: ALL" in bob.stdout, bob.stdout + bob.stderr
    alice = node.node.run("sudo", "-l", "-U", "alice")
    assert "NOPASSWD" not in alice.stdout and "not allowed to run sudo" in alice.stdout, alice.stdout


def test_a_second_run_changes_no_file_and_restarts_nothing(node: Directory):
    def snapshot():
        return {p: node.node.run("stat", "-c", "%Y.%y %a %s", p).stdout + node.node.read(p) for p in WRITTEN}

    before, restarts = snapshot(), node.restarts()
    again = node.script("configure_sssd.sh")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "no change: sssd keeps running" in again.stdout
    assert snapshot() == before
    assert node.restarts() == restarts


def test_a_config_user_with_another_uid_than_the_directory_is_reported(node: Directory):
    users = [
        {"name": "alice", "uid": 20001, "gid": 20001, "sudo": False},
        {"name": "carol", "uid": 20099, "gid": 20099, "sudo": False},
        {"name": "localonly", "uid": 20500, "gid": 20500, "sudo": False},
    ]
    node.write_params(users=users, shared_group={"name": "studio-shared", "gid": 2000})
    try:
        out = node.script("create_users.sh", DEFAULT_HOME_ROOT=str(node.base / "home"))
    finally:
        node.write_params()
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert "carol has uid:gid 20004:20004 in the directory but 20099:20099 in users[]" in text
    assert "user alice (20001:20001) comes from the directory: no local account" in text
    # No local account shadows the directory's alice or carol; a user the directory lacks is still created.
    for name in ("alice", "carol"):
        assert node.node.run("getent", "-s", "files", "passwd", name).returncode != 0
    assert node.node.run("getent", "-s", "files", "passwd", "localonly").returncode == 0
    # Studio's shared group (local) gets the directory user too, though usermod cannot edit her.
    members = node.node.run("getent", "group", "studio-shared").stdout.strip().split(":")[3].split(",")
    assert {"alice", "localonly"} <= set(members), members


def test_a_server_certificate_from_another_ca_is_refused(world):
    """The rogue slapd answers on its port, but its certificate is not signed by the configured CA: sssd's TLS handshake
    fails (its domain log says so) and the script gives up. Its three checks, a second apart, only bound the wait (with
    the right CA the group resolves at the first or second); the log line is what shows why it failed."""
    directory = Directory(world["base"] / "rogue-node", world["rogue"], world["ca"], world["arn"], world["env"])
    try:
        out = directory.script("configure_sssd.sh", DIRECTORY_WAIT_ATTEMPTS="3")
        text = out.stdout + out.stderr
        assert out.returncode != 0, text
        assert "sssd cannot resolve the access group 'hpc-users'" in text
        assert directory.node.run("getent", "passwd", "alice").returncode != 0
        log = directory.base / "root" / "var" / "log" / "sssd" / "sssd_directory.log"
        wait_for_text(log, "ldap_install_tls failed", timeout=30)
    finally:
        directory.node.stop()
