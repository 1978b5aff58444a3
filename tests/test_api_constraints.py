"""The config accepts exactly what SageMaker's CreateCluster accepts, by botocore's service model.

The model ships with the pinned boto3 (requirements.txt), so a boto3 bump that changes a pattern, a limit or an
enum of the HyperPod API fails here until the config follows. Each row maps a place in the config's JSON Schema
to a shape of the `sagemaker` service model; the checks also feed boundary values to `parse_config` so the
validators, not only the schema text, agree with the API.
"""

from __future__ import annotations

import copy
import re

import botocore.session
import pytest

from platform_config import ConfigError, json_schema, parse_config
from platform_config.cluster import DEEP_HEALTH_CHECKS

SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")
SCHEMA = json_schema()

# Values the API offers that this platform deliberately leaves out, with the reason.
EXCLUDED_ENUM_VALUES = {
    # AWS documents two deep health check types for Slurm clusters, InstanceStress and InstanceConnectivity
    # (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-deep-health-checks.html).
    "DeepHealthCheckType": {"MultiNodeTrainingValidation"},
}


def shape(name: str):
    return SAGEMAKER.shape_for(name)


def member(structure: str, name: str):
    return shape(structure).members[name]


def schema_at(*path: str) -> dict:
    """The JSON Schema node for a property path such as ("InstanceGroup", "partitions")."""
    model, *fields = path
    node = SCHEMA["$defs"][model] if model != "PlatformConfig" else SCHEMA
    for field in fields:
        node = node["properties"][field]
    return node


def items_of(node: dict) -> dict:
    return node.get("items", node)


def enum_of(node: dict) -> list:
    node = items_of(node)
    if "enum" in node:
        return node["enum"]
    if "const" in node:
        return [node["const"]]
    return [v for option in node.get("anyOf", []) for v in enum_of(option)]


STRINGS = [  # (JSON Schema path, botocore string shape)
    (("PlatformConfig", "name"), "ClusterName"),
    (("InstanceGroup", "name"), "ClusterInstanceGroupName"),
    (("InstanceGroup", "partitions"), "ClusterPartitionName"),
]


@pytest.mark.parametrize("path,api_shape", STRINGS, ids=[s for _, s in STRINGS])
def test_string_patterns_and_lengths_match_the_api(path, api_shape):
    node = items_of(schema_at(*path))
    api = shape(api_shape).metadata
    assert node["pattern"] == f"^{api['pattern']}$"
    assert node["maxLength"] == api["max"]
    assert node["minLength"] == max(1, api.get("min", 0))


def test_partition_names_list_has_the_api_bounds():
    node = schema_at("InstanceGroup", "partitions")
    api = member("ClusterSlurmConfig", "PartitionNames")
    assert node["maxItems"] == api.metadata["max"]
    assert api.member.name == "ClusterPartitionName"


def test_node_types_are_the_api_enum():
    from constructs.hyperpod_cluster import SLURM_NODE_TYPES

    assert sorted(SLURM_NODE_TYPES.values()) == sorted(member("ClusterSlurmConfig", "NodeType").enum)
    assert sorted(enum_of(schema_at("InstanceGroup", "role"))) == sorted(SLURM_NODE_TYPES)


@pytest.mark.parametrize(
    "path,api_shape",
    [
        (("InstanceGroup", "deep_health_checks"), "DeepHealthCheckType"),
        (("Cluster", "node_recovery"), "ClusterNodeRecovery"),
        (("Cluster", "slurm_config_strategy"), "ClusterSlurmConfigStrategy"),
    ],
)
def test_enums_are_the_api_enums(path, api_shape):
    ours = set(enum_of(schema_at(*path)))
    api = set(shape(api_shape).enum)
    assert ours <= api, f"{'.'.join(path)} offers values the API refuses: {sorted(ours - api)}"
    assert api - ours == EXCLUDED_ENUM_VALUES.get(api_shape, set()), (
        f"the API gained values for {api_shape}: decide on {sorted(api - ours)}"
    )


def test_deep_health_check_list_bound_is_the_api_bound():
    assert (
        schema_at("InstanceGroup", "deep_health_checks")["maxItems"] == shape("OnStartDeepHealthChecks").metadata["max"]
    )
    assert set(DEEP_HEALTH_CHECKS) <= set(shape("DeepHealthCheckType").enum)


@pytest.mark.parametrize(
    "path,api_shape",
    [
        (("InstanceGroup", "instance_count"), "ClusterInstanceCount"),
        (("InstanceGroup", "ebs_volume_gib"), "ClusterEbsVolumeSizeInGB"),
    ],
)
def test_integer_ranges_match_the_api(path, api_shape):
    node, api = schema_at(*path), shape(api_shape).metadata
    assert (node["minimum"], node["maximum"]) == (api["min"], api["max"])


def test_threads_per_core_match_the_api():
    api = shape("ClusterThreadsPerCore").metadata
    assert sorted(enum_of(schema_at("InstanceGroup", "threads_per_core"))) == list(range(api["min"], api["max"] + 1))


# ------------------------------------------------------------------ the validators agree with the API's regexes
def slurm_config(partitions) -> dict:
    return {
        "name": "t",
        "cluster": {
            "instance_groups": [
                {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
                {
                    "name": "workers",
                    "role": "compute",
                    "instance_type": "ml.g5.8xlarge",
                    "instance_count": 1,
                    "partitions": partitions,
                },
            ]
        },
    }


def accepted(data) -> bool:
    try:
        parse_config(copy.deepcopy(data))
        return True
    except ConfigError:
        return False


PARTITION_SAMPLES = [
    "gpu",
    "a",
    "GPU-1",
    "a--b",
    "9",
    "a" * 1024,
    "a" * 1025,
    "a_b",
    "-gpu",
    "gpu-",
    "",
    "g pu",
    "gpu.1",
    "dépt",
]


@pytest.mark.parametrize("name", PARTITION_SAMPLES)
def test_partition_names_accepted_exactly_when_the_api_accepts_them(name):
    api = shape("ClusterPartitionName").metadata
    api_accepts = bool(re.fullmatch(api["pattern"], name)) and api.get("min", 0) <= len(name) <= api["max"]
    assert accepted(slurm_config([name])) == api_accepts


def test_compute_group_needs_exactly_one_partition():
    assert accepted(slurm_config(["gpu"]))
    with pytest.raises(ConfigError) as none:
        parse_config(slurm_config([]))
    assert none.value.errors == [
        "cluster.instance_groups[1].partitions: [] on a compute group; HyperPod's API-driven Slurm configuration "
        "needs exactly one partition name per compute group, e.g. [workers]"
    ]
    with pytest.raises(ConfigError) as two:
        parse_config(slurm_config(["gpu", "cpu"]))
    assert two.value.errors == [
        "cluster.instance_groups[1].partitions: ['gpu', 'cpu'] — List should have at most 1 "
        "item after validation, not 2"
    ]


@pytest.mark.parametrize("name,ok", [("a" * 63, True), ("a" * 64, False), ("a-b", True), ("a_b", False)])
def test_cluster_and_group_names_follow_the_api(name, ok):
    data = slurm_config(["gpu"])
    assert accepted({**data, "name": name}) == ok
    data["cluster"]["instance_groups"][1]["name"] = name
    assert accepted(data) == ok
