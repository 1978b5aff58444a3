"""The boto3 client every custom-resource handler makes its AWS calls through: botocore's standard retry mode
(exponential backoff with jitter on throttling, transient and connection errors; Throttling, ThrottlingException,
RequestLimitExceeded, TooManyRequestsException and SlowDown among them), MAX_ATTEMPTS attempts in all. No retry loop
of our own on top. boto3 >= 1.28 honours AWS_ENDPOINT_URL itself, which is how tests reach moto server.

This file is the one copy. Each function folder that uses it holds a link to it (lambda/<function>/aws_clients.py ->
../shared/aws_clients.py), so a handler imports it as a top-level module, in its Lambda asset as in the tests; the
asset follows the link (constructs/lambda_assets.py), so every function's zip carries the file itself.
"""

from __future__ import annotations

import os

import boto3
from botocore.config import Config

MAX_ATTEMPTS = 8  # in all, the first attempt included


def client(service: str, *, region: str | None = None, max_attempts: int = MAX_ATTEMPTS):
    """A client of `service` in `region` (default: the function's own, AWS_REGION) that retries in standard mode."""
    # A fresh Config per client: botocore rewrites the retries dict it is given.
    config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    return boto3.client(service, region_name=region or os.environ.get("AWS_REGION"), config=config)
