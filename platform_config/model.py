"""The root of the config model: one `PlatformConfig` holding every section, and its JSON Schema."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

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

    name: ClusterName = Field(
        "ml-cluster",
        description="The cluster's name and every stack's name prefix (create-only: every resource name "
        "derives from it).",
    )
    orchestrator: Literal["slurm", "eks"] = Field(
        "slurm",
        description="slurm or eks. On EKS, controller and login groups and Slurm partitions are not used: the "
        "EKS control plane and Studio take their place.",
    )
    shared_fsx: StrictBool = Field(
        True,
        description="true: one shared FSx partition for Studio users; false: one private partition per user. "
        "The default of the Studio stack's SharedFSx parameter. On Slurm it also decides, at synth, "
        "how Studio authenticates: the munge key (true) or a per-user Slurm token (false), see "
        "docs/security.md.",
    )
    deployment: Deployment = Field(Deployment(), description="Account and region.")
    tags: dict[Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(max_length=256)]] = Field(
        {}, description="Tags applied to every resource that takes tags in place."
    )
    network: Network = Field(Network(), description="The VPC.")
    storage: Storage = Field(Storage(), description="FSx for Lustre, the data bucket, checkpoints.")
    cluster: Cluster = Field(Cluster(), description="The HyperPod cluster.")
    studio: Studio = Field(Studio(), description="The SageMaker Studio domain.")
    eks: Eks = Field(Eks(), description="EKS settings, used with orchestrator: eks.")
    users: list[User] = Field(
        [],
        description="People: created on every node with fixed ids and as Studio profiles with the same POSIX identity.",
    )
    observability: Observability = Field(Observability(), description="Alarms, events, dashboards, metrics.")

    def group(self, role: str) -> list[InstanceGroup]:
        return [g for g in self.cluster.instance_groups if g.role == role]


class _SchemaWithPatterns(GenerateJsonSchema):
    """JSON Schema that also carries the patterns of the strings the model checks after parsing (fields.pattern and
    the CIDR check set `json_pattern` on their check), so an editor flags an AZ name where an AZ ID belongs."""

    def function_after_schema(self, schema: core_schema.AfterValidatorFunctionSchema) -> JsonSchemaValue:
        generated = super().function_after_schema(schema)
        regex = getattr(schema["function"].get("function"), "json_pattern", None)
        if regex and generated.get("type") == "string":
            generated = {**generated, "pattern": regex}
        return generated


def json_schema() -> dict[str, Any]:
    schema = PlatformConfig.model_json_schema(schema_generator=_SchemaWithPatterns)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "HyperPod platform configuration"
    return schema
