"""custom_resources.Provider handler: retention on the log group HyperPod creates for a cluster.

HyperPod writes node and lifecycle-script logs to /aws/sagemaker/Clusters/<cluster-name>/<cluster-id>, a group it
creates itself without retention; its name holds the cluster ID, known only once the cluster exists. This resource
runs after the cluster: it creates the group if HyperPod has not yet (HyperPod tolerates an existing group, as the
CloudWatch agent does), encrypted with the platform's customer managed key when KmsKeyId is given (associated with
the key if the group already exists: logs written from then on are encrypted with it), and sets the retention.
Delete leaves the group, its key and its logs alone.

ResourceProperties: LogGroupName, RetentionInDays, optionally KmsKeyId (a key ARN). Environment: AWS_REGION (set by
Lambda), optionally AWS_ENDPOINT_URL (tests).
"""

from __future__ import annotations

import logging
from typing import Any
from collections.abc import Mapping

from botocore.exceptions import ClientError

from aws_clients import client

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)


def apply(logs, name: str, days: int, kms_key_id: str | None = None) -> None:
    """Idempotent: a second run with the same input changes nothing."""
    try:
        logs.create_log_group(logGroupName=name, **({"kmsKeyId": kms_key_id} if kms_key_id else {}))
        LOG.info("created %s", name)
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceAlreadyExistsException":
            raise
        if kms_key_id:  # HyperPod made it first, unencrypted (or with another key)
            logs.associate_kms_key(logGroupName=name, kmsKeyId=kms_key_id)
            LOG.info("associated %s with %s", name, kms_key_id)
    logs.put_retention_policy(logGroupName=name, retentionInDays=days)
    LOG.info("retention of %s: %d days", name, days)


def on_event(event: Mapping[str, Any], _context: Any = None) -> dict:
    props = event["ResourceProperties"]
    name = props["LogGroupName"]
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}  # the logs stay, with their retention
    apply(client("logs"), name, int(props["RetentionInDays"]), props.get("KmsKeyId"))
    return {"PhysicalResourceId": name}
