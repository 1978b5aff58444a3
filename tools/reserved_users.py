"""Writes config/facts/reserved-users.json: the account and group names a config user may not take, with where each
comes from. platform_config/users.py refuses them in `users[].name` and the Slurm token issuer (lambda/slurm_tokens) refuses
to mint a token for them (its environment carries the same list, constructs/slurm_token_issuer.py).

    python tools/reserved_users.py [--check]

Two kinds of source:
- Debian's base-passwd, the package every Debian and Ubuntu system is built from (Essential: yes): its
  /usr/share/base-passwd/passwd.master and group.master list the static system users and groups. Read from the local
  copy; the version read is recorded. Ubuntu 22.04 (HyperPod's AMIs) ships base-passwd 3.5.52, which still has the
  `gnats` user that Debian's 3.6 dropped: EXTRAS keeps it.
- EXTRAS: accounts the node image, Slurm, HyperPod or Studio create, each with the public source that shows it.
A config user with one of these names would be created over (or fail against) an account that has other rights:
`ubuntu` has sudo on the HyperPod AMI, a token naming `slurm` or `root` may act as any user (auth/jwt), `docker` is
root-equivalent as a group. tests/test_config_identities.py checks that every name the local base-passwd lists is in the file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "reserved-users.json"
BASE_PASSWD = Path("/usr/share/base-passwd")
AWSOME = "awslabs/awsome-distributed-ai@95b939cd 1.architectures/5.sagemaker-hyperpod"

EXTRAS = {
    "ubuntu": "the HyperPod AMI's default user, with passwordless sudo (HyperPod developer guide: connect with "
    "SSM and `sudo su - ubuntu`; " + AWSOME + "/patching-backup.sh works in /home/ubuntu)",
    "slurm": "SlurmUser on HyperPod (" + AWSOME + "/LifecycleScripts/base-config/setup_rds_accounting.sh "
    "`SlurmUser=slurm`); auth/jwt lets a token of SlurmUser name another user (SchedMD/slurm "
    "src/plugins/auth/jwt/auth_jwt.c)",
    "munge": "the munge daemon's user, owner of /etc/munge/munge.key (" + AWSOME + "/slurm-studio/slurm_lifecycle.sh "
    "`chown munge:munge /etc/munge/munge.key`)",
    "mysql": "MariaDB's user on the controller, where HyperPod runs slurmdbd's database ("
    + AWSOME
    + "/LifecycleScripts/base-config/setup_mariadb_accounting.sh)",
    "ssm-user": "the account Session Manager creates, with sudo, for sessions without Run As "
    "(https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-getting-started-ssm-"
    "user-permissions.html)",
    "sagemaker-user": "the user Studio's JupyterLab and Code Editor images run as, uid 1000 (lifecycle/studio/"
    "README.md)",
    "docker": "the Docker daemon's socket group on the HyperPod AMI: membership is root on the node (Docker, "
    '"Manage Docker as a non-root user": https://docs.docker.com/engine/install/linux-postinstall/)',
    "syslog": "rsyslog's user on Ubuntu (its postinst adds the system user `syslog`)",
    "messagebus": "D-Bus's system user (dbus: /usr/lib/sysusers.d/dbus.conf)",
    "sshd": "OpenSSH's privilege-separation user (openssh-server postinst)",
    "gnats": "Ubuntu 22.04's base-passwd 3.5.52 passwd.master (uid 41; dropped from Debian's base-passwd 3.6)",
    "lxd": "the lxd group of Ubuntu cloud images: membership is root on the node",
}
PREFIXES = {
    "systemd-": "systemd's system users (systemd-network, systemd-resolve, systemd-timesync, systemd-coredump: "
    "/usr/lib/sysusers.d/*.conf of systemd)",
    "_": "Debian's convention for system accounts created by packages (base-passwd's `_apt`)",
}


def _names(path: Path) -> list[str]:
    return [line.split(":", 1)[0] for line in path.read_text().splitlines() if line and not line.startswith("#")]


def base_passwd_version() -> str:
    try:
        return subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "base-passwd"], check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def base_passwd_names(directory: Path = BASE_PASSWD) -> dict[str, str]:
    names = dict.fromkeys(_names(directory / "passwd.master"), "base-passwd passwd.master (static system user)")
    for group in _names(directory / "group.master"):
        names.setdefault(group, "base-passwd group.master (static system group)")
    return names


def render(directory: Path = BASE_PASSWD) -> str:
    names = base_passwd_names(directory)
    for name, source in EXTRAS.items():
        names.setdefault(name, source)
    return (
        json.dumps(
            {
                "base_passwd": {
                    "package": "base-passwd",
                    "version": base_passwd_version(),
                    "files": ["passwd.master", "group.master"],
                },
                "names": dict(sorted(names.items())),
                "prefixes": PREFIXES,
            },
            indent=2,
        )
        + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is not what is derived")
    args = parser.parse_args()
    if not (BASE_PASSWD / "passwd.master").is_file():
        print(f"{BASE_PASSWD}/passwd.master not found: run on Debian or Ubuntu (package base-passwd)", file=sys.stderr)
        return 2
    text = render()
    if args.check:
        committed = json.loads(FACTS.read_text())["names"]
        missing = sorted(set(json.loads(text)["names"]) - set(committed))
        if missing:
            print(f"{FACTS} lacks {missing}; run python tools/reserved_users.py", file=sys.stderr)
            return 1
        return 0
    FACTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
