"""platform_parameters.json, the file LifecycleScripts (constructs/lifecycle_scripts.py) ships beside the node scripts:
its one typed definition, and the JSON Schema generated from it that the nodes check the file against
(lifecycle/hyperpod/lib/platform_parameters.schema.json, read by lifecycle/hyperpod/lib/params.py `validate`).

Synth builds the file through these models (manifests/node_parameters.py fills them from the config), so a missing
key or a wrong type fails synth. Some values are only known at deploy time (a workspace URL, a file system's DNS
name): they are CDK tokens at synth, so rules on their text are written into the schema only (`node_only`) and
checked on the node, where the values are resolved. `x-message` is what the node says when a value breaks its rule.

Regenerate the schema with `make schema` (tests/test_node_parameters.py fails when the committed one is stale).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

SCHEMA_FILE = (
    Path(__file__).resolve().parent.parent / "lifecycle" / "hyperpod" / "lib" / "platform_parameters.schema.json"
)
VERSION = 1

USER_NAME = r"^[a-z_][a-z0-9_-]{0,31}$"
S3_URI = r"^s3://"
SHA256 = r"^[0-9a-f]{64}$"


def node_only(**rule: Any) -> Any:
    """A rule (pattern, minLength, ...) written into the schema for the node, not applied at synth, where the value
    may be a token."""
    return Field(json_schema_extra=rule)


def message(text: str, **constraints: Any) -> Any:
    """Constraints checked at synth and on the node, with the node's wording when they fail."""
    return Field(json_schema_extra={"x-message": text}, **constraints)


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


Name = Annotated[str, message("missing", min_length=1)]
PosixId = Annotated[int, message("must be an integer >= 1000", ge=1000, strict=True)]


class Artifact(Part):
    name: str
    s3_uri: Annotated[str, message("must be an s3:// URI", pattern=S3_URI)]
    sha256: Annotated[str, message("must be 64 lowercase hex digits", pattern=SHA256)]


class SlurmWorkerGroup(Part):
    instance_group_name: Name
    partition_name: str
    gpus: int


class EksWorkerGroup(Part):
    instance_group_name: Name


class Fsx(Part):
    """`mount`: the lifecycle scripts mount the file system (else HyperPod does, or nobody)."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"mount": {"const": True}}, "required": ["mount"]},
            "then": {
                "properties": {
                    k: {"type": "string", "minLength": 1, "x-message": "missing while fsx.mount is true"}
                    for k in ("dns_name", "mount_name", "mount_path")
                },
                "required": ["dns_name", "mount_name", "mount_path"],
            },
        }
    )
    mount: bool
    dns_name: str
    mount_name: str
    mount_path: str
    checkpoint_dir: str


class User(Part):
    name: Annotated[str, message("is not a valid user name", pattern=USER_NAME)]
    uid: PosixId
    gid: PosixId
    sudo: bool


class Slurm(Part):
    auto_resume: bool
    login_secret_arn: str | None
    auth: Literal["munge", "jwt"]
    jwt_key_secret_arn: str | None
    pam_slurm_adopt: bool
    controller_ssh: Literal["admins", "all"]
    client_bundle_s3_prefix: str | None


class UsersSync(Part):
    parameters_s3_uri: Annotated[str, message("must be an s3:// URI", pattern=S3_URI)]


class SharedGroup(Part):
    name: str
    gid: int


class ContainerRuntime(Part):
    enabled: bool
    ubuntu_release: str
    docker_apt_version: str
    artifacts: list[Artifact]


class Qos(Part):
    name: str
    description: str
    priority: int
    max_tres_per_user: str
    grp_tres: str
    max_wall_minutes: int | None
    max_jobs_per_user: int | None


class Department(Part):
    name: str
    description: str
    fairshare: int
    qos: list[str]
    default_qos: str
    users: list[str]
    coordinators: list[str]


class Accounting(Part):
    enabled: bool
    qos: list[Qos]
    departments: list[Department]
    priority_weights: dict[str, int]


class NodeMetrics(Part):
    remote_write_url: Annotated[str, node_only(pattern="^https://", **{"x-message": "must be an https:// URL"})]
    region: Annotated[str, node_only(minLength=1, **{"x-message": "missing"})]
    scrape_interval_seconds: Annotated[int, message("must be a positive integer", ge=1, strict=True)]
    artifacts: list[Artifact]


class CaCertificate(Part):
    file: str
    sha256: Annotated[str, message("must be 64 lowercase hex digits", pattern=SHA256)]


class Directory(Part):
    uris: list[str]
    start_tls: bool
    search_base: str
    bind_dn: str
    bind_password_secret_arn: str
    region: str
    ldap_schema: str
    access_groups: list[str]
    admin_groups: list[str]
    ca_certificate: CaCertificate
    artifacts: list[Artifact]


class PamSlurmAdopt(Part):
    artifacts: list[Artifact]


class JobCredentials(Part):
    role_arn: str
    region: str


class LifecycleRecordRef(Part):
    """Where the node finds the lifecycle record it checks its scripts and this file against (lib/verify.py); set by
    LifecycleScripts, which creates the record."""

    secret_name: Annotated[str, message("missing", min_length=1)]
    region: str


class NodeFile(Part):
    """The file's top level: `lifecycle_record` is written only once LifecycleScripts has set it."""

    @model_serializer(mode="wrap")
    def _without_unset_record(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if data.get("lifecycle_record") is None:
            data.pop("lifecycle_record", None)
        return data


class SlurmNodeParameters(NodeFile):
    """What lifecycle/hyperpod/on_init_complete.sh and the scripts it runs read on a Slurm node."""

    version: Literal[1]
    cluster_name: str
    controller_group: Name
    login_group: str | None
    worker_groups: list[SlurmWorkerGroup]
    fsx: Fsx | None
    users: list[User]
    slurm: Slurm
    users_sync: UsersSync
    shared_group: SharedGroup | None
    container_runtime: ContainerRuntime
    accounting: Accounting
    node_metrics: NodeMetrics | None
    directory: Directory | None
    pam_slurm_adopt: PamSlurmAdopt
    job_credentials: JobCredentials | None
    lifecycle_record: LifecycleRecordRef | None = None


class EksNodeParameters(NodeFile):
    """What lifecycle/hyperpod/on_create.sh reads on an EKS node (no Slurm, no FSx mount: pods mount FSx through
    the CSI driver)."""

    version: Literal[1]
    orchestrator: Literal["eks"]
    cluster_name: str
    worker_groups: list[EksWorkerGroup]
    lifecycle_record: LifecycleRecordRef | None = None


NodeParameters = SlurmNodeParameters | EksNodeParameters


def schema() -> dict[str, Any]:
    """One schema for both kinds of node: a file with `"orchestrator": "eks"` is an EKS node's, any other a Slurm
    node's (the Slurm file has no orchestrator key)."""
    slurm = SlurmNodeParameters.model_json_schema(ref_template="#/$defs/{model}")
    eks = EksNodeParameters.model_json_schema(ref_template="#/$defs/{model}")
    # The Slurm file has no orchestrator key; a Slurm file that names its orchestrator names slurm.
    slurm["properties"]["orchestrator"] = {"const": "slurm", "x-message": "expected slurm or eks"}
    defs = {**slurm.pop("$defs"), **eks.pop("$defs", {}), "SlurmNodeParameters": slurm, "EksNodeParameters": eks}
    # Synth refuses a key the models lack (extra="forbid"); a node ignores one. A running node's users sync reads the
    # file a later deployment publishes with the scripts it was created with: a key added since must not stop it.
    # A change older nodes cannot read is a new version.
    for definition in defs.values():
        if definition.get("additionalProperties") is False:
            del definition["additionalProperties"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "platform_parameters.json",
        "description": f"Generated from constructs/node_parameters.py (make schema); version {VERSION}.",
        "type": "object",
        "properties": {
            "version": {"const": VERSION, "x-message": f"expected {VERSION}"},
            "orchestrator": {"enum": ["slurm", "eks"], "x-message": "expected slurm or eks"},
        },
        "required": ["version"],
        "if": {"properties": {"orchestrator": {"const": "eks"}}, "required": ["orchestrator"]},
        "then": {"$ref": "#/$defs/EksNodeParameters"},
        "else": {"$ref": "#/$defs/SlurmNodeParameters"},
        "$defs": dict(sorted(defs.items())),
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=1, sort_keys=False) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")
