"""How a command hands its call to one of the suite's warm servers (support/warm_python.py, e2e/aws_shim.py): over
the abstract Unix socket the server listens on, as one JSON request (arguments, environment, what else the server
needs) with the caller's file descriptors 0-2 passed beside it; the caller then shuts its side for writing and reads
the server's answer. Standard library only: the callers import it under `python3 -I -S`, started once per call, and
servers in the Slurm root import it with that root's Python.
"""

from __future__ import annotations

import json
import socket

MAX_REQUEST = 1 << 20  # bytes of arguments and environment one call sends (ARG_MAX is 2 MB)
_CHUNK = 65536


def send_call(name: str, request: dict) -> socket.socket:
    """Connects to the server NAME and sends `request` with this process's fds 0-2; returns the connection, shut for
    writing, to read the answer from (the caller closes it)."""
    data = json.dumps(request).encode()
    if len(data) > MAX_REQUEST:
        raise ValueError(f"a call of {len(data)} bytes: a server takes at most {MAX_REQUEST}")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect("\0" + name)
        sent = socket.send_fds(conn, [data], [0, 1, 2])
        conn.sendall(data[sent:])
        conn.shutdown(socket.SHUT_WR)
    except BaseException:
        conn.close()
        raise
    return conn


def listen(name: str) -> socket.socket:
    """The server's socket: the abstract name NAME (no file to leave behind or to be planted)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(64)
    return listener


def receive_streams(conn: socket.socket) -> tuple[bytes, list[int]]:
    """A call's standard input, output and error (the caller's fds, now this process's), with the request's first
    bytes, which came with them: a server that reports to the caller takes on its streams before it reads the rest."""
    start, fds, _, _ = socket.recv_fds(conn, _CHUNK, 3)
    if len(fds) != 3:
        for fd in fds:
            socket.close(fd)
        raise ValueError(f"a call passed {len(fds)} file descriptors, not its standard input, output and error")
    return start, fds


def receive_request(conn: socket.socket, start: bytes) -> dict:
    """The rest of the call's request after `start` (receive_streams'), up to MAX_REQUEST bytes."""
    data = start
    while chunk := conn.recv(_CHUNK):
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError(f"a call of over {MAX_REQUEST} bytes")
    return json.loads(data)
