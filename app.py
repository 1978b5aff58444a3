#!/usr/bin/env python3
"""Reads the config (file + `-c` overrides), builds the stacks, adds cdk-nag, synthesizes. Nothing else."""

import sys

import aws_cdk as cdk

from platform_config import DEFAULT_CONFIG_PATH, ConfigError, context_overrides, load_config
from stacks.platform import add_security_checks, build_platform

app = cdk.App()
try:
    notices: list[str] = []
    config = load_config(
        app.node.try_get_context("config") or DEFAULT_CONFIG_PATH,
        context_overrides(app.node.get_all_context()),
        notices,
    )
    for notice in notices:
        print(f"config: {notice}", file=sys.stderr)
    # Checks what the config points at on disk: the EKS dependency chart must be the pinned revision. Tests and
    # `make bench` pass `-c allow_chart_stand_in=true` to synthesize against the stand-in; that template then fails
    # CloudFormation validation, so it cannot be deployed.
    build_platform(app, config, allow_chart_stand_in=app.node.try_get_context("allow_chart_stand_in") in (True, "true"))
except ConfigError as error:
    print(error, file=sys.stderr)
    sys.exit(1)
add_security_checks(app)
app.synth()
