"""The benchmark's baseline: the smallest real CDK app (one bucket), synthesized by the same CLI."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

app = cdk.App()
stack = cdk.Stack(app, "trivial")
s3.Bucket(stack, "Bucket")
app.synth()
