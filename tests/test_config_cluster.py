"""The cluster section of the config, without CDK: its table of invalid configurations (instance groups, the
container runtime, partitions, provisioning mode and strategy, controllers), each with its exact error and together
reaching every rule tests/test_config.py leaves to it; the Slurm provisioning mode and strategy sent, and the deep
health checks' connectivity check."""

from __future__ import annotations

import pytest

from platform_config import ConfigError, parse_config
from support.configs import CONTROLLER, WORKERS, base, errors_of, rules_refusing, with_
from support.docs import stated_count


def continuous(**cluster) -> dict:
    data = base()
    data["cluster"].update(node_provisioning_mode="Continuous", **cluster)
    return data


CLUSTER_INVALID = [
    (
        "group name invalid",
        with_("cluster.instance_groups.1.name", "gpu workers"),
        "cluster.instance_groups[1].name: 'gpu workers' — must be 1-63 letters, digits and hyphens, starting and "
        "ending with a letter or digit",
    ),
    (
        "group names unique",
        with_("cluster.instance_groups.1.name", "Controller-Machine"),
        "cluster.instance_groups[1].name: 'Controller-Machine' is already used by cluster.instance_groups[0]; "
        "instance group names must be unique (case-insensitive)",
    ),
    (
        "no controller",
        with_("cluster.instance_groups", [WORKERS]),
        "cluster.instance_groups: 0 groups with role 'controller'; exactly one is required",
    ),
    (
        "two controllers",
        with_("cluster.instance_groups", [CONTROLLER, {**CONTROLLER, "name": "c2"}, WORKERS]),
        "cluster.instance_groups: 2 groups with role 'controller'; exactly one is required",
    ),
    (
        "two login groups",
        with_(
            "cluster.instance_groups",
            [CONTROLLER, {**CONTROLLER, "name": "l1", "role": "login"}, {**CONTROLLER, "name": "l2", "role": "login"}],
        ),
        "cluster.instance_groups: 2 groups with role 'login' (indexes [1, 2]); at most one is allowed",
    ),
    (
        "unknown role",
        with_("cluster.instance_groups.1.role", "worker"),
        "cluster.instance_groups[1].role: 'worker' — Input should be 'controller', 'login' or 'compute'",
    ),
    (
        "negative count",
        with_("cluster.instance_groups.1.instance_count", -1),
        "cluster.instance_groups[1].instance_count: -1 — Input should be greater than or equal to 0",
    ),
    (
        "threads per core",
        with_("cluster.instance_groups.1.threads_per_core", 4),
        "cluster.instance_groups[1].threads_per_core: 4 — Input should be 1 or 2",
    ),
    (
        "ebs too big",
        with_("cluster.instance_groups.1.ebs_volume_gib", 20000),
        "cluster.instance_groups[1].ebs_volume_gib: 20000 — Input should be less than or equal to 16384",
    ),
    (
        "ebs zero",
        with_("cluster.instance_groups.1.ebs_volume_gib", 0),
        "cluster.instance_groups[1].ebs_volume_gib: 0 — Input should be greater than or equal to 1",
    ),
    (
        "instance type not ml.*",
        with_("cluster.instance_groups.1.instance_type", "p5.48xlarge"),
        "cluster.instance_groups[1].instance_type: 'p5.48xlarge' — not an instance type HyperPod clusters accept; did you "
        "mean one of 'ml.p5.48xlarge', 'ml.p5e.48xlarge', 'ml.p5.4xlarge'? allowed: one of the types CreateCluster "
        "accepts (config/facts/cluster_instance_types.json, from botocore's ClusterInstanceType), such as ml.g5.8xlarge",
    ),
    (
        "deep health checks on CPU",
        with_("cluster.instance_groups.0.deep_health_checks", ["InstanceStress"]),
        "cluster.instance_groups[0].deep_health_checks: ['InstanceStress'] on 'ml.m5.xlarge'; deep health checks run "
        "only on instance types with NVIDIA GPUs or Trainium devices (config/facts/accelerators.json)",
    ),
    (
        "controller partitions",
        with_("cluster.instance_groups.0.partitions", ["x"]),
        "cluster.instance_groups[0].partitions: ['x'] on a controller group; only compute groups belong to partitions",
    ),
    (
        "group az without subnet",
        with_("cluster.instance_groups.1.az_id", "usw2-az3"),
        "cluster.instance_groups[1].az_id: 'usw2-az3' has no private subnet; allowed: usw2-az2",
    ),
    (
        "checksum format",
        with_(
            "cluster.container_runtime",
            {
                "enabled": True,
                "docker_apt_version": "24.0.7",
                "artifacts": [{"name": "enroot", "s3_uri": "s3://bkt/enroot_3.5.0-1_amd64.deb", "sha256": "abc"}],
            },
        ),
        "cluster.container_runtime.artifacts[0].sha256: 'abc' — must be a SHA-256 digest: 64 lowercase hex characters",
    ),
    (
        "artifact not a deb",
        with_(
            "cluster.container_runtime",
            {
                "enabled": True,
                "docker_apt_version": "24.0.7",
                "artifacts": [{"name": "pyxis", "s3_uri": "s3://bkt/pyxis.tar.gz", "sha256": "a" * 64}],
            },
        ),
        "cluster.container_runtime.artifacts[0].s3_uri: 's3://bkt/pyxis.tar.gz' — must be an s3:// URI of a Debian "
        "package named package_version_arch.deb (key of letters, digits and . _ + ~ - /)",
    ),
    (
        "unpinned docker",
        with_("cluster.container_runtime", {"enabled": True}),
        "cluster.container_runtime.docker_apt_version: '' with the container runtime enabled; pin the docker.io package "
        "version, e.g. '24.0.7-0ubuntu2~22.04.1'",
    ),
    (
        "repeated deep health check",
        with_("cluster.instance_groups.1.deep_health_checks", ["InstanceStress", "InstanceStress"]),
        "cluster.instance_groups[1].deep_health_checks[1]: 'InstanceStress' repeats "
        "cluster.instance_groups[1].deep_health_checks[0]; list each at most once",
    ),
    (
        "repeated artifact name",
        with_(
            "cluster.container_runtime",
            {
                "enabled": True,
                "docker_apt_version": "1",
                "artifacts": [
                    {"name": "enroot", "s3_uri": "s3://bkt/enroot_3.5.0-1_amd64.deb", "sha256": "a" * 64},
                    {"name": "enroot", "s3_uri": "s3://bkt/enroot_3.4.0-1_amd64.deb", "sha256": "b" * 64},
                ],
            },
        ),
        "cluster.container_runtime.artifacts[1]: name='enroot' repeats cluster.container_runtime.artifacts[0]; list each "
        "at most once",
    ),
    (
        "compute group without partition",
        with_("cluster.instance_groups.1.partitions", []),
        "cluster.instance_groups[1].partitions: [] on a compute group; HyperPod's API-driven Slurm configuration needs "
        "exactly one partition name per compute group, e.g. [workers]",
    ),
    (
        "partition with underscore",
        with_("cluster.instance_groups.1.partitions", ["gpu_a"]),
        "cluster.instance_groups[1].partitions[0]: 'gpu_a' — must be a partition name HyperPod accepts: letters, digits "
        "and hyphens, starting and ending with a letter or digit (no '_')",
    ),
    # "Clusters that use continuous provisioning support only the Merge behavior and reject requests that set
    # SlurmConfigStrategy" (HyperPod developer guide, Migrating to API-driven Slurm configuration).
    (
        "strategy on a continuous cluster",
        continuous(slurm_config_strategy="Merge"),
        "cluster.slurm_config_strategy: 'Merge' with cluster.node_provisioning_mode: Continuous; allowed: unset "
        "(continuous provisioning clusters support only the Merge behavior and reject requests that set "
        "SlurmConfigStrategy: https://docs.aws.amazon.com/sagemaker/latest/dg/"
        "sagemaker-hyperpod-slurm-api-config-migration.html)",
    ),
    (
        "no controller instance",
        with_("cluster.instance_groups.0.instance_count", 0),
        "cluster.instance_groups[0].instance_count: 0 for the controller group; allowed: 1, or 2 or more with "
        "cluster.accounting.database: managed (HyperPod multi-head controllers)",
    ),
    (
        "backup controllers on the controller's own database",
        with_("cluster.instance_groups.0.instance_count", 2),
        "cluster.instance_groups[0].instance_count: 2 for the controller group with cluster.accounting.database: "
        "'hyperpod'; allowed: 1, or 2 or more with cluster.accounting.database: managed (HyperPod multi-head "
        "controllers). Backup controllers take over from the primary, so Slurm accounting must live outside the "
        "controllers (an external database, which HyperPod attaches to continuous clusters only: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html; "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-multihead.html)",
    ),
]


@pytest.mark.parametrize(
    "data, expected", [(d, e) for _, d, e in CLUSTER_INVALID], ids=[i for i, _, _ in CLUSTER_INVALID]
)
def test_invalid_config_reports_exact_error(data, expected):
    assert expected in errors_of(data)


@pytest.mark.parametrize(
    "strategy, mode, sent",
    [
        (None, "Standard", "Managed"),
        ("Overwrite", "Standard", "Overwrite"),
        ("Merge", "Standard", "Merge"),
        (None, "Continuous", None),
    ],
)
def test_slurm_config_strategy_is_never_sent_on_a_continuous_cluster(strategy, mode, sent):
    data = base()
    data["cluster"].update(slurm_config_strategy=strategy, node_provisioning_mode=mode)
    assert parse_config(data).cluster.slurm_config_strategy_sent() == sent


def test_slurm_clusters_are_continuous_unless_created_standard():
    # Continuous by default: HyperPod's cluster events, the external accounting database and multi-head controllers
    # need it. Standard sends no NodeProvisioningMode (the API's one value is Continuous) and may take a strategy.
    assert parse_config(base()).cluster.node_provisioning_mode_sent() == "Continuous"
    assert parse_config(base()).cluster.slurm_config_strategy_sent() is None
    standard = base()
    standard["cluster"].update(node_provisioning_mode="Standard", slurm_config_strategy="Overwrite")
    assert parse_config(standard).cluster.node_provisioning_mode_sent() is None
    assert errors_of(with_("cluster.slurm_config_strategy", "Managed")) == [
        "cluster.slurm_config_strategy: 'Managed' with cluster.node_provisioning_mode: Continuous; allowed: unset "
        "(continuous provisioning clusters support only the Merge behavior and reject requests that set "
        "SlurmConfigStrategy: https://docs.aws.amazon.com/sagemaker/latest/dg/"
        "sagemaker-hyperpod-slurm-api-config-migration.html)"
    ]
    assert errors_of(with_("cluster.node_provisioning_mode", None))[0].startswith(
        "cluster.node_provisioning_mode: None — Input should be 'Continuous' or 'Standard'"
    )


@pytest.mark.parametrize(
    "orchestrator, page",
    [
        ("slurm", "sagemaker-hyperpod-resiliency-slurm-deep-health-checks"),
        ("eks", "sagemaker-hyperpod-eks-resiliency-deep-health-checks"),
    ],
)
@pytest.mark.parametrize("count", [0, 1])
def test_connectivity_check_needs_two_instances_in_the_group(orchestrator, page, count):
    data = with_("cluster.instance_groups.1.instance_count", count)
    data["cluster"]["instance_groups"][1]["deep_health_checks"] = ["InstanceStress", "InstanceConnectivity"]
    if orchestrator == "eks":
        data.update(orchestrator="eks", shared_fsx=False)
        data["cluster"]["instance_groups"] = data["cluster"]["instance_groups"][1:]
    errors = [e for e in errors_of(data) if ".deep_health_checks" in e]
    group = 1 if orchestrator == "slurm" else 0
    assert errors == [
        f"cluster.instance_groups[{group}].deep_health_checks: InstanceConnectivity with "
        f"cluster.instance_groups[{group}].instance_count: {count}; the connectivity check tests the network between "
        "the group's instances and needs at least 2 of them "
        f"(https://docs.aws.amazon.com/sagemaker/latest/dg/{page}.html). Allowed: instance_count of 2 or more, or "
        "deep_health_checks without InstanceConnectivity (e.g. [InstanceStress])"
    ]
    # The stress check runs on one instance; two instances take the connectivity check.
    data["cluster"]["instance_groups"][group]["deep_health_checks"] = ["InstanceStress"]
    assert not [e for e in _errors_or_none(data) if ".deep_health_checks" in e]
    data["cluster"]["instance_groups"][group].update(instance_count=2, deep_health_checks=["InstanceConnectivity"])
    assert not [e for e in _errors_or_none(data) if ".deep_health_checks" in e]


def _errors_or_none(data) -> list[str]:
    try:
        parse_config(data, "test.yaml")
    except ConfigError as error:
        return error.errors
    return []


def test_the_cluster_table_reaches_every_rule_left_to_it(monkeypatch):
    """The rules tests/test_config.py's REFUSED_ELSEWHERE leaves to CLUSTER_INVALID each refuse one of its rows with
    the row's exact message (duplicate_errors too, which that table also reaches)."""
    assert rules_refusing(CLUSTER_INVALID, monkeypatch) == {
        "instance_group_errors",
        "slurm_node_role_errors",
        "container_runtime_errors",
        "slurm_config_strategy_errors",
        "duplicate_errors",
    }


def test_docs_state_the_size_of_the_cluster_table():
    assert stated_count(r"one of (\d+) for `cluster` itself") == len(CLUSTER_INVALID)
