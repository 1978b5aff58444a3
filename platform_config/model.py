"""The root of the config model: one `PlatformConfig` holding every section, and its JSON Schema."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool

from platform_config.cluster import Cluster, InstanceGroup
from platform_config.deployment import Deployment
from platform_config.eks import Eks
from platform_config.fields import ClusterName, Strict
from platform_config.network import Network
from platform_config.observability import Observability
from platform_config.storage import Storage
from platform_config.studio import Studio
from platform_config.users import User


class PlatformConfig(Strict):
    """Everything a deployment needs. Defaults deploy a small but real Slurm cluster."""
    name: ClusterName = "ml-cluster"
    orchestrator: Literal["slurm", "eks"] = "slurm"
    shared_fsx: StrictBool = True
    deployment: Deployment = Deployment()
    tags: dict[Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(max_length=256)]] = {}
    network: Network = Network()
    storage: Storage = Storage()
    cluster: Cluster = Cluster()
    studio: Studio = Studio()
    eks: Eks = Eks()
    users: list[User] = []
    observability: Observability = Observability()

    def group(self, role: str) -> list[InstanceGroup]:
        return [g for g in self.cluster.instance_groups if g.role == role]


def json_schema() -> dict[str, Any]:
    schema = PlatformConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "HyperPod platform configuration"
    return schema
