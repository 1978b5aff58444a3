"""The Slurm login secret's value, from this node's slurm.conf (and munge key in munge mode): what a Studio space needs
to act as a Slurm login node (lifecycle/studio/slurm_login_node.sh). Used by publish_slurm_login.sh on the platform's
controller and by lifecycle/attach/read_slurm_login.sh on an existing one (attach mode); the value's fields are
described in publish_slurm_login.sh.

Usage: slurm_login_value.py SLURM_CONF MUNGE_KEY OUT_JSON, with SLURM_VERSION, SLURM_AUTH (munge | jwt), BUNDLE_URI and
BUNDLE_SHA in the environment (and optionally CONTROLLER_HOST, CONTROLLER_ADDR). Exit status 3: a backup controller
that cannot resolve the primary (the primary publishes). Never prints the key."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys

conf_path, key_path, out_path = sys.argv[1:]
with open(conf_path) as f:
    conf = f.read()
auth = os.environ["SLURM_AUTH"]
key: bytes | None = None
if auth == "munge":
    with open(key_path, "rb") as key_file:
        key = key_file.read()


def setting(name):
    """Last value of NAME=VALUE in slurm.conf (keys are case-insensitive); None when absent."""
    found = None
    for line in conf.splitlines():
        m = re.match(rf"\s*{name}\s*=\s*(\S+)", line.split("#", 1)[0], re.IGNORECASE)
        if m:
            found = m.group(1)
    return found


cluster = setting("ClusterName")
if not cluster:
    sys.exit(f"{conf_path} has no ClusterName")
# Every SlurmctldHost=name or name(addr), in order: the first is the primary controller, the others its backups
# (HyperPod multi-head), which Slurm clients try in turn. Each controller of a multi-head cluster runs this script:
# the value depends on slurm.conf and DNS only, never on which controller runs it, so they all publish the same.
me = subprocess.run(["hostname"], capture_output=True, text=True, check=False).stdout.strip().split(".")[0]


def address_of(host, given):
    """The controller's address: slurm.conf's (addr), else DNS; this node's own first address only for itself."""
    if given:
        return given
    try:
        addr = socket.gethostbyname(host)
    except OSError:
        addr = ""
    if (not addr or addr.startswith("127.")) and host.split(".")[0] == me:
        ips = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
        addr = ips[0] if ips else addr
    return "" if addr.startswith("127.") and host.split(".")[0] != me else addr


controllers: list[list[str | None]] = []
for line in conf.splitlines():
    m = re.match(r"\s*(?:SlurmctldHost|ControlMachine)\s*=\s*([^\s(#]+)(?:\(([^)]+)\))?", line, re.IGNORECASE)
    if m:
        controllers.append([m.group(1), m.group(2)])
controllers = controllers or [[me, None]]
controllers[0] = [
    os.environ.get("CONTROLLER_HOST") or controllers[0][0],
    os.environ.get("CONTROLLER_ADDR") or controllers[0][1],
]
endpoints = [{"host": h, "addr": address_of(h, a)} for h, a in controllers]
host, addr = endpoints[0]["host"], endpoints[0]["addr"]
if not addr:
    if host.split(".")[0] != me:  # a backup that cannot resolve the primary: the primary publishes
        sys.exit(3)
    sys.exit(f"cannot work out the IP address of {host}; set CONTROLLER_ADDR")
for c in endpoints[1:]:
    if not c["addr"]:
        print(
            f"WARNING: cannot work out the address of the backup controller {c['host']}; Studio clients resolve "
            "it by name",
            file=sys.stderr,
        )
port = (setting("SlurmctldPort") or "6817").split("-")[0]

# Included files, recursively, each published under its own name; include lines are rewritten to that name.
includes: dict[str, tuple[str, str | None]] = {}


def inline(text, base):
    out = []
    for line in text.splitlines():
        m = re.match(r"(\s*include)\s+(\S+)\s*$", line, re.IGNORECASE)
        if not m:
            out.append(line)
            continue
        path = os.path.join(base, m.group(2))
        name = os.path.basename(path)
        if any(c in m.group(2) for c in "*?["):
            sys.exit(f"{conf_path}: '{line.strip()}' is a wildcard include; configless clients cannot resolve it")
        if not os.path.isfile(path):
            sys.exit(f"{conf_path}: '{line.strip()}' names {path}, which does not exist yet")
        if name in includes and includes[name][0] != path:
            sys.exit(f"{conf_path}: two included files are named {name} ({includes[name][0]}, {path})")
        if name not in includes:
            includes[name] = (path, None)
            with open(path) as f:
                includes[name] = (path, inline(f.read(), os.path.dirname(path)))
        out.append(f"{m.group(1)} {name}")
    return "\n".join(out) + "\n"


published_conf = inline(conf, os.path.dirname(os.path.abspath(conf_path)))
value = {
    "slurm_version": os.environ["SLURM_VERSION"],
    "controller_host": host,
    "controller_addr": addr,
    "controllers": endpoints,
    "slurmctld_port": int(port),
    "cluster_name": cluster,
    "auth": auth,
    "slurm_conf": published_conf,
    "slurm_conf_includes": {name: text for name, (_, text) in sorted(includes.items())},
}
if os.environ["BUNDLE_URI"]:
    value["client_bundle"] = {"s3_uri": os.environ["BUNDLE_URI"], "sha256": os.environ["BUNDLE_SHA"]}
if key is not None:
    value["munge_key_b64"] = base64.b64encode(key).decode()
text = json.dumps(value, sort_keys=True)
if len(text.encode()) > 65536:
    sys.exit(f"the value is {len(text)} bytes; Secrets Manager allows 65536")
with open(out_path, "w") as f:
    f.write(text)
backups = "".join(f", backup {c['host']} ({c['addr'] or 'by name'})" for c in endpoints[1:])
print(f"cluster {cluster}: Slurm {value['slurm_version']}, slurmctld {host} ({addr}){backups} port {port}, auth {auth}")
