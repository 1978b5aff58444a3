"""lambda/grafana_provisioning: the real boto3 grafana client with botocore Stubber (moto has no Amazon Managed
Grafana service accounts) and a local HTTP server standing in for Grafana's HTTP API (the endpoints Grafana
documents: /api/datasources, /api/datasources/uid/<uid>, /api/dashboards/db)."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

ROOT = Path(__file__).resolve().parents[2]

import grafana_provision
from support.events import custom_resource_event
from support.tls_certificates import certificate

WORKSPACE = "g-0123456789"
TOKEN = "glsa_test_token"
# The service account the platform keeps in each workspace (docs/observability.md): a workspace provisioned by an
# earlier deployment holds it under this name, so a later run must find it, not add a second Admin account.
ACCOUNT_NAME = "hyperpod-platform-provisioner"
TOKEN_SECONDS = 300  # "a token that lives five minutes" (docs/observability.md)
DASHBOARDS = sorted((ROOT / "observability" / "grafana").glob("*.json"))


class FakeGrafana(BaseHTTPRequestHandler):
    """Just enough of Grafana's HTTP API: data sources by uid, dashboards saved by uid with overwrite. It refuses what
    Grafana refuses: a data source without its name, type or access (`binding:"Required"` on AddDataSourceCommand and
    UpdateDataSourceCommand, grafana/grafana pkg/services/datasources/models.go@04d8a250, checked by pkg/web/binding.go:
    400 "bad request data"), and a dashboard whose `id` names no dashboard of this Grafana ("Dashboard not found",
    404). With state["gone"], every path answers 404, as a host that no longer serves the workspace's API would."""

    state: dict = {}

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        self.state["calls"].append((self.command, self.path))
        if self.state.get("gone"):
            self._reply(404, {"message": "Not found"})
            return False
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._reply(401, {"message": "Unauthorized"})
            return False
        return True

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def _refused_source(self, body: dict) -> bool:
        if all(body.get(field) for field in ("name", "type", "access")):
            return False
        self._reply(400, {"message": "bad request data"})
        return True

    def do_GET(self):  # noqa: N802
        if self._authorized():
            uid = self.path.rsplit("/", 1)[-1]
            source = self.state["sources"].get(uid)
            self._reply(200, source) if source else self._reply(404, {"message": "not found"})

    def do_POST(self):  # noqa: N802
        if not self._authorized():
            return
        body = self._body()
        if self.path == "/api/datasources":
            if self._refused_source(body):
                return None
            if body["uid"] in self.state["sources"]:
                return self._reply(409, {"message": "data source with the same uid already exists"})
            self.state["sources"][body["uid"]] = body
            return self._reply(200, {"id": len(self.state["sources"])})
        if self.path == "/api/dashboards/db":
            uid = body["dashboard"]["uid"]
            if body["dashboard"].get("id") and body["dashboard"]["id"] not in self.state["dashboard_ids"].values():
                return self._reply(404, {"message": "Dashboard not found"})
            if uid in self.state["dashboards"] and not body.get("overwrite"):
                return self._reply(412, {"status": "name-exists"})
            self.state["dashboards"][uid] = body["dashboard"]
            self.state["dashboard_ids"].setdefault(uid, len(self.state["dashboard_ids"]) + 1)
            self.state["versions"].setdefault(uid, []).append(body.get("message", ""))
            return self._reply(200, {"uid": uid, "status": "success"})
        self._reply(404, {})

    def do_PUT(self):  # noqa: N802
        if self._authorized():
            uid = self.path.rsplit("/", 1)[-1]
            if uid not in self.state["sources"]:
                return self._reply(404, {})
            body = self._body()
            if self._refused_source(body):
                return None
            self.state["sources"][uid] = body
            self._reply(200, {})

    def log_message(self, *_):
        pass


@pytest.fixture
def grafana_http():
    FakeGrafana.state = {"sources": {}, "dashboards": {}, "dashboard_ids": {}, "versions": {}, "calls": []}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGrafana)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", FakeGrafana.state
    server.shutdown()


@pytest.fixture
def grafana_tls(tmp_path, monkeypatch):
    """The same stand-in over TLS, as a workspace's Grafana answers, with a certificate the handler's default TLS
    context trusts through SSL_CERT_FILE (OpenSSL's default verify paths). Yields its host:port and its state."""
    FakeGrafana.state = {"sources": {}, "dashboards": {}, "dashboard_ids": {}, "versions": {}, "calls": []}
    cert, key = certificate("grafana")
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGrafana)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", FakeGrafana.state
    server.shutdown()


def props(endpoint: str, **overrides) -> dict:
    return {
        "WorkspaceId": WORKSPACE,
        "Region": "us-west-2",
        "Endpoint": endpoint,
        "PrometheusEndpoint": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/",
        "PrometheusUid": "hyperpod-amp",
        "CloudWatchUid": "hyperpod-cloudwatch",
        "FileSystemId": "fs-0123456789abcdef0",
        "Dashboards": [p.read_text() for p in DASHBOARDS],
        "ViewerGroupIds": ["viewers-1"],
        "AdminGroupIds": [],
        **overrides,
    }


def stubbed(existing_account: bool, key: str = TOKEN, client=None):
    if client is None:
        client = boto3.client("grafana", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    accounts = (
        [{"id": "7", "name": ACCOUNT_NAME, "grafanaRole": "ADMIN", "isDisabled": "false"}] if existing_account else []
    )
    stub.add_response(
        "list_workspace_service_accounts",
        {"serviceAccounts": accounts, "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE},
    )
    if not existing_account:
        stub.add_response(
            "create_workspace_service_account",
            {"id": "7", "name": ACCOUNT_NAME, "grafanaRole": "ADMIN", "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "name": ACCOUNT_NAME, "grafanaRole": "ADMIN"},
        )
    stub.add_response(
        "create_workspace_service_account_token",
        {
            "serviceAccountToken": {"id": "tok-1", "name": "n", "key": key},
            "serviceAccountId": "7",
            "workspaceId": WORKSPACE,
        },
        {
            "workspaceId": WORKSPACE,
            "serviceAccountId": "7",
            "name": ANY,
            "secondsToLive": TOKEN_SECONDS,
        },
    )
    stub.add_response(
        "delete_workspace_service_account_token",
        {"tokenId": "tok-1", "serviceAccountId": "7", "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE, "serviceAccountId": "7", "tokenId": "tok-1"},
    )
    return client, stub


def test_first_run_creates_sources_dashboards_and_grants_viewers(grafana_http):
    endpoint, state = grafana_http
    client, stub = stubbed(existing_account=False)
    stub.add_response(
        "update_permissions",
        {"errors": []},
        {
            "workspaceId": WORKSPACE,
            "updateInstructionBatch": [
                {"action": "ADD", "role": "VIEWER", "users": [{"id": "viewers-1", "type": "SSO_GROUP"}]}
            ],
        },
    )
    with stub:
        grafana_provision.provision(client, props(endpoint))
        stub.assert_no_pending_responses()
    assert set(state["sources"]) == {"hyperpod-amp", "hyperpod-cloudwatch"}
    amp = state["sources"]["hyperpod-amp"]
    assert amp["url"] == "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1"
    assert amp["jsonData"]["sigV4Auth"] is True and amp["jsonData"]["sigV4Region"] == "us-west-2"
    assert set(state["dashboards"]) == {"hyperpod-gpu", "hyperpod-efa", "hyperpod-slurm", "hyperpod-fsx"}
    (fs,) = state["dashboards"]["hyperpod-fsx"]["templating"]["list"]
    assert fs["query"] == "fs-0123456789abcdef0"
    assert ("POST", "/api/datasources") in state["calls"]


def test_second_run_updates_in_place_and_reuses_the_service_account(grafana_http):
    endpoint, state = grafana_http
    for existing in (False, True):
        client, stub = stubbed(existing_account=existing)
        stub.add_response("update_permissions", {"errors": []}, None)
        with stub:
            grafana_provision.provision(client, props(endpoint, PrometheusEndpoint="https://other/workspaces/ws-2/"))
            stub.assert_no_pending_responses()
    assert state["sources"]["hyperpod-amp"]["url"] == "https://other/workspaces/ws-2"
    assert [c for c in state["calls"] if c[0] == "PUT"] == [
        ("PUT", "/api/datasources/uid/hyperpod-amp"),
        ("PUT", "/api/datasources/uid/hyperpod-cloudwatch"),
    ]
    assert len(state["dashboards"]) == 4


def test_token_is_deleted_when_grafana_refuses(grafana_http):
    endpoint, state = grafana_http
    client, stub = stubbed(existing_account=True, key="not-a-token-grafana-knows")
    with stub:
        with pytest.raises(RuntimeError, match="HTTP 401"):
            grafana_provision.provision(client, props(endpoint))
        stub.assert_no_pending_responses()  # DeleteWorkspaceServiceAccountToken was called all the same
    assert state["sources"] == {} and state["dashboards"] == {}


def test_an_update_revokes_groups_removed_from_the_config(grafana_http):
    endpoint, _ = grafana_http
    client, stub = stubbed(existing_account=True)
    stub.add_response(
        "update_permissions",
        {"errors": []},
        {
            "workspaceId": WORKSPACE,
            "updateInstructionBatch": [
                {"action": "ADD", "role": "VIEWER", "users": [{"id": "viewers-1", "type": "SSO_GROUP"}]},
                {"action": "REVOKE", "role": "VIEWER", "users": [{"id": "old-viewers", "type": "SSO_GROUP"}]},
                {"action": "REVOKE", "role": "ADMIN", "users": [{"id": "old-admins", "type": "SSO_GROUP"}]},
            ],
        },
    )
    with stub:
        grafana_provision.provision(
            client, props(endpoint), {"ViewerGroupIds": ["viewers-1", "old-viewers"], "AdminGroupIds": ["old-admins"]}
        )
        stub.assert_no_pending_responses()


def test_permission_errors_fail_the_resource(grafana_http):
    endpoint, _ = grafana_http
    client, stub = stubbed(existing_account=True)
    stub.add_response(
        "update_permissions",
        {
            "errors": [
                {
                    "code": 400,
                    "message": "no such group",
                    "causedBy": {
                        "action": "ADD",
                        "role": "VIEWER",
                        "users": [{"id": "viewers-1", "type": "SSO_GROUP"}],
                    },
                }
            ]
        },
        None,
    )
    with stub, pytest.raises(RuntimeError, match="no such group"):
        grafana_provision.provision(client, props(endpoint))


def test_delete_touches_nothing():
    event = {
        "RequestType": "Delete",
        "PhysicalResourceId": f"{WORKSPACE}/provisioning",
        "ResourceProperties": {"WorkspaceId": WORKSPACE},
    }
    assert grafana_provision.on_event(event, None) == {"PhysicalResourceId": f"{WORKSPACE}/provisioning"}


# The data sources as Grafana's data source API takes them (grafana.com/docs/grafana/latest/developers/http_api/
# data_source/): "proxy" access, so Grafana's server makes the queries and signs them (SigV4 has no browser mode);
# the Prometheus data source's SigV4 settings in jsonData (sigV4Auth, sigV4AuthType, sigV4Region) and CloudWatch's
# authType and defaultRegion, with "ec2_iam_role", the stored value of the "Workspace IAM Role" provider
# (grafana/grafana-aws-sdk awsds AuthTypeEC2IAMRole): the workspace's own role, which may query only the platform's
# AMP workspace (docs/observability.md). Queries go as POST (the PromQL in the body, not the URL: Grafana's
# "HTTP method" setting). AMP is the default data source, the one new panels and Explore open on.
AMP_SOURCE = {
    "uid": "hyperpod-amp",
    "name": "HyperPod node metrics (AMP)",
    "type": "prometheus",
    "access": "proxy",
    "url": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1",
    "isDefault": True,
    "jsonData": {"httpMethod": "POST", "sigV4Auth": True, "sigV4AuthType": "ec2_iam_role", "sigV4Region": "us-west-2"},
}
CLOUDWATCH_SOURCE = {
    "uid": "hyperpod-cloudwatch",
    "name": "HyperPod CloudWatch",
    "type": "cloudwatch",
    "access": "proxy",
    "jsonData": {"authType": "ec2_iam_role", "defaultRegion": "us-west-2"},
}


def test_the_data_sources_grafana_holds_sign_with_the_workspace_role(grafana_http):
    endpoint, state = grafana_http
    for existing in (False, True):  # created, then updated in place
        client, stub = stubbed(existing_account=existing)
        stub.add_response("update_permissions", {"errors": []}, None)
        with stub:
            grafana_provision.provision(client, props(endpoint))
        assert state["sources"] == {"hyperpod-amp": AMP_SOURCE, "hyperpod-cloudwatch": CLOUDWATCH_SOURCE}


def test_a_dashboard_carrying_another_grafanas_id_is_saved_by_its_uid(grafana_http):
    """A dashboard exported from a Grafana holds that Grafana's numeric id; saved with it, this workspace's Grafana
    answers "Dashboard not found". It is saved by uid, with the platform's note in its version history."""
    endpoint, state = grafana_http
    exported = {**json.loads(DASHBOARDS[0].read_text()), "id": 42}
    client, stub = stubbed(existing_account=True)
    stub.add_response("update_permissions", {"errors": []}, None)
    with stub:
        grafana_provision.provision(client, props(endpoint, Dashboards=[json.dumps(exported)]))
    (saved,) = state["dashboards"].values()
    assert saved["uid"] == exported["uid"] and saved["title"] == exported["title"]
    assert state["versions"] == {exported["uid"]: ["provisioned by the HyperPod platform"]}


def test_a_host_that_answers_404_to_everything_fails_the_resource(grafana_http):
    """Only a GET's 404 means "not there yet"; a 404 to a POST (a host that no longer serves the workspace's API)
    fails the run instead of reporting success with nothing saved."""
    endpoint, state = grafana_http
    state["gone"] = True
    client, stub = stubbed(existing_account=True)
    with stub:
        with pytest.raises(RuntimeError, match="POST /api/datasources: HTTP 404"):
            grafana_provision.provision(client, props(endpoint))
        stub.assert_no_pending_responses()  # the token is deleted all the same


def _handler_clients(monkeypatch, expect) -> list:
    """on_event makes its own client (aws_clients.client, by service name, in the event's Region); `expect` puts
    the answers on a Stubber of that real client. Returns the clients made."""
    made: list = []
    real = grafana_provision.client

    def make(service: str, *, region: str | None = None):
        client = real(service, region=region)
        expect(client).activate()
        made.append(client)
        return client

    monkeypatch.setattr(grafana_provision, "client", make)
    return made


def test_create_through_on_event_provisions_and_names_the_resource_by_workspace(grafana_http, monkeypatch):
    endpoint, state = grafana_http

    def expect(client):
        _, stub = stubbed(existing_account=False, client=client)
        stub.add_response("update_permissions", {"errors": []}, None)
        return stub

    made = _handler_clients(monkeypatch, expect)
    event = custom_resource_event(
        "Create", props(endpoint, Region="eu-west-1"), resource_type="Custom::GrafanaProvisioning"
    )
    assert grafana_provision.on_event(event, None) == {"PhysicalResourceId": f"{WORKSPACE}/provisioning"}
    (client,) = made
    assert client.meta.service_model.service_name == "grafana" and client.meta.region_name == "eu-west-1"
    assert set(state["sources"]) == {"hyperpod-amp", "hyperpod-cloudwatch"} and len(state["dashboards"]) == 4


def test_an_update_through_on_event_revokes_the_groups_it_removed(grafana_http, monkeypatch):
    endpoint, _ = grafana_http

    def expect(client):
        _, stub = stubbed(existing_account=True, client=client)
        stub.add_response(
            "update_permissions",
            {"errors": []},
            {
                "workspaceId": WORKSPACE,
                "updateInstructionBatch": [
                    {"action": "ADD", "role": "VIEWER", "users": [{"id": "viewers-1", "type": "SSO_GROUP"}]},
                    {"action": "REVOKE", "role": "ADMIN", "users": [{"id": "old-admins", "type": "SSO_GROUP"}]},
                ],
            },
        )
        return stub

    _handler_clients(monkeypatch, expect)
    event = custom_resource_event(
        "Update",
        props(endpoint),
        resource_type="Custom::GrafanaProvisioning",
        old_properties=props(endpoint, AdminGroupIds=["old-admins"]),
        physical_id=f"{WORKSPACE}/provisioning",
    )
    assert grafana_provision.on_event(event, None) == {"PhysicalResourceId": f"{WORKSPACE}/provisioning"}


def test_delete_answers_with_the_physical_id_cloudformation_holds():
    """The Provider framework fails a Delete that answers with another id than the one CloudFormation sent
    ("DELETE: cannot change the physical resource ID", aws-cdk-lib 2.275.0
    custom-resources/lib/provider-framework/runtime/framework.js), whatever the properties say."""
    event = custom_resource_event("Delete", {"WorkspaceId": "g-aaaaaaaaaa"}, physical_id="g-0123456789/provisioning")
    assert grafana_provision.on_event(event, None) == {"PhysicalResourceId": "g-0123456789/provisioning"}


@pytest.mark.parametrize("scheme", ["", "https://"])
def test_the_workspace_endpoint_is_reached_over_https(grafana_tls, scheme):
    """AWS::Grafana::Workspace's Endpoint is the host name alone (g-<id>.grafana-workspace.<region>.amazonaws.com):
    the handler speaks HTTPS to it, and takes an endpoint already written as an https:// URL as it is."""
    host, state = grafana_tls
    client, stub = stubbed(existing_account=True)
    stub.add_response("update_permissions", {"errors": []}, None)
    with stub:
        grafana_provision.provision(client, props(f"{scheme}{host}"))
    assert set(state["sources"]) == {"hyperpod-amp", "hyperpod-cloudwatch"} and len(state["dashboards"]) == 4
