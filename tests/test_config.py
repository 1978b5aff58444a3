"""The config layer, without CDK: defaults, examples, strict parsing and the exact error for bad input."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from conftest import APP_PATH, ROOT, VARIANT_FILES
from platform_config import ConfigError, PlatformConfig, json_schema, load_config, parse_config

CONTROLLER = {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1}
WORKERS = {"name": "workers", "role": "compute", "instance_type": "ml.g5.8xlarge", "instance_count": 2,
           "partitions": ["gpu"]}


def base() -> dict:
    return {"name": "test", "cluster": {"instance_groups": [copy.deepcopy(CONTROLLER), copy.deepcopy(WORKERS)]}}


def with_(path: str, value) -> dict:
    """base() with one dotted path (list indexes as numbers) set to value."""
    data = base()
    *parents, last = path.split(".")
    node = data
    for part in parents:
        key = int(part) if part.isdigit() else part
        if isinstance(node, dict) and key not in node:
            node[key] = {}
        node = node[key]
    node[int(last) if last.isdigit() else last] = value
    return data


def errors_of(data) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "test.yaml")
    return info.value.errors


def continuous(**cluster) -> dict:
    data = base()
    data["cluster"].update(node_provisioning_mode="Continuous", **cluster)
    return data


INVALID = [
    ("cluster name pattern", with_("name", "my_cluster"),
     "name: 'my_cluster' — must be 1-63 letters, digits and hyphens, starting and ending with a letter or digit"),
    ("cluster name too long", with_("name", "a" * 64),
     f"name: '{'a' * 64}' — must be 1-63 letters, digits and hyphens, starting and ending with a letter or digit"),
    ("group name invalid", with_("cluster.instance_groups.1.name", "gpu workers"),
     "cluster.instance_groups[1].name: 'gpu workers' — must be 1-63 letters, digits and hyphens, starting and "
     "ending with a letter or digit"),
    ("group names unique", with_("cluster.instance_groups.1.name", "Controller-Machine"),
     "cluster.instance_groups[1].name: 'Controller-Machine' is already used by cluster.instance_groups[0]; "
     "instance group names must be unique (case-insensitive)"),
    ("no controller", with_("cluster.instance_groups", [WORKERS]),
     "cluster.instance_groups: 0 groups with role 'controller'; exactly one is required"),
    ("two controllers", with_("cluster.instance_groups", [CONTROLLER, {**CONTROLLER, "name": "c2"}, WORKERS]),
     "cluster.instance_groups: 2 groups with role 'controller'; exactly one is required"),
    ("two login groups", with_("cluster.instance_groups", [CONTROLLER, {**CONTROLLER, "name": "l1", "role": "login"},
                                                          {**CONTROLLER, "name": "l2", "role": "login"}]),
     "cluster.instance_groups: 2 groups with role 'login' (indexes [1, 2]); at most one is allowed"),
    ("unknown role", with_("cluster.instance_groups.1.role", "worker"),
     "cluster.instance_groups[1].role: 'worker' — Input should be 'controller', 'login' or 'compute'"),
    ("negative count", with_("cluster.instance_groups.1.instance_count", -1),
     "cluster.instance_groups[1].instance_count: -1 — Input should be greater than or equal to 0"),
    ("threads per core", with_("cluster.instance_groups.1.threads_per_core", 4),
     "cluster.instance_groups[1].threads_per_core: 4 — Input should be 1 or 2"),
    ("ebs too big", with_("cluster.instance_groups.1.ebs_volume_gib", 20000),
     "cluster.instance_groups[1].ebs_volume_gib: 20000 — Input should be less than or equal to 16384"),
    ("ebs zero", with_("cluster.instance_groups.1.ebs_volume_gib", 0),
     "cluster.instance_groups[1].ebs_volume_gib: 0 — Input should be greater than or equal to 1"),
    ("instance type not ml.*", with_("cluster.instance_groups.1.instance_type", "p5.48xlarge"),
     "cluster.instance_groups[1].instance_type: 'p5.48xlarge' — not an instance type HyperPod clusters accept; did you "
     "mean one of 'ml.p5.48xlarge', 'ml.p5e.48xlarge', 'ml.p5.4xlarge'? allowed: one of the types CreateCluster "
     "accepts (config/facts/cluster_instance_types.json, from botocore's ClusterInstanceType), such as ml.g5.8xlarge"),
    ("deep health checks on CPU", with_("cluster.instance_groups.0.deep_health_checks", ["InstanceStress"]),
     "cluster.instance_groups[0].deep_health_checks: ['InstanceStress'] on 'ml.m5.xlarge'; deep health checks run "
     "only on instance types with NVIDIA GPUs or Trainium devices (config/facts/accelerators.json)"),
    ("controller partitions", with_("cluster.instance_groups.0.partitions", ["x"]),
     "cluster.instance_groups[0].partitions: ['x'] on a controller group; only compute groups belong to partitions"),
    ("group az without subnet", with_("cluster.instance_groups.1.az_id", "usw2-az3"),
     "cluster.instance_groups[1].az_id: 'usw2-az3' has no private subnet; allowed: usw2-az2"),
    ("fsx capacity", with_("storage.lustre.storage_capacity_gib", 3600),
     "storage.lustre.storage_capacity_gib: 3600; allowed: 1200 or a multiple of 2400"),
    ("fsx throughput", with_("storage.lustre.throughput_mib_per_tib", 200),
     "storage.lustre.throughput_mib_per_tib: 200 — Input should be 125, 250, 500 or 1000"),
    ("metadata iops", with_("storage.lustre.metadata", {"mode": "USER_PROVISIONED", "iops": 5000}),
     "storage.lustre.metadata.iops: 5000 with mode USER_PROVISIONED; allowed: 1500, 3000, 6000 or a multiple of "
     "12000 up to 192000"),
    ("az id is a name", with_("network.az_ids", ["us-west-2a"]),
     "network.az_ids[0]: 'us-west-2a' — must be an AZ ID such as use1-az4 (not an AZ name)"),
    ("az id in another region", with_("network.az_ids", ["use1-az4"]),
     "network.az_ids[0]: 'use1-az4' is not in region us-west-2; AZ IDs there start with 'usw2-'"),
    ("cidr host bits", with_("network.vpc_cidr", "10.0.0.1/16"),
     "network.vpc_cidr: '10.0.0.1/16' — must be an IPv4 CIDR block with no host bits set, e.g. 10.0.0.0/16"),
    ("cidr outside vpc", with_("network.private_subnet_cidrs", ["10.9.0.0/18"]),
     "network.private_subnet_cidrs[0]: '10.9.0.0/18' is not inside network.vpc_cidr '10.0.0.0/16'"),
    ("cidrs overlap", with_("network.private_subnet_cidrs", ["10.0.0.0/18"]),
     "network.private_subnet_cidrs[0]: '10.0.0.0/18' overlaps network.public_subnet_cidr '10.0.0.0/24'"),
    ("one cidr per az", with_("network.az_ids", ["usw2-az1", "usw2-az2"]),
     "network.private_subnet_cidrs: 1 CIDR(s) for 2 AZ ID(s); give exactly one private subnet CIDR per AZ ID"),
    ("unknown key", with_("storage.lustre.capacity", 1200),
     "storage.lustre.capacity: unknown key; allowed here: storage_capacity_gib, throughput_mib_per_tib, "
     "data_compression, lustre_version, metadata, mount_path, mount_by, data_repository, existing, root_squash"),
    ("unknown top-level key", with_("orchestrater", "slurm"),
     "orchestrater: unknown key; did you mean 'orchestrator'? allowed here: name, orchestrator, shared_fsx, deployment, tags, network, storage, "
     "cluster, studio, eks, users, observability"),
    ("boolean as string", with_("shared_fsx", "yes"), "shared_fsx: 'yes' — must be true or false"),
    ("boolean as number", with_("network.flow_logs", {"enabled": 1}), "network.flow_logs.enabled: 1 — must be true or false"),
    ("unknown orchestrator", with_("orchestrator", "k8s"), "orchestrator: 'k8s' — Input should be 'slurm' or 'eks'"),
    ("duplicate uid", with_("users", [{"name": "a", "uid": 10001}, {"name": "b", "uid": 10001}]),
     "users[1].uid: 10001 is already used by users[0]; uids must be unique"),
    ("uid below Studio's range", with_("users", [{"name": "a", "uid": 2001}]),
     "users[0].uid: 2001 — Input should be greater than or equal to 10000"),
    ("user name not a Studio profile name", with_("users", [{"name": "data_sci", "uid": 10001}]),
     "users[0].name: 'data_sci' cannot be a Studio user profile name; with studio.enabled use letters, digits and "
     "hyphens only"),
    ("checksum format", with_("cluster.container_runtime", {"enabled": True, "docker_apt_version": "24.0.7",
                                                            "artifacts": [{"name": "enroot", "s3_uri": "s3://bkt/enroot_3.5.0-1_amd64.deb",
                                                                           "sha256": "abc"}]}),
     "cluster.container_runtime.artifacts[0].sha256: 'abc' — must be a SHA-256 digest: 64 lowercase hex characters"),
    ("artifact not a deb", with_("cluster.container_runtime", {"enabled": True, "docker_apt_version": "24.0.7",
                                                               "artifacts": [{"name": "pyxis", "s3_uri": "s3://bkt/pyxis.tar.gz",
                                                                              "sha256": "a" * 64}]}),
     "cluster.container_runtime.artifacts[0].s3_uri: 's3://bkt/pyxis.tar.gz' — must be an s3:// URI of a Debian "
     "package named package_version_arch.deb (key of letters, digits and . _ + ~ - /)"),
    ("unpinned docker", with_("cluster.container_runtime", {"enabled": True}),
     "cluster.container_runtime.docker_apt_version: '' with the container runtime enabled; pin the docker.io package "
     "version, e.g. '24.0.7-0ubuntu2~22.04.1'"),
    ("repeated interface endpoint", with_("network.interface_endpoints", ["ssm", "sts", "ssm"]),
     "network.interface_endpoints[2]: 'ssm' repeats network.interface_endpoints[0]; list each at most once"),
    ("repeated deep health check", with_("cluster.instance_groups.1.deep_health_checks",
                                         ["InstanceStress", "InstanceStress"]),
     "cluster.instance_groups[1].deep_health_checks[1]: 'InstanceStress' repeats "
     "cluster.instance_groups[1].deep_health_checks[0]; list each at most once"),
    ("repeated auto-export event", with_("storage.lustre.data_repository", {"auto_export": ["NEW", "NEW"]}),
     "storage.lustre.data_repository.auto_export[1]: 'NEW' repeats storage.lustre.data_repository.auto_export[0]; "
     "list each at most once"),
    ("repeated artifact name", with_("cluster.container_runtime", {
        "enabled": True, "docker_apt_version": "1",
        "artifacts": [{"name": "enroot", "s3_uri": "s3://bkt/enroot_3.5.0-1_amd64.deb", "sha256": "a" * 64},
                      {"name": "enroot", "s3_uri": "s3://bkt/enroot_3.4.0-1_amd64.deb", "sha256": "b" * 64}]}),
     "cluster.container_runtime.artifacts[1]: name='enroot' repeats cluster.container_runtime.artifacts[0]; list each "
     "at most once"),
    ("compute group without partition", with_("cluster.instance_groups.1.partitions", []),
     "cluster.instance_groups[1].partitions: [] on a compute group; HyperPod's API-driven Slurm configuration needs "
     "exactly one partition name per compute group, e.g. [workers]"),
    ("partition with underscore", with_("cluster.instance_groups.1.partitions", ["gpu_a"]),
     "cluster.instance_groups[1].partitions[0]: 'gpu_a' — must be a partition name HyperPod accepts: letters, digits "
     "and hyphens, starting and ending with a letter or digit (no '_')"),
    ("checkpoints outside the S3-linked path", with_("storage.checkpoint_dir", "/checkpoints"),
     "storage.checkpoint_dir: '/checkpoints' is not inside storage.lustre.data_repository.file_system_path '/data'; "
     "nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /data/checkpoints"),
    ("checkpoints at the linked path itself", with_("storage.checkpoint_dir", "/data"),
     "storage.checkpoint_dir: '/data' is not inside storage.lustre.data_repository.file_system_path '/data'; "
     "nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /data/checkpoints"),
    ("checkpoints on a sibling with the same prefix", with_("storage.checkpoint_dir", "/database/ckpt"),
     "storage.checkpoint_dir: '/database/ckpt' is not inside storage.lustre.data_repository.file_system_path "
     "'/data'; nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /data/checkpoints"),
    ("checkpoints escaping with ..", with_("storage.checkpoint_dir", "/data/../ckpt"),
     "storage.checkpoint_dir: '/data/../ckpt' — must be an absolute path such as /fsx: '/' and components of "
     "letters, digits, '.', '_' and '-' (no spaces, quotes, '$', ';', '`', '*' or other shell characters; no '.' or "
     "'..' component)"),
    ("checkpoints not exported", with_("storage.lustre", {"data_repository": {"auto_export": ["DELETED"]}}),
     "storage.lustre.data_repository.auto_export: ['DELETED'] with storage.checkpoint_dir '/data/checkpoints'; "
     "checkpoints reach S3 only when NEW and CHANGED are exported"),
    ("default checkpoints follow the linked path, explicit ones must stay inside",
     with_("storage", {"lustre": {"data_repository": {"file_system_path": "/datasets"}}, "checkpoint_dir": "/data/c"}),
     "storage.checkpoint_dir: '/data/c' is not inside storage.lustre.data_repository.file_system_path '/datasets'; "
     "nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /datasets/checkpoints"),
    ("checkpoint size zero", with_("storage.checkpoint_gib", 0),
     "storage.checkpoint_gib: 0 — Input should be greater than or equal to 1"),
    ("checkpoint budget zero", with_("storage.checkpoint_budget_minutes", 0),
     "storage.checkpoint_budget_minutes: 0 — Input should be greater than or equal to 1"),
    ("flow log retention", with_("network.flow_logs", {"retention_days": 42}),
     "network.flow_logs.retention_days: 42 — Input should be 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, "
     "545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653"),
    ("subscription e-mail", with_("observability.subscriptions", [{"protocol": "email", "endpoint": "ops"}]),
     "observability.subscriptions[0].endpoint: 'ops' — with protocol 'email' it must be an e-mail address such as "
     "ops@example.com"),
    ("subscription https", with_("observability.subscriptions", [{"protocol": "https", "endpoint": "http://x.io"}]),
     "observability.subscriptions[0].endpoint: 'http://x.io' — with protocol 'https' it must be an https:// URL"),
    ("subscription sqs wants a queue ARN",
     with_("observability.subscriptions", [{"protocol": "sqs", "endpoint": "https://sqs.us-west-2.amazonaws.com/1/q"}]),
     "observability.subscriptions[0].endpoint: 'https://sqs.us-west-2.amazonaws.com/1/q' — with protocol 'sqs' it "
     "must be an SQS queue ARN"),
    ("subscription protocol", with_("observability.subscriptions", [{"protocol": "slack", "endpoint": "#ops"}]),
     "observability.subscriptions[0].protocol: 'slack' — Input should be 'email', 'https', 'sms', 'sqs' or 'lambda'"),
    ("subscription twice", with_("observability.subscriptions", [{"protocol": "email", "endpoint": "a@b.io"}] * 2),
     "observability.subscriptions[1]: protocol='email', endpoint='a@b.io' repeats observability.subscriptions[0]; "
     "list each at most once"),
    ("log retention", with_("observability.log_retention_days", 100),
     "observability.log_retention_days: 100 — Input should be 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, "
     "545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653"),
    ("free capacity threshold", with_("observability.fsx_free_capacity_percent", 0),
     "observability.fsx_free_capacity_percent: 0 — Input should be greater than or equal to 1"),
    ("throughput window", with_("observability.fsx_throughput_minutes", 2),
     "observability.fsx_throughput_minutes: 2 — Input should be greater than or equal to 5"),
    ("root squash to root", with_("storage.lustre.root_squash", {"squash_to": "0:0"}),
     "storage.lustre.root_squash.squash_to: '0:0' — must be 'UID:GID', each from 1 to 4294967294 (0 would be root), "
     "e.g. '65534:65534' (nobody:nogroup); to turn root squash off set enabled: false"),
    ("root squash not uid:gid", with_("storage.lustre.root_squash", {"squash_to": "nobody"}),
     "storage.lustre.root_squash.squash_to: 'nobody' — must be 'UID:GID', each from 1 to 4294967294 (0 would be "
     "root), e.g. '65534:65534' (nobody:nogroup); to turn root squash off set enabled: false"),
    ("studio shares the exempt subnet", with_("network.studio_subnet_cidr", None),
     "network.studio_subnet_cidr: not set, but storage.lustre.root_squash exempts the cluster's subnets (their nodes "
     "keep root on FSx) and Studio would share the first of them; give Studio a subnet of its own (e.g. "
     "network.studio_subnet_cidr: 10.0.4.0/22) or set storage.lustre.root_squash.enabled: false"),
    ("studio subnet overlaps the cluster's", with_("network.studio_subnet_cidr", "10.0.96.0/22"),
     "network.studio_subnet_cidr: '10.0.96.0/22' overlaps network.private_subnet_cidrs[0] '10.0.64.0/18'"),
    ("studio subnet outside the vpc", with_("network.vpc_cidr", "10.1.0.0/16"),
     "network.studio_subnet_cidr: '10.0.4.0/22' is not inside network.vpc_cidr '10.1.0.0/16'"),
    ("unknown observability key", with_("observability.email", "ops@example.com"),
     "observability.email: unknown key; allowed here: subscriptions, log_retention_days, fsx_free_capacity_percent, "
     "fsx_throughput_percent, fsx_throughput_minutes, export_backlog_minutes, node_metrics, grafana"),
    ("node metrics without the collector", with_("observability.node_metrics", {"enabled": True, "artifacts": [
        {"name": "prometheus-node-exporter", "s3_uri": "s3://bkt/prometheus-node-exporter_1.7.0-1_amd64.deb",
         "sha256": "a" * 64}]}),
     "observability.node_metrics.artifacts: no 'prometheus' artifact with node metrics enabled; list the Debian "
     "package mirrored to your S3 bucket as {name: prometheus, s3_uri: s3://<bucket>/<path>/prometheus_<version>_"
     "<arch>.deb, sha256: <64 hex>}"),
    ("node metrics prometheus without agent mode", with_("observability.node_metrics.artifacts", [
        {"name": "prometheus", "s3_uri": "s3://bkt/prometheus_2.31.2+ds1-1ubuntu1_amd64.deb", "sha256": "a" * 64}]),
     "observability.node_metrics.artifacts[0].s3_uri: prometheus '2.31.2+ds1-1ubuntu1' has no agent mode; pin a "
     "build of Prometheus 2.32 or later (e.g. Ubuntu 24.04's 2.45.3 or Debian 12's 2.42.0)"),
    ("node metrics artifact of another package", with_("observability.node_metrics.artifacts", [
        {"name": "dcgm-exporter", "s3_uri": "s3://bkt/prometheus_2.45.3+ds-2_amd64.deb", "sha256": "a" * 64}]),
     "observability.node_metrics.artifacts[0].s3_uri: 's3://bkt/prometheus_2.45.3+ds-2_amd64.deb' holds package "
     "'prometheus', but the artifact is named 'dcgm-exporter'; name it after the package it installs"),
    ("node metrics unknown artifact", with_("observability.node_metrics.artifacts", [
        {"name": "grafana-agent", "s3_uri": "s3://bkt/grafana-agent_0.40.0-1_amd64.deb", "sha256": "a" * 64}]),
     "observability.node_metrics.artifacts[0].name: 'grafana-agent'; allowed: prometheus-node-exporter (every "
     "node), prometheus (every node), dcgm-exporter (compute nodes with an NVIDIA GPU)"),
    ("node metrics scrape interval", with_("observability.node_metrics.scrape_interval_seconds", 1),
     "observability.node_metrics.scrape_interval_seconds: 1 — Input should be greater than or equal to 10"),
    # "Clusters that use continuous provisioning support only the Merge behavior and reject requests that set
    # SlurmConfigStrategy" (HyperPod developer guide, Migrating to API-driven Slurm configuration).
    ("strategy on a continuous cluster", continuous(slurm_config_strategy="Merge"),
     "cluster.slurm_config_strategy: 'Merge' with cluster.node_provisioning_mode: Continuous; allowed: unset "
     "(continuous provisioning clusters support only the Merge behavior and reject requests that set "
     "SlurmConfigStrategy: https://docs.aws.amazon.com/sagemaker/latest/dg/"
     "sagemaker-hyperpod-slurm-api-config-migration.html)"),
    ("no controller instance", with_("cluster.instance_groups.0.instance_count", 0),
     "cluster.instance_groups[0].instance_count: 0 for the controller group; allowed: 1, or 2 or more with "
     "cluster.accounting.database: managed (HyperPod multi-head controllers)"),
    ("backup controllers on the controller's own database", with_("cluster.instance_groups.0.instance_count", 2),
     "cluster.instance_groups[0].instance_count: 2 for the controller group with cluster.accounting.database: "
     "'hyperpod'; allowed: 1, or 2 or more with cluster.accounting.database: managed (HyperPod multi-head "
     "controllers). Backup controllers take over from the primary, so Slurm accounting must live outside the "
     "controllers (an external database, which HyperPod attaches to continuous clusters only: "
     "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html; "
     "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-multihead.html)"),
]


@pytest.mark.parametrize("data, expected", [(d, e) for _, d, e in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_config_reports_exact_error(data, expected):
    assert expected in errors_of(data)


def test_invalid_table_is_large_enough():
    assert len(INVALID) >= 20


def test_all_errors_are_reported_together():
    data = with_("name", "bad_name")
    data["cluster"]["instance_groups"][1].update(instance_count=-5, threads_per_core=3)
    data["storage"] = {"lustre": {"storage_capacity_gib": 1000}}
    errors = errors_of(data)
    assert [e.split(":")[0] for e in errors] == ["name", "cluster.instance_groups[1].instance_count",
                                                "cluster.instance_groups[1].threads_per_core"]
    # Semantic rules run once the shapes are right, and are collected together too.
    data = with_("storage.lustre.storage_capacity_gib", 1000)
    data["network"] = {"az_ids": ["use1-az1"]}
    assert len(errors_of(data)) == 2


@pytest.mark.parametrize("strategy, mode, sent", [
    (None, "Standard", "Managed"), ("Overwrite", "Standard", "Overwrite"), ("Merge", "Standard", "Merge"),
    (None, "Continuous", None)])
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
        "sagemaker-hyperpod-slurm-api-config-migration.html)"]
    assert errors_of(with_("cluster.node_provisioning_mode", None))[0].startswith(
        "cluster.node_provisioning_mode: None — Input should be 'Continuous' or 'Standard'")


def test_valid_subscriptions_for_every_protocol():
    subs = [{"protocol": "email", "endpoint": "ops@example.com"}, {"protocol": "https", "endpoint": "https://h.io/x"},
            {"protocol": "sms", "endpoint": "+14155550100"},
            {"protocol": "sqs", "endpoint": "arn:aws:sqs:us-west-2:123456789012:alerts"},
            {"protocol": "lambda", "endpoint": "arn:aws:lambda:us-west-2:123456789012:function:page-oncall"}]
    cfg = parse_config(with_("observability.subscriptions", subs))
    assert [s.protocol for s in cfg.observability.subscriptions] == ["email", "https", "sms", "sqs", "lambda"]


def test_error_message_names_source_and_every_problem():
    with pytest.raises(ConfigError) as info:
        parse_config(with_("name", "_"), "config/mine.yaml")
    assert str(info.value).startswith("1 configuration error(s) in config/mine.yaml:\n  - name: '_'")


def test_default_checkpoint_dir_is_inside_whatever_path_is_linked():
    from platform_config.storage import checkpoint_dir
    assert checkpoint_dir(PlatformConfig().storage) == "/data/checkpoints"
    cfg = parse_config(with_("storage.lustre", {"data_repository": {"file_system_path": "/datasets/"}}))
    assert checkpoint_dir(cfg.storage) == "/datasets/checkpoints"


def test_defaults_are_a_small_real_cluster():
    cfg = PlatformConfig()
    assert [(g.role, g.instance_type, g.instance_count) for g in cfg.cluster.instance_groups] == [
        ("controller", "ml.m5.xlarge", 1), ("login", "ml.m5.xlarge", 1), ("compute", "ml.g5.8xlarge", 1)]
    assert cfg.orchestrator == "slurm" and cfg.shared_fsx is True


@pytest.mark.parametrize("variant", VARIANT_FILES)
def test_shipped_configs_are_valid(variant):
    load_config(VARIANT_FILES[variant])  # shapes, then every rule in platform_config.rules.RULES


def test_every_shipped_config_is_a_variant_the_suite_loads_and_synthesizes():
    # VARIANT_FILES feeds test_shipped_configs_are_valid (every rule) and the synth fixtures (cfn-lint, cdk-nag, the
    # shape tests): a config added to config/ or config/examples/ without an entry there would be checked by nothing.
    shipped = {*(ROOT / "config").glob("*.yaml"), *(ROOT / "config" / "examples").glob("*.yaml")}
    assert shipped == set(VARIANT_FILES.values())


def test_every_rule_of_the_config_model_runs_on_every_config():
    # A rule function written beside its section but left out of RULES would never refuse anything.
    import importlib
    import inspect
    import pkgutil

    import platform_config
    from platform_config.rules import RULES
    defined = set()
    for module in pkgutil.iter_modules(platform_config.__path__):
        for name, fn in inspect.getmembers(importlib.import_module(f"platform_config.{module.name}"),
                                           inspect.isfunction):
            if name.endswith("_errors") and not name.startswith("_") and fn.__module__.startswith("platform_config."):
                defined.add(fn)
    # accounting_errors runs managed_database_errors; semantic_errors runs RULES.
    assert {fn.__name__ for fn in defined - set(RULES)} == {"managed_database_errors", "semantic_errors"}


@pytest.mark.parametrize("orchestrator, page", [("slurm", "sagemaker-hyperpod-resiliency-slurm-deep-health-checks"),
                                                ("eks", "sagemaker-hyperpod-eks-resiliency-deep-health-checks")])
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
        "deep_health_checks without InstanceConnectivity (e.g. [InstanceStress])"]
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


def test_default_yaml_spells_out_the_model_defaults():
    assert load_config(VARIANT_FILES["default"]) == PlatformConfig()


def test_yaml_booleans_are_true_false_only(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("shared_fsx: yes\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.errors == ["shared_fsx: 'yes' — must be true or false"]
    path.write_text("shared_fsx: false\n")
    assert load_config(path).shared_fsx is False


def test_yaml_duplicate_keys_are_rejected(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: a\nname: b\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    # The message names the file and quotes the line under it (libyaml's parser, used for speed, does neither: the
    # file is read again).
    assert info.value.errors == [f'YAML: duplicate key \'name\'\n      in "{path}", line 2, column 1:\n'
                                 '        name: b\n        ^']


def test_both_yaml_parsers_read_configs_alike():
    from platform_config.loading import FastStrictYamlLoader, StrictYamlLoader
    import yaml
    text = "shared_fsx: yes\nname: x\nusers:\n  - {name: a, uid: 10000, sudo: true}\nflag: on\n"
    assert yaml.load(text, Loader=FastStrictYamlLoader) == yaml.load(text, Loader=StrictYamlLoader) == {  # noqa: S506
        "shared_fsx": "yes", "name": "x", "users": [{"name": "a", "uid": 10000, "sudo": True}], "flag": "on"}


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert info.value.errors == [f"config: '{tmp_path / 'nope.yaml'}' — file not found"]


def test_context_overrides_win_over_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("shared_fsx: true\n")
    assert load_config(path, {"shared_fsx": "false"}).shared_fsx is False
    assert load_config(path, {"shared_fsx": None}).shared_fsx is True
    with pytest.raises(ConfigError) as info:
        load_config(path, {"shared_fsx": "no"})
    assert info.value.errors == ["shared_fsx: 'no' — must be true or false (from -c shared_fsx=no)"]
    assert load_config(path, {"orchestrator": "eks"}).orchestrator == "eks"
    with pytest.raises(ConfigError) as info:
        load_config(path, {"orchestrator": "pbs"})
    assert info.value.errors == ["orchestrator: 'pbs' — Input should be 'slurm' or 'eks' (from -c orchestrator=pbs)"]
    assert info.value.source == f"{path} with -c orchestrator=pbs"


def test_committed_json_schema_is_current():
    committed = json.loads((ROOT / "config" / "schema.json").read_text())
    assert committed == json.loads(json.dumps(json_schema())), "run `make schema` and commit config/schema.json"


def test_schema_rejects_unknown_keys_for_editors():
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["InstanceGroup"]["additionalProperties"] is False


@pytest.mark.parametrize("args, expected", [
    (["-c", "orchestrator=pbs"], "orchestrator: 'pbs' — Input should be 'slurm' or 'eks' (from -c orchestrator=pbs)"),
    (["-c", "shared_fsx=maybe"], "shared_fsx: 'maybe' — must be true or false (from -c shared_fsx=maybe)"),
    (["-c", "cluster.instance_groups[2].instance_count=-1"],
     "cluster.instance_groups[2].instance_count: -1 — Input should be greater than or equal to 0 "
     "(from -c cluster.instance_groups[2].instance_count=-1)"),
    (["-c", "nmae=dev"], "nmae: unknown key; did you mean 'name'?"),
    (["-c", "config=config/missing.yaml"], "config: 'config/missing.yaml' — file not found"),
])
def test_app_reports_bad_input_without_traceback(args, expected):
    context = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args[1::2]}
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"PATH": APP_PATH, "CDK_CONTEXT_JSON": json.dumps(context),
                                 "CDK_OUTDIR": "/tmp/should-not-be-written",
                                 "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"})
    assert result.returncode == 1
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------- EKS
def eks_base(**eks) -> dict:
    return {"name": "test", "orchestrator": "eks", "eks": eks,
            "cluster": {"instance_groups": [copy.deepcopy(WORKERS)]}}


TEAM = {"name": "research", "instance_type": "ml.g5.8xlarge", "instance_count": 1}

EKS_BAD_INPUT = [
    ("version too old", eks_base(kubernetes_version="1.29"),
     "eks.kubernetes_version: '1.29' — Input should be '1.30', '1.31', '1.32', '1.33' or '1.34'"),
    ("version HyperPod does not list", eks_base(kubernetes_version="1.35"),
     "eks.kubernetes_version: '1.35' — Input should be '1.30', '1.31', '1.32', '1.33' or '1.34'"),
    ("version past standard support", eks_base(kubernetes_version="1.33"),
     "eks.kubernetes_version: '1.33' left EKS standard support on 2026-07-29 (extended support, billed per cluster "
     "hour, ends 2027-07-29); use 1.34, or set eks.extended_support: true to accept the cost"),
    ("kube-proxy for another version", eks_base(addons={"kube_proxy": "v1.33.10-eksbuild.13"}),
     "eks.addons.kube_proxy: 'v1.33.10-eksbuild.13' does not match eks.kubernetes_version '1.34'; use a "
     "v1.34.x-eksbuild.N version"),
    ("a training operator pin older than the version", eks_base(addons={"training_operator": "v1.2.0-eksbuild.1"}),
     "eks.addons.training_operator: 'v1.2.0-eksbuild.1' does not support eks.kubernetes_version '1.34' (it supports "
     "1.28, 1.29, 1.30, 1.31, 1.32, 1.33; https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator.html "
     "(supported Kubernetes 1.28-1.33); elastic training from v1.2: "
     "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html); for 1.34 use "
     "v1.2.1-eksbuild.1"),
    ("coredns pinned for another version", eks_base(kubernetes_version="1.32", extended_support=True,
                                                    addons={"coredns": "v1.12.4-eksbuild.1"}),
     "eks.addons.coredns: 'v1.12.4-eksbuild.1' does not support eks.kubernetes_version '1.32' (it supports 1.33, "
     "1.34; https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html (latest version per Kubernetes "
     "version)); for 1.32 use v1.11.4-eksbuild.24"),
    ("addon pin without a source", eks_base(addons={"fsx_csi_driver": "v1.7.0-eksbuild.1"}),
     "eks.addons.fsx_csi_driver: 'v1.7.0-eksbuild.1' has no recorded source; known: v1.6.0-eksbuild.1 (leave it "
     "unset for EKS's default, or add the version to ADDON_SUPPORT in platform_config/eks.py with its source)"),
    ("every compute group tainted", {**eks_base(), "cluster": {"instance_groups": [
        {**WORKERS, "kubernetes_taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]},
        {**WORKERS, "name": "b", "kubernetes_taints": [{"key": "dedicated", "value": "b", "effect": "NoExecute"}]}]}},
     "cluster.instance_groups: every compute group carries a NoSchedule or NoExecute taint; the FSx CSI controller, "
     "the training operator and task governance (Kueue) tolerate none, so they could never run; leave at least one "
     "compute group untainted (or use effect PreferNoSchedule)"),
    ("the old vpc-cni pin, which no source names", eks_base(addons={"vpc_cni": "v1.20.4-eksbuild.1"}),
     "eks.addons.vpc_cni: 'v1.20.4-eksbuild.1' has no recorded source; known: none (leave it unset for EKS's "
     "default, or add the version to ADDON_SUPPORT in platform_config/eks.py with its source)"),
    ("training operator too old for elastic jobs", eks_base(addons={"training_operator": "v1.0.1-eksbuild.1"}),
     "eks.addons.training_operator: 'v1.0.1-eksbuild.1'; elastic training (elasticPolicy) needs v1.2 or later "
     "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html)"),
    ("addon version format", eks_base(addons={"coredns": "1.11"}),
     "eks.addons.coredns: '1.11' — must be an EKS add-on version such as v1.20.1-eksbuild.3"),
    ("public endpoint without allow-list", eks_base(endpoint={"public": True}),
     "eks.endpoint.public_access_cidrs: [] with eks.endpoint.public: true; list the CIDR blocks allowed to reach "
     "the public endpoint"),
    ("public endpoint open to the world", eks_base(endpoint={"public": True, "public_access_cidrs": ["0.0.0.0/0"]}),
     "eks.endpoint.public_access_cidrs[0]: '0.0.0.0/0' opens the API server to the internet; allowed: specific "
     "CIDR blocks"),
    ("allow-list on a private endpoint", eks_base(endpoint={"public_access_cidrs": ["203.0.113.0/24"]}),
     "eks.endpoint.public_access_cidrs: ['203.0.113.0/24'] with eks.endpoint.public: false; remove them or set "
     "public: true"),
    ("control plane in one AZ", eks_base(control_plane_subnets=[{"az_id": "usw2-az1", "cidr": "10.0.1.0/28"},
                                                                {"az_id": "usw2-az1", "cidr": "10.0.1.16/28"}]),
     "eks.control_plane_subnets: 1 distinct AZ ID(s) ['usw2-az1']; the EKS control plane needs subnets in at least "
     "two AZs"),
    ("control plane subnet too small", eks_base(control_plane_subnets=[{"az_id": "usw2-az1", "cidr": "10.0.1.0/29"},
                                                                       {"az_id": "usw2-az3", "cidr": "10.0.1.16/28"}]),
     "eks.control_plane_subnets[0].cidr: '10.0.1.0/29'; EKS needs at least a /28 per subnet"),
    ("control plane overlaps private subnet", eks_base(control_plane_subnets=[
        {"az_id": "usw2-az1", "cidr": "10.0.64.0/28"}, {"az_id": "usw2-az3", "cidr": "10.0.1.16/28"}]),
     "eks.control_plane_subnets[0].cidr: '10.0.64.0/28' overlaps network.private_subnet_cidrs[0] '10.0.64.0/18'"),
    ("no compute group", {"orchestrator": "eks", "cluster": {"instance_groups": [copy.deepcopy(CONTROLLER)]}},
     "cluster.instance_groups: no group with role 'compute'; an EKS cluster needs at least one"),
    ("taint effect", {"orchestrator": "eks", "cluster": {"instance_groups": [
        {**WORKERS, "kubernetes_taints": [{"key": "gpu", "effect": "Never"}]}]}},
     "cluster.instance_groups[0].kubernetes_taints[0].effect: 'Never' — Input should be 'NoSchedule', "
     "'PreferNoSchedule' or 'NoExecute'"),
    ("label key", {"orchestrator": "eks", "cluster": {"instance_groups": [
        {**WORKERS, "kubernetes_labels": {"bad key": "x"}}]}},
     "cluster.instance_groups[0].kubernetes_labels key: 'bad key' — must be a Kubernetes label key such "
     "as team or example.com/pool"),
    ("studio partitions in the team directories", {**eks_base(task_governance={"teams": [TEAM]}),
                                                   "studio": {"partition_root": "eks"}},
     "studio.partition_root: 'eks' is where the EKS team directories live; allowed: any other directory name "
     "(the default is 'studio')"),
    ("team name", eks_base(task_governance={"teams": [{**TEAM, "name": "Research"}]}),
     "eks.task_governance.teams[0].name: 'Research' — must be 1-40 lowercase letters, digits and '-', starting and "
     "ending alphanumeric"),
    ("duplicate team", eks_base(task_governance={"teams": [TEAM, TEAM]}),
     "eks.task_governance.teams[1].name: 'research' is already used by eks.task_governance.teams[0]; team names must "
     "be unique"),
    ("team without a size", eks_base(task_governance={"teams": [{"name": "a", "instance_type": "ml.g5.8xlarge"}]}),
     "eks.task_governance.teams[0]: instance_count=None, accelerators=None; give exactly one of them"),
    ("team on a type the cluster lacks", eks_base(task_governance={"teams": [{**TEAM, "instance_type": "ml.p5.48xlarge"}]}),
     "eks.task_governance.teams[0].instance_type: 'ml.p5.48xlarge' is not the type of any compute group; allowed: "
     "ml.g5.8xlarge"),
    ("teams guaranteed more than exists", eks_base(task_governance={"teams": [
        {**TEAM, "instance_count": 2}, {**TEAM, "name": "prod", "instance_count": 1}]}),
     "eks.task_governance.teams: 3 guaranteed ml.g5.8xlarge instance(s) across teams; the compute groups have 2"),
    ("borrow limit without borrowing", eks_base(task_governance={"teams": [{**TEAM, "sharing": "Lend",
                                                                          "borrow_limit_percent": 80}]}),
     "eks.task_governance.teams[0].borrow_limit_percent: 80 with sharing 'Lend'; a borrow limit applies only to "
     "LendAndBorrow"),
    ("priority weight", eks_base(task_governance={"priority_classes": [{"name": "urgent", "weight": 101}]}),
     "eks.task_governance.priority_classes[0].weight: 101 — Input should be less than or equal to 100"),
    ("duplicate priority class", eks_base(task_governance={"priority_classes": [{"name": "a", "weight": 1},
                                                                               {"name": "a", "weight": 2}]}),
     "eks.task_governance.priority_classes[1].name: 'a' is listed twice; names must be unique"),
    ("team member who is not a user", {**eks_base(task_governance={"teams": [{**TEAM, "members": ["carol"]}]}),
                                       "users": [{"name": "alice", "uid": 10001}]},
     "eks.task_governance.teams[0].members[0]: 'carol' is not a user; allowed: alice"),
    ("user in two teams", {**eks_base(task_governance={"teams": [
        {**TEAM, "instance_count": 1, "members": ["alice"]},
        {**TEAM, "name": "prod", "instance_count": 1, "members": ["alice"]}]}),
        "cluster": {"instance_groups": [{**copy.deepcopy(WORKERS), "instance_count": 2}]},
        "users": [{"name": "alice", "uid": 10001}]},
     "eks.task_governance.teams[1].members[0]: 'alice' is already a member of team 'research'; a Studio profile "
     "runs as one team's role"),
    ("teams with governance off", eks_base(task_governance={"enabled": False, "teams": [TEAM]}),
     "eks.task_governance.teams: 1 team(s) with task governance disabled; enable it or remove the teams"),
    ("existing VPC without control-plane subnets", {
        "orchestrator": "eks", "cluster": {"instance_groups": [copy.deepcopy(WORKERS)]},
        "network": {"existing": {"vpc_id": "vpc-0123456789abcdef0", "security_group_id": "sg-0123456789abcdef0",
                                 "private_subnets": [{"id": "subnet-0123456789abcdef0", "az_id": "usw2-az2"}]}}},
     "network.existing.control_plane_subnets: 0 distinct AZ ID(s) []; the EKS control plane needs subnets in at "
     "least two AZs"),
]


@pytest.mark.parametrize("case, data, expected", EKS_BAD_INPUT, ids=[c[0] for c in EKS_BAD_INPUT])
def test_eks_bad_input_names_key_value_and_what_is_allowed(case, data, expected):
    assert expected in errors_of(data)


def test_extended_support_is_accepted_when_asked_for_and_add_ons_default_to_eks():
    assert parse_config(eks_base(kubernetes_version="1.33", extended_support=True), "test").eks.extended_support
    cfg = parse_config(eks_base(), "test")
    assert cfg.eks.kubernetes_version == "1.34" and not cfg.eks.extended_support
    assert set(cfg.eks.addons.model_dump().values()) == {None}  # every add-on at EKS's default for the version


def test_one_switch_turns_the_default_config_into_eks():
    cfg = load_config(VARIANT_FILES["default"], {"orchestrator": "eks"})
    assert cfg.orchestrator == "eks"
    assert [g.role for g in cfg.cluster.instance_groups if g.role == "compute"]


def test_existing_file_system_needs_real_identifiers():
    errors = errors_of(with_("storage.lustre.existing", {"file_system_id": "fs-1", "dns_name": "fsx.example.com",
                                                          "mount_name": "ABC", "data_bucket": "Data_Bucket"}))
    assert errors == [
        "storage.lustre.existing.file_system_id: 'fs-1' — must be a file system ID such as fs-0123456789abcdef0",
        "storage.lustre.existing.dns_name: 'fsx.example.com' — must be the file system's DNS name, "
        "fs-....fsx.<region>.amazonaws.com",
        "storage.lustre.existing.mount_name: 'ABC' — must be the file system's LustreConfiguration.MountName",
        "storage.lustre.existing.data_bucket: 'Data_Bucket' — must be an S3 bucket name"]


# ---------------------------------------------------------------------------------------------- slurm accounting
def accounting(**changes) -> dict:
    """base() (2 x ml.g5.8xlarge: 2 nodes, 2 GPUs) with two users, one QoS and one department."""
    data = base()
    data["shared_fsx"] = False  # departments need per-user mode (test_departments_need_per_user_mode)
    data["users"] = [{"name": "ada", "uid": 20001}, {"name": "bob", "uid": 20002}]
    data["cluster"]["accounting"] = {
        "enabled": True,
        "qos": [{"name": "short", "max_wall_minutes": 60, "max_tres_per_user": {"gpu": 1}}],
        "departments": [{"name": "physics", "qos": ["normal", "short"], "default_qos": "normal",
                         "users": ["ada", "bob"], "coordinators": ["ada"]}],
    }
    data["cluster"]["accounting"].update(changes)
    return data


def physics(**changes) -> list[dict]:
    return [{"name": "physics", "qos": ["normal", "short"], "users": ["ada", "bob"], **changes}]


def cpu_workers(data: dict) -> dict:
    for group in data["cluster"]["instance_groups"]:
        if group["role"] == "compute":
            group["instance_type"] = "ml.c5.9xlarge"
    return data


ACCOUNTING_INVALID = [
    ("unknown department qos", accounting(departments=physics(qos=["normal", "long"])),
     "cluster.accounting.departments[0].qos[1]: 'long' is not a QoS; allowed: normal, short (define it under "
     "cluster.accounting.qos)"),
    ("unknown default qos", accounting(departments=physics(qos=[], default_qos="gold")),
     "cluster.accounting.departments[0].default_qos: 'gold' is not a QoS; allowed: normal, short (define it under "
     "cluster.accounting.qos)"),
    ("default qos not allowed", accounting(departments=physics(qos=["short"], default_qos="normal")),
     "cluster.accounting.departments[0].default_qos: 'normal' is not in the department's qos ['short']; add it "
     "there"),
    ("duplicate account", accounting(departments=physics() + physics(users=[])),
     "cluster.accounting.departments[1].name: 'physics' is already used by cluster.accounting.departments[0]; each "
     "department is one Slurm account, names must be unique"),
    ("root account", accounting(departments=physics(name="root")),
     "cluster.accounting.departments[0].name: 'root' is Slurm's own top account; choose another name"),
    ("platform users account", accounting(departments=physics(name="hyperpod-users")),
     "cluster.accounting.departments[0].name: 'hyperpod-users' is the platform's account for users no department "
     "lists; choose another name"),
    ("duplicate qos", accounting(qos=[{"name": "short"}, {"name": "short"}]),
     "cluster.accounting.qos[1].name: 'short' is already used by cluster.accounting.qos[0]; QoS names must be "
     "unique"),
    ("unknown user", accounting(departments=physics(users=["ada", "zed"])),
     "cluster.accounting.departments[0].users[1]: 'zed' is not a user; allowed: ada, bob (Slurm runs jobs as the "
     "user's POSIX account, which `users` creates on every node)"),
    ("user listed twice", accounting(departments=physics(users=["ada", "ada"])),
     "cluster.accounting.departments[0].users[1]: 'ada' repeats cluster.accounting.departments[0].users[0]; list "
     "each at most once"),
    ("coordinator not a member", accounting(departments=physics(users=["bob"], coordinators=["ada"])),
     "cluster.accounting.departments[0].coordinators[0]: 'ada' is not one of the department's users ['bob']; list "
     "them in users first"),
    ("gpus over the cluster", accounting(qos=[{"name": "short", "max_tres_per_user": {"gpu": 8}}]),
     "cluster.accounting.qos[0].max_tres_per_user.gpu: 8; the compute groups have 2 NVIDIA GPU(s) in total "
     "(counts in config/facts/accelerators.json), so the limit could never bind; allowed: at most 2"),
    ("gpu limit without gpus", cpu_workers(accounting(qos=[{"name": "short", "grp_tres": {"gpu": 1}}])),
     "cluster.accounting.qos[0].grp_tres.gpu: 1; no compute group has NVIDIA GPUs (instance types ml.c5.9xlarge; GPU "
     "types and counts in config/facts/accelerators.json), so Slurm has no gpu GRES to limit; remove the gpu limit "
     "or add a GPU instance group"),
    ("nodes over the cluster", accounting(qos=[{"name": "short", "grp_tres": {"node": 3}}]),
     "cluster.accounting.qos[0].grp_tres.node: 3; the compute groups have 2 node(s) in total, so the limit could "
     "never bind; allowed: at most 2"),
    ("per user over the group", accounting(qos=[{"name": "short", "max_tres_per_user": {"cpu": 64},
                                                 "grp_tres": {"cpu": 32}}]),
     "cluster.accounting.qos[0].max_tres_per_user.cpu: 64 is more than grp_tres.cpu 32, the QoS's total; allowed: "
     "at most 32"),
    ("departments while disabled", accounting(enabled=False),
     "cluster.accounting.enabled: false with 1 department(s) and 1 QoS; enable accounting or remove them"),
    ("account name", accounting(departments=physics(name="Physics")),
     "cluster.accounting.departments[0].name: 'Physics' — must be 1-30 lowercase letters, digits, '_' and '-', "
     "starting with a letter"),
    ("unknown tres", accounting(qos=[{"name": "short", "max_tres_per_user": {"gpus": 1}}]),
     "cluster.accounting.qos[0].max_tres_per_user.gpus: unknown key; did you mean 'gpu'? allowed here: cpu, node, "
     "gpu"),
    ("description sacctmgr would split", accounting(departments=physics(description="Physics, Astronomy")),
     "cluster.accounting.departments[0].description: 'Physics, Astronomy' — must be at most 100 letters, digits, "
     "spaces and .:()/_-"),
    ("zero fairshare", accounting(departments=physics(fairshare=0)),
     "cluster.accounting.departments[0].fairshare: 0 — Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize("data, message", [c[1:] for c in ACCOUNTING_INVALID], ids=[c[0] for c in ACCOUNTING_INVALID])
def test_accounting_bad_input_gets_an_exact_error(data, message):
    assert errors_of(data) == [message]


def test_accounting_on_eks_is_refused():
    data = accounting()
    data["orchestrator"] = "eks"
    assert ("cluster.accounting.enabled: true with orchestrator 'eks'; Slurm accounting needs orchestrator slurm"
            in errors_of(data))


def test_accounting_valid_config_and_its_parameters():
    from platform_config.accounting_plan import accounting_parameters
    cfg = parse_config(accounting(departments=physics(coordinators=["ada"], fairshare=30)))
    params = accounting_parameters(cfg)
    assert params["qos"] == [{"name": "short", "description": "", "priority": 0, "max_tres_per_user": "gres/gpu=1",
                              "grp_tres": "", "max_wall_minutes": 60, "max_jobs_per_user": None}]
    assert params["departments"] == [{"name": "physics", "description": "", "fairshare": 30,
                                      "qos": ["normal", "short"], "default_qos": "normal", "users": ["ada", "bob"],
                                      "coordinators": ["ada"]}]
    # A department without a qos list may use its default QoS only.
    cfg = parse_config(accounting(departments=physics(qos=[], default_qos="short")))
    assert accounting_parameters(cfg)["departments"][0]["qos"] == ["short"]
    assert accounting_parameters(PlatformConfig())["enabled"] is False


# ---------------------------------------------------------------------------------------------- login access, budgets
LOGIN = {"name": "login", "role": "login", "instance_type": "ml.m5.xlarge", "instance_count": 2}


def with_login(**access) -> dict:
    data = base()
    data["cluster"]["instance_groups"].append(dict(LOGIN))
    data["users"] = [{"name": "ada", "uid": 20001}]
    data["cluster"]["login_access"] = access
    return data


def budgeted(budget: dict | None = None, **department) -> dict:
    data = accounting(departments=physics(**department))
    if budget is not None:
        data["cluster"]["budget"] = budget
    return data


LOGIN_AND_BUDGET_INVALID = [
    ("ssh open to everything", with_login(ssh_allowed_cidrs=["10.0.0.0/16", "0.0.0.0/0"]),
     "cluster.login_access.ssh_allowed_cidrs[1]: '0.0.0.0/0' would let every address that routes into the VPC reach "
     "the login nodes' SSH; list the networks people connect from, e.g. 10.0.0.0/16"),
    ("run as ssm-user", with_login(run_as_default_user="ssm-user"),
     "cluster.login_access.run_as_default_user: 'ssm-user'; Session Manager starts a session only as a user that "
     "exists on the node: allowed: nobody (untagged principals are refused) or one of users (ada); never ssm-user or "
     "root"),
    ("run as root", with_login(run_as_default_user="root"),
     "cluster.login_access.run_as_default_user: 'root'; Session Manager starts a session only as a user that exists "
     "on the node: allowed: nobody (untagged principals are refused) or one of users (ada); never ssm-user or root"),
    ("budget without a recipient", budgeted({"monthly_limit_usd": 1000, "notify_topic": False}),
     "cluster.budget: notify_topic: false and no emails; a budget alert needs a recipient: set notify_topic: true "
     "(the platform's alarm topic) or list emails"),
    ("department budget without the cluster's", budgeted(monthly_budget_usd=500),
     "cluster.accounting.departments[0].monthly_budget_usd: 500 without cluster.budget; department budgets take "
     "their thresholds and recipients from cluster.budget: add it (monthly_limit_usd, thresholds_percent, emails)"),
    ("department recipients without a budget", budgeted({"monthly_limit_usd": 1000},
                                                        budget_emails=["it@example.edu"]),
     "cluster.accounting.departments[0].budget_emails: ['it@example.edu'] without monthly_budget_usd; set the "
     "department's monthly budget or remove its budget_emails"),
    ("repeated threshold", budgeted({"monthly_limit_usd": 1000, "thresholds_percent": [80, 80]}),
     "cluster.budget.thresholds_percent[1]: 80 repeats cluster.budget.thresholds_percent[0]; list each at most "
     "once"),
    ("threshold out of range", budgeted({"monthly_limit_usd": 1000, "thresholds_percent": [0]}),
     "cluster.budget.thresholds_percent[0]: 0; allowed: 1-1000 (percent of the monthly limit)"),
    ("too many notifications", budgeted({"monthly_limit_usd": 1000, "thresholds_percent": [10, 20, 30, 40, 50, 60]}),
     "cluster.budget.thresholds_percent: [10, 20, 30, 40, 50, 60] — List should have at most 5 items after "
     "validation, not 6"),
    ("bad e-mail", budgeted({"monthly_limit_usd": 1000, "emails": ["admins"]}),
     "cluster.budget.emails[0]: 'admins' — must be an e-mail address such as hpc-admins@example.edu"),
    ("zero limit", budgeted({"monthly_limit_usd": 0}),
     "cluster.budget.monthly_limit_usd: 0 — Input should be greater than or equal to 1"),
    ("aws: tag key", budgeted({"monthly_limit_usd": 1000, "department_tag_key": "aws:department"}),
     "cluster.budget.department_tag_key: 'aws:department' — must be a tag key: at most 128 letters, digits, spaces "
     "and _.:/=+-@, not starting with aws:"),
]


@pytest.mark.parametrize("data, message", [c[1:] for c in LOGIN_AND_BUDGET_INVALID],
                         ids=[c[0] for c in LOGIN_AND_BUDGET_INVALID])
def test_login_access_and_budget_bad_input_gets_an_exact_error(data, message):
    assert errors_of(data) == [message]


def test_an_existing_vpc_needs_the_ssh_networks_spelled_out():
    data = with_login()
    data["network"] = {"existing": {"vpc_id": "vpc-0123456789abcdef0", "security_group_id": "sg-0123456789abcdef0",
                                    "private_subnets": [{"id": "subnet-0123456789abcdef0", "az_id": "usw2-az2"}],
                                    "studio_subnet": {"id": "subnet-0123456789abcdef1", "az_id": "usw2-az2"}}}
    assert errors_of(data) == [
        "cluster.login_access.ssh_allowed_cidrs: [] with network.existing; the default is the VPC's CIDR, which the "
        "platform cannot know for an existing VPC: list the networks people connect from, or set "
        "cluster.login_access.load_balancer: false"]
    data["cluster"]["login_access"] = {"ssh_allowed_cidrs": ["10.1.0.0/16"]}
    parse_config(data)
    data["cluster"]["login_access"] = {"load_balancer": False}
    parse_config(data)


def test_which_configs_get_a_load_balancer_and_department_tags():
    from platform_config.budgets import department_tags
    from platform_config.login_access import login_load_balancer, session_run_as
    assert login_load_balancer(parse_config(with_login())) and session_run_as(parse_config(with_login()))
    assert not login_load_balancer(parse_config(with_login(load_balancer=False)))
    no_login = parse_config(base())
    assert not login_load_balancer(no_login)
    empty = with_login()
    empty["cluster"]["instance_groups"][-1]["instance_count"] = 0
    assert not login_load_balancer(parse_config(empty))
    assert parse_config(with_login(run_as_default_user="ada")).cluster.login_access.run_as_default_user == "ada"
    # department tags only with budgets; a user's tag is their first (default) department's
    assert department_tags(parse_config(budgeted())) == {}
    two = budgeted({"monthly_limit_usd": 1000, "department_tag_key": "cost-center"})
    two["cluster"]["accounting"]["departments"].append({"name": "biology", "users": ["bob", "ada"]})
    assert department_tags(parse_config(two)) == {"ada": ("cost-center", "physics"), "bob": ("cost-center", "physics")}
# ---------------------------------------------------------------------------------------------- GPUs and PAM
@pytest.mark.parametrize("instance_type, gpus", [("ml.g5.2xlarge", 1), ("ml.g5.12xlarge", 4), ("ml.g5.48xlarge", 8),
                                                 ("ml.p5.48xlarge", 8), ("ml.trn1.32xlarge", 0),
                                                 ("ml.c5.9xlarge", 0)])
def test_nvidia_gpus_per_instance_type_are_the_gres_slurm_should_show(instance_type, gpus):
    from platform_config.facts import nvidia_gpus
    assert nvidia_gpus(instance_type) == gpus  # Trainium has Neuron devices, not GPU GRES


def test_controller_ssh_is_admins_unless_opened_to_all():
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    assert parse_config(data, "test.yaml").cluster.controller_ssh == "admins"
    data["cluster"]["controller_ssh"] = "all"
    assert parse_config(data, "test.yaml").cluster.controller_ssh == "all"
    data["cluster"]["controller_ssh"] = "everyone"
    with pytest.raises(ConfigError, match=r"cluster\.controller_ssh.*'everyone'.*admins.*all"):
        parse_config(data, "test.yaml")


PAM_ADOPT_PACKAGE = {"name": "slurm-pam-adopt", "s3_uri": "s3://mirror/pam/slurm-pam-adopt_24.11.5-1_amd64.deb",
                     "sha256": "a" * 64}


def test_pam_slurm_adopt_needs_the_module_package_the_ami_lacks():
    data = base()
    data["cluster"]["pam_slurm_adopt"] = True
    assert errors_of(data) == [
        "cluster.pam_slurm_adopt: true with cluster.pam_slurm_adopt_artifacts: []; HyperPod's AMI has no "
        "pam_slurm_adopt.so and the platform fetches nothing from GitHub at deploy time, so every compute node would "
        "stop. Allowed: false, or a .deb of pam_slurm_adopt.so built from the source of the Slurm release HyperPod "
        "runs (as awslabs/awsome-distributed-ai@95b939cd 1.architectures/5.sagemaker-hyperpod/LifecycleScripts/"
        "base-config/utils/pam_adopt_cgroup_wheel.sh builds it) in pam_slurm_adopt_artifacts"]
    data["cluster"]["pam_slurm_adopt_artifacts"] = [PAM_ADOPT_PACKAGE]
    assert parse_config(data, "test.yaml").cluster.pam_slurm_adopt is True
    data["cluster"]["pam_slurm_adopt"] = False
    assert errors_of(data) == [
        "cluster.pam_slurm_adopt_artifacts: 1 package(s) with cluster.pam_slurm_adopt: false; allowed only with "
        "pam_slurm_adopt: true (nothing would install them)"]


def test_the_module_package_reaches_the_nodes_and_only_that_object_is_readable():
    from manifests.node_parameters import artifact_s3_uris
    data = base()
    data["cluster"].update(pam_slurm_adopt=True, pam_slurm_adopt_artifacts=[PAM_ADOPT_PACKAGE])
    assert artifact_s3_uris(parse_config(data)) == [PAM_ADOPT_PACKAGE["s3_uri"]]
    assert artifact_s3_uris(parse_config(base())) == []


def test_pam_slurm_adopt_is_a_slurm_setting():
    data = base()
    data["cluster"].update(pam_slurm_adopt=True, pam_slurm_adopt_artifacts=[PAM_ADOPT_PACKAGE])
    assert parse_config(data, "test.yaml").cluster.pam_slurm_adopt is True
    data["orchestrator"] = "eks"
    assert ("cluster.pam_slurm_adopt: true with orchestrator 'eks'; it is a Slurm PAM module, allowed only with "
            "orchestrator slurm") in errors_of(data)
def test_existing_network_needs_studio_its_own_subnet_while_the_cluster_keeps_root():
    net = {"existing": {"vpc_id": "vpc-0a1b2c3d4e5f60718", "security_group_id": "sg-0a1b2c3d4e5f60718",
                        "private_subnets": [{"id": "subnet-0a1b2c3d4e5f60718", "az_id": "usw2-az2"}]}}
    data = with_("network", copy.deepcopy(net))
    assert ("network.existing.studio_subnet: not set, but storage.lustre.root_squash exempts the cluster's subnets"
            in " ".join(errors_of(data)))
    data["network"]["existing"]["studio_subnet"] = {"id": "subnet-0a1b2c3d4e5f60718", "az_id": "usw2-az2"}
    assert ("network.existing.studio_subnet.id: 'subnet-0a1b2c3d4e5f60718' is also in "
            "network.existing.private_subnets; Studio needs a subnet the cluster does not use") in errors_of(data)
    data["network"]["existing"]["studio_subnet"]["id"] = "subnet-0fedcba9876543210"
    assert parse_config(data, "test.yaml").network.existing.studio_subnet.id == "subnet-0fedcba9876543210"
    # Nothing is exempt on EKS, and a file system you bring is not changed: no Studio subnet needed then.
    off = with_("network", copy.deepcopy(net))
    off["storage"] = {"lustre": {"root_squash": {"enabled": False}}}
    assert parse_config(off, "test.yaml").network.existing.studio_subnet is None


@pytest.mark.parametrize("instance_type", ["ml.p6-b200.48xlarge", "ml.p5.4xlarge", "ml.trn2.3xlarge"])
def test_deep_health_checks_are_accepted_on_every_accelerated_type(instance_type):
    # The p6 types are hyphenated (ml.p6-b200.48xlarge): a family list keyed on "p6" refused them.
    data = with_("cluster.instance_groups.1.instance_type", instance_type)
    data["cluster"]["instance_groups"][1]["deep_health_checks"] = ["InstanceStress", "InstanceConnectivity"]
    parse_config(data, "test.yaml")


# ---------------------------------------------------------------------------------------------- issue 21: what a user
# controls must not reach a shell, a system account or another user's data
PATH_MESSAGE = ("must be an absolute path such as /fsx: '/' and components of letters, digits, '.', '_' and '-' (no "
                "spaces, quotes, '$', ';', '`', '*' or other shell characters; no '.' or '..' component)")
# Every config path that reaches a shell on a node (mount_fsx.sh, create_users.sh: homes live under the mount path)
# or names a directory of FSx (checkpoints, Studio's partitions under the linked path).
SHELL_PATH_KEYS = ("storage.lustre.mount_path", "storage.checkpoint_dir",
                   "storage.lustre.data_repository.file_system_path")
HOSTILE_PATHS = ("/fsx;id", "/fsx$(x)", "/fsx`id`", "/fsx dir", "/fsx'x", '/fsx"x', "/fsx\nid", "/fsx&&id", "/fsx|id",
                 "/fsx/*", "/fsx/../etc", "/fsx/./x", "//fsx", "fsx", "/fsx>x", "/fsx\\x", "/fsx~root")


@pytest.mark.parametrize("key", SHELL_PATH_KEYS)
@pytest.mark.parametrize("value", HOSTILE_PATHS)
def test_paths_with_shell_characters_are_refused(key, value):
    assert errors_of(with_(key, value)) == [f"{key}: {value!r} — {PATH_MESSAGE}"]


@pytest.mark.parametrize("key, value", [("storage.lustre.mount_path", "/fsx-2/lustre_a.b"),
                                        ("storage.lustre.data_repository.file_system_path", "/"),
                                        ("storage.lustre.data_repository.file_system_path", "/datasets/")])
def test_ordinary_paths_still_pass(key, value):
    parse_config(with_(key, value))


@pytest.mark.parametrize("value", ["..", ".", "a/b", "st udio", "x;y"])
def test_partition_root_is_one_plain_directory_name(value):
    assert errors_of(with_("studio.partition_root", value)) == [
        f"studio.partition_root: {value!r} — must be a single directory name such as studio (letters, digits, '.', "
        "'_', '-'; not '.' or '..')"]


@pytest.mark.parametrize("version", ["24.0.7; curl x|sh", "$(id)", "24.0.7 other-package", "`id`", "latest"])
def test_docker_version_reaching_apt_get_is_a_debian_version(version):
    data = with_("cluster.container_runtime", {"enabled": True, "docker_apt_version": version})
    assert errors_of(data)[0] == (f"cluster.container_runtime.docker_apt_version: {version!r} — must be empty or a "
                                  "Debian package version such as 24.0.7-0ubuntu2~22.04.1")


@pytest.mark.parametrize("uri", ["s3://bkt/$(id)/enroot_3.5.0-1_amd64.deb", "s3://bkt/x;y/enroot_3.5.0-1_amd64.deb",
                                 "s3://bkt/enroot_3.5.0`id`_amd64.deb", "s3://bkt/a b/enroot_3.5.0-1_amd64.deb",
                                 "s3://bkt/'/enroot_3.5.0-1_amd64.deb"])
def test_artifact_uris_reaching_the_nodes_hold_no_shell_characters(uri):
    data = with_("cluster.container_runtime", {"enabled": True, "docker_apt_version": "24.0.7", "artifacts": [
        {"name": "enroot", "s3_uri": uri, "sha256": "a" * 64}]})
    assert errors_of(data) == [f"cluster.container_runtime.artifacts[0].s3_uri: {uri!r} — must be an s3:// URI of a "
                               "Debian package named package_version_arch.deb (key of letters, digits and . _ + ~ - /)"]


def users(*entries: dict, **top) -> dict:
    data = base()
    data["users"] = list(entries)
    data.update(top)
    return data


@pytest.mark.parametrize("name", ["root", "slurm", "ubuntu", "munge", "daemon", "nobody", "sys", "bin", "syslog",
                                  "_apt", "systemd-network", "systemd-anything", "docker", "ssm-user", "mysql", "sudo",
                                  "adm", "sagemaker-user"])
def test_reserved_system_names_are_refused_with_their_source(name):
    from platform_config.facts import reserved_user
    data = users({"name": name, "uid": 20001}, studio={"enabled": False})
    assert errors_of(data) == [f"users[0].name: {name!r} is a reserved system account or group name "
                               f"({reserved_user(name)}); allowed: any other POSIX name (the full list: "
                               "config/facts/reserved-users.json)"]


def test_ubuntu_is_refused_because_it_has_sudo_on_the_ami():
    (message,) = errors_of(users({"name": "ubuntu", "uid": 20001}))
    assert "the HyperPod AMI's default user, with passwordless sudo" in message


def test_ordinary_names_that_merely_look_alike_pass():
    parse_config(users({"name": "rooty", "uid": 20001}, {"name": "ubuntu-fan", "uid": 20002},
                       {"name": "slurmer", "uid": 20003}))


@pytest.mark.parametrize("entry, top, message", [
    ({"name": "ada", "uid": 65534}, {},
     "users[0].uid: 65534 is nobody/nogroup; allowed: a uid from 10000 to 4000000 that is no system or squash "
     "identity"),
    ({"name": "ada", "uid": 20001, "gid": 65534}, {},
     "users[0].gid: 65534 is nobody/nogroup; allowed: a gid from 1001 to 4000000 that is no system or squash "
     "identity"),
    ({"name": "ada", "uid": 30000}, {"storage": {"lustre": {"root_squash": {"squash_to": "30000:30000"}}}},
     "users[0].uid: 30000 is storage.lustre.root_squash.squash_to (what root in Studio is on FSx); allowed: a uid "
     "from 10000 to 4000000 that is no system or squash identity"),
    ({"name": "ada", "uid": 20001, "gid": 30001}, {"storage": {"lustre": {"root_squash": {"squash_to": "30000:30001"}}}},
     "users[0].gid: 30001 is storage.lustre.root_squash.squash_to's group; allowed: a gid from 1001 to 4000000 that "
     "is no system or squash identity"),
    ({"name": "ada", "uid": 999}, {},
     "users[0].uid: 999 — Input should be greater than or equal to 10000"),
])
def test_system_and_squash_ids_are_refused(entry, top, message):
    assert errors_of(users(entry, **top)) == [message]


def test_the_squash_uid_is_free_again_when_squash_is_off():
    parse_config(users({"name": "ada", "uid": 30000},
                       storage={"lustre": {"root_squash": {"enabled": False, "squash_to": "30000:30000"}}}))


def test_reserved_names_cover_the_local_base_passwd():
    """Every static system user and group of this machine's base-passwd (Debian/Ubuntu, Essential) is reserved: the
    committed facts are at least what tools/reserved_users.py derives here."""
    from tools import reserved_users
    if not (reserved_users.BASE_PASSWD / "passwd.master").is_file():
        pytest.skip("no base-passwd on this machine (not Debian/Ubuntu)")
    committed = json.loads(reserved_users.FACTS.read_text())
    assert set(reserved_users.base_passwd_names()) <= set(committed["names"])
    assert set(reserved_users.EXTRAS) <= set(committed["names"])
    assert committed["prefixes"] == reserved_users.PREFIXES


def test_departments_need_per_user_mode():
    data = accounting()
    data["shared_fsx"] = True
    assert errors_of(data) == [
        "cluster.accounting.departments: 1 department(s) with shared_fsx: true; shared mode gives every Studio space "
        "the cluster's munge key, so any department member is root on the compute nodes and can change every "
        "department's associations, limits and fair share with sacctmgr as root. Allowed: shared_fsx: false (per-user "
        "mode: each profile its own Slurm token and role), or no departments"]
    data["studio"] = {"enabled": False}  # no Studio: nobody but the nodes has the key
    parse_config(data)


def test_research_example_runs_in_per_user_mode():
    cfg = load_config(VARIANT_FILES["research"])
    assert cfg.shared_fsx is False and cfg.cluster.accounting.departments


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
def test_mlflow_is_allowed_in_per_user_mode(orchestrator):
    """As the Studio + HyperPod article runs it: per-user partitions and the managed MLflow server. The trust this
    costs (every profile reads every run on the one server) is written in docs/security.md, "MLflow"."""
    data = with_("studio.mlflow", {"enabled": True})
    data["shared_fsx"] = False
    if orchestrator == "eks":
        data = yaml.safe_load(VARIANT_FILES["eks"].read_text())
        data["studio"] = {"mlflow": {"enabled": True}}
        assert data["shared_fsx"] is False
    assert parse_config(data).studio.mlflow.enabled


def test_the_university_example_has_mlflow_in_per_user_mode():
    cfg = load_config(VARIANT_FILES["research"])
    assert cfg.shared_fsx is False and cfg.studio.mlflow.enabled


def test_shared_space_user_names_a_user_in_shared_mode():
    data = base()
    data["users"] = [{"name": "alice", "uid": 10001}]
    data["studio"] = {"shared_space_user": "carol"}
    assert errors_of(data) == ["studio.shared_space_user: 'carol' is not a user; allowed: alice"]
    data["studio"] = {"shared_space_user": "alice"}
    data["shared_fsx"] = False
    assert errors_of(data) == [
        "studio.shared_space_user: 'alice' with shared_fsx: false; per-user mode has no partition every member of a "
        "shared space may use. Allowed: unset in per-user mode, or shared_fsx: true"]
    data["shared_fsx"] = True
    assert parse_config(data).studio.shared_space_user == "alice"


@pytest.mark.parametrize("entry, studio, message", [
    ({"name": "studio-shared", "uid": 20001}, {},
     "users[0].name: 'studio-shared' is the group every node makes for studio.shared_gid; a user's own group of that "
     "name would take its place on the nodes; allowed: any other name"),
    ({"name": "ada", "uid": 20001, "gid": 2000}, {},
     "users[0].gid: 2000 makes studio.shared_gid (2000) the primary group of 'ada', which every user is in on the nodes: "
     "their home and files would be every user's to read; allowed: a gid other than 2000 (set users[0].gid)"),
    # No gid: the effective gid is the uid.
    ({"name": "ada", "uid": 20001}, {"shared_gid": 20001},
     "users[0].uid: 20001 makes studio.shared_gid (20001) the primary group of 'ada', which every user is in on the "
     "nodes: their home and files would be every user's to read; allowed: a gid other than 20001 (set "
     "users[0].gid)"),
])
def test_a_user_entry_that_conflicts_with_the_shared_group_is_refused_with_key_value_and_reason(entry, studio, message):
    assert errors_of(users(entry, studio=studio)) == [message]


def test_the_shared_group_is_free_without_studio():
    parse_config(users({"name": "studio-shared", "uid": 20001, "gid": 2000}, studio={"enabled": False}))
