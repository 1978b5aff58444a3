#!/usr/bin/env python3
"""Stand-in for the AWS CLI calls the lifecycle scripts make, used only when the test machine has no AWS CLI (a
clean CI machine). It speaks to the same moto server through boto3 (AWS_ENDPOINT_URL).

    aws secretsmanager get-secret-value --secret-id ARN [--region R] --query SecretString --output text
    aws secretsmanager put-secret-value --secret-id ARN [--region R] --secret-string file://PATH
    aws s3 cp [--only-show-errors] [--region R] SOURCE DESTINATION   (one side s3://bucket/key, the other a file)
    aws sts assume-role --role-arn ARN --role-session-name NAME [--duration-seconds N] [--region R] --output json

It runs one of three ways:
- `aws_shim.py ARGS...`: the call in this process (Python and boto3 start for it, ~0.45 s of CPU).
- `aws_shim.py --serve NAME`: a server on the abstract Unix socket NAME that imported boto3 and loaded the three
  services' models once. It prints "ready" when it accepts calls and forks a child per call, which becomes the caller
  before it does the call: the caller's standard input, output and error (passed over the socket), its root (the
  mount namespace's tree it sees, through /proc/<pid> of the socket's peer, whose pid and ids the kernel gives) and
  working directory, its uid, gid and groups, umask and environment. So a script sees what the command would do in
  its own process: files read and written as its user at its paths, its AWS_* variables and config files, its exit
  status.
- `aws_shim.py --call NAME ARGS...`: the `aws` command of a server's callers, standard library only (start it with
  `python3 -I -S`): sends its arguments, environment and standard streams, exits with the call's status.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

# Run only as a script, by path (under `python3 -I`, which leaves the script's own directory off sys.path), on this
# machine or in the Slurm root: the calling convention it shares with support/warm_python.py is in tests/support.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "support"))
from socket_calls import listen, receive_request, receive_streams, send_call


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="aws")
    services = parser.add_subparsers(dest="service", required=True)
    secrets = services.add_parser("secretsmanager")
    secrets.add_argument("operation", choices=["get-secret-value", "put-secret-value"])
    secrets.add_argument("--secret-id", required=True)
    secrets.add_argument("--region")
    secrets.add_argument("--query")
    secrets.add_argument("--output")
    secrets.add_argument("--secret-string")
    s3 = services.add_parser("s3")
    s3.add_argument("operation", choices=["cp"])
    s3.add_argument("--only-show-errors", action="store_true")
    s3.add_argument("--region")
    s3.add_argument("source")
    s3.add_argument("destination")
    sts = services.add_parser("sts")
    sts.add_argument("operation", choices=["assume-role"])
    sts.add_argument("--role-arn", required=True)
    sts.add_argument("--role-session-name", required=True)
    sts.add_argument("--duration-seconds", type=int, default=3600)
    sts.add_argument("--region")
    sts.add_argument("--output", choices=["json"], required=True)
    args = parser.parse_args(argv)
    if (
        args.service == "secretsmanager"
        and args.operation == "get-secret-value"
        and (args.query != "SecretString" or args.output != "text")
    ):
        parser.error("only --query SecretString --output text is supported")
    if args.service == "s3" and args.source.startswith("s3://") == args.destination.startswith("s3://"):
        parser.error("exactly one of SOURCE and DESTINATION is an s3:// URI")
    return args


def s3_location(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


def main(argv: list[str], session=None) -> int:
    """The call; `session` is a boto3 Session (a fresh one, as the AWS CLI makes, when None)."""
    import boto3
    from botocore.exceptions import ClientError

    args = parse(argv)
    session = session or boto3.session.Session()
    try:
        if args.service == "sts":
            client = session.client("sts", region_name=args.region)
            response = client.assume_role(
                RoleArn=args.role_arn, RoleSessionName=args.role_session_name, DurationSeconds=args.duration_seconds
            )
            response.pop("ResponseMetadata", None)
            print(json.dumps(response, default=lambda t: t.isoformat()))  # the CLI prints datetimes as ISO 8601
        elif args.service == "s3":
            client = session.client("s3", region_name=args.region)
            if args.source.startswith("s3://"):
                client.download_file(*s3_location(args.source), args.destination)
            else:
                client.upload_file(args.source, *s3_location(args.destination))
        elif args.operation == "get-secret-value":
            client = session.client("secretsmanager", region_name=args.region)
            print(client.get_secret_value(SecretId=args.secret_id)["SecretString"])
        else:
            client = session.client("secretsmanager", region_name=args.region)
            value = args.secret_string
            if value.startswith("file://"):
                with open(value[len("file://") :]) as f:
                    value = f.read()
            print(json.dumps(client.put_secret_value(SecretId=args.secret_id, SecretString=value)["VersionId"]))
    except ClientError as e:
        print(f"An error occurred ({e.response['Error']['Code']}): {e}", file=sys.stderr)
        return 254
    return 0


def call(name: str, argv: list[str]) -> int:
    """Sends argv, the environment and fds 0-2 to the server NAME; returns the status it answers."""
    with send_call(name, {"argv": argv, "env": dict(os.environ)}) as conn:
        answer = b""
        while chunk := conn.recv(64):
            answer += chunk
    if not answer.strip().isdigit():
        print(f"aws (test stand-in): the server {name!r} gave no status", file=sys.stderr)
        return 255
    return int(answer)


def serve(name: str) -> None:
    import signal
    import struct  # noqa: F401  (for _become_the_caller, imported once before the forks)
    import traceback

    import boto3
    import boto3.s3.transfer  # what download_file and upload_file import on first use
    import botocore.session

    loader = botocore.session.get_session().get_component("data_loader")
    warm = boto3.session.Session(botocore_session=_session_with(loader))
    for service in ("s3", "sts", "secretsmanager"):  # models, endpoint rules and partitions into `loader`
        warm.client(
            service,
            region_name="us-east-1",
            endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="warm-up",
            aws_secret_access_key="warm-up",
        )
    listener = listen(name)
    # Each call's child is waited for, so its CPU counts in this process's (tools/pytest_cpu.py reads it there).
    signal.signal(signal.SIGCHLD, _reap)
    parent = os.getppid()
    listener.settimeout(5)
    print("ready", flush=True)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the process that started it died without stopping it
                return
            continue
        conn.settimeout(None)
        if os.fork():
            conn.close()
            continue
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        status = 1
        try:
            argv = _become_the_caller(conn)
            status = main(argv, boto3.session.Session(botocore_session=_session_with(loader)))
        except SystemExit as e:  # argparse's usage errors
            status = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            conn.sendall(str(status).encode())
        finally:
            os._exit(0)


def _reap(signum, frame) -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _session_with(loader):
    """A new botocore session (the environment read afresh) sharing `loader`, whose models are loaded already."""
    import botocore.session

    session = botocore.session.Session()
    session.register_component("data_loader", loader)
    return session


def _become_the_caller(conn: socket.socket) -> list[str]:
    """Reads the call and turns this process into its caller: its standard streams first (what goes wrong from
    here on is reported to the caller), then its root directory (/proc/<pid>/root: a path looked up from there
    crosses the mounts of the caller's namespace), working directory, groups, gid, uid, umask and environment.
    Returns the call's argv. What boto3 imports on first use is read from the caller's root, which holds the same
    Python as the server's: the Slurm root's for scripts run in it, this machine's for scripts run on it."""
    import struct

    start, fds = receive_streams(conn)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    message = receive_request(conn, start)
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    proc = f"/proc/{pid}"
    with open(f"{proc}/status") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    root = os.open(f"{proc}/root", os.O_RDONLY | os.O_DIRECTORY)
    cwd = os.open(f"{proc}/cwd", os.O_RDONLY | os.O_DIRECTORY)
    os.fchdir(root)
    os.chroot(".")
    os.fchdir(cwd)
    for fd in (root, cwd):
        os.close(fd)
    os.setgroups([int(g) for g in status["Groups"].split()])
    os.setgid(gid)
    os.setuid(uid)
    os.umask(int(status["Umask"], 8))
    os.environ.clear()
    os.environ.update(message["env"])
    return message["argv"]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    elif sys.argv[1:2] == ["--call"]:
        sys.exit(call(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit(main(sys.argv[1:]))
