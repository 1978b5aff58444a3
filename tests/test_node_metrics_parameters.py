"""observability.node_metrics -> the `node_metrics` block of platform_parameters.json (the contract with
lifecycle/hyperpod/install_node_metrics.sh) and the node role's artifact reads. The workspace here is a CfnWorkspace
made only for this test; the platform's own is the storage stack's (constructs/metrics_workspace.py), whose
remote-write URL SlurmClusterStack passes on (tests/test_grafana.py checks that wiring)."""

from __future__ import annotations

import json
import subprocess
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_aps as aps

from support.paths import ROOT
from platform_config import load_config
from manifests.node_parameters import artifact_s3_uris, node_metrics_parameters, slurm_node_parameters

SHA = "c" * 64
ARTIFACTS = [
    {
        "name": "prometheus-node-exporter",
        "s3_uri": "s3://mirror/m/prometheus-node-exporter_1.7.0-1ubuntu0.1_amd64.deb",
        "sha256": SHA,
    },
    {"name": "prometheus", "s3_uri": "s3://mirror/m/prometheus_2.45.3+ds-2ubuntu0.1_amd64.deb", "sha256": SHA},
    {"name": "dcgm-exporter", "s3_uri": "s3://mirror/m/dcgm-exporter_4.8.3-ubuntu22.04u5_amd64.deb", "sha256": SHA},
]


def config(enabled: bool = True):
    return load_config(
        ROOT / "config" / "default.yaml",
        {
            "observability": {
                "node_metrics": {"enabled": enabled, "scrape_interval_seconds": 15, "artifacts": ARTIFACTS}
            }
        },
    )


def workspace_url() -> tuple[cdk.Stack, str]:
    stack = cdk.Stack(cdk.App(), "Test", env=cdk.Environment(account="111122223333", region="us-west-2"))
    workspace = aps.CfnWorkspace(stack, "Workspace", alias="test")
    return stack, f"{workspace.attr_prometheus_endpoint}api/v1/remote_write"  # any token: the block passes it on


def test_enabled_puts_the_workspace_url_region_interval_and_artifacts_into_the_parameters():
    stack, url = workspace_url()
    block = stack.resolve(node_metrics_parameters(config(), url, cdk.Aws.REGION))
    assert block["remote_write_url"] == {
        "Fn::Join": ["", [{"Fn::GetAtt": ["Workspace", "PrometheusEndpoint"]}, "api/v1/remote_write"]]
    }
    assert block["region"] == {"Ref": "AWS::Region"}  # the workspace is in the stack's region
    assert block["scrape_interval_seconds"] == 15
    assert block["artifacts"] == ARTIFACTS


def test_disabled_ships_no_block_and_the_node_role_reads_no_metrics_artifact():
    assert node_metrics_parameters(config(enabled=False), "https://example", "us-west-2") is None
    assert artifact_s3_uris(config(enabled=False)) == []


def test_enabled_without_a_workspace_url_fails_synth_with_the_reason():
    with pytest.raises(
        ValueError,
        match="observability.node_metrics.enabled is true but the Slurm cluster stack "
        "got no node_metrics_remote_write_url",
    ):
        node_metrics_parameters(config(), None, "us-west-2")


def test_the_node_role_may_read_exactly_the_metrics_artifacts():
    assert artifact_s3_uris(config()) == [a["s3_uri"] for a in ARTIFACTS]


def test_the_parameters_pass_the_nodes_own_check(synth, tmp_path):
    """What the stack writes is what lib/params.py on the node accepts (tokens replaced by what they resolve to)."""
    s = synth("default")
    cfg = config()
    params = slurm_node_parameters(
        cfg,
        lustre=s.platform.storage.lustre,
        region="us-west-2",  # cdk.Aws.REGION, resolved at deploy
        slurm_login_secret_arn=None,
        jwt_key_secret_arn=None,
        parameters_s3_uri="s3://b/hyperpod/x/p.json",
        client_bundle_s3_prefix=None,
        job_role_arn=None,
        node_metrics_remote_write_url="https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/api/v1/"
        "remote_write",
    )
    params["fsx"] = None
    path = tmp_path / "platform_parameters.json"
    path.write_text(json.dumps(params))
    check = subprocess.run(
        [sys.executable, str(ROOT / "lifecycle" / "hyperpod" / "lib" / "params.py"), "validate", str(path)],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
