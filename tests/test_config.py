"""The config layer, without CDK: defaults, examples, the table of invalid configurations and their exact
errors (but for the cluster section's, tests/test_config_cluster.py), every problem reported at once."""

from __future__ import annotations

import pytest

from platform_config import ConfigError, PlatformConfig, load_config, parse_config, rules
from support.configs import errors_of, rules_refusing, with_
from support.docs import stated_count
from support.paths import ROOT
from support.variants import VARIANT_FILES


INVALID = [
    (
        "cluster name pattern",
        with_("name", "my_cluster"),
        "name: 'my_cluster' — must be 1-63 letters, digits and hyphens, starting and ending with a letter or digit",
    ),
    (
        "cluster name too long",
        with_("name", "a" * 64),
        f"name: '{'a' * 64}' — must be 1-63 letters, digits and hyphens, starting and ending with a letter or digit",
    ),
    (
        "fsx capacity",
        with_("storage.lustre.storage_capacity_gib", 3600),
        "storage.lustre.storage_capacity_gib: 3600; allowed: 1200 or a multiple of 2400",
    ),
    (
        "fsx throughput",
        with_("storage.lustre.throughput_mib_per_tib", 200),
        "storage.lustre.throughput_mib_per_tib: 200 — Input should be 125, 250, 500 or 1000",
    ),
    (
        "metadata iops",
        with_("storage.lustre.metadata", {"mode": "USER_PROVISIONED", "iops": 5000}),
        "storage.lustre.metadata.iops: 5000 with mode USER_PROVISIONED; allowed: 1500, 3000, 6000 or a multiple of "
        "12000 up to 192000",
    ),
    (
        "az id is a name",
        with_("network.az_ids", ["us-west-2a"]),
        "network.az_ids[0]: 'us-west-2a' — must be an AZ ID such as use1-az4 (not an AZ name)",
    ),
    (
        "az id in another region",
        with_("network.az_ids", ["use1-az4"]),
        "network.az_ids[0]: 'use1-az4' is not in region us-west-2; AZ IDs there start with 'usw2-'",
    ),
    (
        "cidr host bits",
        with_("network.vpc_cidr", "10.0.0.1/16"),
        "network.vpc_cidr: '10.0.0.1/16' — must be an IPv4 CIDR block with no host bits set, e.g. 10.0.0.0/16",
    ),
    (
        "cidr outside vpc",
        with_("network.private_subnet_cidrs", ["10.9.0.0/18"]),
        "network.private_subnet_cidrs[0]: '10.9.0.0/18' is not inside network.vpc_cidr '10.0.0.0/16'",
    ),
    (
        "cidrs overlap",
        with_("network.private_subnet_cidrs", ["10.0.0.0/18"]),
        "network.private_subnet_cidrs[0]: '10.0.0.0/18' overlaps network.public_subnet_cidr '10.0.0.0/24'",
    ),
    (
        "one cidr per az",
        with_("network.az_ids", ["usw2-az1", "usw2-az2"]),
        "network.private_subnet_cidrs: 1 CIDR(s) for 2 AZ ID(s); give exactly one private subnet CIDR per AZ ID",
    ),
    (
        "unknown key",
        with_("storage.lustre.capacity", 1200),
        "storage.lustre.capacity: unknown key; allowed here: storage_capacity_gib, throughput_mib_per_tib, "
        "data_compression, lustre_version, metadata, mount_path, mount_by, data_repository, existing, root_squash",
    ),
    (
        "unknown top-level key",
        with_("orchestrater", "slurm"),
        "orchestrater: unknown key; did you mean 'orchestrator'? allowed here: name, orchestrator, shared_fsx, deployment, tags, network, storage, "
        "cluster, studio, eks, users, observability",
    ),
    ("boolean as string", with_("shared_fsx", "yes"), "shared_fsx: 'yes' — must be true or false"),
    (
        "boolean as number",
        with_("network.flow_logs", {"enabled": 1}),
        "network.flow_logs.enabled: 1 — must be true or false",
    ),
    ("unknown orchestrator", with_("orchestrator", "k8s"), "orchestrator: 'k8s' — Input should be 'slurm' or 'eks'"),
    (
        "duplicate uid",
        with_("users", [{"name": "a", "uid": 10001}, {"name": "b", "uid": 10001}]),
        "users[1].uid: 10001 is already used by users[0]; uids must be unique",
    ),
    (
        "uid below Studio's range",
        with_("users", [{"name": "a", "uid": 2001}]),
        "users[0].uid: 2001 — Input should be greater than or equal to 10000",
    ),
    (
        "user name not a Studio profile name",
        with_("users", [{"name": "data_sci", "uid": 10001}]),
        "users[0].name: 'data_sci' cannot be a Studio user profile name; with studio.enabled use letters, digits and "
        "hyphens only",
    ),
    (
        "repeated interface endpoint",
        with_("network.interface_endpoints", ["ssm", "sts", "ssm"]),
        "network.interface_endpoints[2]: 'ssm' repeats network.interface_endpoints[0]; list each at most once",
    ),
    (
        "repeated auto-export event",
        with_("storage.lustre.data_repository", {"auto_export": ["NEW", "NEW"]}),
        "storage.lustre.data_repository.auto_export[1]: 'NEW' repeats storage.lustre.data_repository.auto_export[0]; "
        "list each at most once",
    ),
    (
        "checkpoints outside the S3-linked path",
        with_("storage.checkpoint_dir", "/checkpoints"),
        "storage.checkpoint_dir: '/checkpoints' is not inside storage.lustre.data_repository.file_system_path '/data'; "
        "nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /data/checkpoints",
    ),
    (
        "checkpoints at the linked path itself",
        with_("storage.checkpoint_dir", "/data"),
        "storage.checkpoint_dir: '/data' is not inside storage.lustre.data_repository.file_system_path '/data'; "
        "nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /data/checkpoints",
    ),
    (
        "checkpoints on a sibling with the same prefix",
        with_("storage.checkpoint_dir", "/database/ckpt"),
        "storage.checkpoint_dir: '/database/ckpt' is not inside storage.lustre.data_repository.file_system_path "
        "'/data'; nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /data/checkpoints",
    ),
    (
        "checkpoints escaping with ..",
        with_("storage.checkpoint_dir", "/data/../ckpt"),
        "storage.checkpoint_dir: '/data/../ckpt' — must be an absolute path such as /fsx: '/' and components of "
        "letters, digits, '.', '_' and '-' (no spaces, quotes, '$', ';', '`', '*' or other shell characters; no '.' or "
        "'..' component)",
    ),
    (
        "checkpoints not exported",
        with_("storage.lustre", {"data_repository": {"auto_export": ["DELETED"]}}),
        "storage.lustre.data_repository.auto_export: ['DELETED'] with storage.checkpoint_dir '/data/checkpoints'; "
        "checkpoints reach S3 only when NEW and CHANGED are exported",
    ),
    (
        "default checkpoints follow the linked path, explicit ones must stay inside",
        with_(
            "storage", {"lustre": {"data_repository": {"file_system_path": "/datasets"}}, "checkpoint_dir": "/data/c"}
        ),
        "storage.checkpoint_dir: '/data/c' is not inside storage.lustre.data_repository.file_system_path '/datasets'; "
        "nothing would export its checkpoints to S3. Allowed: a subdirectory of it, e.g. /datasets/checkpoints",
    ),
    (
        "checkpoint size zero",
        with_("storage.checkpoint_gib", 0),
        "storage.checkpoint_gib: 0 — Input should be greater than or equal to 1",
    ),
    (
        "checkpoint budget zero",
        with_("storage.checkpoint_budget_minutes", 0),
        "storage.checkpoint_budget_minutes: 0 — Input should be greater than or equal to 1",
    ),
    (
        "flow log retention",
        with_("network.flow_logs", {"retention_days": 42}),
        "network.flow_logs.retention_days: 42 — Input should be 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, "
        "545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653",
    ),
    (
        "subscription e-mail",
        with_("observability.subscriptions", [{"protocol": "email", "endpoint": "ops"}]),
        "observability.subscriptions[0].endpoint: 'ops' — with protocol 'email' it must be an e-mail address such as "
        "ops@example.com",
    ),
    (
        "subscription https",
        with_("observability.subscriptions", [{"protocol": "https", "endpoint": "http://x.io"}]),
        "observability.subscriptions[0].endpoint: 'http://x.io' — with protocol 'https' it must be an https:// URL",
    ),
    (
        "subscription sqs wants a queue ARN",
        with_(
            "observability.subscriptions", [{"protocol": "sqs", "endpoint": "https://sqs.us-west-2.amazonaws.com/1/q"}]
        ),
        "observability.subscriptions[0].endpoint: 'https://sqs.us-west-2.amazonaws.com/1/q' — with protocol 'sqs' it "
        "must be an SQS queue ARN",
    ),
    (
        "subscription protocol",
        with_("observability.subscriptions", [{"protocol": "slack", "endpoint": "#ops"}]),
        "observability.subscriptions[0].protocol: 'slack' — Input should be 'email', 'https', 'sms', 'sqs' or 'lambda'",
    ),
    (
        "subscription twice",
        with_("observability.subscriptions", [{"protocol": "email", "endpoint": "a@b.io"}] * 2),
        "observability.subscriptions[1]: protocol='email', endpoint='a@b.io' repeats observability.subscriptions[0]; "
        "list each at most once",
    ),
    (
        "log retention",
        with_("observability.log_retention_days", 100),
        "observability.log_retention_days: 100 — Input should be 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, "
        "545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653",
    ),
    (
        "free capacity threshold",
        with_("observability.fsx_free_capacity_percent", 0),
        "observability.fsx_free_capacity_percent: 0 — Input should be greater than or equal to 1",
    ),
    (
        "throughput window",
        with_("observability.fsx_throughput_minutes", 2),
        "observability.fsx_throughput_minutes: 2 — Input should be greater than or equal to 5",
    ),
    (
        "root squash to root",
        with_("storage.lustre.root_squash", {"squash_to": "0:0"}),
        "storage.lustre.root_squash.squash_to: '0:0' — must be 'UID:GID', each from 1 to 4294967294 (0 would be root), "
        "e.g. '65534:65534' (nobody:nogroup); to turn root squash off set enabled: false",
    ),
    (
        "root squash not uid:gid",
        with_("storage.lustre.root_squash", {"squash_to": "nobody"}),
        "storage.lustre.root_squash.squash_to: 'nobody' — must be 'UID:GID', each from 1 to 4294967294 (0 would be "
        "root), e.g. '65534:65534' (nobody:nogroup); to turn root squash off set enabled: false",
    ),
    (
        "studio shares the exempt subnet",
        with_("network.studio_subnet_cidr", None),
        "network.studio_subnet_cidr: not set, but storage.lustre.root_squash exempts the cluster's subnets (their nodes "
        "keep root on FSx) and Studio would share the first of them; give Studio a subnet of its own (e.g. "
        "network.studio_subnet_cidr: 10.0.4.0/22) or set storage.lustre.root_squash.enabled: false",
    ),
    (
        "studio subnet overlaps the cluster's",
        with_("network.studio_subnet_cidr", "10.0.96.0/22"),
        "network.studio_subnet_cidr: '10.0.96.0/22' overlaps network.private_subnet_cidrs[0] '10.0.64.0/18'",
    ),
    (
        "studio subnet outside the vpc",
        with_("network.vpc_cidr", "10.1.0.0/16"),
        "network.studio_subnet_cidr: '10.0.4.0/22' is not inside network.vpc_cidr '10.1.0.0/16'",
    ),
    (
        "unknown observability key",
        with_("observability.email", "ops@example.com"),
        "observability.email: unknown key; allowed here: subscriptions, log_retention_days, fsx_free_capacity_percent, "
        "fsx_throughput_percent, fsx_throughput_minutes, export_backlog_minutes, node_metrics, grafana",
    ),
    (
        "node metrics without the collector",
        with_(
            "observability.node_metrics",
            {
                "enabled": True,
                "artifacts": [
                    {
                        "name": "prometheus-node-exporter",
                        "s3_uri": "s3://bkt/prometheus-node-exporter_1.7.0-1_amd64.deb",
                        "sha256": "a" * 64,
                    }
                ],
            },
        ),
        "observability.node_metrics.artifacts: no 'prometheus' artifact with node metrics enabled; list the Debian "
        "package mirrored to your S3 bucket as {name: prometheus, s3_uri: s3://<bucket>/<path>/prometheus_<version>_"
        "<arch>.deb, sha256: <64 hex>}",
    ),
    (
        "node metrics prometheus without agent mode",
        with_(
            "observability.node_metrics.artifacts",
            [{"name": "prometheus", "s3_uri": "s3://bkt/prometheus_2.31.2+ds1-1ubuntu1_amd64.deb", "sha256": "a" * 64}],
        ),
        "observability.node_metrics.artifacts[0].s3_uri: prometheus '2.31.2+ds1-1ubuntu1' has no agent mode; pin a "
        "build of Prometheus 2.32 or later (e.g. Ubuntu 24.04's 2.45.3 or Debian 12's 2.42.0)",
    ),
    (
        "node metrics artifact of another package",
        with_(
            "observability.node_metrics.artifacts",
            [{"name": "dcgm-exporter", "s3_uri": "s3://bkt/prometheus_2.45.3+ds-2_amd64.deb", "sha256": "a" * 64}],
        ),
        "observability.node_metrics.artifacts[0].s3_uri: 's3://bkt/prometheus_2.45.3+ds-2_amd64.deb' holds package "
        "'prometheus', but the artifact is named 'dcgm-exporter'; name it after the package it installs",
    ),
    (
        "node metrics unknown artifact",
        with_(
            "observability.node_metrics.artifacts",
            [{"name": "grafana-agent", "s3_uri": "s3://bkt/grafana-agent_0.40.0-1_amd64.deb", "sha256": "a" * 64}],
        ),
        "observability.node_metrics.artifacts[0].name: 'grafana-agent'; allowed: prometheus-node-exporter (every "
        "node), prometheus (every node), dcgm-exporter (compute nodes with an NVIDIA GPU)",
    ),
    (
        "node metrics scrape interval",
        with_("observability.node_metrics.scrape_interval_seconds", 1),
        "observability.node_metrics.scrape_interval_seconds: 1 — Input should be greater than or equal to 10",
    ),
]


@pytest.mark.parametrize("data, expected", [(d, e) for _, d, e in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_config_reports_exact_error(data, expected):
    assert expected in errors_of(data)


# The semantic rules INVALID leaves to the refusals of their own section, and where those are.
REFUSED_ELSEWHERE = {
    "eks_errors": "EKS_BAD_INPUT",
    "task_governance_errors": "EKS_BAD_INPUT",
    "accounting_errors": "ACCOUNTING_INVALID",
    "login_access_errors": "LOGIN_AND_BUDGET_INVALID",
    "budget_errors": "LOGIN_AND_BUDGET_INVALID",
    "directory_errors": "tests/test_directory.py",
    "pam_slurm_adopt_errors": "test_pam_slurm_adopt_needs_the_module_package_the_ami_lacks",
    "identity_errors": "test_system_and_squash_ids_are_refused",
    "studio_errors": "test_shared_space_user_names_a_user_in_shared_mode",
    "per_user_mode_errors": "test_departments_need_per_user_mode",
    "attach_errors": "tests/test_attach.py",
    "instance_group_errors": "CLUSTER_INVALID",
    "slurm_node_role_errors": "CLUSTER_INVALID",
    "container_runtime_errors": "CLUSTER_INVALID",
    "slurm_config_strategy_errors": "CLUSTER_INVALID",
}


def test_the_invalid_table_reaches_every_rule_not_refused_elsewhere(monkeypatch):
    """The table is the config layer's refusals: each rule it does not leave to another table refuses one of its rows
    with the row's exact message. A rule added without a row, or the last row of a rule removed, fails here."""
    all_rules = {rule.__name__ for rule in rules.RULES}
    assert set(REFUSED_ELSEWHERE) <= all_rules
    assert rules_refusing(INVALID, monkeypatch) == all_rules - set(REFUSED_ELSEWHERE)


def test_all_errors_are_reported_together():
    data = with_("name", "bad_name")
    data["cluster"]["instance_groups"][1].update(instance_count=-5, threads_per_core=3)
    data["storage"] = {"lustre": {"storage_capacity_gib": 1000}}
    errors = errors_of(data)
    assert [e.split(":")[0] for e in errors] == [
        "name",
        "cluster.instance_groups[1].instance_count",
        "cluster.instance_groups[1].threads_per_core",
    ]
    # Semantic rules run once the shapes are right, and are collected together too.
    data = with_("storage.lustre.storage_capacity_gib", 1000)
    data["network"] = {"az_ids": ["use1-az1"]}
    assert len(errors_of(data)) == 2


def test_valid_subscriptions_for_every_protocol():
    subs = [
        {"protocol": "email", "endpoint": "ops@example.com"},
        {"protocol": "https", "endpoint": "https://h.io/x"},
        {"protocol": "sms", "endpoint": "+14155550100"},
        {"protocol": "sqs", "endpoint": "arn:aws:sqs:us-west-2:123456789012:alerts"},
        {"protocol": "lambda", "endpoint": "arn:aws:lambda:us-west-2:123456789012:function:page-oncall"},
    ]
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
        ("controller", "ml.m5.xlarge", 1),
        ("login", "ml.m5.xlarge", 1),
        ("compute", "ml.g5.8xlarge", 1),
    ]
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
        for name, fn in inspect.getmembers(
            importlib.import_module(f"platform_config.{module.name}"), inspect.isfunction
        ):
            if name.endswith("_errors") and not name.startswith("_") and fn.__module__.startswith("platform_config."):
                defined.add(fn)
    # accounting_errors runs managed_database_errors; semantic_errors runs RULES.
    assert {fn.__name__ for fn in defined - set(RULES)} == {"managed_database_errors", "semantic_errors"}


def test_docs_state_the_size_of_the_invalid_table():
    assert stated_count(r"a table of (\d+) invalid configurations") == len(INVALID)
