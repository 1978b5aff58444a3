#!/usr/bin/env python3
"""The files configure_sssd.sh writes for platform_parameters.json `directory`, each to stdout.

Usage:
  sssd.py conf PARAMS HOME_ROOT CA_PATH   sssd.conf; the bind password is read from stdin (never an argument)
  sssd.py nsswitch PATH                   PATH with `sss` after the other sources of passwd, group and shadow
  sssd.py sudoers PARAMS                  one sudoers rule per directory.admin_groups entry ("" when none)

Standard library only. Errors go to stderr as one line, exit status 2.
"""

import json
import sys

# The databases sssd answers for the platform: users, groups, and shadow (pam_unix's view; harmless for sss users).
NSS_DATABASES = ("passwd", "group", "shadow")
# The lowest uid/gid sssd accepts from the directory (see conf()).
MIN_ID = 1001


class SssdError(Exception):
    pass


def directory(params_path):
    with open(params_path, encoding="utf-8") as f:
        section = json.load(f).get("directory")
    if not section:
        raise SssdError(f"{params_path} has no directory section")
    return section


def conf(section, home_root, ca_path, password):
    if not password or "\n" in password or password != password.strip():
        raise SssdError(
            "the bind password secret is empty, spans lines or starts or ends with whitespace, which "
            "sssd.conf cannot hold; store the password alone as the secret's SecretString"
        )
    uris = section["uris"]
    for uri in uris:
        if uri.startswith("ldap://") and not section.get("start_tls"):
            raise SssdError(f"refusing plaintext {uri}: use ldaps:// or start_tls")
    lines = [
        "# Written by the HyperPod platform (lifecycle/hyperpod/configure_sssd.sh) at node start; edits are overwritten.",
        "[sssd]",
        "config_file_version = 2",
        "services = nss, pam",
        "domains = directory",
        "",
        "[nss]",
        # Local system accounts never come from the directory.
        "filter_users = root",
        "filter_groups = root",
        "",
        "[pam]",
        "offline_credentials_expiration = 1",
        "",
        "[domain/directory]",
        "id_provider = ldap",
        "auth_provider = ldap",
        "chpass_provider = none",
        # Group-based access with sssd's own group resolution, for every schema (an LDAP access filter would need
        # memberOf, which rfc2307 directories lack).
        "access_provider = simple",
        "simple_allow_groups = " + ", ".join(section["access_groups"]),
        "ldap_uri = " + ", ".join(uris),
        "ldap_search_base = " + section["search_base"],
        "ldap_schema = " + section["ldap_schema"],
        "ldap_default_bind_dn = " + section["bind_dn"],
        "ldap_default_authtok_type = password",
        "ldap_default_authtok = " + password,
        "ldap_tls_cacert = " + ca_path,
        "ldap_tls_reqcert = demand",
        "ldap_id_use_start_tls = " + ("true" if section.get("start_tls") else "false"),
        # The directory's uidNumber/gidNumber, which must equal the config's users[].uid (Studio's identities).
        "ldap_id_mapping = false",
        # sssd.conf(5): an entry with a uid or gid outside [min_id, max_id] is ignored (a user also when their primary
        # gid is). Below MIN_ID are the node's own accounts: system users and groups (< 1000; sudo is gid 27) and
        # the AMI's ubuntu (1000). A directory entry with such an id would be that account to the kernel: a group
        # with gidNumber 27 would give its members sudo. 1001 is also the config's lowest gid (Studio's floor).
        f"min_id = {MIN_ID}",
        # Active Directory referrals stall lookups (AWS's reference setup_sssd.py turns them off too).
        "ldap_referrals = false",
        "cache_credentials = true",
        "enumerate = false",
        "use_fully_qualified_names = false",
        # The platform's homes (on FSx when mounted), whatever homeDirectory the directory has: the same place
        # create_users.sh and setup_ssh_keys.sh use for `users`, shared by every node (AWS's reference overrides too).
        "override_homedir = " + home_root.rstrip("/") + "/%u",
        "default_shell = /bin/bash",
    ]
    return "\n".join(lines) + "\n"


def nsswitch(path):
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        text = ""
    out, seen = [], set()
    for line in text.splitlines():
        database, sep, sources = line.partition(":")
        name = database.strip()
        if sep and name in NSS_DATABASES and not line.lstrip().startswith("#"):
            seen.add(name)
            words = sources.split()
            if "sss" not in words:
                line = f"{database}:{sources.rstrip()} sss"
        out.append(line)
    for name in NSS_DATABASES:
        if name not in seen:
            out.append(f"{name + ':':<16}files sss")
    return "\n".join(out) + "\n"


def sudoers(section):
    # sudoers(5): a group is %name; a space in the name is escaped with a backslash.
    return "".join(
        f"%{group.replace(' ', chr(92) + ' ')} ALL=(ALL) NOPASSWD:ALL\n" for group in section.get("admin_groups") or []
    )


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "conf":
        sys.stdout.write(conf(directory(args[0]), args[1], args[2], sys.stdin.read().rstrip("\n")))
    elif command == "nsswitch":
        sys.stdout.write(nsswitch(args[0]))
    elif command == "sudoers":
        sys.stdout.write(sudoers(directory(args[0])))
    else:
        raise SssdError(f"unknown command {command!r}")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (SssdError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
