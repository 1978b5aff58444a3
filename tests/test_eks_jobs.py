"""EKS jobs and Studio: each team's jobs log to the platform's MLflow server through their own pod identity, and
Studio spaces default to their member's namespace."""

from __future__ import annotations

import json

import pytest

from support.iam import statements_of
from support.template import kubernetes_objects, only, resources


# ---------------------------------------------------------------------------------------------- jobs and MLflow
def tracking_server_name(studio: dict) -> str:
    return only(studio, "AWS::SageMaker::MlflowTrackingServer")["Properties"]["TrackingServerName"]


def server_arn_name(resource) -> str:
    """The resource name of a `format_arn` of a tracking server: arn:<partition>:sagemaker:<region>:<account>:mlflow-
    tracking-server/<name>."""
    parts = resource["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "<" + p["Ref"] + ">" for p in parts)
    assert text.startswith("arn:aws:sagemaker:us-west-2:<AWS::AccountId>:mlflow-tracking-server/")
    return text.rsplit("mlflow-tracking-server/", 1)[1]


def test_each_teams_jobs_log_to_the_platforms_mlflow_server_through_their_own_pod_identity(synth):
    s = synth("eks_shared")
    t = s.templates["cluster"]
    teams = [team.name for team in s.config.eks.task_governance.teams]
    associations = {
        (a["Properties"]["Namespace"], a["Properties"]["ServiceAccount"]): a["Properties"]["RoleArn"]
        for a in resources(t, "AWS::EKS::PodIdentityAssociation").values()
    }
    server = tracking_server_name(s.templates["studio"])
    roles = set()
    for team in teams:
        role = associations[(f"hyperpod-ns-{team}", "training-job")]["Fn::GetAtt"][0]
        roles.add(role)
        (trust,) = t["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == f"hyperpod-ns-{team}"
        assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "training-job"
        (statement,) = statements_of(t, role)
        assert statement["Action"] == "sagemaker-mlflow:*" and statement["Effect"] == "Allow"
        assert server_arn_name(statement["Resource"]) == server  # the Studio stack's server, by its fixed name
    assert len(roles) == len(teams)  # a role per team: MLflow and CloudTrail see the team
    objects = {
        (o["kind"], o["metadata"]["namespace"]): o
        for o in kubernetes_objects(t)
        if o["kind"] in ("ServiceAccount", "ConfigMap") and o["metadata"]["name"] != "hyperpod-team-identities"
    }
    for team in teams:
        assert objects[("ServiceAccount", f"hyperpod-ns-{team}")]["metadata"]["name"] == "training-job"
        config_map = objects[("ConfigMap", f"hyperpod-ns-{team}")]
        assert config_map["metadata"]["name"] == "mlflow"
        assert config_map["data"]["tracking-uri"].endswith(f":mlflow-tracking-server/{server}")


def test_without_mlflow_jobs_get_their_service_account_and_no_aws_role(synth):
    s = synth("eks")
    assert not s.config.studio.mlflow.enabled
    t = s.templates["cluster"]
    objects = kubernetes_objects(t)
    teams = {team.name for team in s.config.eks.task_governance.teams}
    assert {
        o["metadata"]["namespace"]
        for o in objects
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "training-job"
    } == {f"hyperpod-ns-{team}" for team in teams}
    assert not [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "mlflow"]
    assert "sagemaker-mlflow" not in json.dumps(t)


@pytest.mark.parametrize("variant", ["eks", "eks_shared"])
def test_studio_spaces_default_to_the_members_namespace_and_read_the_cluster_for_the_task_pages(synth, variant):
    """The lifecycle config tells each space its profile's team namespace (lifecycle/studio/eks_login_node.sh makes it
    the kube context's default; tests/lifecycle/studio_eks_login_node.bats runs that), and with MLflow turns on
    presigned artifact uploads; every Studio role may call eks:AccessKubernetesApi on this cluster only."""
    s = synth(variant)
    studio = s.templates["studio"]
    text = json.dumps(resources(studio, "AWS::SageMaker::StudioLifecycleConfig"))
    for team in s.config.eks.task_governance.teams:
        if team.members:
            assert f"hyperpod-ns-{team.name}={','.join(team.members)}" in text
    assert ("MLFLOW_PRESIGNED_UPLOADS" in text) is s.config.studio.mlflow.enabled
    roles = [
        k
        for k, r in resources(studio, "AWS::IAM::Role").items()
        if "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
        and (k.startswith("ExecutionRole") or k.startswith("MemberRole"))
    ]
    assert len(roles) == 1 + sum(len(t.members) for t in s.config.eks.task_governance.teams)
    for role in roles:
        statements = [
            st
            for p in resources(studio, "AWS::IAM::Policy").values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        (eks_api,) = [st for st in statements if "eks:AccessKubernetesApi" in json.dumps(st["Action"])]
        assert sorted(eks_api["Action"]) == ["eks:AccessKubernetesApi", "eks:DescribeCluster"]
        assert f":cluster/{s.config.name}" in json.dumps(eks_api["Resource"])
        assert not any("eks:MutateViaKubernetesApi" in json.dumps(st["Action"]) for st in statements)


def test_a_member_list_too_long_for_the_lifecycle_config_becomes_a_group_lookup():
    from manifests.kubernetes_objects import MAX_NAMESPACE_LIST, studio_kube_settings

    small = studio_kube_settings({"research": ["alice", "carol"], "idle": [], "dev": ["bob"]}, mlflow=False)
    assert small == {"KUBE_NAMESPACES": "hyperpod-ns-dev=bob hyperpod-ns-research=alice,carol"}
    many = {"research": [f"user{i:05d}" for i in range(MAX_NAMESPACE_LIST // 9 + 1)]}
    assert studio_kube_settings(many, mlflow=True) == {
        "KUBE_TEAM_GROUPS": "hyperpod-team-=hyperpod-ns-",
        "MLFLOW_PRESIGNED_UPLOADS": "true",
    }
