"""Node metrics and Grafana (observability.node_metrics, observability.grafana): the Prometheus workspace, exactly
aps:RemoteWrite for the writers, the EKS observability add-on, the Grafana workspace and what it provisions, and the
dashboards as code."""

from __future__ import annotations

import json

import pytest

from support.paths import ROOT
from support.variants import GRAFANA_VIEWERS
from constructs.grafana_dashboards import (
    CLOUDWATCH_UID,
    PROMETHEUS_UID,
    SCHEMA_VERSION,
    cloudwatch_metrics_named,
    dashboards,
    prometheus_metrics_named,
)
from constructs.observability_dashboard import DOCUMENTED_METRICS
from platform_config import ConfigError, parse_config
from constructs.node_metric_names import DCGM_FACTS, PROMETHEUS_METRICS
from tools.generate_grafana_dashboards import OUT, rendered
from support.iam import actions
from support.iam_facts import statements as policy_statements
from support.template import resources


def aps_statements(template: dict) -> list[dict]:
    return [s for _, s in policy_statements(template) if any(a.startswith("aps:") or a == "*" for a in actions(s))]


def is_workspace_arn(value) -> bool:
    """A cross-stack read of the storage stack's AMP workspace Arn attribute."""
    output = value["Fn::GetStackOutput"]
    return (
        output["StackName"].endswith("-storage")
        and output["OutputName"].startswith("PublishOutputFnGetAttNodeMetricsWorkspace")
        and "Arn" in output["OutputName"]
    )


@pytest.fixture(scope="module")
def metrics(synth):
    return synth("metrics")


@pytest.fixture(scope="module")
def eks_metrics(synth):
    return synth("eks_metrics")


# ---------------------------------------------------------------------------------------------- workspace and IAM
def test_off_by_default_no_workspace_and_no_aps_anywhere(synth):
    s = synth("default")
    for template in s.templates.values():
        assert resources(template, "AWS::APS::Workspace") == {}
        assert resources(template, "AWS::Grafana::Workspace") == {}
        assert aps_statements(template) == []


def test_the_storage_stack_keeps_an_encrypted_workspace(metrics):
    storage = metrics.templates["storage"]
    (workspace,) = resources(storage, "AWS::APS::Workspace").values()
    assert workspace["DeletionPolicy"] == workspace["UpdateReplacePolicy"] == "Retain"
    props = workspace["Properties"]
    assert props["Alias"] == "ml-cluster-node-metrics"
    assert props["KmsKeyArn"]["Fn::GetAtt"][1] == "Arn"
    assert resources(storage, "AWS::KMS::Key")[props["KmsKeyArn"]["Fn::GetAtt"][0]]["Properties"]["EnableKeyRotation"]
    assert props["WorkspaceConfiguration"] == {"RetentionPeriodInDays": 150}
    url = storage["Outputs"]["NodeMetricsRemoteWriteUrl"]["Value"]["Fn::Join"][1]
    workspace_id = next(iter(resources(storage, "AWS::APS::Workspace")))
    assert url == [
        "https://aps-workspaces.",
        {"Ref": "AWS::Region"},
        ".",
        {"Ref": "AWS::URLSuffix"},
        "/workspaces/",
        {"Fn::GetAtt": [workspace_id, "WorkspaceId"]},
        "/api/v1/remote_write",
    ]


def test_slurm_nodes_may_only_remote_write_to_that_workspace(metrics):
    cluster = metrics.templates["cluster"]
    statements = aps_statements(cluster)
    for statement in statements:
        assert statement["Action"] == "aps:RemoteWrite" and statement["Effect"] == "Allow"
        assert "Condition" not in statement
        assert is_workspace_arn(statement["Resource"])
    # on the node roles (the controller's and the login/compute groups' worker role), nowhere else
    roles = sorted(
        role["Ref"]
        for r in resources(cluster, "AWS::IAM::Policy").values()
        if any(st in r["Properties"]["PolicyDocument"]["Statement"] for st in statements)
        for role in r["Properties"]["Roles"]
    )
    node_roles = sorted(
        k for k in resources(cluster, "AWS::IAM::Role") if k.startswith(("HyperPodExecutionRole", "HyperPodWorkerRole"))
    )
    assert len(node_roles) == 2 and roles == node_roles
    assert metrics.platform.cluster.node_metrics_remote_write_url is not None


def test_eks_collector_gets_remote_write_through_pod_identity(eks_metrics):
    cluster = eks_metrics.templates["cluster"]
    (addon,) = [
        r
        for r in resources(cluster, "AWS::EKS::Addon").values()
        if r["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-observability"
    ]
    assert addon["Properties"]["AddonVersion"] == eks_metrics.config.observability.node_metrics.eks_addon_version
    values = addon["Properties"]["ConfigurationValues"]["Fn::Join"][1]
    assert values[0] == '{"ampWorkspace":{"prometheusEndpoint":"https://aps-workspaces.'
    assert values[1] == {"Ref": "AWS::Region"} and values[3] == {"Ref": "AWS::URLSuffix"}
    assert values[4] == "/workspaces/" and "WorkspaceId" in values[5]["Fn::GetStackOutput"]["OutputName"]
    assert values[6] == '/","arn":"' and is_workspace_arn(values[7])
    ((association_id, association),) = [
        (k, r)
        for k, r in resources(cluster, "AWS::EKS::PodIdentityAssociation").items()
        if r["Properties"]["Namespace"] == "hyperpod-observability"
    ]
    assert association["Properties"]["ServiceAccount"] == "hyperpod-observability-operator-otel-collector"
    assert association_id in addon["DependsOn"]
    (statement,) = aps_statements(cluster)
    assert statement["Action"] == "aps:RemoteWrite"
    assert is_workspace_arn(statement["Resource"])
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    (policy,) = [
        r
        for r in resources(cluster, "AWS::IAM::Policy").values()
        if statement in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert policy["Properties"]["Roles"] == [{"Ref": role_id}]


# ---------------------------------------------------------------------------------------------- Grafana
def test_grafana_reads_only_its_workspace_and_cloudwatch(metrics):
    obs = metrics.templates["observability"]
    (workspace,) = resources(obs, "AWS::Grafana::Workspace").values()
    props = workspace["Properties"]
    assert props["PermissionType"] == "CUSTOMER_MANAGED" and props["AuthenticationProviders"] == ["AWS_SSO"]
    assert props["AccountAccessType"] == "CURRENT_ACCOUNT" and props["GrafanaVersion"] == "10.4"
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    role = resources(obs, "AWS::IAM::Role")[role_id]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "grafana.amazonaws.com"
    }
    (policy,) = [
        r for r in resources(obs, "AWS::IAM::Policy").values() if r["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert set(by_sid) == {"QueryNodeMetrics", "ReadCloudWatchMetrics"}
    assert sorted(by_sid["QueryNodeMetrics"]["Action"]) == [
        "aps:GetLabels",
        "aps:GetMetricMetadata",
        "aps:GetSeries",
        "aps:QueryMetrics",
    ]
    assert is_workspace_arn(by_sid["QueryNodeMetrics"]["Resource"])
    assert all(
        a.startswith("cloudwatch:Get") or a.startswith("cloudwatch:List") or a.startswith("cloudwatch:Describe")
        for a in by_sid["ReadCloudWatchMetrics"]["Action"]
    )


def test_provisioning_carries_the_committed_dashboards_and_the_viewer_group(metrics):
    obs = metrics.templates["observability"]
    (custom,) = resources(obs, "Custom::GrafanaProvisioning").values()
    props = custom["Properties"]
    assert props["Dashboards"] == [p.read_text() for p in sorted(OUT.glob("*.json"))]
    assert props["ViewerGroupIds"] == [GRAFANA_VIEWERS] and props["AdminGroupIds"] == []
    assert (props["PrometheusUid"], props["CloudWatchUid"]) == (PROMETHEUS_UID, CLOUDWATCH_UID)
    grafana_actions = [s for _, s in policy_statements(obs) if any(a.startswith("grafana:") for a in actions(s))]
    assert {s["Sid"] for s in grafana_actions} == {"ShortLivedGrafanaToken", "GrantGroupRoles"}
    for s in grafana_actions:  # the workspace's ARN, arn:<partition>:grafana:<region>:<account>:/workspaces/<id>
        parts = s["Resource"]["Fn::Join"][1]
        assert parts[-2].endswith(":/workspaces/") and parts[-1]["Fn::GetAtt"][1] == "Id"


# ---------------------------------------------------------------------------------------------- dashboards
def test_committed_dashboards_are_what_the_generator_writes():
    assert {p.name: p.read_text() for p in OUT.glob("*.json")} == rendered()


@pytest.mark.parametrize("name", sorted(dashboards()))
def test_dashboard_structure(name):
    """Grafana's dashboard JSON model (schemaVersion 39): unique panel ids, panels on the 24-column grid without
    overlap, known data sources, unique refIds per panel."""
    body = json.loads((OUT / f"{name}.json").read_text())
    assert body["schemaVersion"] == SCHEMA_VERSION and body["uid"].startswith("hyperpod-") and body["title"]
    ids = [p["id"] for p in body["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for panel in body["panels"]:
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
        assert panel["datasource"]["uid"] in (PROMETHEUS_UID, CLOUDWATCH_UID)
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"])


def test_every_metric_a_panel_names_is_one_the_collectors_emit():
    facts = json.loads((ROOT / DCGM_FACTS).read_text())["counters"]
    for name, body in dashboards().items():
        for metric in prometheus_metrics_named(body):
            assert metric in PROMETHEUS_METRICS, f"{name}: {metric}"
            if metric.startswith("DCGM_"):
                assert metric in facts, f"{metric} is not a default dcgm-exporter counter"
        for metric in cloudwatch_metrics_named(body):
            assert metric in DOCUMENTED_METRICS, f"{name}: {metric}"
    assert {m for m in PROMETHEUS_METRICS if m.startswith("DCGM_")} <= set(facts)


def test_dashboards_cover_gpu_efa_slurm_and_fsx():
    named = {name: prometheus_metrics_named(body) for name, body in dashboards().items()}
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"} <= named["gpu"]
    assert {"efa_rx_bytes_total", "efa_tx_bytes_total", "efa_rx_drops_total"} <= named["efa"]
    assert {"slurm_jobs", "slurm_nodes"} <= named["slurm"]
    assert ("AWS/FSx", "FreeDataStorageCapacity") in cloudwatch_metrics_named(dashboards()["fsx"])


# ---------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "observability, message",
    [
        ({"grafana": {"enabled": True}}, "observability.grafana.enabled: true with observability.node_metrics.enabled"),
        (
            {"node_metrics": {"enabled": True}, "grafana": {"enabled": True, "authentication_provider": "SAML"}},
            "observability.grafana.saml: missing with authentication_provider SAML",
        ),
        ({"grafana": {"viewer_group_ids": ["studio"]}}, "observability.grafana.viewer_group_ids[0]: 'studio'"),
        (
            {"grafana": {"authentication_provider": "SAML", "admin_group_ids": [GRAFANA_VIEWERS]}},
            "observability.grafana.admin_group_ids: ['9067c5ed5d",
        ),
        (
            {"grafana": {"permission_type": "SERVICE_MANAGED"}},
            "observability.grafana.permission_type: 'SERVICE_MANAGED'",
        ),
    ],
)
def test_config_errors_name_the_key(observability, message):
    with pytest.raises(ConfigError) as error:
        parse_config({"observability": observability}, "test")
    assert any(e.startswith(message) for e in error.value.errors), error.value.errors


def test_saml_workspace_maps_admin_roles_from_the_assertion():
    import aws_cdk as cdk
    from aws_cdk.assertions import Match, Template

    from constructs.grafana_workspace import GrafanaWorkspace, SamlSettings
    from constructs.metrics_workspace import MetricsWorkspace

    stack = cdk.Stack(cdk.App(), "Saml", env=cdk.Environment(account="111122223333", region="us-west-2"))
    metrics = MetricsWorkspace(stack, "Metrics", alias="saml-node-metrics", retention_days=30)
    GrafanaWorkspace(
        stack,
        "Grafana",
        name="saml",
        metrics=metrics,
        file_system_id="fs-0123456789abcdef0",
        authentication_provider="SAML",
        saml=SamlSettings("https://idp.example.com/metadata", "groups", ("grafana-admins",)),
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::Grafana::Workspace",
        {
            "AuthenticationProviders": ["SAML"],
            "SamlConfiguration": {
                "IdpMetadata": {"Url": "https://idp.example.com/metadata"},
                "AssertionAttributes": {"Role": "groups"},
                "RoleValues": {"Admin": ["grafana-admins"]},
            },
        },
    )
    # no Identity Center groups: the provisioner may not change permissions
    for policy in template.find_resources("AWS::IAM::Policy").values():
        assert "grafana:UpdatePermissions" not in json.dumps(policy)
    template.has_resource_properties(
        "Custom::GrafanaProvisioning",
        {
            "ViewerGroupIds": [],
            "AdminGroupIds": [],
            "FileSystemId": "fs-0123456789abcdef0",
            "Dashboards": Match.any_value(),
        },
    )
