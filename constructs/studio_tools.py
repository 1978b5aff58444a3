"""The Studio tools bundle: the HyperPod CLI (`hyp`) as a hash-locked wheelhouse, a static jq and, when
`studio.tools.eksctl` is on, eksctl's release tarball. tools/build_studio_tools.py builds the bundle from PyPI into
build/studio-tools/ (`make studio-tools`); eksctl comes from `make studio-eksctl`. Synth checks both against the
committed pins and ships them to the lifecycle bucket; lifecycle/studio/studio_tools.sh installs hyp and jq in the
space, lifecycle/studio/eks_login_node.sh eksctl, all without internet."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "studio_tools.json"
LOCK_DIR = ROOT / "lifecycle" / "studio_tools"
BUILDER = ROOT / "tools" / "build_studio_tools.py"
BUNDLE_DIR = ROOT / "build" / "studio-tools"
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
    directory: Path        # hyp/, jq/, SHA256SUMS
    manifest_sha256: str   # STUDIO_TOOLS_SHA256: the space checks SHA256SUMS against it, then every file


@dataclass(frozen=True)
class EksctlArtifact:
    directory: Path        # holds eksctl/<file>
    key: str               # eksctl/<file>, relative to the tools prefix
    sha256: str
    version: str


@dataclass(frozen=True)
class StudioToolArtifacts:
    bundle: Optional[StudioToolsBundle]   # studio.tools.hyp_and_jq
    eksctl: Optional[EksctlArtifact]      # studio.tools.eksctl


def studio_tools_bundle(directory: Path = BUNDLE_DIR) -> StudioToolsBundle:
    """The built bundle, refused unless it was built from the committed inputs and every file matches SHA256SUMS."""
    rebuild = "run `make studio-tools` (tools/build_studio_tools.py; needs PyPI, gcc and make)"
    stamp, manifest = directory / INPUTS, directory / MANIFEST
    if not stamp.is_file() or not manifest.is_file():
        raise StudioToolsError(f"studio.tools: the hyp/jq bundle {directory} is missing; {rebuild}")
    if stamp.read_text().strip() != inputs_digest():
        raise StudioToolsError(f"studio.tools: {directory} was built from other pins than "
                               f"{FACTS.relative_to(ROOT)} and {LOCK_DIR.relative_to(ROOT)}/; {rebuild}")
    listed = {}
    for line in manifest.read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    present = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()} - {MANIFEST, INPUTS}
    if present != set(listed):
        raise StudioToolsError(f"studio.tools: {directory} holds files its {MANIFEST} does not list or lacks listed "
                               f"ones ({sorted(present ^ set(listed))[:5]}); {rebuild}")
    for name, digest in listed.items():
        if sha256(directory / name) != digest:
            raise StudioToolsError(f"studio.tools: {directory / name} does not match its sha256 in {MANIFEST}; "
                                   f"{rebuild}")
    return StudioToolsBundle(directory=directory, manifest_sha256=sha256(manifest))


def eksctl_artifact(directory: Path = EKSCTL_DIR) -> EksctlArtifact:
    """eksctl's release tarball as `make studio-eksctl` fetched it, refused unless its sha256 is the pinned one."""
    pin = facts()["eksctl"]
    path = directory / "eksctl" / pin["file"]
    fetch = (f"run `make studio-eksctl` on a machine that reaches github.com, or copy {pin['url']} there yourself")
    if not path.is_file():
        raise StudioToolsError(f"studio.tools.eksctl: true needs eksctl {pin['version']} at {path}; {fetch}")
    actual = sha256(path)
    if actual != pin["sha256"]:
        raise StudioToolsError(f"studio.tools.eksctl: {path} has sha256 {actual}; eksctl {pin['version']} is "
                               f"{pin['sha256']} ({FACTS.relative_to(ROOT)}); {fetch}")
    return EksctlArtifact(directory=directory, key=f"eksctl/{pin['file']}", sha256=actual, version=pin["version"])
