"""`studio:` the SageMaker Studio domain whose JupyterLab and Code Editor spaces act as login nodes, its FSx
partitions' root and group, and managed MLflow."""
from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StrictBool

from platform_config.fields import Strict, pattern

# What a Studio user profile name may be (CreateUserProfile's UserProfileName).
STUDIO_PROFILE_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")


class Mlflow(Strict):
    enabled: StrictBool = False
    size: Literal["Small", "Medium", "Large"] = "Small"
    mlflow_version: Annotated[str, pattern(r"\d+\.\d+(\.\d+)?", "an MLflow version such as 2.16")] = "2.16"


class Studio(Strict):
    """The SageMaker Studio domain whose JupyterLab and Code Editor spaces act as login nodes."""
    enabled: StrictBool = True
    idle_timeout_minutes: int = Field(default=120, ge=60, le=525600)
    partition_root: Annotated[str, pattern(r"(?!\.\.?$)[a-zA-Z0-9._-]+", "a single directory name such as studio "
                                                                       "(letters, digits, '.', '_', '-'; not '.' "
                                                                       "or '..')")] = "studio"
    # Group owning the shared partition; every user's primary group in shared mode is this one in Studio.
    shared_gid: int = Field(default=2000, ge=1001, le=4000000)
    mlflow: Mlflow = Mlflow()
