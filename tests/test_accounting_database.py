"""`cluster.accounting.database: managed`: an RDS for MySQL instance for slurmdbd, attached to the Slurm cluster through
Orchestrator.Slurm.AccountingDatabase, reachable only from the controller's own security group."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Match, Template

from support import cfn_lint
from support.variants import cdk_json_context, VARIANT_FILES
from platform_config import ConfigError, parse_config
from stacks.platform import add_security_checks, build_platform


def managed_data(**cluster) -> dict:
    data = yaml.safe_load(VARIANT_FILES["research"].read_text())
    data["network"] = {
        **data.get("network", {}),
        "az_ids": ["usw2-az1", "usw2-az2"],
        "private_subnet_cidrs": ["10.0.64.0/18", "10.0.128.0/18"],
    }
    data["cluster"]["node_provisioning_mode"] = "Continuous"
    data["cluster"]["accounting"]["database"] = "managed"
    data["cluster"].update(cluster)
    return data


# The synthesized variant is also the multi-head one: backup controllers need the external database
# (platform_config/cluster.py, _controller_count_errors), and one synth serves both (synthesis costs seconds).
CONTROLLERS = 2


def multi_head(data: dict, count: int = CONTROLLERS) -> dict:
    controller = next(g for g in data["cluster"]["instance_groups"] if g["role"] == "controller")
    controller["instance_count"] = count
    return data


@cache
def synthesized(out_root: str):
    config = parse_config(multi_head(managed_data()), "managed-accounting")
    out = Path(out_root) / "managed_accounting"
    app = cdk.App(outdir=str(out), context=cdk_json_context(stage_assets=False))
    build_platform(app, config)
    add_security_checks(app)
    app.synth()  # raises on an unacknowledged cdk-nag finding
    path = out / f"{config.name}-cluster.template.json"
    return path, json.loads(path.read_text())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    return synthesized(str(tmp_path_factory.mktemp("acctdb")))


def only(template: Template, type_: str) -> tuple[str, dict]:
    found = template.find_resources(type_)
    assert len(found) == 1, found.keys()
    return next(iter(found.items()))


def database_key(template: Template) -> tuple[str, dict]:
    """The database's own key (the cluster stack has others: the auth/jwt signing key's, the log groups')."""
    (found,) = [
        (k, r) for k, r in template.find_resources("AWS::KMS::Key").items() if k.startswith("AccountingDatabaseKey")
    ]
    return found


def test_database_refuses_connections_without_tls(cluster):
    """require_secure_transport=1 in the instance's own parameter group: slurmdbd's credentials and every job record
    cross the VPC encrypted or not at all."""
    _, raw = cluster
    t = Template.from_json(raw)
    group_id, group = only(t, "AWS::RDS::DBParameterGroup")
    assert group["Properties"]["Family"] == "mysql8.4"
    assert group["Properties"]["Parameters"]["require_secure_transport"] == "1"
    _, db = only(t, "AWS::RDS::DBInstance")
    assert db["Properties"]["DBParameterGroupName"] == {"Ref": group_id}


def test_tls_requirement_can_be_turned_off_explicitly_only():
    from platform_config import parse_config as parse

    assert parse(managed_data(), "x").cluster.accounting.managed_database.require_tls is True
    data = managed_data()
    data["cluster"]["accounting"]["managed_database"] = {"require_tls": False}
    assert parse(data, "x").cluster.accounting.managed_database.require_tls is False


def test_database_is_private_encrypted_with_its_key_and_kept_on_delete(cluster):
    _, raw = cluster
    t = Template.from_json(raw)
    key_id, key = database_key(t)
    assert key["DeletionPolicy"] == "Retain" and key["Properties"]["EnableKeyRotation"] is True
    db_id, db = only(t, "AWS::RDS::DBInstance")
    props = db["Properties"]
    assert db["DeletionPolicy"] == "Snapshot" and db["UpdateReplacePolicy"] == "Snapshot"
    assert props["DeletionProtection"] is True and props["PubliclyAccessible"] is False
    assert props["StorageEncrypted"] is True and props["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert props["Engine"] == "mysql" and props["Port"] == "3306"
    # RDS generates the password into Secrets Manager under our key and rotates it; none is in the template.
    assert props["ManageMasterUserPassword"] is True and "MasterUserPassword" not in props
    assert props["MasterUserSecret"] == {"KmsKeyId": {"Fn::GetAtt": [key_id, "Arn"]}}
    assert not t.find_resources(
        "AWS::SecretsManager::Secret", {"Properties": {"Description": Match.string_like_regexp("[Aa]ccounting")}}
    )
    _, subnets = only(t, "AWS::RDS::DBSubnetGroup")
    private = {json.dumps(s, sort_keys=True) for s in subnets["Properties"]["SubnetIds"]}
    assert len(private) == 2
    # the subnets are the network stack's private ones (imported by the cluster stack), the same the cluster uses
    cluster_subnets = {
        json.dumps(s, sort_keys=True)
        for s in next(iter(t.find_resources("AWS::SageMaker::Cluster").values()))["Properties"]["VpcConfig"]["Subnets"]
    }
    assert cluster_subnets <= private


def test_only_the_controller_group_reaches_3306(cluster):
    _, raw = cluster
    t = Template.from_json(raw)
    groups = t.find_resources("AWS::EC2::SecurityGroup")
    db_sg = next(
        k for k, v in groups.items() if "MySQL from the controller only" in v["Properties"]["GroupDescription"]
    )
    ctl_sg = next(
        k for k, v in groups.items() if "Slurm controller: the one source" in v["Properties"]["GroupDescription"]
    )
    ingress = [
        r
        for r in t.find_resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [db_sg, "GroupId"]}
    ]
    ingress += [{"Properties": r} for r in groups[db_sg]["Properties"].get("SecurityGroupIngress", [])]
    assert [
        (r["Properties"]["FromPort"], r["Properties"]["ToPort"], r["Properties"].get("SourceSecurityGroupId"))
        for r in ingress
    ] == [(3306, 3306, {"Fn::GetAtt": [ctl_sg, "GroupId"]})]
    _, db = only(t, "AWS::RDS::DBInstance")
    assert db["Properties"]["VPCSecurityGroups"] == [{"Fn::GetAtt": [db_sg, "GroupId"]}]
    # The controller group, and only it, carries that group besides the cluster's.
    hp = next(iter(t.find_resources("AWS::SageMaker::Cluster").values()))["Properties"]
    carrying = {
        g["InstanceGroupName"]
        for g in hp["InstanceGroups"]
        if {"Fn::GetAtt": [ctl_sg, "GroupId"]} in g.get("OverrideVpcConfig", {}).get("SecurityGroupIds", [])
    }
    assert carrying == {"controller-machine"}


def test_cluster_attaches_the_database_in_continuous_mode(cluster):
    _, raw = cluster
    t = Template.from_json(raw)
    db_id, _ = only(t, "AWS::RDS::DBInstance")
    hp = next(iter(t.find_resources("AWS::SageMaker::Cluster").values()))["Properties"]
    assert hp["NodeProvisioningMode"] == "Continuous"
    # "Clusters that use continuous provisioning support only the Merge behavior and reject requests that set
    # SlurmConfigStrategy" (HyperPod developer guide, Migrating to API-driven Slurm configuration).
    assert "SlurmConfigStrategy" not in hp["Orchestrator"]["Slurm"]
    assert hp["Orchestrator"]["Slurm"]["AccountingDatabase"] == {
        "Endpoint": {"Fn::GetAtt": [db_id, "Endpoint.Address"]},
        "SecretArn": {"Fn::GetAtt": [db_id, "MasterUserSecret.SecretArn"]},
        "Name": "slurm_acct_db",
        "Port": 3306,
    }


def test_controller_role_reads_exactly_that_secret_with_that_key(cluster):
    _, raw = cluster
    t = Template.from_json(raw)
    db_id, _ = only(t, "AWS::RDS::DBInstance")
    key_id, _ = database_key(t)
    statements = [
        s for p in t.find_resources("AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    reads = [
        s
        for s in statements
        if "secretsmanager:GetSecretValue" in json.dumps(s.get("Action"))
        and "MasterUserSecret" in json.dumps(s["Resource"])
    ]
    assert len(reads) == 1 and reads[0]["Action"] == "secretsmanager:GetSecretValue"
    assert reads[0]["Resource"] == {"Fn::GetAtt": [db_id, "MasterUserSecret.SecretArn"]}
    decrypts = [s for s in statements if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
    assert len(decrypts) == 1 and decrypts[0]["Action"] == "kms:Decrypt"
    # ... and that policy belongs to the controller's role only (the worker role's has neither).
    owners = [
        p["Properties"]["Roles"]
        for p in t.find_resources("AWS::IAM::Policy").values()
        if reads[0] in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    controller = [
        k
        for k, r in t.find_resources("AWS::IAM::Role").items()
        if r["Properties"].get("RoleName") == "ml-research-cluster-cluster-exec"
        or k.startswith("HyperPodExecutionRole")
    ]
    assert owners == [[{"Ref": controller[0]}]]


def test_multi_head_controllers_are_one_group_of_several_instances(cluster):
    """HyperPod multi-head: the controller group's instances are the primary and its backups (SlurmConfig NodeType
    Controller); every one of them carries the controller's role and security group (the database admits it)."""
    _, raw = cluster
    t = Template.from_json(raw)
    hp = next(iter(t.find_resources("AWS::SageMaker::Cluster").values()))["Properties"]
    controllers = [g for g in hp["InstanceGroups"] if g["SlurmConfig"]["NodeType"] == "Controller"]
    assert [(g["InstanceGroupName"], g["InstanceCount"]) for g in controllers] == [("controller-machine", CONTROLLERS)]
    assert len(controllers[0]["OverrideVpcConfig"]["SecurityGroupIds"]) == 2


def test_multi_head_needs_the_external_database():
    data = multi_head(managed_data())
    data["cluster"]["accounting"]["database"] = "hyperpod"
    with pytest.raises(ConfigError) as err:
        parse_config(data, "x")
    assert any(
        e.startswith(
            f"cluster.instance_groups[0].instance_count: {CONTROLLERS} for the controller group with "
            "cluster.accounting.database: 'hyperpod'; allowed: 1, or 2 or more with "
            "cluster.accounting.database: managed"
        )
        for e in err.value.errors
    ), err.value.errors
    # ... which in turn needs continuous provisioning: without it, that is the error.
    data = multi_head(managed_data(node_provisioning_mode="Standard"))
    with pytest.raises(ConfigError) as err:
        parse_config(data, "x")
    assert [e.split(";")[0] for e in err.value.errors] == [
        "cluster.node_provisioning_mode: 'Standard' with cluster.accounting.database: managed"
    ]


def test_a_strategy_on_the_continuous_cluster_is_refused():
    with pytest.raises(ConfigError) as err:
        parse_config(managed_data(slurm_config_strategy="Managed"), "x")
    assert [e.split(";")[0] for e in err.value.errors] == [
        "cluster.slurm_config_strategy: 'Managed' with cluster.node_provisioning_mode: Continuous"
    ]


def test_cfn_lint_is_clean(cluster):
    path, _ = cluster
    assert cfn_lint.lint([path]) == {path: []}


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"node_provisioning_mode": "Standard"},
            "cluster.node_provisioning_mode: 'Standard' with "
            "cluster.accounting.database: managed; allowed: 'Continuous'",
        ),
        (
            {"accounting": {"enabled": False, "database": "managed"}},
            "cluster.accounting.database: 'managed' with cluster.accounting.enabled: false",
        ),
    ],
)
def test_refused_without_what_hyperpod_requires(change, message):
    data = managed_data()
    data["cluster"].update(change)
    with pytest.raises(ConfigError) as err:
        parse_config(data, "x")
    assert any(e.startswith(message) for e in err.value.errors), err.value.errors


def test_refused_with_one_az():
    data = managed_data()
    data["network"].update(az_ids=["usw2-az2"], private_subnet_cidrs=["10.0.64.0/18"])
    with pytest.raises(ConfigError) as err:
        parse_config(data, "x")
    assert any(
        e.startswith(
            "network.az_ids: ['usw2-az2'] with cluster.accounting.database: managed; allowed: "
            "private subnets in at least 2 AZs"
        )
        for e in err.value.errors
    ), err.value.errors


def test_refused_with_eks_and_unknown_value():
    data = yaml.safe_load(VARIANT_FILES["eks"].read_text())
    data["cluster"] = {**data.get("cluster", {}), "accounting": {"database": "managed"}}
    with pytest.raises(ConfigError) as err:
        parse_config(data, "x")
    assert any(
        e.startswith("cluster.accounting.database: 'managed' with orchestrator 'eks'") for e in err.value.errors
    ), err.value.errors
    data = managed_data(accounting={"enabled": True, "database": "aurora"})
    with pytest.raises(ConfigError) as err:
        parse_config(data, "x")
    assert any("cluster.accounting.database" in e and "hyperpod" in e and "managed" in e for e in err.value.errors)


def test_default_stays_on_hyperpods_database_in_continuous_mode():
    config = parse_config(yaml.safe_load(VARIANT_FILES["default"].read_text()), "default")
    assert config.cluster.accounting.database == "hyperpod" and config.cluster.node_provisioning_mode == "Continuous"


def test_default_template_has_no_database_is_continuous_and_sends_no_strategy(synth):
    # Continuous for HyperPod's cluster events (the alarm topic and the login load balancer subscribe to them);
    # continuous clusters reject SlurmConfigStrategy, so none is sent.
    t = synth("default").template("cluster")
    t.resource_count_is("AWS::RDS::DBInstance", 0)
    hp = next(iter(t.find_resources("AWS::SageMaker::Cluster").values()))["Properties"]
    assert hp["NodeProvisioningMode"] == "Continuous"
    assert (
        "AccountingDatabase" not in hp["Orchestrator"]["Slurm"]
        and "SlurmConfigStrategy" not in hp["Orchestrator"]["Slurm"]
    )
    assert all("OverrideVpcConfig" not in g for g in hp["InstanceGroups"])
