"""Packs the built Studio tools bundle (build/studio-tools/, tools/build_studio_tools.py) into ONE deterministic zip,
build/studio-tools.zip, and writes its sha256 beside it (build/studio-tools.zip.sha256, `sha256sum --check` format).
Synth ships that zip as a single file asset with the zip's sha256 as its asset hash (constructs/studio_tools.py), so no
synth fingerprints, walks or copies the 115 MB directory; BucketDeployment extracts the zip into the tools prefix,
which then holds exactly the directory's files, as when the directory itself was the asset.

    python tools/pack_studio_tools.py            # `make studio-tools` runs it after the build: packs only when needed
    python tools/pack_studio_tools.py --force    # packs in any case

Packs only a bundle whose files are exactly those its SHA256SUMS lists (plus SHA256SUMS and BUILD_INPUTS), each with
its digest, so a zip is never made from a damaged directory. The zip does not depend on the machine: entries sorted,
stored (the wheels are zips already; deflate's bytes would vary with the zlib build), one fixed timestamp, mode 0644
(0755 for a file its owner may execute), no directory entries. Unchanged input gives the same bytes.

Up to date, it rewrites nothing: the zip matches its recorded sha256, holds the directory's BUILD_INPUTS and
SHA256SUMS, and is newer than this script. Otherwise (missing, altered, another bundle, a changed packer) it packs
again.
It is not one of the bundle's inputs (constructs/studio_tools.py inputs_digest): it decides how the files travel, not
what they are, so changing it repacks in a second instead of rebuilding from PyPI.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bundle_module():
    """constructs/studio_tools.py by its path: `import constructs.studio_tools` would first import the `constructs`
    library (the folder shares its name), whose jsii runtime starts Node.js, which packing never needs."""
    name = "studio_tools_bundle"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "constructs" / "studio_tools.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


_bundle = _bundle_module()
BUNDLE_DIR, BUNDLE_ZIP, INPUTS, MANIFEST = _bundle.BUNDLE_DIR, _bundle.BUNDLE_ZIP, _bundle.INPUTS, _bundle.MANIFEST
digest_file, sha256 = _bundle.digest_file, _bundle.sha256

FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can record
CHUNK = 1 << 20


class PackError(SystemExit):
    pass


def listed(directory: Path) -> dict[str, str]:
    """SHA256SUMS as {relative path: sha256}, refused unless the directory holds exactly those files (and the two
    files that describe them)."""
    manifest = directory / MANIFEST
    if not manifest.is_file() or not (directory / INPUTS).is_file():
        raise PackError(f"{directory} has no {MANIFEST} or {INPUTS}: build it first (`make studio-tools`)")
    entries = dict(line.split("  ", 1)[::-1] for line in manifest.read_text().splitlines())
    present = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()} - {MANIFEST, INPUTS}
    if present != set(entries):
        raise PackError(
            f"{directory} holds files its {MANIFEST} does not list or lacks listed ones "
            f"({sorted(present ^ set(entries))[:5]}); rebuild it: `make -B studio-tools`"
        )
    return entries


def write_zip(directory: Path, out, entries: dict[str, str]) -> None:
    """The deterministic zip of `directory` into the open binary file `out`, each file checked against SHA256SUMS
    as it is read (one read per file)."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted([*entries, MANIFEST, INPUTS]):
            path = directory / name
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.create_system = 3  # Unix: external_attr holds the mode
            info.external_attr = (stat.S_IFREG | (0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644)) << 16
            info.compress_type = zipfile.ZIP_STORED
            info.file_size = path.stat().st_size
            digest = hashlib.sha256()
            with path.open("rb") as source, archive.open(info, "w") as target:
                for chunk in iter(lambda: source.read(CHUNK), b""):
                    digest.update(chunk)
                    target.write(chunk)
            if name in entries and digest.hexdigest() != entries[name]:
                raise PackError(f"{path} does not match its sha256 in {MANIFEST}; rebuild it: `make -B studio-tools`")


def up_to_date(directory: Path, archive: Path) -> bool:
    record = digest_file(archive)
    if not archive.is_file() or not record.is_file():
        return False
    if record.stat().st_mtime < Path(__file__).stat().st_mtime:
        return False
    try:
        with zipfile.ZipFile(archive) as opened:
            same = all(opened.read(name) == (directory / name).read_bytes() for name in (INPUTS, MANIFEST))
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
    return same and sha256(archive) == record.read_text().split()[0]


def pack(directory: Path = BUNDLE_DIR, archive: Path = BUNDLE_ZIP, *, force: bool = False) -> bool:
    """Writes `archive` and its digest file from `directory` unless they are up to date; True when it wrote them.
    Both are replaced by rename, the digest last: an interrupted run leaves the old pair or a mismatch that the next
    run (and synth) sees."""
    entries = listed(directory)
    if not force and up_to_date(directory, archive):
        return False
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=archive.parent, prefix=f".{archive.name}.", delete=False) as out:
        try:
            write_zip(directory, out, entries)
        except BaseException:
            os.unlink(out.name)
            raise
    os.chmod(out.name, 0o644)
    os.replace(out.name, archive)
    record = digest_file(archive)
    partial = record.with_name(f".{record.name}.part")
    partial.write_text(f"{sha256(archive)}  {archive.name}\n")
    os.replace(partial, record)
    return True


def main(argv: list[str]) -> int:
    if argv not in ([], ["--force"]):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    wrote = pack(force=argv == ["--force"])
    shown, digest = BUNDLE_ZIP.relative_to(ROOT), digest_file(BUNDLE_ZIP).read_text().split()[0]
    print(
        f"packed {BUNDLE_DIR.relative_to(ROOT)} into {shown} (sha256 {digest})"
        if wrote
        else f"{shown} is up to date (sha256 {digest})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
