"""The Studio tools bundle: the HyperPod CLI (`hyp`) as a hash-locked wheelhouse, a static jq and, when
`studio.tools.eksctl` is on, eksctl's release tarball. tools/build_studio_tools.py builds the bundle from PyPI into
build/studio-tools/ and tools/pack_studio_tools.py packs that directory into one deterministic zip,
build/studio-tools.zip, with its sha256 beside it (`make studio-tools` runs both); eksctl comes from
`make studio-eksctl`. Synth checks the zip and eksctl against the committed pins and ships them to the lifecycle
bucket (the zip as one file asset, which BucketDeployment extracts into the tools prefix);
lifecycle/studio/studio_tools.sh installs hyp and jq in the space, lifecycle/studio/eks_login_node.sh eksctl, all
without internet."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "studio_tools.json"
LOCK_DIR = ROOT / "lifecycle" / "studio_tools"
BUILDER = ROOT / "tools" / "build_studio_tools.py"
BUNDLE_DIR = ROOT / "build" / "studio-tools"
BUNDLE_ZIP = ROOT / "build" / "studio-tools.zip"  # BUNDLE_DIR as one zip; its sha256 in studio-tools.zip.sha256
EKSCTL_DIR = ROOT / "build" / "studio-eksctl"
MANIFEST = "SHA256SUMS"
INPUTS = "BUILD_INPUTS"


class StudioToolsError(ValueError):
    """The bundle is missing, stale or altered: synth stops with what to run."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# (path, device, inode, size, mtime, ctime) -> sha256, for files this process has hashed. Any write to a file or
# replacement of it changes its ctime (which no system call sets; only changing the clock could forge it), so a file
# that still has the same key still has the same bytes. Tests synthesize dozens of apps in one process: one hash.
_HASHED: dict[tuple, str] = {}


def _key(path: Path, st: os.stat_result) -> tuple:
    return (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def sha256_once(path: Path) -> str:
    """sha256(path), computed once per process for as long as the file is unchanged."""
    key = _key(path, path.stat())
    if key not in _HASHED:
        _HASHED[key] = sha256(path)
    return _HASHED[key]


def link_keeping_digest(source: Path, link: Path) -> None:
    """os.link(source, link). A link, and its removal (unlink_keeping_digest), changes the ctime of the same bytes,
    and every synthesis links the Studio tools zip into its assembly (one 115 MB hash each again): the digest
    sha256_once holds for `source` is kept for its new ctime when nothing else moved (same inode, size and mtime).
    Only a write that also put the mtime back, between the two stats around the link, would go unseen."""
    before = source.stat()
    os.link(source, link)
    _keep_digest(source, before, source.stat())


def unlink_keeping_digest(link: Path, source: Path) -> None:
    """link.unlink() of a link to `source` that link_keeping_digest made, the digest of `source` kept as there."""
    before = source.stat()
    link.unlink()
    _keep_digest(source, before, source.stat())


def _keep_digest(source: Path, before: os.stat_result, after: os.stat_result) -> None:
    digest = _HASHED.get(_key(source, before))
    same = (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns)
    if digest is not None and same == (after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns):
        _HASHED[_key(source, after)] = digest


def digest_file(archive: Path) -> Path:
    """Where the packer records the zip's sha256: `<zip>.sha256`, one `sha256sum` line."""
    return archive.with_name(archive.name + ".sha256")


def facts() -> dict:
    return json.loads(FACTS.read_text())


def inputs_digest() -> str:
    """What a bundle is built from: the facts, the hyp locks and the builder."""
    digest = hashlib.sha256()
    for path in [FACTS, *sorted(LOCK_DIR.glob("hyp-cp*.txt")), BUILDER]:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class StudioToolsBundle:
    archive: Path  # one zip of hyp/, jq/, SHA256SUMS, BUILD_INPUTS; extracted into the tools prefix
    archive_sha256: str  # the zip's sha256: its asset hash, so CDK neither fingerprints nor walks anything
    manifest_sha256: str  # STUDIO_TOOLS_SHA256: the space checks SHA256SUMS against it, then every file


@dataclass(frozen=True)
class EksctlArtifact:
    directory: Path  # holds eksctl/<file>
    key: str  # eksctl/<file>, relative to the tools prefix
    sha256: str
    version: str


@dataclass(frozen=True)
class StudioToolArtifacts:
    bundle: StudioToolsBundle | None  # studio.tools.hyp_and_jq
    eksctl: EksctlArtifact | None  # studio.tools.eksctl


def studio_tools_bundle(archive: Path = BUNDLE_ZIP) -> StudioToolsBundle:
    """The packed bundle, refused unless it was built from the committed inputs (its BUILD_INPUTS) and the zip is
    byte for byte the one the packer wrote (its recorded sha256: one hash of one file). The packer made the zip only
    from a directory whose every file matched SHA256SUMS, so its members match too; the space checks them again."""
    rebuild = (
        "run `make studio-tools` (tools/build_studio_tools.py builds the bundle, needs PyPI, gcc and make; "
        "tools/pack_studio_tools.py zips it, offline)"
    )
    record = digest_file(archive)
    if not archive.is_file() or not record.is_file():
        missing = archive if not archive.is_file() else record
        raise StudioToolsError(f"studio.tools: the hyp/jq bundle {missing} is missing; {rebuild}")
    try:
        with zipfile.ZipFile(archive) as opened:
            stamp, manifest = opened.read(INPUTS).decode().strip(), opened.read(MANIFEST)
    except (OSError, KeyError, UnicodeDecodeError, zipfile.BadZipFile) as error:
        raise StudioToolsError(
            f"studio.tools: {archive} is not a bundle the packer wrote ({error}); {rebuild}"
        ) from None
    if stamp != inputs_digest():
        raise StudioToolsError(
            f"studio.tools: {archive} was built from other pins than "
            f"{FACTS.relative_to(ROOT)} and {LOCK_DIR.relative_to(ROOT)}/; {rebuild}"
        )
    expected = (record.read_text().split() or [""])[0]
    actual = sha256_once(archive)
    if actual != expected:
        raise StudioToolsError(
            f"studio.tools: {archive} has sha256 {actual}, not the {expected or 'nothing'} "
            f"{record.name} recorded when it was packed: it was altered; {rebuild}"
        )
    return StudioToolsBundle(
        archive=archive, archive_sha256=actual, manifest_sha256=hashlib.sha256(manifest).hexdigest()
    )


def eksctl_artifact(directory: Path = EKSCTL_DIR) -> EksctlArtifact:
    """eksctl's release tarball as `make studio-eksctl` fetched it, refused unless its sha256 is the pinned one."""
    pin = facts()["eksctl"]
    path = directory / "eksctl" / pin["file"]
    fetch = f"run `make studio-eksctl` on a machine that reaches github.com, or copy {pin['url']} there yourself"
    if not path.is_file():
        raise StudioToolsError(f"studio.tools.eksctl: true needs eksctl {pin['version']} at {path}; {fetch}")
    actual = sha256_once(path)
    if actual != pin["sha256"]:
        raise StudioToolsError(
            f"studio.tools.eksctl: {path} has sha256 {actual}; eksctl {pin['version']} is "
            f"{pin['sha256']} ({FACTS.relative_to(ROOT)}); {fetch}"
        )
    return EksctlArtifact(directory=directory, key=f"eksctl/{pin['file']}", sha256=actual, version=pin["version"])
