"""The Studio tools in a config and in what it synthesizes: eksctl's pinned release and its switch (refused on Slurm,
stopping synth without its tarball), and the lifecycle configs installing hyp and jq from their own prefix and
shipping eksctl. The built bundle and its offline install: test_studio_tools.py; the zip: test_studio_tools_zip.py."""

from __future__ import annotations

import base64
import json
import os
import re

import pytest
import yaml

from constructs import studio_tools
from constructs.studio_tools import (
    BUNDLE_ZIP,
    MANIFEST,
    EksctlArtifact,
    StudioToolsError,
    digest_file,
    eksctl_artifact,
    sha256,
    studio_tools_bundle,
)
from platform_config import ConfigError, load_config
from support.paths import ROOT
from support.studio_bundles import PINS, built_bundle, small_zip


def test_eksctl_must_be_the_pinned_release(tmp_path):
    pin = PINS["eksctl"]
    with pytest.raises(StudioToolsError, match=rf"needs eksctl {pin['version']} at .*; run `make studio-eksctl`"):
        eksctl_artifact(tmp_path)
    (tmp_path / "eksctl").mkdir()
    (tmp_path / "eksctl" / pin["file"]).write_bytes(b"not eksctl")
    with pytest.raises(
        StudioToolsError,
        match=rf"has sha256 {sha256(tmp_path / 'eksctl' / pin['file'])}; eksctl "
        rf"{pin['version']} is {pin['sha256']}",
    ):
        eksctl_artifact(tmp_path)


def _config(orchestrator_file: str, **studio_tools_keys):
    data = yaml.safe_load((ROOT / orchestrator_file).read_text())
    data.setdefault("studio", {})["tools"] = studio_tools_keys
    if "eks" in data:
        data["eks"]["hyperpod_dependencies"]["chart_dir"] = str(ROOT / "tests" / "fixtures" / "hyperpod-helm-chart")
    path = ROOT / "build" / f"test-studio-tools-{os.getpid()}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    try:
        return load_config(path)
    finally:
        path.unlink()


def test_eksctl_is_refused_on_slurm_with_the_key_and_what_is_allowed():
    with pytest.raises(ConfigError) as error:
        _config("config/default.yaml", eksctl=True)
    assert (
        "studio.tools.eksctl: true with orchestrator: slurm; eksctl manages EKS clusters. Allowed: true with "
        "orchestrator: eks, false otherwise"
    ) in error.value.errors


def test_switching_eksctl_on_without_its_tarball_stops_synth_with_a_config_error(monkeypatch, tmp_path):
    import aws_cdk as cdk
    from stacks.platform import build_platform

    monkeypatch.setattr(studio_tools, "EKSCTL_DIR", tmp_path)
    monkeypatch.setattr(studio_tools.eksctl_artifact, "__defaults__", (tmp_path,))
    config = _config("config/examples/eks.yaml", eksctl=True)
    app = cdk.App()
    with pytest.raises(ConfigError) as error:
        build_platform(app, config, allow_chart_stand_in=True)
    assert error.value.source == "studio.tools.eksctl"
    assert "run `make studio-eksctl`" in error.value.errors[0]
    assert not app.node.children  # refused before any stack exists


def _lifecycle_body(template) -> tuple[str, dict]:
    (config, *_) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::StudioLifecycleConfig"]
    return config["Properties"]["StudioLifecycleConfigContent"]["Fn::Base64"]["Fn::Sub"]


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_synthesized_lifecycle_configs_install_hyp_and_jq_from_their_own_prefix(synth, variant):
    s = synth(variant)
    t = s.templates["studio"]
    name = s.config.name
    body, variables = _lifecycle_body(t)
    assert "export STUDIO_TOOLS_S3_URI='${STUDIO_TOOLS_S3_URI}'" in body
    assert variables["STUDIO_TOOLS_SHA256"] == sha256(built_bundle() / MANIFEST)
    assert f"/studio-tools/{name}/" in json.dumps(variables["STUDIO_TOOLS_S3_URI"])
    assert body.index('bash "${!scripts}/studio_tools.sh"') < body.index("exec bash")
    assert "EKSCTL_S3_URI" not in body  # off by default
    # StudioLifecycleConfigContent is at most 16,384 characters of base64, with each deploy-time value filled in
    # (here at 128 characters each): the wheels' digests travel in SHA256SUMS, not in the lifecycle config.
    filled = re.sub(r"\$\{[A-Za-z0-9_:]+\}", "x" * 128, body)
    assert len(base64.b64encode(filled.encode())) <= 16384
    deployments = {
        r["Properties"]["DestinationBucketKeyPrefix"]: r
        for r in t["Resources"].values()
        if r["Type"] == "Custom::CDKBucketDeployment"
    }
    assert set(deployments) == {f"studio/{name}/", f"studio-tools/{name}/"}
    assets = {h: a for m in s.out_dir.glob("*.assets.json") for h, a in json.loads(m.read_text())["files"].items()}
    (key,) = deployments[f"studio-tools/{name}/"]["Properties"]["SourceObjectKeys"]
    assert deployments[f"studio-tools/{name}/"]["Properties"].get("Extract", True) is not False  # unzipped there
    # One file asset, hashed by the zip's own sha256 (AssetHashType.CUSTOM): staged as it is, uploaded as it is.
    source = assets[key.split(".")[0]]["source"]
    assert source["packaging"] == "file" and source["path"].endswith(".zip")
    staged = s.out_dir / source["path"]
    assert sha256(staged) == digest_file(BUNDLE_ZIP).read_text().split()[0]
    if staged.stat().st_dev == BUNDLE_ZIP.stat().st_dev:  # linked, not copied (constructs/lifecycle_scripts.py)
        assert staged.stat().st_ino == BUNDLE_ZIP.stat().st_ino
    statements = [
        st
        for r in t["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for st in r["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid") == "ReadStudioTools"
    ]
    assert statements and all(
        st["Action"] == "s3:GetObject" and f"studio-tools/{name}/*" in json.dumps(st["Resource"]) for st in statements
    )


def test_eksctl_switch_ships_the_tarball_and_hands_its_uri_and_digest_to_the_eks_script(tmp_path):
    """Construct level (no GitHub here): the artifact, however it was checked, lands under eksctl/ of the tools
    prefix, and eks_login_node.sh gets EKSCTL_S3_URI and EKSCTL_SHA256."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Template
    from constructs.studio_lifecycle_configs import EKS_ENTRY_POINT, StudioLifecycleConfigs

    (tmp_path / "eksctl").mkdir()
    tarball = tmp_path / "eksctl" / PINS["eksctl"]["file"]
    tarball.write_bytes(b"eksctl stand-in")
    eksctl = EksctlArtifact(directory=tmp_path, key=f"eksctl/{tarball.name}", sha256=sha256(tarball), version="v0")
    archive = small_zip(tmp_path / "b")
    stack = cdk.Stack(cdk.App(), "T")
    StudioLifecycleConfigs(
        stack,
        "L",
        name="ml-cluster",
        bucket=s3.Bucket.from_bucket_name(stack, "B", "bucket"),
        entry_point=EKS_ENTRY_POINT,
        upload_role_name="upload",
        environment={},
        tools=studio_tools_bundle(archive),
        eksctl=eksctl,
    )
    template = Template.from_stack(stack).to_json()
    body, variables = _lifecycle_body(template)
    assert variables["EKSCTL_SHA256"] == sha256(tarball)
    assert variables["EKSCTL_S3_URI"] == f"s3://bucket/studio-tools/ml-cluster/eksctl/{tarball.name}"
    (deployment,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "Custom::CDKBucketDeployment"
        and r["Properties"]["DestinationBucketKeyPrefix"] == "studio-tools/ml-cluster/"
    ]
    assert len(deployment["Properties"]["SourceObjectKeys"]) == 2  # the hyp/jq zip and the eksctl directory
