"""One retention for every log group the platform creates, whoever wrote the construct (aws-cdk-lib's asset
uploads default to two years, our handlers to three months)."""

from __future__ import annotations

from collections.abc import Iterable

import jsii
import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import IConstruct


@jsii.implements(cdk.IAspect)
class LogRetention:
    """Sets RetentionInDays on every AWS::Logs::LogGroup under the scope it is added to, except `keep` (groups
    whose retention another config key owns, e.g. the EKS control plane's)."""

    def __init__(self, days: int, keep: Iterable[logs.CfnLogGroup] = ()) -> None:
        self.days = days
        keep = list(keep)
        self._keep_paths = {group.node.path for group in keep}
        self._keep_stacks = {cdk.Stack.of(group) for group in keep}

    def visit(self, node: IConstruct, stack: cdk.Stack | None = None) -> None:
        """`stack`: the node's own stack, when the caller knows it: a log group of a stack that holds none of `keep`
        is not one of them, without asking the jsii kernel for its path."""
        if isinstance(node, logs.CfnLogGroup) and (
            (stack is not None and stack not in self._keep_stacks) or node.node.path not in self._keep_paths
        ):
            node.retention_in_days = self.days
