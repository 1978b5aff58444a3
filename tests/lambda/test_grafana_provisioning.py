"""lambda/grafana_provisioning: the real boto3 grafana client with botocore Stubber (moto has no Amazon Managed
Grafana service accounts) and a local HTTP server standing in for Grafana's HTTP API (the endpoints Grafana
documents: /api/datasources, /api/datasources/uid/<uid>, /api/dashboards/db)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

ROOT = Path(__file__).resolve().parents[2]

import grafana_provision

WORKSPACE = "g-0123456789"
TOKEN = "glsa_test_token"
DASHBOARDS = sorted((ROOT / "observability" / "grafana").glob("*.json"))


class FakeGrafana(BaseHTTPRequestHandler):
    """Just enough of Grafana's HTTP API: data sources by uid, dashboards saved by uid with overwrite."""

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
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._reply(401, {"message": "Unauthorized"})
            return False
        return True

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

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
            if body["uid"] in self.state["sources"]:
                return self._reply(409, {"message": "data source with the same uid already exists"})
            self.state["sources"][body["uid"]] = body
            return self._reply(200, {"id": len(self.state["sources"])})
        if self.path == "/api/dashboards/db":
            uid = body["dashboard"]["uid"]
            if uid in self.state["dashboards"] and not body.get("overwrite"):
                return self._reply(412, {"status": "name-exists"})
            self.state["dashboards"][uid] = body["dashboard"]
            return self._reply(200, {"uid": uid, "status": "success"})
        self._reply(404, {})

    def do_PUT(self):  # noqa: N802
        if self._authorized():
            uid = self.path.rsplit("/", 1)[-1]
            if uid not in self.state["sources"]:
                return self._reply(404, {})
            self.state["sources"][uid] = self._body()
            self._reply(200, {})

    def log_message(self, *_):
        pass


@pytest.fixture
def grafana_http():
    FakeGrafana.state = {"sources": {}, "dashboards": {}, "calls": []}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGrafana)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", FakeGrafana.state
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


def stubbed(existing_account: bool, key: str = TOKEN):
    client = boto3.client("grafana", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    accounts = (
        [{"id": "7", "name": grafana_provision.SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "isDisabled": "false"}]
        if existing_account
        else []
    )
    stub.add_response(
        "list_workspace_service_accounts",
        {"serviceAccounts": accounts, "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE},
    )
    if not existing_account:
        stub.add_response(
            "create_workspace_service_account",
            {"id": "7", "name": grafana_provision.SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "name": grafana_provision.SERVICE_ACCOUNT, "grafanaRole": "ADMIN"},
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
            "secondsToLive": grafana_provision.TOKEN_SECONDS,
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
