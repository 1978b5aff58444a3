"""`studio:` the SageMaker Studio domain whose JupyterLab and Code Editor spaces act as login nodes, its FSx
partitions' root and group, and managed MLflow."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictBool

from platform_config.fields import Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

# What a Studio user profile name may be (CreateUserProfile's UserProfileName).
STUDIO_PROFILE_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")


class Mlflow(Strict):
    """SageMaker managed MLflow: one tracking server for the domain."""

    enabled: StrictBool = Field(
        False,
        description="A managed MLflow tracking server with its own KMS-encrypted, versioned, retained artifact "
        "bucket. In both modes; in per-user mode too, with the trust docs/security.md states: "
        "MLflow's IAM stops at the tracking server, so every profile that may use it reads and can "
        "delete every experiment, run and model on it. Where departments must not see each other's "
        "runs, deploy one platform (one tracking server) per department (docs/studio.md, "
        '"MLflow").',
    )
    size: Literal["Small", "Medium", "Large"] = Field("Small", description="The tracking server's size.")
    mlflow_version: Annotated[str, pattern(r"\d+\.\d+(\.\d+)?", "an MLflow version such as 2.16")] = Field(
        "2.16", description="The tracking server's MLflow version."
    )


class StudioTools(Strict):
    """Command-line tools installed in every space from the lifecycle bucket, without internet, each checked by
    sha256 (docs/studio.md, "Tools")."""

    hyp_and_jq: StrictBool = Field(
        True,
        description="The HyperPod CLI (hyp, PyPI sagemaker-hyperpod, in a venv of its own) and jq, from a "
        "hash-locked bundle that `make studio-tools` builds from PyPI "
        "(config/facts/studio_tools.json).",
    )
    eksctl: StrictBool = Field(
        False,
        description="EKS only: eksctl, from its release tarball pinned by sha256 in "
        "config/facts/studio_tools.json, which `make studio-eksctl` fetches from GitHub before "
        "synth (CI and the deploy never fetch it).",
    )


class Studio(Strict):
    """The SageMaker Studio domain whose JupyterLab and Code Editor spaces act as login nodes."""

    enabled: StrictBool = Field(True, description="Build the Studio stack.")
    idle_timeout_minutes: int = Field(
        default=120, ge=60, le=525600, description="Idle shutdown of JupyterLab and Code Editor apps, minutes."
    )
    partition_root: Annotated[
        str,
        pattern(
            r"(?!\.\.?$)[a-zA-Z0-9._-]+",
            "a single directory name such as studio (letters, digits, '.', '_', '-'; not '.' or '..')",
        ),
    ] = Field(
        "studio",
        description="The directory under the data repository path that holds the Studio partitions (on EKS "
        "with task governance, not eks: the team directories' root).",
    )
    shared_gid: int = Field(
        default=2000,
        ge=1001,
        le=4000000,
        description="The group owning the shared partition; in shared mode every user's primary group in Studio.",
    )
    mlflow: Mlflow = Field(Mlflow(), description="Managed MLflow.")
    tools: StudioTools = Field(StudioTools(), description="Tools installed in every space.")
    shared_space_user: str | None = Field(
        None,
        description="Shared mode only: the user (a name from users) whose uid shared spaces run as, with the "
        "shared gid; they then mount the shared partition at the cluster's path like private spaces. "
        "Unset: shared spaces get the lifecycle configs but no FSx (a space several people use has "
        "no one owner whose identity the cluster knows). Create it as an account the team shares.",
    )


# The group every Slurm node makes for shared_gid, which every user joins (lifecycle/hyperpod/create_users.sh).
SHARED_GROUP_NAME = "studio-shared"


def studio_errors(cfg: PlatformConfig) -> list[str]:
    """studio.shared_space_user names a user, in shared mode; eksctl only on EKS."""
    studio = cfg.studio
    errors = []
    if studio.enabled and studio.tools.eksctl and cfg.orchestrator != "eks":
        errors.append(
            f"studio.tools.eksctl: true with orchestrator: {cfg.orchestrator}; eksctl manages EKS clusters. "
            "Allowed: true with orchestrator: eks, false otherwise"
        )
    if not studio.enabled or studio.shared_space_user is None:
        return errors
    names = [u.name for u in cfg.users]
    if studio.shared_space_user not in names:
        errors.append(
            f"studio.shared_space_user: {studio.shared_space_user!r} is not a user; allowed: "
            f"{', '.join(names) or '(no users)'}"
        )
    elif not cfg.shared_fsx:
        errors.append(
            f"studio.shared_space_user: {studio.shared_space_user!r} with shared_fsx: false; per-user mode "
            "has no partition every member of a shared space may use. Allowed: unset in per-user mode, or "
            "shared_fsx: true"
        )
    return errors
