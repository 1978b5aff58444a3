"""The benchmark's floor: the smallest piece of the platform, the default config's network stack alone (VPC, subnets,
NAT, S3 endpoint, flow logs, EFA security group; no cdk-nag). Its distance from the trivial app is what any real
template costs before the platform adds anything of its own, CDK's built-in template validation included."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aws_cdk as cdk
from platform_config import DEFAULT_CONFIG_PATH, load_config
from stacks.network_stack import NetworkStack

app = cdk.App()
config = load_config(DEFAULT_CONFIG_PATH, {})
NetworkStack(
    app,
    f"{config.name}-network",
    network=config.network,
    control_plane_subnets=(),
    env=cdk.Environment(region=config.deployment.region),
)
app.synth()
