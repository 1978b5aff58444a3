"""What every custom-resource function of the platform shares: its runtime and how its folder under lambda/ becomes
its code asset.

A function folder's modules are top-level modules in the asset (`import partitions`); the boto3 client helper,
lambda/shared/aws_clients.py, reaches each folder that uses it as a link (lambda/<function>/aws_clients.py), which
packaging follows, so every zip holds the file itself. __pycache__ stays out: its bytes change from run to run and
would change the asset hash.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "lambda"
RUNTIME = lambda_.Runtime.PYTHON_3_14


def function_dir(name: str) -> Path:
    """lambda/<name>: one function's handler modules."""
    return FUNCTIONS_DIR / name


def handler_code(folder: Path | str) -> lambda_.Code:
    """The folder as a Lambda code asset, links followed."""
    return lambda_.Code.from_asset(
        str(folder), exclude=["__pycache__", "*.pyc"], follow_symlinks=cdk.SymlinkFollowMode.ALWAYS
    )


def execution_role(function: lambda_.Function) -> iam.IRole:
    """The function's role: the one it was given or the one aws-cdk-lib made for it (jsii types it as optional,
    for functions imported by ARN)."""
    role = function.role
    if role is None:
        raise ValueError(f"{function.node.path} has no execution role")
    return role


def function_log_group(scope: Construct, construct_id: str) -> logs.LogGroup:
    """A platform function's (or its provider's) log group: kept three months, deleted with its stack (it holds the
    function's own log lines, no user data)."""
    return logs.LogGroup(
        scope, construct_id, retention=logs.RetentionDays.THREE_MONTHS, removal_policy=cdk.RemovalPolicy.DESTROY
    )
