#!/usr/bin/env python3
"""The job credential broker: AWS credentials of the Slurm job role for processes of running Slurm jobs, and for no one
else (docs/security.md, "Slurm jobs and AWS").

    job_credentials.py serve --socket PATH --role-arn ARN --region REGION    (root: hyperpod-job-credentials.service)
    job_credentials.py fetch [--socket PATH]                                 (anyone: an AWS credential_process)

The node's own credentials are root's only (block_imds.sh). The broker runs as root, listens on a Unix socket anyone
may connect to, and decides from what the kernel and Slurm say about the peer, never from what the peer says:
- the peer's pid and uid come from the socket (SO_PEERCRED, set by the kernel at connect);
- the pid must be one of a running job's processes on this node as slurmstepd tracks them (`scontrol listpids`, run
  by root: the job's cgroup with proctrack/cgroup, its process tree otherwise; node_contract.json,
  slurmstepd-lists-job-pids: a process it does not list gets nothing); a SLURM_JOB_ID in the client's environment
  counts for nothing;
- that job's owner (`scontrol show job`) must be the peer's uid, and the pid must still be the same process (its start
  time) after the checks, so a pid reused meanwhile gets nothing.
Then it assumes the job role with the node's credentials (`aws sts assume-role`, session name slurm-<job>-<user>, so
CloudTrail names both) and answers with the JSON a credential_process prints; one set per job is reused until five
minutes before it expires. Anything else gets {"Error": "..."} and nothing of the role's. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

DEFAULT_SOCKET = "/run/hyperpod-job-credentials/broker.sock"
SESSION_SECONDS = 3600  # the job role's MaxSessionDuration, and the most role chaining allows
REFRESH_BEFORE = 300


class Refused(Exception):
    pass


def log(message: str) -> None:
    print(f"job_credentials: {message}", flush=True)


def start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat (after the parenthesised command, which may hold spaces)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        raise Refused(f"process {pid} is gone") from None
    return stat[stat.rfind(")") + 2 :].split()[19]


def job_of(pid: int) -> str:
    """The job whose step on this node holds `pid`, from slurmstepd (`scontrol listpids`: PID JOBID STEPID ...)."""
    result = subprocess.run(["scontrol", "listpids"], capture_output=True, text=True, timeout=30, check=False)
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == str(pid) and fields[1].isdigit():
            return fields[1]
    raise Refused(f"process {pid} is not in a running Slurm job on this node")


def job_owner(job_id: str) -> tuple[str, int]:
    """(user name, uid) of a running job: `scontrol show job` says UserId=NAME(UID) and JobState."""
    result = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30, check=False
    )
    owner = re.search(r"\bUserId=([^(\s]+)\((\d+)\)", result.stdout)
    state = re.search(r"\bJobState=(\S+)", result.stdout)
    if result.returncode != 0 or not owner or not state or state.group(1) != "RUNNING":
        raise Refused(f"job {job_id} is not running")
    return owner.group(1), int(owner.group(2))


class Broker:
    def __init__(self, role_arn: str, region: str):
        self.role_arn, self.region = role_arn, region
        self.cache: dict[str, dict] = {}
        self.lock = threading.Lock()

    def credentials_for(self, pid: int, uid: int) -> tuple[str, dict]:
        started = start_time(pid)
        job_id = job_of(pid)
        user, owner_uid = job_owner(job_id)
        if owner_uid != uid:
            raise Refused(f"job {job_id} belongs to uid {owner_uid}, not to the caller's uid {uid}")
        if start_time(pid) != started:
            raise Refused(f"process {pid} changed while it was checked")
        with self.lock:
            cached = self.cache.get(job_id)
            if cached and _expires(cached) - time.time() > REFRESH_BEFORE:
                return job_id, cached
            credentials = self.assume(f"slurm-{job_id}-{user}"[:64])
            self.cache = {j: c for j, c in self.cache.items() if _expires(c) > time.time()}
            self.cache[job_id] = credentials
            return job_id, credentials

    def assume(self, session: str) -> dict:
        result = subprocess.run(
            [
                "aws",
                "sts",
                "assume-role",
                "--role-arn",
                self.role_arn,
                "--role-session-name",
                session,
                "--duration-seconds",
                str(SESSION_SECONDS),
                "--region",
                self.region,
                "--output",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            log(f"sts assume-role {self.role_arn} failed: {result.stderr.strip()}")
            raise Refused("the node could not assume the job role (see the broker's journal)")
        c = json.loads(result.stdout)["Credentials"]
        return {
            "Version": 1,
            "AccessKeyId": c["AccessKeyId"],
            "SecretAccessKey": c["SecretAccessKey"],
            "SessionToken": c["SessionToken"],
            "Expiration": _iso(c["Expiration"]),
        }


def _iso(value) -> str:
    """The CLI prints Expiration as ISO 8601 (with an offset); credential_process wants ISO 8601 too."""
    return (
        datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        .astimezone(timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def _expires(credentials: dict) -> float:
    return datetime.strptime(credentials["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def peer(conn: socket.socket) -> tuple[int, int]:
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


def serve(args: argparse.Namespace) -> int:
    broker = Broker(args.role_arn, args.region)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(60)
            pid, uid = peer(self.request)
            try:
                job_id, answer = broker.credentials_for(pid, uid)
                log(f"job {job_id}: credentials of {broker.role_arn} for pid {pid} (uid {uid})")
            except Refused as refusal:
                log(f"refused pid {pid} (uid {uid}): {refusal}")
                answer = {"Error": str(refusal)}
            except Exception as error:  # noqa: BLE001 - one caller's failure must not stop the broker
                log(f"error for pid {pid} (uid {uid}): {error!r}")
                answer = {"Error": "the broker failed (see its journal)"}
            self.request.sendall(json.dumps(answer).encode())

    socketserver.ThreadingUnixStreamServer.daemon_threads = True
    directory = os.path.dirname(args.socket)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    if os.path.islink(directory) or os.stat(directory).st_uid != 0:
        raise SystemExit(f"{directory} is a symlink or not owned by root: not listening there")
    if os.path.lexists(args.socket):
        os.unlink(args.socket)
    with socketserver.ThreadingUnixStreamServer(args.socket, Handler) as server:
        os.chmod(args.socket, 0o666)  # noqa: S103 - anyone may ask; the answer depends on who asks
        log(f"listening on {args.socket} for {args.role_arn}")
        server.serve_forever()
    return 0


def fetch(args: argparse.Namespace) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(90)
        try:
            conn.connect(args.socket)
        except OSError as error:
            print(f"job_credentials: cannot reach the broker at {args.socket}: {error}", file=sys.stderr)
            return 1
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    answer = json.loads(data or b"{}")
    if "AccessKeyId" not in answer:
        print(f"job_credentials: {answer.get('Error', 'no answer')}", file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    server = commands.add_parser("serve")
    server.add_argument("--socket", default=DEFAULT_SOCKET)
    server.add_argument("--role-arn", required=True)
    server.add_argument("--region", required=True)
    client = commands.add_parser("fetch")
    client.add_argument("--socket", default=DEFAULT_SOCKET)
    args = parser.parse_args(argv)
    return serve(args) if args.command == "serve" else fetch(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
