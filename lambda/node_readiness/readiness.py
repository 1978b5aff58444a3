"""custom_resources.Provider handlers of Custom::SchedulableNode: wait until the EKS cluster has a node that an add-on's
pods can be scheduled on, so the add-ons that run Deployments are created when they can run.

Why: with continuous provisioning the HyperPod cluster is InService before any node has joined, nodes under deep
health checks carry `sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`, and instance groups may
carry taints of their own. CloudFormation treats an EKS add-on that cannot schedule (DEGRADED) as created, so without a
wait the stack completes with add-ons that are not running.

A node counts when it is Ready, not cordoned, not marked unschedulable by HyperPod's health label, and every
NoSchedule/NoExecute taint it has is one of `ToleratedTaints` (those the waiting add-ons tolerate; [] for add-ons
that tolerate none). When none appears before `WaitMinutes`, the resource completes anyway with `Node` = "" rather
than fail: failing would roll back the HyperPod cluster, while continuous provisioning keeps adding nodes and the
add-ons' pods schedule when they come (docs/eks.md, "Order of creation"). An API that has not answered by then fails
the resource (the same endpoint serves every manifest of the stack), as does a refusal lasting REFUSAL_GRACE_SECONDS
or a server whose certificate is not the cluster's.

Kubernetes API access: the EKS API accepts a bearer token that is a presigned STS GetCallerIdentity URL signed with
the `x-k8s-aws-id: <cluster name>` header, URL-safe base64 without padding, prefixed `k8s-aws-v1.` (the format of
`aws eks get-token`, aws/aws-cli@05c1ed9f awscli/customizations/eks/get_token.py). Presigning is local: no AWS call.
The function's role reaches the API through an EKS access entry whose Kubernetes group may only list nodes.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from typing import Any
from collections.abc import Mapping

import botocore.loaders
import botocore.session
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_HEADER = "x-k8s-aws-id"
URL_SECONDS = 60
# A new access entry takes a moment to authenticate; a refusal that lasts longer is a missing entry or binding, which
# waiting cannot fix.
REFUSAL_GRACE_SECONDS = 300
# HyperPod's node label: Schedulable once basic checks pass; Unschedulable during deep health checks,
# UnschedulablePendingReplacement / UnschedulablePendingReboot after a failure
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


class ReadinessError(RuntimeError):
    """Fails the CloudFormation operation; the message is what the stack events show."""


class ApiUnreachable(RuntimeError):
    """The API did not answer this time; the next poll may succeed."""


class Refused(RuntimeError):
    """401/403: the access entry or its RBAC binding is missing, or not yet in effect."""


# botocore's installed data (endpoints.json, 1.2 MB, and the STS model), read once per environment and data path: each
# token is made in a botocore session of its own (credentials and configuration read anew), whose own loader would
# read those files again (~90 ms of CPU a poll).
_botocore_data = functools.cache(botocore.loaders.create_loader)


def eks_token(cluster_name: str, region: str) -> str:
    session = botocore.session.Session()
    session.register_component("data_loader", _botocore_data(session.get_config_variable("data_path")))
    credentials = session.get_credentials()
    if credentials is None:
        raise ReadinessError("no AWS credentials in the function's environment")
    endpoint = session.create_client("sts", region_name=region).meta.endpoint_url
    request = AWSRequest(
        method="GET",
        url=f"{endpoint}/?Action=GetCallerIdentity&Version=2011-06-15",
        headers={CLUSTER_HEADER: cluster_name},
    )
    SigV4QueryAuth(credentials.get_frozen_credentials(), "sts", region, expires=URL_SECONDS).add_auth(request)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(request.url.encode()).decode().rstrip("=")


def list_nodes(props: Mapping[str, Any]) -> list[dict]:
    """The cluster's nodes. Raises ReadinessError where waiting cannot help (a server whose certificate is not the
    cluster's), Refused on 401/403, and ApiUnreachable where waiting may help (no answer yet, a 5xx)."""
    context = ssl.create_default_context(cadata=base64.b64decode(props["CertificateAuthorityData"]).decode())
    request = urllib.request.Request(
        f"{props['Endpoint'].rstrip('/')}/api/v1/nodes",
        headers={
            "Authorization": f"Bearer {eks_token(props['ClusterName'], props['Region'])}",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=20) as response:
            return json.load(response).get("items", [])
    except urllib.error.HTTPError as error:
        detail = error.read()[:300].decode(errors="replace")
        if error.code in (401, 403):
            raise Refused(f"the EKS API refused to list nodes ({error.code}): {detail}") from None
        raise ApiUnreachable(f"the EKS API answered {error.code}: {detail}") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, ssl.SSLCertVerificationError):
            raise ReadinessError(f"the EKS API endpoint's certificate is not the cluster's: {error.reason}") from None
        raise ApiUnreachable(f"the EKS API did not answer: {error.reason}") from None
    except (TimeoutError, ConnectionError) as error:
        raise ApiUnreachable(f"the EKS API did not answer: {error}") from None


def tolerated(taint: Mapping[str, str], tolerations: list[Mapping[str, str]]) -> bool:
    """Kubernetes' rule for the tolerations the platform writes: Equal on key and value, or Exists on the key,
    with the taint's effect or none."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def why_not(node: Mapping[str, Any], tolerations: list[Mapping[str, str]]) -> str | None:
    """None when the node can take the add-ons' pods; else why not, for the log."""
    status = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
    if status.get("Ready") != "True":
        return "not Ready"
    if node.get("spec", {}).get("unschedulable"):
        return "cordoned"
    health = node.get("metadata", {}).get("labels", {}).get(HEALTH_LABEL)
    if health is not None and health != "Schedulable":
        return f"{HEALTH_LABEL}={health}"
    for taint in node.get("spec", {}).get("taints", []):
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerated(taint, tolerations):
            return f"taint {taint['key']}={taint.get('value', '')}:{taint['effect']}"
    return None


def on_event(event: Mapping[str, Any], _context: Any = None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    physical_id = event.get("PhysicalResourceId") or f"{props['ClusterName']}/{event['LogicalResourceId']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": physical_id}
    now = int(time.time())
    return {
        "PhysicalResourceId": physical_id,
        "Data": {"Started": str(now), "Deadline": str(now + int(props["WaitMinutes"]) * 60)},
    }


def is_complete(event: Mapping[str, Any], _context: Any = None) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    props = event["ResourceProperties"]
    tolerations = json.loads(props["ToleratedTaints"])
    past_deadline = time.time() >= int(event["Data"]["Deadline"])
    try:
        nodes = list_nodes(props)
    except Refused as error:
        if time.time() >= int(event["Data"]["Started"]) + REFUSAL_GRACE_SECONDS:
            raise ReadinessError(
                f"{error}; check the function role's EKS access entry and the ClusterRoleBinding of its group"
            ) from None
        LOG.info("%s; a new access entry may not be in effect yet, trying again", error)
        return {"IsComplete": False}
    except ApiUnreachable as error:
        if past_deadline:  # never reached in the whole wait: the kubectl handler could not reach it either
            raise ReadinessError(f"{error} (for {props['WaitMinutes']} minutes)") from None
        LOG.info("%s; trying again", error)
        return {"IsComplete": False}
    reasons = {}
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        reason = why_not(node, tolerations)
        if reason is None:
            LOG.info("node %s can take the add-ons' pods", node["metadata"]["name"])
            return {"IsComplete": True, "Data": {"Node": node["metadata"]["name"]}}
        reasons[node["metadata"]["name"]] = reason
    LOG.info("no schedulable node yet: %s", json.dumps(reasons) if reasons else "no nodes")
    if past_deadline:
        LOG.warning(
            "no schedulable node within %s minutes; completing so the HyperPod cluster is kept: the add-ons "
            "schedule when a node comes",
            props["WaitMinutes"],
        )
        return {"IsComplete": True, "Data": {"Node": ""}}
    return {"IsComplete": False}
