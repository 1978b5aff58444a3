"""The role a Slurm job's processes act as when they call AWS: MLflow logging, and nothing of the node's.

The nodes' instance credentials are root's alone (lifecycle/hyperpod/block_imds.sh): a job runs as its user, so it
gets no credentials from the instance. Instead a credential broker on each login and compute node
(lifecycle/hyperpod/lib/job_credentials.py, run as root) answers a process that belongs to a running Slurm job with
credentials of this role, which it assumes with the node's own role (docs/security.md, "Slurm jobs and AWS").

Least privilege on both sides: the role trusts the worker nodes' role only, for sts:AssumeRole only; that node role
may assume this role and no other; the role may use the platform's one MLflow tracking server and nothing else
(constructs/mlflow_job_access.py). Its sessions last at most one hour, IAM's default (MaxSessionDuration).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from constructs.mlflow_job_access import allow_mlflow_logging


class SlurmJobRole(Construct):
    """`role`: what a job's processes get; `node_role` (the login and compute groups' execution role) may assume it."""

    def __init__(
        self, scope: Construct, id_: str, *, node_role: iam.IRole, role_name: str, tracking_server_arn: str
    ) -> None:
        super().__init__(scope, id_)
        self.role = iam.Role(
            self,
            "Role",
            role_name=role_name,
            assumed_by=iam.ArnPrincipal(node_role.role_arn),
            max_session_duration=cdk.Duration.hours(1),
            description="Slurm jobs on the cluster's login and compute nodes: MLflow logging only, through the "
            "node's job credential broker",
        )
        allow_mlflow_logging(
            self.role,
            tracking_server_arn=tracking_server_arn,
            who="Slurm jobs (through the nodes' job credential broker)",
        )
        node_role.add_to_principal_policy(
            iam.PolicyStatement(sid="AssumeSlurmJobRole", actions=["sts:AssumeRole"], resources=[self.role.role_arn])
        )
