"""A `python` command whose processes are forked from one warm interpreter: for tests that start many processes of
the training venv, each of which would spend seconds of CPU importing torch and MLflow (docs/testing.md).

- `warm_python.py --serve NAME MODULE...` (in the interpreter to stand in for): imports the modules once, with the
  garbage collector off and then frozen (a fork's collections do not walk them), listens on the abstract Unix socket
  NAME and prints "ready". Each call is a child forked from it that becomes the caller's process: its standard
  streams (passed over the socket), working directory and environment, then runs what the command line asks as
  `python` would (`[-u] SCRIPT ARGS...` or `[-u] -m MODULE ARGS...`: `sys.argv`, `sys.path[0]`, `__main__`) and
  ends the way the interpreter ends, so its exit status is the script's own: `sys.exit`, an uncaught exception (1),
  `os._exit`, a signal. The server waits for each child and answers its status.
- `warm_python.py --call NAME ARGS...` (standard library only; `python3 -I -S` starts it in ~10 ms): sends ARGS, the
  environment, the working directory and fds 0-2, passes on the signals a process is sent to stop or to be told
  something (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGUSR1, SIGUSR2) to the child, and ends with the child's
  status (killed by the same signal when the child was).
- `warm(python, modules)`: a context manager that starts a server and writes the command that calls it.

What the interpreter settles at its start is the server's, not the caller's: its hash seed, `sys.flags`, the
PYTHONPATH it read. The caller's PYTHONFAULTHANDLER turns the fault handler on and its PYTHONUNBUFFERED, like -u,
leaves stdout and stderr unbuffered, as at a start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, NamedTuple

if __package__ == "support":  # imported by the tests
    from support.socket_calls import listen, receive_request, receive_streams, send_call
else:  # the server and the `python` command run this file with tests/support first on sys.path
    from socket_calls import listen, receive_request, receive_streams, send_call

if TYPE_CHECKING:  # the caller's side imports only what a call needs: it starts once per process it stands in for
    from collections.abc import Iterator
    from pathlib import Path

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGABRT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
READY_TIMEOUT = 300  # seconds a server may take to import its modules (~5 s of CPU for torch and MLflow)


def parse_command_line(argv: list[str]) -> tuple[bool, str, str, list[str]]:
    """(unbuffered, "script" or "module", its path or name, sys.argv) of `python ARGV`; any option but -u and -m is
    refused, so the stand-in never runs something other than what the command asks."""
    unbuffered = False
    while argv[:1] == ["-u"]:
        unbuffered, argv = True, argv[1:]
    if argv[:1] == ["-m"] and len(argv) > 1:
        return unbuffered, "module", argv[1], [argv[1], *argv[2:]]
    if not argv or argv[0].startswith("-"):
        raise ValueError(
            f"warm_python runs `python [-u] SCRIPT ARGS...` or `python [-u] -m MODULE ARGS...`, not {argv}"
        )
    return unbuffered, "script", argv[0], argv


def call(name: str, argv: list[str]) -> int:
    """Has the server NAME run `python ARGV` as this process; returns its exit code (or ends by its signal)."""
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    child: list[int] = []
    pending: list[int] = []  # signals that came before the child's pid: passed on once it is known

    def forward(signum: int, frame: object) -> None:
        if not child:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):  # it has ended already
            os.kill(child[0], signum)

    for forwarded in FORWARDED:
        signal.signal(forwarded, forward)
    with send_call(name, request) as conn:
        answer = conn.makefile("r")
        pid = answer.readline().strip()
        if not pid.isdigit():
            print(f"python (warm stand-in): the server {name!r} did not start the call", file=sys.stderr)
            return 255
        child.append(int(pid))
        for signum in pending:
            forward(signum, None)
        status = answer.readline().strip()
    if not status.lstrip("-").isdigit():
        print(f"python (warm stand-in): the server {name!r} gave no status for {pid}", file=sys.stderr)
        return 255
    code = int(status)
    if code < 0:
        with contextlib.suppress(OSError):  # SIGKILL and SIGSTOP have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def serve(name: str, modules: list[str]) -> tuple[bool, str, str, list[str]]:
    """Serves calls until the process that started it ends; returns in each forked child, become the caller, what
    it is to run (the `__main__` block runs it, so that it ends as a started interpreter does)."""
    import gc
    import importlib
    import inspect
    import selectors

    gc.disable()
    for module in modules:
        importlib.import_module(module)
    # inspect's table of module files, which it completes on first use with a realpath of every module's file not
    # yet in it (~0.5 s of CPU for the ~3,000 modules of torch and MLflow): filled here once, not in every call that
    # asks inspect.stack() (torch's rendezvous does, for each event it records).
    inspect.getmodule(None, "")
    gc.freeze()
    gc.enable()
    if len(os.listdir("/proc/self/task")) != 1:  # a thread here would be copied mid-flight into every fork
        raise RuntimeError(f"{len(os.listdir('/proc/self/task'))} threads after importing {modules}")
    listener = listen(name)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    parent = os.getppid()
    print("ready", flush=True)
    while os.getppid() == parent:  # the process that started it died without stopping it: end
        for key, _ in selector.select(timeout=5):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                start, fds = receive_streams(conn)
                message = receive_request(conn, start)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    for key in selector.get_map().values():  # the other calls' connections and pidfds
                        if key.data:
                            key.data[1].close()
                            os.close(key.fd)
                    selector.close()
                    listener.close()
                    return _become_the_caller(conn, fds, message)
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"{pid}\n".encode())
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))
            else:
                pid, conn = key.data
                selector.unregister(key.fileobj)
                os.close(key.fd)
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                with contextlib.suppress(OSError), conn:  # a caller killed meanwhile no longer reads it
                    conn.sendall(f"{code}\n".encode())
    raise SystemExit(0)


def _become_the_caller(conn: socket.socket, fds: list[int], message: dict) -> tuple[bool, str, str, list[str]]:
    import faulthandler
    import io

    conn.close()
    for fd, target in zip(fds, (0, 1, 2), strict=True):
        os.dup2(fd, target)
        os.close(fd)
    for forwarded in FORWARDED:
        signal.signal(forwarded, signal.default_int_handler if forwarded == signal.SIGINT else signal.SIG_DFL)
    os.chdir(message["cwd"])
    os.environ.clear()
    os.environ.update(message["env"])
    if os.environ.get("PYTHONFAULTHANDLER"):
        faulthandler.enable()
    unbuffered, kind, target, argv = parse_command_line(message["argv"])
    unbuffered = unbuffered or bool(os.environ.get("PYTHONUNBUFFERED"))
    if kind == "module" and target in sys.modules:
        raise ValueError(f"{target} was imported by the server: `python -m {target}` runs it in a fresh interpreter")
    # The standard streams as a started interpreter opens them on fds 0-2 (-u: no buffer under the text layer).
    sys.stdin = io.TextIOWrapper(io.open(0, "rb", closefd=False), line_buffering=False)
    for fd, stream in ((1, "stdout"), (2, "stderr")):
        raw = io.open(fd, "wb", buffering=0, closefd=False)
        buffered = raw if unbuffered else io.BufferedWriter(raw)
        line = not unbuffered and (fd == 2 or os.isatty(fd))
        setattr(sys, stream, io.TextIOWrapper(buffered, line_buffering=line, write_through=unbuffered))
    sys.stderr.reconfigure(errors="backslashreplace")
    sys.argv = argv
    sys.path[0] = os.getcwd() if kind == "module" else os.path.dirname(os.path.realpath(target))
    return unbuffered, kind, target, argv


class Warm(NamedTuple):
    command: Path  # the `python` of the calls: an executable that takes python's command line
    pid: int  # the server's: the calls' processes are its children


@contextlib.contextmanager
def warm(python: Path, modules: list[str], directory: Path, env: dict[str, str]) -> Iterator[Warm]:
    """A server in `python` that imported `modules`, and `directory`/python, the command that calls it. `env` is the
    server's: what is read when a module is imported (OMP_NUM_THREADS, for one) should be what the calls have."""
    import subprocess
    import uuid
    from pathlib import Path

    name = f"warm-python-{uuid.uuid4().hex}"
    server = subprocess.Popen(
        [str(python), __file__, "--serve", name, *modules], stdout=subprocess.PIPE, text=True, cwd=directory, env=env
    )
    try:
        import select

        if not select.select([server.stdout], [], [], READY_TIMEOUT)[0]:
            raise RuntimeError(f"the warm python server was not ready within {READY_TIMEOUT} s (importing {modules})")
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the warm python server ended with {server.wait()} before it was ready")
        command = directory / "python"
        command.write_text(
            f"#!/usr/bin/python3 -IS\nimport sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            f"from warm_python import call\nsys.exit(call({name!r}, sys.argv[1:]))\n"
        )
        command.chmod(0o755)
        yield Warm(command, server.pid)
    finally:
        server.terminate()
        server.wait()  # its CPU, the calls' included, then counts in this process's children's


def _run_as_main(kind: str, target: str) -> None:
    """What `python SCRIPT` or `python -m MODULE` runs, in a `__main__` module of its own."""
    import builtins
    import runpy
    import types
    from importlib.machinery import SourceFileLoader

    if kind == "module":
        runpy.run_module(target, run_name="__main__", alter_sys=True)
        return
    path = os.path.abspath(target)
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path, __cached__=None, __builtins__=builtins, __loader__=SourceFileLoader("__main__", path)
    )
    sys.modules["__main__"] = main
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec")
    exec(code, main.__dict__)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--call"]:
        sys.exit(call(sys.argv[2], sys.argv[3:]))
    if sys.argv[1:2] != ["--serve"]:
        sys.exit(f"usage: {sys.argv[0]} --serve NAME MODULE... | --call NAME ARGS...")
    _, kind, target, _ = serve(sys.argv[2], sys.argv[3:])
    _run_as_main(kind, target)  # in the forked child only: it ends as `python` ends, its exceptions uncaught
