"""tests/support/socket_calls.py: a call reaches a warm server whole, with the caller's standard streams, and what a
server cannot take is refused on both sides."""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid

import pytest

from support.socket_calls import MAX_REQUEST, listen, receive_request, receive_streams, send_call


def _identity(fd: int) -> tuple[int, int]:
    status = os.fstat(fd)
    return status.st_dev, status.st_ino


def test_a_call_larger_than_a_read_arrives_whole_with_the_caller_s_streams():
    name = f"socket-calls-{uuid.uuid4().hex}"
    request = {"argv": ["cp", "a", "b"], "env": {f"VAR{i}": "x" * 100 for i in range(3000)}}  # ~330 KB
    received: dict = {}
    with listen(name) as listener:

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                start, fds = receive_streams(conn)
                received["fds"] = [_identity(fd) for fd in fds]
                for fd in fds:
                    os.close(fd)
                received["request"] = receive_request(conn, start)
                conn.sendall(b"0")

        server = threading.Thread(target=serve)
        server.start()
        with send_call(name, request) as conn:
            assert conn.recv(1) == b"0"
        server.join(timeout=30)
    assert received["request"] == request
    assert received["fds"] == [_identity(fd) for fd in (0, 1, 2)]


def test_a_call_over_the_limit_is_refused_by_the_caller_and_by_the_server():
    name = f"socket-calls-{uuid.uuid4().hex}"
    with pytest.raises(ValueError, match="a server takes at most"):
        send_call(name, {"env": {"BIG": "x" * MAX_REQUEST}})  # refused before it connects: no server listens
    refused: list[Exception] = []
    with listen(name) as listener:

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                start, fds = receive_streams(conn)
                for fd in fds:
                    os.close(fd)
                try:
                    receive_request(conn, start)
                except ValueError as e:
                    refused.append(e)

        server = threading.Thread(target=serve)
        server.start()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:  # a caller that does not check
            conn.connect("\0" + name)
            data = json.dumps({"env": "x" * MAX_REQUEST}).encode()
            sent = socket.send_fds(conn, [data[:1000]], [0, 1, 2])
            try:
                conn.sendall(data[sent:])
            except OSError:  # the server stopped reading and closed
                pass
        server.join(timeout=30)
    assert [str(e) for e in refused] == [f"a call of over {MAX_REQUEST} bytes"]


def test_a_call_without_its_three_streams_is_refused():
    left, right = socket.socketpair()
    with left, right:
        socket.send_fds(left, [b"{}"], [1])
        left.shutdown(socket.SHUT_WR)
        with pytest.raises(ValueError, match="passed 1 file descriptors, not its standard input, output and error"):
            receive_streams(right)
