#!/usr/bin/env python3
"""Reads the config (file + `-c` overrides), builds the stacks, adds cdk-nag, synthesizes. Nothing else."""
import sys

import aws_cdk as cdk

from stacks.config import CONTEXT_OVERRIDES, DEFAULT_CONFIG_PATH, ConfigError, load_config
from stacks.platform import add_security_checks, build_platform

app = cdk.App()
try:
    config = load_config(app.node.try_get_context("config") or DEFAULT_CONFIG_PATH,
                         {key: app.node.try_get_context(key) for key in CONTEXT_OVERRIDES})
    build_platform(app, config)  # checks what the config points at on disk (the EKS dependency chart)
except ConfigError as error:
    print(error, file=sys.stderr)
    sys.exit(1)
add_security_checks(app)
app.synth()
