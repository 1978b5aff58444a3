"""The EKS orchestrator's Studio: spaces as EKS clients with checksummed tools, their ports, both SharedFSx values."""

from __future__ import annotations

import json

import pytest

from support.variants import EKS_KUBERNETES_VERSION
from constructs import layer_binaries
from constructs.studio_eks_tools import studio_eks_tools
from support.template import resources


# ---------------------------------------------------------------------------------------------- Studio on EKS
def test_studio_spaces_become_eks_clients_with_checksummed_tools(synth):
    s = synth("eks")
    t = s.templates["studio"]
    configs = resources(t, "AWS::SageMaker::StudioLifecycleConfig")
    body, variables = next(iter(configs.values()))["Properties"]["StudioLifecycleConfigContent"]["Fn::Base64"][
        "Fn::Sub"
    ]
    assert 'exec bash "${!scripts}/eks_login_node.sh"' in body
    assert "export EKS_CLUSTER_NAME='${EKS_CLUSTER_NAME}'" in body
    digests = layer_binaries.digests(layer_binaries.layer_zip(layer_binaries.jsii_tarball()))
    assert variables["KUBECTL_SHA256"] == digests["kubectl"] and variables["HELM_SHA256"] == digests["helm"]
    assert "SLURM_LOGIN_SECRET_ARN" not in body
    tools = studio_eks_tools(EKS_KUBERNETES_VERSION)
    assert (tools.directory / "kubectl" / "kubectl").stat().st_mode & 0o111


def test_studio_reaches_the_eks_api_not_slurm(synth):
    t = synth("eks").templates["studio"]
    ports = sorted(
        (r["Properties"]["FromPort"], r["Properties"]["Description"])
        for r in resources(t, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["Description"].endswith("from Studio apps")
    )
    assert ports == [
        (443, "EksApi from Studio apps"),
        (988, "Lustre from Studio apps"),
        (1018, "Lustre from Studio apps"),
    ]
    assert "secretsmanager" not in json.dumps(t)


@pytest.mark.parametrize("variant, default", [("eks", "False"), ("eks_shared", "True")])
def test_both_shared_fsx_values_synthesize_on_eks(synth, variant, default):
    assert synth(variant).templates["studio"]["Parameters"]["SharedFSx"]["Default"] == default
