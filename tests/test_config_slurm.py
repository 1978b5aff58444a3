"""The Slurm sections of the config: accounting, login access and budgets (each bad input with its exact error),
GPUs per instance type, controller SSH and pam_slurm_adopt."""

from __future__ import annotations

import copy

import pytest
import yaml

from platform_config import ConfigError, PlatformConfig, parse_config
from support.configs import base, errors_of, with_
from support.docs import stated_count
from support.variants import VARIANT_FILES


# ---------------------------------------------------------------------------------------------- slurm accounting
def accounting(**changes) -> dict:
    """base() (2 x ml.g5.8xlarge: 2 nodes, 2 GPUs) with two users, one QoS and one department."""
    data = base()
    data["shared_fsx"] = False  # departments need per-user mode (test_departments_need_per_user_mode)
    data["users"] = [{"name": "ada", "uid": 20001}, {"name": "bob", "uid": 20002}]
    data["cluster"]["accounting"] = {
        "enabled": True,
        "qos": [{"name": "short", "max_wall_minutes": 60, "max_tres_per_user": {"gpu": 1}}],
        "departments": [
            {
                "name": "physics",
                "qos": ["normal", "short"],
                "default_qos": "normal",
                "users": ["ada", "bob"],
                "coordinators": ["ada"],
            }
        ],
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
    (
        "unknown department qos",
        accounting(departments=physics(qos=["normal", "long"])),
        "cluster.accounting.departments[0].qos[1]: 'long' is not a QoS; allowed: normal, short (define it under "
        "cluster.accounting.qos)",
    ),
    (
        "unknown default qos",
        accounting(departments=physics(qos=[], default_qos="gold")),
        "cluster.accounting.departments[0].default_qos: 'gold' is not a QoS; allowed: normal, short (define it under "
        "cluster.accounting.qos)",
    ),
    (
        "default qos not allowed",
        accounting(departments=physics(qos=["short"], default_qos="normal")),
        "cluster.accounting.departments[0].default_qos: 'normal' is not in the department's qos ['short']; add it "
        "there",
    ),
    (
        "duplicate account",
        accounting(departments=physics() + physics(users=[])),
        "cluster.accounting.departments[1].name: 'physics' is already used by cluster.accounting.departments[0]; each "
        "department is one Slurm account, names must be unique",
    ),
    (
        "root account",
        accounting(departments=physics(name="root")),
        "cluster.accounting.departments[0].name: 'root' is Slurm's own top account; choose another name",
    ),
    (
        "platform users account",
        accounting(departments=physics(name="hyperpod-users")),
        "cluster.accounting.departments[0].name: 'hyperpod-users' is the platform's account for users no department "
        "lists; choose another name",
    ),
    (
        "duplicate qos",
        accounting(qos=[{"name": "short"}, {"name": "short"}]),
        "cluster.accounting.qos[1].name: 'short' is already used by cluster.accounting.qos[0]; QoS names must be "
        "unique",
    ),
    (
        "unknown user",
        accounting(departments=physics(users=["ada", "zed"])),
        "cluster.accounting.departments[0].users[1]: 'zed' is not a user; allowed: ada, bob (Slurm runs jobs as the "
        "user's POSIX account, which `users` creates on every node)",
    ),
    (
        "user listed twice",
        accounting(departments=physics(users=["ada", "ada"])),
        "cluster.accounting.departments[0].users[1]: 'ada' repeats cluster.accounting.departments[0].users[0]; list "
        "each at most once",
    ),
    (
        "coordinator not a member",
        accounting(departments=physics(users=["bob"], coordinators=["ada"])),
        "cluster.accounting.departments[0].coordinators[0]: 'ada' is not one of the department's users ['bob']; list "
        "them in users first",
    ),
    (
        "gpus over the cluster",
        accounting(qos=[{"name": "short", "max_tres_per_user": {"gpu": 8}}]),
        "cluster.accounting.qos[0].max_tres_per_user.gpu: 8; the compute groups have 2 NVIDIA GPU(s) in total "
        "(counts in config/facts/accelerators.json), so the limit could never bind; allowed: at most 2",
    ),
    (
        "gpu limit without gpus",
        cpu_workers(accounting(qos=[{"name": "short", "grp_tres": {"gpu": 1}}])),
        "cluster.accounting.qos[0].grp_tres.gpu: 1; no compute group has NVIDIA GPUs (instance types ml.c5.9xlarge; GPU "
        "types and counts in config/facts/accelerators.json), so Slurm has no gpu GRES to limit; remove the gpu limit "
        "or add a GPU instance group",
    ),
    (
        "nodes over the cluster",
        accounting(qos=[{"name": "short", "grp_tres": {"node": 3}}]),
        "cluster.accounting.qos[0].grp_tres.node: 3; the compute groups have 2 node(s) in total, so the limit could "
        "never bind; allowed: at most 2",
    ),
    (
        "per user over the group",
        accounting(qos=[{"name": "short", "max_tres_per_user": {"cpu": 64}, "grp_tres": {"cpu": 32}}]),
        "cluster.accounting.qos[0].max_tres_per_user.cpu: 64 is more than grp_tres.cpu 32, the QoS's total; allowed: "
        "at most 32",
    ),
    (
        "departments while disabled",
        accounting(enabled=False),
        "cluster.accounting.enabled: false with 1 department(s) and 1 QoS; enable accounting or remove them",
    ),
    (
        "account name",
        accounting(departments=physics(name="Physics")),
        "cluster.accounting.departments[0].name: 'Physics' — must be 1-30 lowercase letters, digits, '_' and '-', "
        "starting with a letter",
    ),
    (
        "unknown tres",
        accounting(qos=[{"name": "short", "max_tres_per_user": {"gpus": 1}}]),
        "cluster.accounting.qos[0].max_tres_per_user.gpus: unknown key; did you mean 'gpu'? allowed here: cpu, node, "
        "gpu",
    ),
    (
        "description sacctmgr would split",
        accounting(departments=physics(description="Physics, Astronomy")),
        "cluster.accounting.departments[0].description: 'Physics, Astronomy' — must be at most 100 letters, digits, "
        "spaces and .:()/_-",
    ),
    (
        "zero fairshare",
        accounting(departments=physics(fairshare=0)),
        "cluster.accounting.departments[0].fairshare: 0 — Input should be greater than or equal to 1",
    ),
]


@pytest.mark.parametrize("data, message", [c[1:] for c in ACCOUNTING_INVALID], ids=[c[0] for c in ACCOUNTING_INVALID])
def test_accounting_bad_input_gets_an_exact_error(data, message):
    assert errors_of(data) == [message]


def test_accounting_on_eks_is_refused():
    data = accounting()
    data["orchestrator"] = "eks"
    assert (
        "cluster.accounting.enabled: true with orchestrator 'eks'; Slurm accounting needs orchestrator slurm"
        in errors_of(data)
    )


def test_accounting_valid_config_and_its_parameters():
    from platform_config.accounting_plan import accounting_parameters

    cfg = parse_config(accounting(departments=physics(coordinators=["ada"], fairshare=30)))
    params = accounting_parameters(cfg)
    assert params["qos"] == [
        {
            "name": "short",
            "description": "",
            "priority": 0,
            "max_tres_per_user": "gres/gpu=1",
            "grp_tres": "",
            "max_wall_minutes": 60,
            "max_jobs_per_user": None,
        }
    ]
    assert params["departments"] == [
        {
            "name": "physics",
            "description": "",
            "fairshare": 30,
            "qos": ["normal", "short"],
            "default_qos": "normal",
            "users": ["ada", "bob"],
            "coordinators": ["ada"],
        }
    ]
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
    (
        "ssh open to everything",
        with_login(ssh_allowed_cidrs=["10.0.0.0/16", "0.0.0.0/0"]),
        "cluster.login_access.ssh_allowed_cidrs[1]: '0.0.0.0/0' would let every address that routes into the VPC reach "
        "the login nodes' SSH; list the networks people connect from, e.g. 10.0.0.0/16",
    ),
    (
        "run as ssm-user",
        with_login(run_as_default_user="ssm-user"),
        "cluster.login_access.run_as_default_user: 'ssm-user'; Session Manager starts a session only as a user that "
        "exists on the node: allowed: nobody (untagged principals are refused) or one of users (ada); never ssm-user or "
        "root",
    ),
    (
        "run as root",
        with_login(run_as_default_user="root"),
        "cluster.login_access.run_as_default_user: 'root'; Session Manager starts a session only as a user that exists "
        "on the node: allowed: nobody (untagged principals are refused) or one of users (ada); never ssm-user or root",
    ),
    (
        "budget without a recipient",
        budgeted({"monthly_limit_usd": 1000, "notify_topic": False}),
        "cluster.budget: notify_topic: false and no emails; a budget alert needs a recipient: set notify_topic: true "
        "(the platform's alarm topic) or list emails",
    ),
    (
        "department budget without the cluster's",
        budgeted(monthly_budget_usd=500),
        "cluster.accounting.departments[0].monthly_budget_usd: 500 without cluster.budget; department budgets take "
        "their thresholds and recipients from cluster.budget: add it (monthly_limit_usd, thresholds_percent, emails)",
    ),
    (
        "department recipients without a budget",
        budgeted({"monthly_limit_usd": 1000}, budget_emails=["it@example.edu"]),
        "cluster.accounting.departments[0].budget_emails: ['it@example.edu'] without monthly_budget_usd; set the "
        "department's monthly budget or remove its budget_emails",
    ),
    (
        "repeated threshold",
        budgeted({"monthly_limit_usd": 1000, "thresholds_percent": [80, 80]}),
        "cluster.budget.thresholds_percent[1]: 80 repeats cluster.budget.thresholds_percent[0]; list each at most once",
    ),
    (
        "threshold out of range",
        budgeted({"monthly_limit_usd": 1000, "thresholds_percent": [0]}),
        "cluster.budget.thresholds_percent[0]: 0; allowed: 1-1000 (percent of the monthly limit)",
    ),
    (
        "too many notifications",
        budgeted({"monthly_limit_usd": 1000, "thresholds_percent": [10, 20, 30, 40, 50, 60]}),
        "cluster.budget.thresholds_percent: [10, 20, 30, 40, 50, 60] — List should have at most 5 items after "
        "validation, not 6",
    ),
    (
        "bad e-mail",
        budgeted({"monthly_limit_usd": 1000, "emails": ["admins"]}),
        "cluster.budget.emails[0]: 'admins' — must be an e-mail address such as hpc-admins@example.edu",
    ),
    (
        "zero limit",
        budgeted({"monthly_limit_usd": 0}),
        "cluster.budget.monthly_limit_usd: 0 — Input should be greater than or equal to 1",
    ),
    (
        "aws: tag key",
        budgeted({"monthly_limit_usd": 1000, "department_tag_key": "aws:department"}),
        "cluster.budget.department_tag_key: 'aws:department' — must be a tag key: at most 128 letters, digits, spaces "
        "and _.:/=+-@, not starting with aws:",
    ),
]


@pytest.mark.parametrize(
    "data, message", [c[1:] for c in LOGIN_AND_BUDGET_INVALID], ids=[c[0] for c in LOGIN_AND_BUDGET_INVALID]
)
def test_login_access_and_budget_bad_input_gets_an_exact_error(data, message):
    assert errors_of(data) == [message]


def test_an_existing_vpc_needs_the_ssh_networks_spelled_out():
    data = with_login()
    data["network"] = {
        "existing": {
            "vpc_id": "vpc-0123456789abcdef0",
            "security_group_id": "sg-0123456789abcdef0",
            "private_subnets": [{"id": "subnet-0123456789abcdef0", "az_id": "usw2-az2"}],
            "studio_subnet": {"id": "subnet-0123456789abcdef1", "az_id": "usw2-az2"},
        }
    }
    assert errors_of(data) == [
        "cluster.login_access.ssh_allowed_cidrs: [] with network.existing; the default is the VPC's CIDR, which the "
        "platform cannot know for an existing VPC: list the networks people connect from, or set "
        "cluster.login_access.load_balancer: false"
    ]
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
@pytest.mark.parametrize(
    "instance_type, gpus",
    [
        ("ml.g5.2xlarge", 1),
        ("ml.g5.12xlarge", 4),
        ("ml.g5.48xlarge", 8),
        ("ml.p5.48xlarge", 8),
        ("ml.trn1.32xlarge", 0),
        ("ml.c5.9xlarge", 0),
    ],
)
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


PAM_ADOPT_PACKAGE = {
    "name": "slurm-pam-adopt",
    "s3_uri": "s3://mirror/pam/slurm-pam-adopt_24.11.5-1_amd64.deb",
    "sha256": "a" * 64,
}


def test_pam_slurm_adopt_needs_the_module_package_the_ami_lacks():
    data = base()
    data["cluster"]["pam_slurm_adopt"] = True
    assert errors_of(data) == [
        "cluster.pam_slurm_adopt: true with cluster.pam_slurm_adopt_artifacts: []; HyperPod's AMI has no "
        "pam_slurm_adopt.so and the platform fetches nothing from GitHub at deploy time, so every compute node would "
        "stop. Allowed: false, or a .deb of pam_slurm_adopt.so built from the source of the Slurm release HyperPod "
        "runs (as awslabs/awsome-distributed-ai@95b939cd 1.architectures/5.sagemaker-hyperpod/LifecycleScripts/"
        "base-config/utils/pam_adopt_cgroup_wheel.sh builds it) in pam_slurm_adopt_artifacts"
    ]
    data["cluster"]["pam_slurm_adopt_artifacts"] = [PAM_ADOPT_PACKAGE]
    assert parse_config(data, "test.yaml").cluster.pam_slurm_adopt is True
    data["cluster"]["pam_slurm_adopt"] = False
    assert errors_of(data) == [
        "cluster.pam_slurm_adopt_artifacts: 1 package(s) with cluster.pam_slurm_adopt: false; allowed only with "
        "pam_slurm_adopt: true (nothing would install them)"
    ]


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
    assert (
        "cluster.pam_slurm_adopt: true with orchestrator 'eks'; it is a Slurm PAM module, allowed only with "
        "orchestrator slurm"
    ) in errors_of(data)


def test_existing_network_needs_studio_its_own_subnet_while_the_cluster_keeps_root():
    net = {
        "existing": {
            "vpc_id": "vpc-0a1b2c3d4e5f60718",
            "security_group_id": "sg-0a1b2c3d4e5f60718",
            "private_subnets": [{"id": "subnet-0a1b2c3d4e5f60718", "az_id": "usw2-az2"}],
        }
    }
    data = with_("network", copy.deepcopy(net))
    assert (
        "network.existing.studio_subnet: not set, but storage.lustre.root_squash exempts the cluster's subnets"
        in " ".join(errors_of(data))
    )
    data["network"]["existing"]["studio_subnet"] = {"id": "subnet-0a1b2c3d4e5f60718", "az_id": "usw2-az2"}
    assert (
        "network.existing.studio_subnet.id: 'subnet-0a1b2c3d4e5f60718' is also in "
        "network.existing.private_subnets; Studio needs a subnet the cluster does not use"
    ) in errors_of(data)
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


def test_departments_need_per_user_mode():
    data = accounting()
    data["shared_fsx"] = True
    assert errors_of(data) == [
        "cluster.accounting.departments: 1 department(s) with shared_fsx: true; shared mode gives every Studio space "
        "the cluster's munge key, so any department member is root on the compute nodes and can change every "
        "department's associations, limits and fair share with sacctmgr as root. Allowed: shared_fsx: false (per-user "
        "mode: each profile its own Slurm token and role), or no departments"
    ]
    data["studio"] = {"enabled": False}  # no Studio: nobody but the nodes has the key
    parse_config(data)


def test_docs_state_the_size_of_the_accounting_and_login_tables():
    assert stated_count(r"one of (\d+) for `cluster.accounting`") == len(ACCOUNTING_INVALID)
    assert stated_count(r"one of (\d+) for `cluster.login_access`") == len(LOGIN_AND_BUDGET_INVALID)
