"""The Slurm login secret, on its own: the cluster's controller writes it (lifecycle/hyperpod/publish_slurm_login.sh)
and Studio reads it. It needs nothing, so both the cluster and Studio stacks can start as soon as their other
inputs exist, and neither waits for the other."""
from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from constructs.nag_acknowledgments import acknowledge


class SlurmLoginStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, cluster_name: str, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        # The controller's on_create publishes the Slurm version, its address, slurm.conf and the munge key here;
        # only the cluster (write) and the Studio execution role (read) may use it.
        self.secret = secretsmanager.Secret(
            self, "SlurmLoginSecret", description=f"{cluster_name}: what a Studio login node needs to reach Slurm")
        acknowledge(self.secret, "AwsSolutions-SMG4",
                    "the value is the cluster's munge key and slurm.conf, written by the controller at creation; it "
                    "changes when the cluster is re-created, not on a rotation schedule")
        cdk.CfnOutput(self, "SlurmLoginSecretArn", value=self.secret.secret_arn,
                      description="Written by the Slurm controller at creation, read by Studio's login nodes")
