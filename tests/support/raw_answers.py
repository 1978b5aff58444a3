"""An HTTP answer a test injects at a real client's before-send event: below botocore's parsing and its retry handler,
so what the handler sees is what botocore makes of that status and body from the service itself."""

from __future__ import annotations

from typing import Any

from botocore.awsrequest import AWSResponse


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any):
        yield self._body


def answer(request: Any, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> AWSResponse:
    """The service's answer to `request` (a before-send handler's argument): `status`, `body` (none by default, as
    S3 answers a HEAD) and `headers`."""
    return AWSResponse(request.url, status, {"Content-Length": str(len(body)), **(headers or {})}, _Body(body))
