"""readiness.on_event / is_complete (Custom::SchedulableNode) against a Kubernetes API stand-in served here over TLS on
loopback: it serves `GET /api/v1/nodes` only, authenticates the bearer token the way EKS does (a presigned STS
GetCallerIdentity URL it calls itself, here on the moto server) and refuses anything else. The nodes it serves are
checked against the Kubernetes v1.34 Node schema (kubernetes-validate), so the handler reads the real shape."""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import hmac
import http.server
import json
import ssl
import threading
import time
import urllib.parse
from pathlib import Path

import botocore.auth
import botocore.loaders
import kubernetes_validate
import pytest


import readiness
from readiness import ReadinessError
from support.events import PROVIDER_TOKEN, custom_resource_event, is_complete_event
from support.tls_certificates import certificate

CLUSTER = "ml-eks"
HEALTH = "sagemaker.amazonaws.com/node-health-status"
DEDICATED = {"key": "dedicated", "value": "development", "effect": "NoSchedule"}
ACCESS_KEY, SECRET_KEY = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DHC_TAINT = {"key": HEALTH, "value": "Unschedulable", "effect": "NoSchedule"}


# What the API server can answer in; like kube-apiserver it answers 406 Not Acceptable when the client's Accept header
# allows none of them, and JSON when there is no Accept header (Kubernetes API concepts, "Alternate representations of
# resources": "By default, Kubernetes returns objects serialized to JSON with content type application/json").
SERVED_TYPES = ("application/json", "application/*", "*/*")


class FakeApiServer:
    """`nodes`: what GET /api/v1/nodes returns; `status`: an HTTP error to answer instead (with `error_body` as its body
    when set); `drop`: close the connection without an answer; `tokens`: what it saw."""

    def __init__(self, tmp_path: Path):
        self.nodes: list[dict] = []
        self.status: int | None = None
        self.error_body: bytes | None = None
        self.drop = False
        self.tokens: list[str] = []
        self.ca, key = certificate("kubernetes")
        (tmp_path / "cert.pem").write_bytes(self.ca)
        (tmp_path / "key.pem").write_bytes(key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_):
                pass

            def do_GET(self):  # noqa: N802
                if self.path != "/api/v1/nodes":
                    return self._answer(404, {"kind": "Status", "message": "not served here"})
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                server.tokens.append(token)
                if server.drop:
                    self.close_connection = True
                    return None
                if not server.authenticated(token):
                    return self._answer(401, {"kind": "Status", "message": "Unauthorized"})
                if server.status:
                    return self._answer(
                        server.status, server.error_body or {"kind": "Status", "message": "nodes is forbidden"}
                    )
                accept = self.headers.get("Accept")
                if accept and not {r.split(";")[0].strip() for r in accept.split(",")} & set(SERVED_TYPES):
                    return self._answer(406, {"kind": "Status", "message": f"only {SERVED_TYPES} are served"})
                self._answer(200, {"kind": "NodeList", "apiVersion": "v1", "items": server.nodes})

            def _answer(self, code: int, body: dict | bytes):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.endpoint = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)  # quick to shut down
        self.thread.start()

    def authenticated(self, token: str) -> bool:
        if not token.startswith("k8s-aws-v1.") or token.endswith("="):
            return False
        body = token.removeprefix("k8s-aws-v1.")
        url = urllib.parse.urlsplit(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode())
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        if (
            (url.scheme, url.netloc, url.path or "/") != ("https", "sts.us-east-1.amazonaws.com", "/")
            or query.get("Action") != "GetCallerIdentity"
            or int(query.get("X-Amz-Expires", 0)) > 60
        ):
            return False
        return valid_signature(url.netloc, query, {"x-k8s-aws-id": CLUSTER})

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def valid_signature(host: str, query: dict[str, str], headers: dict[str, str]) -> bool:
    """SigV4 query-string authentication (https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html)
    with the fixture's secret key, over `host` and `headers` (which must all be signed)."""
    signed = query["X-Amz-SignedHeaders"].split(";")
    if signed != sorted(["host", *headers]):
        return False
    values = {"host": host, **headers}
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(query.items())
        if k != "X-Amz-Signature"
    )
    canonical = "\n".join(
        [
            "GET",
            "/",
            canonical_query,
            *(f"{h}:{values[h]}" for h in signed),
            "",
            ";".join(signed),
            hashlib.sha256(b"").hexdigest(),
        ]
    )  # a GET: the empty payload
    key_id, date, region, service, terminal = query["X-Amz-Credential"].split("/")
    scope = f"{date}/{region}/{service}/{terminal}"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", query["X-Amz-Date"], scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + SECRET_KEY).encode()
    for part in (date, region, service, terminal):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return (key_id, service) == (ACCESS_KEY, "sts") and hmac.compare_digest(expected, query["X-Amz-Signature"])


@pytest.fixture
def api(tmp_path, monkeypatch):
    # the function's own credentials, and the real regional STS endpoint in the token (nothing calls it)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    server = FakeApiServer(tmp_path)
    yield server
    server.close()


def node(
    name: str,
    *,
    ready: bool = True,
    taints: list[dict] = (),
    health: str | None = "Schedulable",
    cordoned: bool = False,
) -> dict:
    labels = {"kubernetes.io/hostname": name, "sagemaker.amazonaws.com/cluster-name": CLUSTER}
    if health is not None:
        labels[HEALTH] = health
    spec = {"providerID": f"aws:///usw2-az1/{name}"}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if cordoned:
        spec["unschedulable"] = True
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"},
            ]
        },
    }
    kubernetes_validate.validate(obj, "1.34", strict=True)
    return obj


def event(
    api: FakeApiServer,
    request: str = "Create",
    tolerations: list[dict] = (),
    wait_minutes: int = 50,
    ca: bytes | None = None,
) -> dict:
    return custom_resource_event(
        request,
        {
            "ServiceToken": PROVIDER_TOKEN,
            "ClusterName": CLUSTER,
            "Region": "us-east-1",
            "Endpoint": api.endpoint,
            "CertificateAuthorityData": base64.b64encode(ca or api.ca).decode(),
            "ToleratedTaints": json.dumps(list(tolerations)),
            "WaitMinutes": str(wait_minutes),
        },
        logical_id="UntaintedNode",
        resource_type="Custom::SchedulableNode",
    )


def started(evt: dict) -> dict:
    """The event is_complete receives: the framework merges on_event's answer into it."""
    return is_complete_event(evt, readiness.on_event(evt))


def test_waits_until_a_node_the_pods_tolerate_is_ready(api):
    evt = started(event(api))
    assert evt["PhysicalResourceId"] == f"{CLUSTER}/UntaintedNode"
    assert readiness.is_complete(evt) == {"IsComplete": False}  # no nodes yet (continuous provisioning)
    api.nodes = [
        node("hyperpod-i-0a", ready=False),
        node("hyperpod-i-0b", health="Unschedulable", taints=[DHC_TAINT]),  # deep health checks
        node("hyperpod-i-0c", taints=[DEDICATED]),  # the g5 group's own taint
        node("hyperpod-i-0d", cordoned=True),
        node("hyperpod-i-0e", health="UnschedulablePendingReplacement"),
    ]
    assert readiness.is_complete(evt) == {"IsComplete": False}
    api.nodes.append(node("hyperpod-i-0f", taints=[{"key": "gpu", "value": "x", "effect": "PreferNoSchedule"}]))
    assert readiness.is_complete(evt) == {"IsComplete": True, "Data": {"Node": "hyperpod-i-0f"}}
    assert api.tokens and all(t.startswith("k8s-aws-v1.") for t in api.tokens)


def test_a_wait_with_tolerations_accepts_a_node_with_those_taints_only(api):
    toleration = {"key": "dedicated", "operator": "Equal", "value": "development", "effect": "NoSchedule"}
    evt = started(event(api, tolerations=[toleration]))
    api.nodes = [node("hyperpod-i-0b", health="Unschedulable", taints=[DHC_TAINT, DEDICATED])]
    assert readiness.is_complete(evt) == {"IsComplete": False}  # the DHC taint is not among them
    api.nodes = [
        node("hyperpod-i-0c", taints=[DEDICATED, {"key": "dedicated", "value": "other", "effect": "NoExecute"}])
    ]
    assert readiness.is_complete(evt) == {"IsComplete": False}
    api.nodes.append(node("hyperpod-i-0d", taints=[DEDICATED]))
    assert readiness.is_complete(evt)["Data"] == {"Node": "hyperpod-i-0d"}
    # without the toleration the same node is no use
    assert readiness.is_complete(started(event(api))) == {"IsComplete": False}


@pytest.mark.parametrize(
    "toleration, fits",
    [
        ({"operator": "Exists"}, True),
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "value": "development"}, True),  # operator defaults to Equal
        ({"key": "dedicated", "operator": "Equal", "value": "production", "effect": "NoSchedule"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerations_follow_kubernetes_matching(toleration, fits):
    assert readiness.tolerated(DEDICATED, [toleration]) is fits


GPU = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}  # a taint without a value: the API omits the empty value


@pytest.mark.parametrize(
    "toleration, fits",
    [
        ({"key": "nvidia.com/gpu"}, True),  # Equal, and no value: the empty value
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": ""}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "x"}, False),
    ],
)
def test_a_taint_without_a_value_matches_the_empty_value(toleration, fits):
    assert readiness.tolerated(GPU, [toleration]) is fits


def test_a_group_taint_without_a_value_is_tolerated_as_the_platform_writes_it(api):
    """A config taint `nvidia.com/gpu:NoSchedule` (value "") becomes the toleration addon_tolerations writes, with
    "value": ""; the node the API serves has the taint without a value field."""
    toleration = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "", "effect": "NoSchedule"}
    api.nodes = [node("hyperpod-i-0g", taints=[GPU])]
    assert readiness.is_complete(started(event(api, tolerations=[toleration])))["Data"] == {"Node": "hyperpod-i-0g"}


def at(monkeypatch, seconds: float) -> None:
    """The clock of the function's next poll."""
    monkeypatch.setattr(readiness.time, "time", lambda: seconds)


def test_gives_up_waiting_at_the_deadline_without_failing(api, monkeypatch):
    evt = started(event(api, wait_minutes=50))
    api.nodes = [node("hyperpod-i-0b", health="Unschedulable", taints=[DHC_TAINT])]
    assert readiness.is_complete(evt) == {"IsComplete": False}
    start = int(evt["Data"]["Started"])
    at(monkeypatch, start + 50 * 60 - 1)
    assert readiness.is_complete(evt) == {"IsComplete": False}  # still within WaitMinutes
    at(monkeypatch, start + 50 * 60)
    assert readiness.is_complete(evt) == {"IsComplete": True, "Data": {"Node": ""}}


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_is_retried_for_five_minutes_then_fails(api, monkeypatch, status):
    """EKS answers 401 to a role without an access entry (here: the function signs with a key that is not the entry's)
    and 403 to one whose group is not bound to reading nodes. A new entry takes a moment; docs/eks.md promises the
    refusal fails the resource once it has lasted 5 minutes, well before the 50 minutes' wait for a node."""
    if status == 401:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAI44QH8DHBEXAMPLE")
    else:
        api.status = 403
    evt = started(event(api, wait_minutes=50))
    assert readiness.is_complete(evt) == {"IsComplete": False}
    start = int(evt["Data"]["Started"])
    at(monkeypatch, start + 5 * 60 - 1)
    assert readiness.is_complete(evt) == {"IsComplete": False}
    at(monkeypatch, start + 5 * 60)
    with pytest.raises(ReadinessError, match=rf"refused to list nodes \({status}\).*access entry"):
        readiness.is_complete(evt)
    assert len(api.tokens) == 3


def test_a_server_without_the_clusters_certificate_is_not_trusted(api):
    other_ca, _ = certificate("someone-else")
    with pytest.raises(ReadinessError, match="certificate is not the cluster's"):
        readiness.is_complete(started(event(api, ca=other_ca)))
    assert api.tokens == []  # the token never left the function


def test_an_endpoint_that_does_not_answer_is_retried_then_fails(api, monkeypatch):
    evt = started(event(api, wait_minutes=1))
    api.close()  # nothing listens any more
    assert readiness.is_complete(evt) == {"IsComplete": False}
    later = time.time() + 61
    monkeypatch.setattr(readiness.time, "time", lambda: later)
    with pytest.raises(ReadinessError, match="did not answer"):
        readiness.is_complete(evt)
    api.close = lambda: None  # already closed


def test_a_server_error_is_retried(api):
    api.status = 503
    assert readiness.is_complete(started(event(api))) == {"IsComplete": False}


def test_an_error_answer_that_is_not_utf8_is_still_reported(api):
    """A proxy's error page in another encoding, or a body cut inside a character, is quoted with replacement
    characters: the poll is retried, or the refusal reported, not crashed on."""
    api.status, api.error_body = 503, "Dienst nicht verfügbar".encode("latin-1")
    assert readiness.is_complete(started(event(api))) == {"IsComplete": False}
    api.status, api.error_body = 403, b"{" + "é".encode() * 200  # the message quotes 300 bytes: a cut inside an é
    with pytest.raises(readiness.Refused, match=r"\(403\): \{(é){149}\ufffd$"):
        readiness.list_nodes(event(api)["ResourceProperties"])


def test_a_connection_dropped_without_an_answer_is_retried(api):
    """An API server that closes the connection (a control-plane update replacing it) is a poll to retry."""
    api.drop = True
    assert readiness.is_complete(started(event(api))) == {"IsComplete": False}
    assert len(api.tokens) == 1  # it was reached


def test_a_function_without_credentials_fails_saying_so(api, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ReadinessError, match="no AWS credentials"):
        readiness.is_complete(started(event(api)))
    assert api.tokens == []


def test_a_token_whose_encoding_ends_in_x_authenticates(api, monkeypatch):
    """Only base64's padding is stripped from the token. Lambda's credentials carry a session token, whose length
    decides how the URL's base64 ends; with this one, signing at 12:00:13 gives a signature ending in '1', encoded as a
    final 'x' (found by trying the instants of that minute)."""
    monkeypatch.setenv("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLEAA")
    instant = datetime.datetime(2026, 11, 30, 12, 0, 13)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: instant)
    api.nodes = [node("hyperpod-i-0a")]
    assert readiness.is_complete(started(event(api)))["Data"] == {"Node": "hyperpod-i-0a"}
    assert api.tokens[-1].endswith("x")


def test_delete_never_calls_the_cluster(api):
    evt = event(api, "Delete")
    evt["PhysicalResourceId"] = f"{CLUSTER}/UntaintedNode"
    assert readiness.on_event(evt) == {"PhysicalResourceId": f"{CLUSTER}/UntaintedNode"}
    assert readiness.is_complete(evt) == {"IsComplete": True}
    assert api.tokens == []


def test_each_poll_signs_with_the_credentials_of_the_moment_and_reads_botocores_data_once(api, monkeypatch):
    """A warm environment makes a token per poll: each is signed with the credentials the environment holds then
    (the API refuses the second, another key's), and botocore's data files (endpoints.json, the STS model) are read
    for the first token only."""
    monkeypatch.setattr(readiness, "_botocore_data", functools.cache(botocore.loaders.create_loader))  # a new one
    read: list[str] = []
    load_file = botocore.loaders.JSONFileLoader.load_file
    monkeypatch.setattr(
        botocore.loaders.JSONFileLoader, "load_file", lambda self, path: read.append(path) or load_file(self, path)
    )
    assert readiness.is_complete(started(event(api))) == {"IsComplete": False}  # no node yet
    first_token_reads = list(read)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAI44QH8DHBEXAMPLE")
    api.nodes = [node("ip-10-1-0-7")]
    assert readiness.is_complete(started(event(api))) == {"IsComplete": False}  # refused: not the entry's key
    assert any("endpoints" in path for path in first_token_reads) and read == first_token_reads
    urls = [
        urllib.parse.urlsplit(base64.urlsafe_b64decode(t[11:] + "=" * (-len(t[11:]) % 4)).decode()) for t in api.tokens
    ]
    keys = [dict(urllib.parse.parse_qsl(u.query))["X-Amz-Credential"].split("/")[0] for u in urls]
    assert keys == [ACCESS_KEY, "AKIAI44QH8DHBEXAMPLE"]
