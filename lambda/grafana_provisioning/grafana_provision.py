"""Custom resource: puts the platform's data sources and dashboards into an Amazon Managed Grafana workspace and
grants its IAM Identity Center groups their Grafana roles.

The Grafana HTTP API needs a token: the handler keeps one Admin service account per workspace
(grafana:CreateWorkspaceServiceAccount) and makes a token that lives 5 minutes for each run
(CreateWorkspaceServiceAccountToken), deleting it when done. Data sources are created or updated by uid
(GET/POST /api/datasources, PUT /api/datasources/uid/<uid>) and dashboards saved with overwrite
(POST /api/dashboards/db), so a retry or an update converges:
https://grafana.com/docs/grafana/latest/developers/http_api/data_source/ and .../http_api/dashboard/.
Delete removes nothing: the dashboards go with the workspace."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from aws_clients import client

SERVICE_ACCOUNT = "hyperpod-platform-provisioner"
TOKEN_SECONDS = 300
FILE_SYSTEM_VARIABLE = "file_system_id"


def on_event(event, _context):
    props = event["ResourceProperties"]
    workspace_id = props["WorkspaceId"]
    physical_id = f"{workspace_id}/provisioning"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
    grafana = client("grafana", region=props["Region"])
    provision(grafana, props, event.get("OldResourceProperties") if event["RequestType"] == "Update" else None)
    return {"PhysicalResourceId": physical_id}


def provision(grafana, props: dict, old: dict | None = None) -> None:
    workspace_id = props["WorkspaceId"]
    account_id = service_account(grafana, workspace_id)
    token = grafana.create_workspace_service_account_token(
        workspaceId=workspace_id,
        serviceAccountId=account_id,
        name=f"provision-{os.urandom(6).hex()}",
        secondsToLive=TOKEN_SECONDS,
    )["serviceAccountToken"]
    try:
        api = GrafanaApi(props["Endpoint"], token["key"])
        for source in data_sources(props):
            api.put_data_source(source)
        for text in props.get("Dashboards", []):
            api.put_dashboard(dashboard(text, props["FileSystemId"]))
    finally:
        grafana.delete_workspace_service_account_token(
            workspaceId=workspace_id, serviceAccountId=account_id, tokenId=token["id"]
        )
    grant_roles(grafana, workspace_id, props, old or {})


def service_account(grafana, workspace_id: str) -> str:
    for page in grafana.get_paginator("list_workspace_service_accounts").paginate(workspaceId=workspace_id):
        for account in page["serviceAccounts"]:
            if account["name"] == SERVICE_ACCOUNT:
                return account["id"]
    return grafana.create_workspace_service_account(
        workspaceId=workspace_id, name=SERVICE_ACCOUNT, grafanaRole="ADMIN"
    )["id"]


def grant_roles(grafana, workspace_id: str, props: dict, old: dict) -> None:
    """Groups in the config get their role; groups an update removed from the config lose it."""
    batch = []
    for role, key in (("VIEWER", "ViewerGroupIds"), ("ADMIN", "AdminGroupIds")):
        wanted, before = props.get(key, []), old.get(key, [])
        for action, groups in (("ADD", wanted), ("REVOKE", [g for g in before if g not in wanted])):
            if groups:
                batch.append(
                    {"action": action, "role": role, "users": [{"id": group, "type": "SSO_GROUP"} for group in groups]}
                )
    if batch:
        errors = grafana.update_permissions(workspaceId=workspace_id, updateInstructionBatch=batch)["errors"]
        if errors:
            raise RuntimeError(f"UpdatePermissions failed: {errors}")


def data_sources(props: dict) -> list[dict]:
    """AMP through SigV4 with the workspace's role; CloudWatch with the same role."""
    region = props["Region"]
    # Grafana appends /api/v1/query to the data source URL; the workspace's Prometheus endpoint ends with '/'.
    prometheus_url = props["PrometheusEndpoint"].rstrip("/")
    return [
        {
            "uid": props["PrometheusUid"],
            "name": "HyperPod node metrics (AMP)",
            "type": "prometheus",
            "access": "proxy",
            "url": prometheus_url,
            "isDefault": True,
            "jsonData": {
                "httpMethod": "POST",
                "sigV4Auth": True,
                "sigV4AuthType": "ec2_iam_role",
                "sigV4Region": region,
            },
        },
        {
            "uid": props["CloudWatchUid"],
            "name": "HyperPod CloudWatch",
            "type": "cloudwatch",
            "access": "proxy",
            "jsonData": {"authType": "ec2_iam_role", "defaultRegion": region},
        },
    ]


def dashboard(text: str, file_system_id: str) -> dict:
    body = json.loads(text)
    for variable in body.get("templating", {}).get("list", []):
        if variable.get("name") == FILE_SYSTEM_VARIABLE:
            variable["query"] = file_system_id
    body.pop("id", None)  # saved by uid
    return body


class GrafanaApi:
    def __init__(self, endpoint: str, token: str):
        self.base = endpoint if endpoint.startswith(("http://", "https://")) else f"https://{endpoint}"
        self.token = token

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.base}{path}",
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            if error.code == 404 and method == "GET":
                return 404, {}
            raise RuntimeError(f"Grafana {method} {path}: HTTP {error.code} {error.read()[:500]!r}") from None

    def put_data_source(self, source: dict) -> None:
        status, _ = self.request("GET", f"/api/datasources/uid/{source['uid']}")
        if status == 404:
            self.request("POST", "/api/datasources", source)
        else:
            self.request("PUT", f"/api/datasources/uid/{source['uid']}", source)

    def put_dashboard(self, body: dict) -> None:
        self.request(
            "POST",
            "/api/dashboards/db",
            {"dashboard": body, "overwrite": True, "message": "provisioned by the HyperPod platform"},
        )
