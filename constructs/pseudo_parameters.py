"""CloudFormation's pseudo parameters as aws-cdk-lib's tokens (`cdk.Aws.REGION`, ...), read once per process.

Each is a static token the jsii kernel made once, so every read of `cdk.Aws.REGION` gives the same string, but is a
round trip to the kernel (~0.3 ms of CPU); the constructs read them ~60 times a synthesis."""

from __future__ import annotations

import aws_cdk as cdk

ACCOUNT_ID: str = cdk.Aws.ACCOUNT_ID
PARTITION: str = cdk.Aws.PARTITION
REGION: str = cdk.Aws.REGION
URL_SUFFIX: str = cdk.Aws.URL_SUFFIX
