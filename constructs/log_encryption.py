"""Every log group the platform creates is encrypted with a customer managed key: one key per stack, made on first
use, whose policy lets CloudWatch Logs use it for log groups of this account and region only.

CloudWatch Logs encrypts and decrypts itself; readers and writers need no KMS permission. The key policy must let the
regional service principal `logs.<region>.amazonaws.com` use the key, conditioned on the encryption context CloudWatch
Logs sends, `kms:EncryptionContext:aws:logs:arn` = the log group's ARN
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html, "Step 2: Set permissions on
the KMS key"). Log group names are generated at deploy time (CloudFormation's names), so the condition names this
account's and region's log groups, as that page does, not each group.

The key is retained: log groups kept after a stack delete (flow logs, the EKS control plane's) stay readable.
"""

from __future__ import annotations

from typing import cast

import jsii
import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import IConstruct

KEY_ID = "LogsKey"


def logs_key(stack: cdk.Stack) -> kms.Key:
    """The stack's log group key, created on first call."""
    existing = stack.node.try_find_child(KEY_ID)
    if existing is not None:
        return cast(kms.Key, existing)  # jsii types children as IConstruct; this id is only ever the key below
    key = kms.Key(
        stack,
        KEY_ID,
        enable_key_rotation=True,
        removal_policy=cdk.RemovalPolicy.RETAIN,
        description=f"{stack.stack_name}: encrypts this stack's CloudWatch log groups",
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsEncryptsThisAccountsLogGroups",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="*",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    )
    return key


@jsii.implements(cdk.IAspect)
class LogGroupEncryption:
    """Sets KmsKeyId on every AWS::Logs::LogGroup visited that has none, to its own stack's key (logs_key)."""

    def __init__(self) -> None:
        self._key_arns: dict[cdk.Stack, str] = {}  # each stack's key, looked up once

    def visit(self, node: IConstruct, stack: cdk.Stack | None = None) -> None:
        """`stack`: the node's own stack, when the caller knows it (saves asking the jsii kernel)."""
        if isinstance(node, logs.CfnLogGroup) and node.kms_key_id is None:
            stack = stack or cdk.Stack.of(node)
            if stack not in self._key_arns:
                self._key_arns[stack] = logs_key(stack).key_arn
            node.kms_key_id = self._key_arns[stack]
