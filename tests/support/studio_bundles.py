"""The Studio tools bundles the tests read: the built one (`make studio-tools`), its pins, and a small bundle laid out
like it, packed as the real one is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from constructs.studio_tools import BUNDLE_DIR, BUNDLE_ZIP, FACTS, INPUTS, MANIFEST, digest_file, inputs_digest, sha256
from tools.pack_studio_tools import pack

PINS = json.loads(FACTS.read_text())


def built_bundle() -> Path:
    if not (BUNDLE_DIR / MANIFEST).is_file() or not digest_file(BUNDLE_ZIP).is_file():
        pytest.fail(f"{BUNDLE_DIR} or {BUNDLE_ZIP} is missing: run `make studio-tools` (make test and make synth do)")
    return BUNDLE_DIR


def small_bundle(tmp_path: Path, inputs: str | None = None) -> Path:
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


def small_zip(tmp_path: Path, inputs: str | None = None) -> Path:
    """small_bundle packed as `make studio-tools` packs the real one: tmp_path/studio-tools.zip and its .sha256."""
    archive = tmp_path / "studio-tools.zip"
    assert pack(small_bundle(tmp_path, inputs), archive)
    return archive


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}
