"""The Studio tools' zip (hyp and jq, as synth ships them): synth's refusals of a missing, stale or altered zip, the
packer's deterministic zip and its refusals of a damaged directory, and the zip staged into an assembly by a link.
The built bundle and its offline install: test_studio_tools.py; the config's switch and the lifecycle configs:
test_studio_tools_config.py."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from constructs import studio_tools
from constructs.studio_tools import (
    INPUTS,
    MANIFEST,
    StudioToolsError,
    digest_file,
    inputs_digest,
    sha256,
    studio_tools_bundle,
)
from support.studio_bundles import files_of, small_bundle, small_zip
from support.variants import NO_ASSET_STAGING
from tools.pack_studio_tools import PackError, pack


def _flip_a_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_synth_accepts_the_packed_bundle_and_takes_its_digests_from_it(tmp_path):
    archive = small_zip(tmp_path)
    bundle = studio_tools_bundle(archive)
    assert bundle.archive == archive
    assert bundle.archive_sha256 == sha256(archive) == digest_file(archive).read_text().split()[0]
    assert bundle.manifest_sha256 == sha256(tmp_path / "bundle" / MANIFEST)  # STUDIO_TOOLS_SHA256


def test_synth_refuses_a_missing_zip_naming_what_to_run(tmp_path):
    """Also what a checkout that has only the directory of an earlier version sees: `make studio-tools` packs it."""
    small_bundle(tmp_path)
    with pytest.raises(
        StudioToolsError,
        match=r"studio.tools: the hyp/jq bundle .*/studio-tools.zip is missing; "
        r"run `make studio-tools`",
    ):
        studio_tools_bundle(tmp_path / "studio-tools.zip")
    archive = small_zip(tmp_path / "2")
    digest_file(archive).unlink()
    with pytest.raises(StudioToolsError, match=r"bundle .*/studio-tools.zip.sha256 is missing; run `make studio-tool"):
        studio_tools_bundle(archive)


def test_synth_refuses_an_altered_zip(tmp_path):
    """One byte of a member's data changed: the zip still opens and its BUILD_INPUTS is current, only the one hash of
    the whole file tells."""
    archive = small_zip(tmp_path)
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
    archive = small_zip(tmp_path, inputs="0" * 64)
    with pytest.raises(
        StudioToolsError,
        match=r"studio-tools.zip was built from other pins than "
        r"config/facts/studio_tools.json and lifecycle/studio_tools/; "
        r"run `make studio-tools`",
    ):
        studio_tools_bundle(archive)


def test_an_altered_zip_is_refused_again_in_the_same_process(tmp_path):
    """Synth hashes the zip once per process (tests synthesize dozens of apps); any write to it is seen."""
    archive = small_zip(tmp_path)
    studio_tools_bundle(archive)
    with zipfile.ZipFile(archive) as opened:
        member = opened.getinfo("jq/jq")
    _flip_a_byte(archive, member.header_offset + 30 + len(member.filename))
    with pytest.raises(StudioToolsError, match="it was altered"):
        studio_tools_bundle(archive)


def test_the_packer_refuses_a_damaged_directory(tmp_path):
    bundle = small_bundle(tmp_path / "1")
    (bundle / "jq" / "jq").write_bytes(b"jq stand-in, altered")
    with pytest.raises(PackError, match=r"jq/jq does not match its sha256 in SHA256SUMS"):
        pack(bundle, tmp_path / "1" / "out.zip")
    assert not list((tmp_path / "1").glob("*out.zip*"))  # nothing left behind
    bundle = small_bundle(tmp_path / "2")
    (bundle / "extra").write_text("not listed")
    with pytest.raises(PackError, match=r"holds files its SHA256SUMS does not list .*'extra'"):
        pack(bundle, tmp_path / "2" / "out.zip")
    with pytest.raises(PackError, match=r"has no SHA256SUMS or BUILD_INPUTS: build it first"):
        pack(tmp_path / "missing", tmp_path / "out.zip")


def test_the_zip_is_deterministic_and_extracts_to_exactly_the_bundle(tmp_path):
    """Same files, other timestamps, umask and order on disk: the same bytes. Stored, sorted, one fixed time, 0644
    or 0755, no directories; extracted as BucketDeployment's handler extracts a source (ZipFile.extractall), it gives
    the bundle's files, every one, and nothing else."""
    first = small_zip(tmp_path / "1")
    old = os.umask(0o077)
    try:
        bundle = small_bundle(tmp_path / "2")
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
    assert names == sorted(names) == sorted(files_of(tmp_path / "1" / "bundle"))
    assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in infos if i.external_attr >> 16 & 0o111} == {
        "jq/jq": 0o755
    }
    assert files_of(tmp_path / "extracted") == files_of(tmp_path / "1" / "bundle")


def test_the_packer_rewrites_only_what_is_missing_altered_or_of_another_build(tmp_path):
    archive = small_zip(tmp_path)
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
    archive = small_zip(tmp_path)
    app = _tools_stack(tmp_path, archive)
    assembly = Path(app.synth().directory)
    (staged,) = [p for p in assembly.glob("asset.*.zip") if sha256(p) == sha256(archive)]
    assert staged.stat().st_ino == archive.stat().st_ino


def test_linking_the_zip_into_assemblies_does_not_hash_it_again(tmp_path, monkeypatch):
    """Each synthesis links the zip into its assembly, and removes the link again where asset staging is off (as the
    day-2 matrix synthesizes): both change the zip's ctime, not its bytes, and the process hashes the zip once (the
    real one is 115 MB). Written in place after that, it is hashed again
    (test_an_altered_zip_is_refused_again_in_the_same_process)."""
    archive = small_zip(tmp_path)
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

    archive = small_zip(tmp_path)
    monkeypatch.setattr(
        lifecycle_scripts,
        "_staged_zip",
        lambda scope, digest: Path(lifecycle_scripts.cdk.Stage.of(scope).asset_outdir) / "asset.x.zip",
    )
    assembly = Path(_tools_stack(tmp_path, archive).synth().directory)
    assert not (assembly / "asset.x.zip").exists()
    (staged,) = [p for p in assembly.glob("asset.*.zip") if sha256(p) == sha256(archive)]
    assert staged.stat().st_ino != archive.stat().st_ino
