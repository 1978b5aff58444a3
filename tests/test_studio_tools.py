"""Studio tools (hyp, jq, eksctl): the locks against the pinned wheel's own metadata, the packer's deterministic zip
and its refusals of a damaged directory, synth's refusals of a missing, stale or altered zip, the switch in the
config, what the synthesized lifecycle configs carry and ship, and a real offline install of the built bundle by
lifecycle/studio/studio_tools.sh (`make studio-tools` builds and packs it; `make test` does)."""

from __future__ import annotations

import base64
import email.parser
import json
import os
import re
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from constructs import studio_tools
from constructs.studio_tools import (
    BUNDLE_DIR,
    BUNDLE_ZIP,
    FACTS,
    INPUTS,
    LOCK_DIR,
    MANIFEST,
    EksctlArtifact,
    StudioToolsError,
    digest_file,
    eksctl_artifact,
    inputs_digest,
    sha256,
    studio_tools_bundle,
)
from platform_config import ConfigError, load_config
from support.paths import in_memory_dir
from support.variants import NO_ASSET_STAGING
from tools.pack_studio_tools import PackError, pack

ROOT = Path(__file__).resolve().parent.parent
PINS = json.loads(FACTS.read_text())
LOCK_LINE = re.compile(r"^([a-z0-9-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})", re.M)
SCRIPT = ROOT / "lifecycle" / "studio" / "studio_tools.sh"


def _built() -> Path:
    if not (BUNDLE_DIR / MANIFEST).is_file() or not digest_file(BUNDLE_ZIP).is_file():
        pytest.fail(f"{BUNDLE_DIR} or {BUNDLE_ZIP} is missing: run `make studio-tools` (make test and make synth do)")
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
    # The installer the space runs from its wheel (studio_tools.sh), pinned like every other wheel.
    installer = PINS["hyp"]["installer"]
    assert lock[installer["distribution"]] == (installer["version"], installer["sha256"])
    assert sha256(_built() / "hyp" / "wheels" / installer["wheel"]) == installer["sha256"]
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
        installs = dict(
            re.findall(
                r"^([a-z0-9-]+)==\S+ --hash=sha256:([0-9a-f]{64})$",
                (BUNDLE_DIR / "hyp" / f"requirements-{tag}.txt").read_text(),
                re.M,
            )
        )
        lock = _lock(tag)
        assert set(installs) == set(lock)
        # Wheels from PyPI keep PyPI's digest; only the four source-only distributions were built here.
        rebuilt = {name for name, digest in installs.items() if digest != lock[name][1]}
        assert rebuilt == {"antlr4-python3-runtime", "awscli-cwlogs", "pytest-dependency", "ratelimit"}
        assert set(installs.values()) <= {d for n, d in listed.items() if n.startswith("hyp/wheels/")}


def _small_bundle(tmp_path: Path, inputs: str | None = None) -> Path:
    """A bundle laid out like the real one (its BUILD_INPUTS is the committed inputs'), small enough to alter."""
    bundle = tmp_path / "bundle"
    (bundle / "jq").mkdir(parents=True)
    (bundle / "hyp" / "wheels").mkdir(parents=True)
    (bundle / "jq" / "jq").write_bytes(b"jq stand-in")
    (bundle / "jq" / "jq").chmod(0o755)
    (bundle / "hyp" / "wheels" / "a-1-py3-none-any.whl").write_bytes(b"wheel stand-in " * 100)
    (bundle / "hyp" / "requirements-cp311.txt").write_text("a==1\n")
    (bundle / MANIFEST).write_text(
        "".join(
            f"{sha256(bundle / n)}  {n}\n"
            for n in ["hyp/requirements-cp311.txt", "hyp/wheels/a-1-py3-none-any.whl", "jq/jq"]
        )
    )
    (bundle / INPUTS).write_text((inputs or inputs_digest()) + "\n")
    return bundle


def _small_zip(tmp_path: Path, inputs: str | None = None) -> Path:
    """_small_bundle packed as `make studio-tools` packs the real one: tmp_path/studio-tools.zip and its .sha256."""
    archive = tmp_path / "studio-tools.zip"
    assert pack(_small_bundle(tmp_path, inputs), archive)
    return archive


def _files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def _flip_a_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_synth_accepts_the_packed_bundle_and_takes_its_digests_from_it(tmp_path):
    archive = _small_zip(tmp_path)
    bundle = studio_tools_bundle(archive)
    assert bundle.archive == archive
    assert bundle.archive_sha256 == sha256(archive) == digest_file(archive).read_text().split()[0]
    assert bundle.manifest_sha256 == sha256(tmp_path / "bundle" / MANIFEST)  # STUDIO_TOOLS_SHA256


def test_synth_refuses_a_missing_zip_naming_what_to_run(tmp_path):
    """Also what a checkout that has only the directory of an earlier version sees: `make studio-tools` packs it."""
    _small_bundle(tmp_path)
    with pytest.raises(
        StudioToolsError,
        match=r"studio.tools: the hyp/jq bundle .*/studio-tools.zip is missing; "
        r"run `make studio-tools`",
    ):
        studio_tools_bundle(tmp_path / "studio-tools.zip")
    archive = _small_zip(tmp_path / "2")
    digest_file(archive).unlink()
    with pytest.raises(StudioToolsError, match=r"bundle .*/studio-tools.zip.sha256 is missing; run `make studio-tool"):
        studio_tools_bundle(archive)


def test_synth_refuses_an_altered_zip(tmp_path):
    """One byte of a member's data changed: the zip still opens and its BUILD_INPUTS is current, only the one hash of
    the whole file tells."""
    archive = _small_zip(tmp_path)
    recorded = digest_file(archive).read_text().split()[0]
    with zipfile.ZipFile(archive) as opened:
        member = opened.getinfo("hyp/wheels/a-1-py3-none-any.whl")
    _flip_a_byte(archive, member.header_offset + 30 + len(member.filename) + 5)  # in the stored data
    with zipfile.ZipFile(archive) as opened:
        assert opened.read(INPUTS).decode().strip() == inputs_digest()
    with pytest.raises(
        StudioToolsError,
        match=rf"studio-tools.zip has sha256 {sha256(archive)}, not the {recorded} "
        r"studio-tools.zip.sha256 recorded when it was packed: it was altered; "
        r"run `make studio-tools`",
    ):
        studio_tools_bundle(archive)
    archive.write_bytes(b"not a zip")
    with pytest.raises(StudioToolsError, match=r"studio-tools.zip is not a bundle the packer wrote .*; run `make"):
        studio_tools_bundle(archive)


def test_synth_refuses_a_zip_built_from_other_pins(tmp_path):
    archive = _small_zip(tmp_path, inputs="0" * 64)
    with pytest.raises(
        StudioToolsError,
        match=r"studio-tools.zip was built from other pins than "
        r"config/facts/studio_tools.json and lifecycle/studio_tools/; "
        r"run `make studio-tools`",
    ):
        studio_tools_bundle(archive)


def test_an_altered_zip_is_refused_again_in_the_same_process(tmp_path):
    """Synth hashes the zip once per process (tests synthesize dozens of apps); any write to it is seen."""
    archive = _small_zip(tmp_path)
    studio_tools_bundle(archive)
    with zipfile.ZipFile(archive) as opened:
        member = opened.getinfo("jq/jq")
    _flip_a_byte(archive, member.header_offset + 30 + len(member.filename))
    with pytest.raises(StudioToolsError, match="it was altered"):
        studio_tools_bundle(archive)


def test_the_packer_refuses_a_damaged_directory(tmp_path):
    bundle = _small_bundle(tmp_path / "1")
    (bundle / "jq" / "jq").write_bytes(b"jq stand-in, altered")
    with pytest.raises(PackError, match=r"jq/jq does not match its sha256 in SHA256SUMS"):
        pack(bundle, tmp_path / "1" / "out.zip")
    assert not list((tmp_path / "1").glob("*out.zip*"))  # nothing left behind
    bundle = _small_bundle(tmp_path / "2")
    (bundle / "extra").write_text("not listed")
    with pytest.raises(PackError, match=r"holds files its SHA256SUMS does not list .*'extra'"):
        pack(bundle, tmp_path / "2" / "out.zip")
    with pytest.raises(PackError, match=r"has no SHA256SUMS or BUILD_INPUTS: build it first"):
        pack(tmp_path / "missing", tmp_path / "out.zip")


def test_the_zip_is_deterministic_and_extracts_to_exactly_the_bundle(tmp_path):
    """Same files, other timestamps, umask and order on disk: the same bytes. Stored, sorted, one fixed time, 0644
    or 0755, no directories; extracted as BucketDeployment's handler extracts a source (ZipFile.extractall), it gives
    the bundle's files, every one, and nothing else."""
    first = _small_zip(tmp_path / "1")
    old = os.umask(0o077)
    try:
        bundle = _small_bundle(tmp_path / "2")
    finally:
        os.umask(old)
    for path in bundle.rglob("*"):
        os.utime(path, (1_800_000_000, 1_800_000_000))
    second = tmp_path / "2" / "studio-tools.zip"
    pack(bundle, second)
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as opened:
        infos = opened.infolist()
        opened.extractall(tmp_path / "extracted")
    names = [i.filename for i in infos]
    assert names == sorted(names) == sorted(_files(tmp_path / "1" / "bundle"))
    assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in infos if i.external_attr >> 16 & 0o111} == {
        "jq/jq": 0o755
    }
    assert _files(tmp_path / "extracted") == _files(tmp_path / "1" / "bundle")


def test_the_packer_rewrites_only_what_is_missing_altered_or_of_another_build(tmp_path):
    archive = _small_zip(tmp_path)
    bundle, packed = tmp_path / "bundle", archive.read_bytes()
    assert not pack(bundle, archive)  # up to date: nothing written
    with zipfile.ZipFile(archive) as opened:
        member = opened.getinfo("hyp/wheels/a-1-py3-none-any.whl")
    _flip_a_byte(archive, member.header_offset + 30 + len(member.filename))  # BUILD_INPUTS and SHA256SUMS intact
    assert pack(bundle, archive) and archive.read_bytes() == packed
    _flip_a_byte(archive, 100)  # in BUILD_INPUTS: the zip no longer reads
    assert pack(bundle, archive) and archive.read_bytes() == packed
    digest_file(archive).unlink()
    assert pack(bundle, archive) and studio_tools_bundle(archive)
    (bundle / INPUTS).write_text("1" * 64 + "\n")  # the directory was rebuilt
    assert pack(bundle, archive)
    with zipfile.ZipFile(archive) as opened:
        assert opened.read(INPUTS) == b"1" * 64 + b"\n"


def test_the_built_zip_is_the_packing_of_the_built_bundle(tmp_path):
    """What synth ships is exactly build/studio-tools/: packing it again gives the recorded sha256, and the zip
    extracts to its files."""
    bundle = studio_tools_bundle()
    assert bundle.archive_sha256 == digest_file(BUNDLE_ZIP).read_text().split()[0]
    again = tmp_path / "again.zip"
    pack(_built(), again, force=True)
    assert sha256(again) == bundle.archive_sha256
    with zipfile.ZipFile(BUNDLE_ZIP) as opened:
        assert sorted(opened.namelist()) == sorted(_files(BUNDLE_DIR))


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
    assert variables["STUDIO_TOOLS_SHA256"] == sha256(_built() / MANIFEST)
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
    archive = _small_zip(tmp_path / "b")
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


def _tools_stack(tmp_path: Path, archive: Path, *, stage_assets: bool = True):
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from constructs.studio_lifecycle_configs import SLURM_ENTRY_POINT, StudioLifecycleConfigs

    app = cdk.App(outdir=str(tmp_path / "out"), context={} if stage_assets else NO_ASSET_STAGING)
    stack = cdk.Stack(app, "T")
    StudioLifecycleConfigs(
        stack,
        "L",
        name="ml-cluster",
        bucket=s3.Bucket.from_bucket_name(stack, "B", "bucket"),
        entry_point=SLURM_ENTRY_POINT,
        upload_role_name="upload",
        environment={},
        tools=studio_tools_bundle(archive),
    )
    return app


def test_the_zip_is_staged_by_a_link_not_a_copy(tmp_path):
    archive = _small_zip(tmp_path)
    app = _tools_stack(tmp_path, archive)
    assembly = Path(app.synth().directory)
    (staged,) = [p for p in assembly.glob("asset.*.zip") if sha256(p) == sha256(archive)]
    assert staged.stat().st_ino == archive.stat().st_ino


def test_linking_the_zip_into_assemblies_does_not_hash_it_again(tmp_path, monkeypatch):
    """Each synthesis links the zip into its assembly, and removes the link again where asset staging is off (as the
    day-2 matrix synthesizes): both change the zip's ctime, not its bytes, and the process hashes the zip once (the
    real one is 115 MB). Written in place after that, it is hashed again
    (test_an_altered_zip_is_refused_again_in_the_same_process)."""
    archive = _small_zip(tmp_path)
    hashed: list[Path] = []
    monkeypatch.setattr(studio_tools, "sha256", lambda path: hashed.append(path) or sha256(path))
    for n, staging in enumerate([True, False, True, False]):
        assembly = Path(_tools_stack(tmp_path / str(n), archive, stage_assets=staging).synth().directory)
        linked = [p for p in assembly.glob("asset.*.zip") if p.stat().st_ino == archive.stat().st_ino]
        assert len(linked) == (1 if staging else 0)
    assert archive.stat().st_nlink == 3
    assert [path for path in hashed if path == archive] == [archive]


def test_a_link_cdk_does_not_use_is_removed_and_cdk_copies(tmp_path, monkeypatch):
    """As if a future aws-cdk-lib named staged assets otherwise: the link under the expected name is removed again
    and the assembly holds CDK's own copy."""
    from constructs import lifecycle_scripts

    archive = _small_zip(tmp_path)
    monkeypatch.setattr(
        lifecycle_scripts,
        "_staged_zip",
        lambda scope, digest: Path(lifecycle_scripts.cdk.Stage.of(scope).asset_outdir) / "asset.x.zip",
    )
    assembly = Path(_tools_stack(tmp_path, archive).synth().directory)
    assert not (assembly / "asset.x.zip").exists()
    (staged,) = [p for p in assembly.glob("asset.*.zip") if sha256(p) == sha256(archive)]
    assert staged.stat().st_ino != archive.stat().st_ino


@pytest.fixture
def install_home(tmp_path) -> Iterator[Path]:
    """The home the offline install writes into: ~600 MB in ~23,000 files (the bundle's copy, hyp's venv), in memory
    when there is room (support.paths.in_memory_dir). The same pip install spent 1.3-1.4 s of system CPU in /dev/shm
    and 2.9-12.5 s under /tmp, its removal 0.3 against 0.7-0.8 s (back to back on this machine)."""
    with in_memory_dir(tmp_path, 2 * 2**30) as directory:
        yield directory / "home"


def test_the_built_bundle_installs_offline_and_hyp_and_jq_run(tmp_path, install_home):
    """The real bundle, through the real installer, in a network namespace without any network and with no index
    (pip --no-index, no pip configuration): a venv for this Python, hyp answering --help (run by the installer
    before it links ~/.local/bin/hyp to it), the static jq 1.8.2. The installer is the bundle's pinned pip, run from
    its wheel: a `pip` that fails stands first on PYTHONPATH, so a `python -m pip` of the venv (ensurepip's pip)
    would fail, while pip run from its wheel puts the wheel first; the venv then holds the lock's pip.
    pip leaves the installed modules uncompiled here (PIP_NO_COMPILE=0: pip reads a --no-* option's variable as
    the value of the option it negates, so 0 is --no-compile): byte-compiling hyp's 6,499 modules is pip's own work,
    not the installer's, and was most of this test's CPU (measured: docs/testing.md); what hyp imports compiles when
    it runs, without writing its bytecode (PYTHONDONTWRITEBYTECODE: nothing runs it a second time). The Python is
    this one's base interpreter itself, not a launcher in front of it (pyenv's python3.11 shim is a bash script that
    starts several processes each time the installer runs Python)."""
    bundle = _built()
    home = install_home
    home.mkdir()
    not_the_bundles = tmp_path / "shadow" / "pip"
    not_the_bundles.mkdir(parents=True)
    (not_the_bundles / "__init__.py").write_text("raise SystemExit('a pip that is not the bundle pip ran')\n")
    env = {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "STUDIO_TOOLS_SOURCE_DIR": str(bundle),
        "STUDIO_TOOLS_SHA256": sha256(bundle / MANIFEST),
        "STUDIO_TOOLS_FOREGROUND": "1",
        "STUDIO_TOOLS_PYTHON": os.path.realpath(sys.executable),
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_COMPILE": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(not_the_bundles.parent),
    }
    run = subprocess.run(
        ["unshare", "--net", "bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (venv,) = (home / ".studio-tools").glob("hyp-*")
    # hyp ran, in the namespace without network: the installer runs it before linking and logs what it printed
    # (a second run here would cost hyp's ~1,240 imports again), and ~/.local/bin/hyp is that same program.
    assert f"[studio-tools] {venv}/bin/hyp --help runs: Usage: hyp [OPTIONS] COMMAND" in run.stdout, run.stdout
    assert os.readlink(home / ".local" / "bin" / "hyp") == str(venv / "bin" / "hyp")
    tag = venv.name.rsplit("-", 1)[1]
    (pip_metadata,) = venv.glob("lib/python3*/site-packages/pip-*.dist-info")
    assert pip_metadata.name == f"pip-{_lock(tag)['pip'][0]}.dist-info"
    assert _lock(tag)["pip"] == (PINS["hyp"]["installer"]["version"], PINS["hyp"]["installer"]["sha256"])
    jq = home / ".local" / "bin" / "jq"
    assert subprocess.run([str(jq), "--version"], capture_output=True, text=True).stdout.strip() == "jq-1.8.2"
    assert (
        subprocess.run([str(jq), "-r", ".a.b"], input='{"a": {"b": "ok"}}', capture_output=True, text=True).stdout
        == "ok\n"
    )
    check = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    # The one requirement left out on purpose, and nothing else.
    assert check.stdout.strip() == "sagemaker-hyperpod 3.12.0 requires zstandard, which is not installed.", check.stdout
