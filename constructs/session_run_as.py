"""A Session Manager preferences document that runs each session as the person's own POSIX user.

With run-as on, Session Manager starts the session as the user named by the SSMSessionRunAs tag of the caller's IAM
user or role; without that tag, as runAsDefaultUser; never as ssm-user; the user must exist on the node
(https://docs.aws.amazon.com/systems-manager/latest/userguide/session-preferences-run-as.html). The inputs are those
of the Standard_Stream session document AWS documents (https://docs.aws.amazon.com/systems-manager/latest/userguide/
getting-started-default-session-document.html).

The account's default document, SSM-SessionManagerRunShell, holds the preferences of every session in the region
that names no document; creating or changing it would change everyone's sessions. This document has a name of its
own, and people pass it: `aws ssm start-session --target ... --document-name <name>` (or `make connect
ARGS=--run-as`, cli/connect.py); an IAM policy can require it (docs/slurm-departments.md, "Session Manager as yourself").
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ssm as ssm
from constructs import Construct


def session_document_name(cluster_name: str) -> str:
    return f"{cluster_name}-RunAsShell"


class SessionRunAsDocument(Construct):
    def __init__(self, scope: Construct, id_: str, *, cluster_name: str, default_user: str) -> None:
        super().__init__(scope, id_)
        self.name = session_document_name(cluster_name)
        self.document = ssm.CfnDocument(
            self,
            "Document",
            name=self.name,
            document_type="Session",
            document_format="JSON",
            # A named document cannot be replaced in place (the new one would need the old one's name).
            update_method="NewVersion",
            content={
                "schemaVersion": "1.0",
                "description": f"{cluster_name}: a shell as your own POSIX user (IAM tag SSMSessionRunAs)",
                "sessionType": "Standard_Stream",
                "inputs": {"runAsEnabled": True, "runAsDefaultUser": default_user},
            },
        )
        stack = cdk.Stack.of(self)
        self.arn = stack.format_arn(service="ssm", resource="document", resource_name=self.name)
