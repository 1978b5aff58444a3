"""The machinery of tests/e2e/test_directory_sssd.py: a test CA and server certificates (openssl), the directory's
entries, a real slapd serving them over ldaps:// on loopback (Slapd), a mount namespace standing in for the node
(Node, with a `systemctl` stand-in that starts sssd there) and the node as configure_sssd.sh sees it (Directory).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
HYPERPOD = REPO / "lifecycle" / "hyperpod"
SUFFIX = "dc=example,dc=org"
BIND_DN = f"cn=sssd-bind,ou=services,{SUFFIX}"
BIND_PASSWORD = "bind-pw-Very-Secret-7"
PASSWORDS = {
    "alice": "alice-pw-1",
    "bob": "bob-pw-2",
    "mallory": "mallory-pw-3",
    "carol": "carol-pw-4",
    "eve": "eve-pw-5",
    "trudy": "trudy-pw-6",
}
# eve has ubuntu's uid (1000) and trudy a system uid (998): entries a directory should not have, which sssd must drop.
UIDS = {"alice": 20001, "bob": 20002, "mallory": 20003, "carol": 20004, "eve": 1000, "trudy": 998}
# wheel has the node's sudo group's gid (27 on Debian and Ubuntu): alice must not get it.
GROUPS = {
    "hpc-users": (30000, ["alice", "bob", "carol", "eve", "trudy"]),
    "hpc-admins": (30001, ["bob"]),
    "wheel": (27, ["alice"]),
}
DIRECTORY_NAMES = frozenset(UIDS) | frozenset(GROUPS)
PAM_SERVICE = "hyperpod-e2e-login"
# The files configure_sssd.sh may write; a second run must leave each byte and mtime as it was.
WRITTEN = (
    "/etc/sssd/sssd.conf",
    "/etc/sssd/hyperpod-directory-ca.pem",
    "/etc/nsswitch.conf",
    "/etc/pam.d/common-auth",
    "/etc/pam.d/common-account",
    "/etc/pam.d/common-session",
    "/etc/sudoers.d/91-hyperpod-directory",
)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)


# ------------------------------------------------------------------------------------------ certificates and slapd
# The test CAs' and servers' keys: P-256, which openssl makes at once, where an RSA-2048 key took 0.1-0.6 s of CPU
# (four per run). What is checked is the chain and the name, whatever the key type.
NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256")


def make_ca(base: Path, name: str) -> tuple[Path, Path]:
    key, cert = base / f"{name}.key", base / f"{name}.pem"
    out = run(
        [
            "openssl",
            "req",
            "-x509",
            *NEW_KEY,
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            f"/CN={name}",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]
    )
    assert out.returncode == 0, out.stderr
    return key, cert


def make_server_cert(base: Path, name: str, ca_key: Path, ca_cert: Path) -> tuple[Path, Path]:
    key, csr, cert, ext = (base / f"{name}.key", base / f"{name}.csr", base / f"{name}.pem", base / f"{name}.ext")
    out = run(
        [
            "openssl",
            "req",
            *NEW_KEY,
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(csr),
            "-subj",
            "/CN=127.0.0.1",
        ]
    )
    assert out.returncode == 0, out.stderr
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    out = run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(ca_cert),
            "-CAkey",
            str(ca_key),
            "-CAcreateserial",
            "-out",
            str(cert),
            "-days",
            "2",
            "-extfile",
            str(ext),
        ]
    )
    assert out.returncode == 0, out.stderr
    return key, cert


def ssha(password: str) -> str:
    out = run(["slappasswd", "-s", password], env={"PATH": "/usr/sbin:/usr/bin"})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def directory_ldif() -> str:
    entries = [f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n"]
    for ou in ("people", "groups", "services"):
        entries.append(f"dn: ou={ou},{SUFFIX}\nobjectClass: organizationalUnit\nou: {ou}\n")
    entries.append(
        f"dn: {BIND_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
        f"cn: sssd-bind\nuserPassword: {ssha(BIND_PASSWORD)}\n"
    )
    for name, uid in UIDS.items():
        entries.append(
            f"dn: uid={name},ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\n"
            f"uid: {name}\ncn: {name}\nsn: {name}\nuidNumber: {uid}\ngidNumber: {uid}\n"
            f"homeDirectory: /users/{name}\nloginShell: /bin/bash\nuserPassword: {ssha(PASSWORDS[name])}\n"
        )
        entries.append(f"dn: cn={name},ou=groups,{SUFFIX}\nobjectClass: posixGroup\ncn: {name}\ngidNumber: {uid}\n")
    for group, (gid, members) in GROUPS.items():
        entries.append(
            f"dn: cn={group},ou=groups,{SUFFIX}\nobjectClass: posixGroup\ncn: {group}\ngidNumber: {gid}\n"
            + "".join(f"memberUid: {m}\n" for m in members)
        )
    return "\n".join(entries)


class Slapd:
    """One slapd serving ldaps://127.0.0.1:PORT with the given certificate."""

    def __init__(self, base: Path, key: Path, cert: Path):
        self.base, self.port = base, free_port()
        (base / "db").mkdir(parents=True)
        self.conf = base / "slapd.conf"
        self.conf.write_text(f"""include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {base}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCertificateFile {cert}
TLSCertificateKeyFile {key}
database mdb
suffix "{SUFFIX}"
rootdn "cn=admin,{SUFFIX}"
directory {base}/db
access to attrs=userPassword by anonymous auth by * none
access to * by users read by * none
""")
        ldif = base / "data.ldif"
        ldif.write_text(directory_ldif())
        out = run(["slapadd", "-f", str(self.conf), "-l", str(ldif)], env={"PATH": "/usr/sbin:/usr/bin"})
        assert out.returncode == 0, out.stderr
        self.uri = f"ldaps://127.0.0.1:{self.port}"
        self.log = open(base / "slapd.log", "w")
        self.proc = subprocess.Popen(
            ["slapd", "-f", str(self.conf), "-h", self.uri + "/", "-d", "0"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={"PATH": "/usr/sbin:/usr/bin"},
        )
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, (base / "slapd.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "slapd did not listen"
                time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()


# ------------------------------------------------------------------------------------------ the node's namespace
SYSTEMCTL = """#!/bin/bash
# Stand-in for systemd in the test's mount namespace: runs the real sssd there.
running() { [[ -s /run/sssd.pid ]] && kill -0 "$(cat /run/sssd.pid)" 2>/dev/null; }
case "$1" in
  is-active) running ;;
  enable) exit 0 ;;
  restart)
    if running; then pid="$(cat /run/sssd.pid)"; kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; fi
    rm -f /var/lib/sss/mc/* /run/sssd.pid
    echo restart >>"$SYSTEMCTL_LOG"
    /usr/sbin/sssd -D --logger=files ;; # as Debian's sssd.service starts it (DEBUG_LOGGER=--logger=files)
  *) echo "systemctl stand-in: $*" >&2; exit 1 ;;
esac
"""


class Node:
    """A mount namespace with private copies of the system files the script and sssd touch."""

    # All of /etc (4 MB here): useradd and pam-auth-update replace files by rename, which a bind-mounted file refuses.
    PRIVATE = ("/etc", "/var/lib/pam", "/var/lib/sss", "/var/log/sssd")

    def __init__(self, base: Path, env: dict[str, str]):
        self.base, self.env = base, env
        root = base / "root"
        lines = ["set -e"]
        for path in self.PRIVATE:
            copy = root / path.lstrip("/")
            copy.parent.mkdir(parents=True, exist_ok=True)
            assert run(["cp", "-a", path, str(copy)]).returncode == 0
            lines.append(f"mount --bind {copy} {path}")
        for private in ("/var/lib/sss/db", "/var/lib/sss/mc", "/var/lib/sss/pipes", "/var/log/sssd"):
            for f in (root / private.lstrip("/")).rglob("*"):
                if f.is_file() or f.is_socket():
                    f.unlink()
        # The node before the script has no local account named like a directory entry, whatever this host has
        # (the Slurm e2e modules add a local alice and bob for their own use).
        for table in ("passwd", "shadow", "group", "gshadow"):
            path = root / "etc" / table
            if path.exists():
                path.write_text(
                    "".join(
                        line
                        for line in path.read_text().splitlines(keepends=True)
                        if line.split(":", 1)[0] not in DIRECTORY_NAMES
                    )
                )
        shutil.rmtree(root / "etc/sssd/conf.d", ignore_errors=True)
        (root / "etc/sssd/conf.d").mkdir()
        (root / "etc/sssd/sssd.conf").unlink(missing_ok=True)
        # The node before the script: no sss in NSS, no pam_sss (the packages' own postinst added them on this host).
        nss = root / "etc/nsswitch.conf"
        nss.write_text(
            "\n".join(
                line.replace(" sss", "") for line in nss.read_text().splitlines() if not line.startswith("automount:")
            )
            + "\n"
        )
        (root / "etc/pam.d" / PAM_SERVICE).write_text("@include common-auth\n@include common-account\n")
        lines += ["mount -t tmpfs tmpfs /run", "pam-auth-update --disable sss mkhomedir", "exec sleep infinity"]
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", "\n".join(lines)],
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"},
        )
        deadline = time.monotonic() + 20
        while "pam_sss" in self.read("/etc/pam.d/common-auth") or not self._mounted():
            assert self.proc.poll() is None, "the namespace setup failed"
            assert time.monotonic() < deadline, "the namespace was not ready"
            time.sleep(0.2)

    def _mounted(self) -> bool:
        return "tmpfs /run " in self.run("cat", "/proc/self/mounts").stdout

    def run(
        self, *cmd: str, input: str | None = None, env: dict[str, str] | None = None, timeout: int = 180
    ) -> subprocess.CompletedProcess:
        return run(
            ["nsenter", f"--target={self.proc.pid}", "--mount", "--", *cmd],
            input=input,
            env={**self.env, **(env or {})},
            timeout=timeout,
        )

    def read(self, path: str) -> str:
        result = self.run("cat", path)
        return result.stdout if result.returncode == 0 else ""

    def stop(self) -> None:
        pid = self.read("/run/sssd.pid").strip()
        if pid:
            os.kill(int(pid), signal.SIGTERM)
            for _ in range(100):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.1)
        self.proc.kill()
        self.proc.wait(timeout=10)


class Directory:
    def __init__(self, base: Path, slapd: Slapd, ca: Path, secret_arn: str, env: dict[str, str]):
        self.base, self.slapd, self.secret_arn = base, slapd, secret_arn
        self.scripts = base / "hyperpod"
        shutil.copytree(HYPERPOD, self.scripts, ignore=shutil.ignore_patterns("__pycache__"))
        (self.scripts / "directory").mkdir()
        shutil.copy(ca, self.scripts / "directory" / "ca.pem")
        self.params = base / "platform_parameters.json"
        self.write_params()
        self.node = Node(
            base,
            {
                **env,
                "PARAMS_FILE": str(self.params),
                "LOG_DIR": str(base / "log"),
                "STATE_DIR": str(base / "state"),
                "RETRY_DELAY": "1",
                "SYSTEMCTL_LOG": str(base / "systemctl.log"),
            },
        )

    def write_params(self, users=(), shared_group=None, **directory) -> None:
        ca = (self.scripts / "directory" / "ca.pem").read_bytes()
        section = {
            "uris": [self.slapd.uri],
            "start_tls": False,
            "search_base": SUFFIX,
            "bind_dn": BIND_DN,
            "bind_password_secret_arn": self.secret_arn,
            "region": "us-east-1",
            "ldap_schema": "rfc2307",
            "access_groups": ["hpc-users"],
            "admin_groups": ["hpc-admins"],
            "ca_certificate": {"file": "directory/ca.pem", "sha256": hashlib.sha256(ca).hexdigest()},
            "artifacts": [],
            **directory,
        }
        self.params.write_text(
            json.dumps({"version": 1, "users": list(users), "shared_group": shared_group, "directory": section})
        )

    def script(self, name: str, **env: str) -> subprocess.CompletedProcess:
        return self.node.run("bash", str(self.scripts / name), env={"DIRECTORY_WAIT_ATTEMPTS": "20", **env})

    def restarts(self) -> int:
        log = self.base / "systemctl.log"
        return len(log.read_text().splitlines()) if log.exists() else 0
