"""Studio tools (hyp, jq, eksctl): the locks against the pinned wheel's own metadata, synth's refusals of a missing,
stale or altered bundle, the switch in the config, what the synthesized lifecycle configs carry, and a real offline
install of the built bundle by lifecycle/studio/studio_tools.sh (`make studio-tools` builds it; `make test` does)."""
from __future__ import annotations

import base64
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from constructs import studio_tools
from constructs.studio_tools import (BUNDLE_DIR, FACTS, INPUTS, LOCK_DIR, MANIFEST, EksctlArtifact, StudioToolsBundle,
                                     StudioToolsError, eksctl_artifact, inputs_digest, sha256, studio_tools_bundle)
from platform_config import ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent
PINS = json.loads(FACTS.read_text())
LOCK_LINE = re.compile(r"^([a-z0-9-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})", re.M)
SCRIPT = ROOT / "lifecycle" / "studio" / "studio_tools.sh"


def _built() -> Path:
    if not (BUNDLE_DIR / MANIFEST).is_file():
        pytest.fail(f"{BUNDLE_DIR} is missing: run `make studio-tools` (make test and make synth do)")
    return BUNDLE_DIR


def _lock(python_tag: str) -> dict[str, tuple[str, str]]:
    text = (LOCK_DIR / f"hyp-{python_tag}.txt").read_text()
    return {name: (version, digest) for name, version, digest in LOCK_LINE.findall(text)}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("python_tag", ["cp311", "cp312"])
def test_each_lock_holds_every_requirement_of_the_pinned_wheel_but_the_documented_one(python_tag):
    """Read from the wheel itself (in the built bundle, whose sha256 is the pinned one): every Requires-Dist is in the
    lock at a version it allows, except `left_out`, which neither the lock nor any module of the wheel has."""
    wheel = _built() / "hyp" / "wheels" / PINS["hyp"]["wheel"]
    assert sha256(wheel) == PINS["hyp"]["sha256"]
    lock = _lock(python_tag)
    assert lock[PINS["hyp"]["distribution"]] == (PINS["hyp"]["version"], PINS["hyp"]["sha256"])
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = email.parser.Parser().parsestr(archive.read(meta).decode()).get_all("Requires-Dist")
        sources = "\n".join(archive.read(n).decode() for n in archive.namelist() if n.endswith(".py"))
    left_out = {_canonical(Requirement(r).name) for r in PINS["hyp"]["left_out"]}
    assert left_out == {"zstandard"}
    for text in requires:
        requirement = Requirement(text)
        name = _canonical(requirement.name)
        if name in left_out:
            assert name not in lock
            assert not re.search(rf"^\s*(import|from)\s+{name}\b", sources, re.M)
            continue
        assert name in lock, f"{text} is not in hyp-{python_tag}.txt"
        assert requirement.specifier.contains(lock[name][0], prereleases=True), (text, lock[name][0])


def test_the_bundle_matches_the_committed_pins():
    bundle = studio_tools_bundle()
    assert bundle.manifest_sha256 == sha256(_built() / MANIFEST)
    listed = dict(line.split("  ")[::-1] for line in (BUNDLE_DIR / MANIFEST).read_text().splitlines())
    for tag in ("cp311", "cp312"):
        installs = dict(re.findall(r"^([a-z0-9-]+)==\S+ --hash=sha256:([0-9a-f]{64})$",
                                   (BUNDLE_DIR / "hyp" / f"requirements-{tag}.txt").read_text(), re.M))
        lock = _lock(tag)
        assert set(installs) == set(lock)
        # Wheels from PyPI keep PyPI's digest; only the four source-only distributions were built here.
        rebuilt = {name for name, digest in installs.items() if digest != lock[name][1]}
        assert rebuilt == {"antlr4-python3-runtime", "awscli-cwlogs", "pytest-dependency", "ratelimit"}
        assert set(installs.values()) <= {d for n, d in listed.items() if n.startswith("hyp/wheels/")}


def _small_bundle(tmp_path: Path) -> Path:
    """A bundle laid out like the real one (its BUILD_INPUTS is the committed inputs'), small enough to alter."""
    bundle = tmp_path / "bundle"
    (bundle / "jq").mkdir(parents=True)
    (bundle / "jq" / "jq").write_bytes(b"jq stand-in")
    (bundle / MANIFEST).write_text(f"{sha256(bundle / 'jq' / 'jq')}  jq/jq\n")
    (bundle / INPUTS).write_text(inputs_digest() + "\n")
    return bundle


def test_synth_refuses_a_missing_stale_or_altered_bundle(tmp_path):
    bundle = _small_bundle(tmp_path)
    assert studio_tools_bundle(bundle).manifest_sha256 == sha256(bundle / MANIFEST)
    with pytest.raises(StudioToolsError, match=r"studio.tools: .*/missing is missing; run `make studio-tools`"):
        studio_tools_bundle(tmp_path / "missing")
    (bundle / "jq" / "jq").write_bytes(b"jq stand-in, altered")
    with pytest.raises(StudioToolsError, match=r"jq/jq does not match its sha256 in SHA256SUMS"):
        studio_tools_bundle(bundle)
    bundle = _small_bundle(tmp_path / "2")
    (bundle / "extra").write_text("not listed")
    with pytest.raises(StudioToolsError, match=r"holds files its SHA256SUMS does not list .*'extra'"):
        studio_tools_bundle(bundle)
    bundle = _small_bundle(tmp_path / "3")
    (bundle / INPUTS).write_text("0" * 64 + "\n")
    with pytest.raises(StudioToolsError, match=r"built from other pins than config/facts/studio_tools.json"):
        studio_tools_bundle(bundle)


def test_eksctl_must_be_the_pinned_release(tmp_path):
    pin = PINS["eksctl"]
    with pytest.raises(StudioToolsError, match=rf"needs eksctl {pin['version']} at .*; run `make studio-eksctl`"):
        eksctl_artifact(tmp_path)
    (tmp_path / "eksctl").mkdir()
    (tmp_path / "eksctl" / pin["file"]).write_bytes(b"not eksctl")
    with pytest.raises(StudioToolsError, match=rf"has sha256 {sha256(tmp_path / 'eksctl' / pin['file'])}; eksctl "
                                               rf"{pin['version']} is {pin['sha256']}"):
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
    assert ("studio.tools.eksctl: true with orchestrator: slurm; eksctl manages EKS clusters. Allowed: true with "
            "orchestrator: eks, false otherwise") in error.value.errors


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
    assert variables["STUDIO_TOOLS_SHA256"] == sha256(_built() / MANIFEST)
    assert f"/studio-tools/{name}/" in json.dumps(variables["STUDIO_TOOLS_S3_URI"])
    assert body.index('bash "${!scripts}/studio_tools.sh"') < body.index("exec bash")
    assert "EKSCTL_S3_URI" not in body  # off by default
    # StudioLifecycleConfigContent is at most 16,384 characters of base64, with each deploy-time value filled in
    # (here at 128 characters each): the wheels' digests travel in SHA256SUMS, not in the lifecycle config.
    filled = re.sub(r"\$\{[A-Za-z0-9_:]+\}", "x" * 128, body)
    assert len(base64.b64encode(filled.encode())) <= 16384
    deployments = {r["Properties"]["DestinationBucketKeyPrefix"]: r for r in t["Resources"].values()
                   if r["Type"] == "Custom::CDKBucketDeployment"}
    assert set(deployments) == {f"studio/{name}/", f"studio-tools/{name}/"}
    assets = {h: a for m in s.out_dir.glob("*.assets.json") for h, a in json.loads(m.read_text())["files"].items()}
    (key,) = deployments[f"studio-tools/{name}/"]["Properties"]["SourceObjectKeys"]
    shipped = s.out_dir / assets[key.split(".")[0]]["source"]["path"]
    assert (shipped / MANIFEST).read_bytes() == (BUNDLE_DIR / MANIFEST).read_bytes()
    statements = [st for r in t["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  for st in r["Properties"]["PolicyDocument"]["Statement"] if st.get("Sid") == "ReadStudioTools"]
    assert statements and all(st["Action"] == "s3:GetObject" and
                              f"studio-tools/{name}/*" in json.dumps(st["Resource"]) for st in statements)


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
    bundle = _small_bundle(tmp_path / "b")
    stack = cdk.Stack(cdk.App(), "T")
    StudioLifecycleConfigs(stack, "L", name="ml-cluster", bucket=s3.Bucket.from_bucket_name(stack, "B", "bucket"),
                           entry_point=EKS_ENTRY_POINT, upload_role_name="upload", environment={},
                           tools=StudioToolsBundle(directory=bundle, manifest_sha256=sha256(bundle / MANIFEST)),
                           eksctl=eksctl)
    template = Template.from_stack(stack).to_json()
    body, variables = _lifecycle_body(template)
    assert variables["EKSCTL_SHA256"] == sha256(tarball)
    assert variables["EKSCTL_S3_URI"] == f"s3://bucket/studio-tools/ml-cluster/eksctl/{tarball.name}"
    (deployment,) = [r for r in template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment"
                     and r["Properties"]["DestinationBucketKeyPrefix"] == "studio-tools/ml-cluster/"]
    assert len(deployment["Properties"]["SourceObjectKeys"]) == 2  # the hyp/jq bundle and the eksctl directory


def test_the_built_bundle_installs_offline_and_hyp_and_jq_run(tmp_path):
    """The real bundle, through the real installer, in a network namespace without any network and with no index
    (pip --no-index, no pip configuration): a venv for this Python, hyp answering --help, the static jq 1.8.2."""
    bundle = _built()
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "STUDIO_TOOLS_SOURCE_DIR": str(bundle), "STUDIO_TOOLS_SHA256": sha256(bundle / MANIFEST),
           "STUDIO_TOOLS_FOREGROUND": "1", "STUDIO_TOOLS_PYTHON": shutil.which("python3.11") or sys.executable,
           "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull}
    run = subprocess.run(["unshare", "--net", "bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    hyp = subprocess.run(["unshare", "--net", str(home / ".local" / "bin" / "hyp"), "--help"], capture_output=True,
                         text=True, env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert hyp.returncode == 0 and "Usage: hyp" in hyp.stdout, hyp.stdout + hyp.stderr
    jq = home / ".local" / "bin" / "jq"
    assert subprocess.run([str(jq), "--version"], capture_output=True, text=True).stdout.strip() == "jq-1.8.2"
    assert subprocess.run([str(jq), "-r", ".a.b"], input='{"a": {"b": "ok"}}', capture_output=True,
                          text=True).stdout == "ok\n"
    (venv,) = (home / ".studio-tools").glob("hyp-*")
    check = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    # The one requirement left out on purpose, and nothing else.
    assert check.stdout.strip() == "sagemaker-hyperpod 3.12.0 requires zstandard, which is not installed.", check.stdout
