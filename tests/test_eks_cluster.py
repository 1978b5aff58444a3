"""The EKS orchestrator: control plane, access and RBAC, add-ons, dependency chart, HyperPod on EKS."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest

from support import iam_facts
from support.app_main import run_app
from support.variants import EKS_KUBERNETES_VERSION, cdk_json_context, eks_config, VARIANT_FILES
from platform_config import ConfigError, load_config
from platform_config.chart_pin import chart_directory
from cli.stack_graph import stack_dependencies
from support.template import kubernetes_objects, only, resources


# ---------------------------------------------------------------------------------------------- control plane
def test_control_plane_is_private_encrypted_and_logs_everything(synth):
    t = synth("eks").templates["eks"]
    props = only(t, "AWS::EKS::Cluster")["Properties"]
    assert props["Version"] == EKS_KUBERNETES_VERSION
    assert props["AccessConfig"] == {"AuthenticationMode": "API", "BootstrapClusterCreatorAdminPermissions": False}
    # vpc-cni, kube-proxy and coredns are managed add-ons; EKS must not install its own copies first.
    assert props["BootstrapSelfManagedAddons"] is False
    vpc = props["ResourcesVpcConfig"]
    assert vpc["EndpointPrivateAccess"] is True and vpc["EndpointPublicAccess"] is False
    assert len(vpc["SubnetIds"]) == 2
    assert props["EncryptionConfig"][0]["Resources"] == ["secrets"]
    assert sorted(entry["Type"] for entry in props["Logging"]["ClusterLogging"]["EnabledTypes"]) == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    log_groups = [
        g["Properties"]
        for g in resources(t, "AWS::Logs::LogGroup").values()
        if g["Properties"].get("LogGroupName") == "/aws/eks/ml-eks/cluster"
    ]
    assert [g["RetentionInDays"] for g in log_groups] == [90]


def test_control_plane_gets_small_subnets_in_two_azs(synth):
    network = synth("eks").templates["network"]
    subnets = [s["Properties"] for s in resources(network, "AWS::EC2::Subnet").values()]
    control = sorted((s["AvailabilityZoneId"], s["CidrBlock"]) for s in subnets if s["CidrBlock"].endswith("/28"))
    assert control == [("usw2-az1", "10.0.1.0/28"), ("usw2-az2", "10.0.1.16/28")]
    slurm_network = synth("default").templates["network"]
    assert not [
        s for s in resources(slurm_network, "AWS::EC2::Subnet").values() if s["Properties"]["CidrBlock"].endswith("/28")
    ]


def test_public_endpoint_only_with_an_allow_list(tmp_path):
    cfg = eks_config(
        VARIANT_FILES["eks"], eks={"endpoint": {"public": True, "public_access_cidrs": ["203.0.113.0/24"]}}
    )
    assert cfg.eks.endpoint.public_access_cidrs == ["203.0.113.0/24"]
    with pytest.raises(ConfigError) as info:
        eks_config(VARIANT_FILES["eks"], eks={"endpoint": {"public": True}})
    assert any("list the CIDR blocks" in e for e in info.value.errors)


def test_addons_take_the_eks_default_for_the_cluster_version(synth):
    """No add-on version in the example: EKS installs the one it marks default for the cluster's Kubernetes version
    (no source names a vpc-cni or pod-identity-agent build; platform_config/eks.py), and make preflight checks it."""
    s = synth("eks")
    addons = {
        a["Properties"]["AddonName"]: a["Properties"]
        for stack in ("eks", "cluster")
        for a in resources(s.templates[stack], "AWS::EKS::Addon").values()
    }
    # DaemonSets before the nodes, with the control plane; Deployments after them, with HyperPod
    assert {a["Properties"]["AddonName"] for a in resources(s.templates["eks"], "AWS::EKS::Addon").values()} == {
        "vpc-cni",
        "kube-proxy",
        "eks-pod-identity-agent",
    }
    assert set(addons) == {
        "vpc-cni",
        "kube-proxy",
        "coredns",
        "eks-pod-identity-agent",
        "aws-fsx-csi-driver",
        "cert-manager",
        "amazon-sagemaker-hyperpod-training-operator",
        "amazon-sagemaker-hyperpod-taskgovernance",
    }
    assert [name for name, props in addons.items() if "AddonVersion" in props] == []


def test_hyperpod_nodes_may_give_pods_ips_in_the_cluster_vpc_only(synth):
    t = synth("eks").templates["cluster"]
    cluster = only(t, "AWS::SageMaker::Cluster")["Properties"]
    role = cluster["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0]
    statements = [
        st
        for p in resources(t, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for st in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    cni = {"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses", "ec2:ModifyNetworkInterfaceAttribute"}
    granting = [
        st for st in statements if cni & set(st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
    ]
    assert granting and all(set(st["Action"]) >= cni for st in granting)
    for st in granting:
        assert "ec2:Vpc" in st["Condition"]["ArnEquals"]
        assert "network-interface/*" in json.dumps(st["Resource"])


def test_pod_identities_are_scoped(synth):
    t = synth("eks").templates["cluster"]
    associations = {
        (a["Properties"]["Namespace"], a["Properties"]["ServiceAccount"])
        for a in resources(t, "AWS::EKS::PodIdentityAssociation").values()
    }
    assert associations == {
        ("kube-system", "fsx-csi-controller-sa"),
        ("aws-hyperpod", "hp-training-operator-controller-manager"),
    }
    policies = json.dumps([p["Properties"]["PolicyDocument"] for p in resources(t, "AWS::IAM::Policy").values()])
    assert '"fsx:DescribeFileSystems"' in policies
    # An action that authorizes no resource type matches only "*" (Service Authorization Reference facts); the FSx
    # CSI controller's describe call named one file system and so would have been denied.
    assert iam_facts.scoping_errors(t) == []
    (describe,) = [
        st
        for policy, st in iam_facts.statements(t)
        if policy.startswith("FsxCsiRole") and "fsx:DescribeFileSystems" in iam_facts.as_list(st["Action"])
    ]
    assert describe["Resource"] == "*" and iam_facts.as_list(describe["Action"]) == ["fsx:DescribeFileSystems"]
    for forbidden in ("FullAccess", '"fsx:*"', '"fsx:CreateFileSystem"', '"fsx:DeleteFileSystem"'):
        assert forbidden not in policies


def test_access_entries_are_scoped_by_role(synth):
    s = synth("eks")
    cluster_entries = [e["Properties"] for e in resources(s.templates["eks"], "AWS::EKS::AccessEntry").values()]
    admin = [e for e in cluster_entries if e["PrincipalArn"] == "arn:aws:iam::111122223333:role/PlatformAdmin"]
    assert len(admin) == 1 and "AmazonEKSClusterAdminPolicy" in json.dumps(admin[0]["AccessPolicies"])
    assert not resources(s.templates["studio"], "AWS::EKS::AccessEntry")  # Studio does not wait for EKS
    studio = [e["Properties"] for e in resources(s.templates["eks-access"], "AWS::EKS::AccessEntry").values()]
    text = json.dumps(studio)
    for forbidden in ("AmazonEKSClusterAdminPolicy", "AmazonEKSAdminPolicy", "AmazonEKSEditPolicy", '"cluster"'):
        assert forbidden not in text
    scopes = sorted(
        (tuple(e.get("KubernetesGroups", [])), tuple(p["AccessScope"]["Namespaces"]))
        for e in studio
        for p in e["AccessPolicies"]
    )
    # research has alice, developers bob, production carol: one role each.
    assert scopes == [
        ((), ("default",)),
        (("hyperpod-team-developers",), ("hyperpod-ns-developers",)),
        (("hyperpod-team-production",), ("hyperpod-ns-production",)),
        (("hyperpod-team-research",), ("hyperpod-ns-research",)),
    ]

    # One Kubernetes identity per member: each member's own Studio role (the ExecutionRole of their profile) maps to
    # their own username, which the job policies tie to their uid; the shared role gets EKS's default username.
    profiles = {
        p["Properties"]["UserProfileName"]: p["Properties"]["UserSettings"].get("ExecutionRole")
        for t in s.nested.values()
        for p in resources(t, "AWS::SageMaker::UserProfile").values()
    }
    members = {m: t.name for t in s.config.eks.task_governance.teams for m in t.members}
    usernames = {e.get("Username"): e for e in studio}
    assert set(usernames) == {None} | {f"hyperpod-user:{m}" for m in members}
    for member, team in members.items():
        entry = usernames[f"hyperpod-user:{member}"]
        assert entry["KubernetesGroups"] == [f"hyperpod-team-{team}"]
        assert json.dumps(entry["PrincipalArn"]).split("MemberRole")[1].startswith(member)
        assert f"MemberRole{member}" in json.dumps(profiles[member])


def rbac_allows(
    objects: list[dict], groups: list[str], *, verb: str, group: str, resource: str, namespace: str
) -> bool:
    """Kubernetes RBAC for namespaced requests, evaluated over the objects the stack applies."""
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "Role"}
    for binding in (o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == namespace):
        if not any(sub["kind"] == "Group" and sub["name"] in groups for sub in binding["subjects"]):
            continue
        role = roles.get((namespace, binding["roleRef"]["name"]))
        for rule in (role or {}).get("rules", []):
            if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
                return True
    return False


def test_team_members_submit_jobs_in_their_namespace_only(synth):
    s = synth("eks")
    objects = kubernetes_objects(s.templates["cluster"])
    entries = [e["Properties"] for e in resources(s.templates["eks-access"], "AWS::EKS::AccessEntry").values()]
    groups = {e["AccessPolicies"][0]["AccessScope"]["Namespaces"][0]: e.get("KubernetesGroups", []) for e in entries}
    job = dict(group="sagemaker.amazonaws.com", resource="hyperpodpytorchjobs")
    assert rbac_allows(objects, groups["hyperpod-ns-research"], verb="create", namespace="hyperpod-ns-research", **job)
    assert rbac_allows(
        objects, groups["hyperpod-ns-developers"], verb="delete", namespace="hyperpod-ns-developers", **job
    )
    for namespace in ("default", "hyperpod-ns-developers", "hyperpod-ns-production"):
        assert not rbac_allows(objects, groups["hyperpod-ns-research"], verb="create", namespace=namespace, **job)
    assert not rbac_allows(objects, groups["default"], verb="create", namespace="default", **job)
    for verb, group, resource in (
        ("get", "", "secrets"),
        ("create", "", "pods"),
        ("create", "rbac.authorization.k8s.io", "rolebindings"),
    ):
        assert not rbac_allows(
            objects,
            groups["hyperpod-ns-research"],
            verb=verb,
            group=group,
            resource=resource,
            namespace="hyperpod-ns-research",
        )
    profiles = {
        p["Properties"]["UserProfileName"]: p["Properties"]["UserSettings"]
        for t in s.nested.values()
        for p in resources(t, "AWS::SageMaker::UserProfile").values()
    }
    assert "ExecutionRole" in profiles["alice"] and "ExecutionRole" in profiles["bob"]
    assert profiles["alice"]["ExecutionRole"] != profiles["bob"]["ExecutionRole"]


def test_writable_namespaces_enforce_pod_security_and_default_gets_no_accelerators(synth):
    t = synth("eks").templates["cluster"]
    objects = kubernetes_objects(t)
    # The stack creates no namespace (task governance does, with each quota); it labels default and each team's.
    assert not [o for o in objects if o["kind"] == "Namespace"]
    patches = {
        p["Properties"]["ResourceName"]: p["Properties"]
        for p in resources(t, "Custom::AWSCDK-EKS-KubernetesPatch").values()
    }
    teams = synth("eks").config.eks.task_governance.teams
    assert set(patches) == {"namespace/default"} | {f"namespace/hyperpod-ns-{team.name}" for team in teams}
    for name, patch in patches.items():
        applied = json.loads(patch["ApplyPatchJson"])
        assert applied["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name.split("/")[1], **applied["metadata"]}},
            EKS_KUBERNETES_VERSION,
            strict=True,
        )
    (default_quota,) = [o for o in objects if o["kind"] == "ResourceQuota" and o["metadata"]["namespace"] == "default"]
    assert default_quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
    assert default_quota["spec"]["hard"]["requests.aws.amazon.com/neurondevice"] == "0"


# ---------------------------------------------------------------------------------------------- dependency chart
def test_dependency_chart_is_installed_before_the_hyperpod_cluster(synth):
    s = synth("eks")
    t = s.templates["eks"]
    ((chart_id, chart),) = resources(t, "Custom::AWSCDK-EKS-HelmChart").items()
    assert chart["Properties"]["Release"] == "hyperpod-dependencies"
    assert "ChartAssetURL" in chart["Properties"]
    values = json.loads(chart["Properties"]["Values"])
    assert values["global"]["region"] == "us-west-2"
    # HyperPod is in the cluster stack, which CloudFormation creates only once the EKS stack (chart included) is
    assert resources(s.templates["cluster"], "AWS::SageMaker::Cluster")
    assert "ml-eks-eks" in stack_dependencies(s.out_dir)["ml-eks-cluster"]
    assert "Wait" not in chart["Properties"]  # nothing can schedule before the nodes exist
    early = {
        r: a["Properties"]["AddonName"]
        for r, a in resources(t, "AWS::EKS::Addon").items()
        if a["Properties"]["AddonName"] in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
    }
    assert len(early) == 3 and set(early) <= set(chart["DependsOn"])


def test_missing_chart_is_a_clear_error(tmp_path):
    cfg = eks_config(VARIANT_FILES["eks"])
    cfg = cfg.model_copy(
        update={
            "eks": cfg.eks.model_copy(
                update={
                    "hyperpod_dependencies": cfg.eks.hyperpod_dependencies.model_copy(
                        update={"chart_dir": str(tmp_path)}
                    )
                }
            )
        }
    )
    with pytest.raises(ConfigError) as info:
        chart_directory(cfg)
    assert info.value.errors == [
        f"eks.hyperpod_dependencies.chart_dir: {str(tmp_path)!r} holds no Chart.yaml; the HyperPod dependency chart "
        "is not committed: run `make hyperpod-chart` to fetch the pinned revision (needs network access to "
        "github.com), or point chart_dir at a copy of it"
    ]


def test_app_reports_a_missing_chart_without_traceback(tmp_path, monkeypatch, capsys):
    config = tmp_path / "eks.yaml"
    config.write_text(
        VARIANT_FILES["eks"]
        .read_text()
        .replace("chart_dir: build/hyperpod-helm-chart", f"chart_dir: {tmp_path / 'no-chart'}")
    )
    # app.py in this process, as tests/test_config_loading.py runs it (one case there starts it as the CLI does)
    result = run_app({**cdk_json_context(), "config": str(config)}, monkeypatch, capsys, outdir=tmp_path / "out")
    assert result.returncode == 1
    assert "holds no Chart.yaml" in result.stderr and "make hyperpod-chart" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "out").glob("*.template.json"))


# ---------------------------------------------------------------------------------------------- HyperPod on EKS
def test_hyperpod_cluster_is_orchestrated_by_eks(synth):
    s = synth("eks")
    t = s.templates["cluster"]
    props = only(t, "AWS::SageMaker::Cluster")["Properties"]
    arn = props["Orchestrator"]["Eks"]["ClusterArn"]["Fn::GetStackOutput"]
    assert arn["StackName"] == "ml-eks-eks"
    assert s.templates["eks"]["Outputs"][arn["OutputName"]]["Value"] == {
        "Fn::GetAtt": [next(iter(resources(s.templates["eks"], "AWS::EKS::Cluster"))), "Arn"]
    }
    assert props["NodeProvisioningMode"] == "Continuous"
    assert props["NodeRecovery"] == "Automatic"
    groups = {g["InstanceGroupName"]: g for g in props["InstanceGroups"]}
    assert list(groups) == ["training-p5", "dev-g5"]
    assert groups["training-p5"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert groups["training-p5"]["KubernetesConfig"] == {"Labels": {"workload": "training"}}
    assert groups["dev-g5"]["KubernetesConfig"]["Taints"] == [
        {"Key": "dedicated", "Value": "development", "Effect": "NoSchedule"}
    ]
    assert all("SlurmConfig" not in g for g in groups.values())
    assert "AutoScaling" not in props and "ClusterRole" not in props


def test_karpenter_autoscaling_uses_a_role_trusted_by_hyperpod(synth):
    t = synth("eks_shared").templates["cluster"]
    props = only(t, "AWS::SageMaker::Cluster")["Properties"]
    assert props["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    role_id = props["ClusterRole"]["Fn::GetAtt"][0]
    trust = t["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "hyperpod.sagemaker.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "cluster/*" in json.dumps(trust["Condition"]["ArnLike"]["aws:SourceArn"])


def test_pod_identity_roles_trust_only_their_service_account_on_this_cluster(synth):
    s = synth("eks")
    t = s.templates["cluster"]
    roles = {
        a["Properties"]["ServiceAccount"]: (a["Properties"]["Namespace"], a["Properties"]["RoleArn"]["Fn::GetAtt"][0])
        for a in resources(t, "AWS::EKS::PodIdentityAssociation").values()
    }
    (eks_cluster,) = resources(s.templates["eks"], "AWS::EKS::Cluster")
    eks_outputs = s.templates["eks"]["Outputs"]
    for account, (namespace, role) in roles.items():
        (statement,) = t["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        # the cluster's ARN comes from the EKS stack, by a weak cross-stack reference to its output
        arn = statement["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-arn"]["Fn::GetStackOutput"]
        assert arn["StackName"] == "ml-eks-eks"
        assert eks_outputs[arn["OutputName"]]["Value"] == {"Fn::GetAtt": [eks_cluster, "Arn"]}
        assert statement["Condition"]["StringEquals"] == {
            "aws:SourceAccount": {"Ref": "AWS::AccountId"},
            "aws:RequestTag/eks-cluster-arn": {"Fn::GetStackOutput": arn},
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": account,
        }


def test_slurm_only_groups_are_not_created_on_eks(synth):
    cfg = load_config(VARIANT_FILES["default"], {"orchestrator": "eks"})
    assert {g.role for g in cfg.cluster.instance_groups} == {"controller", "login", "compute"}
    # The stack keeps compute groups only; a second platform synth would cost seconds, so check the selection.
    from constructs.platform_refs import NetworkRefs
    from stacks.platform import group_specs
    from constructs.hyperpod_vpc import PrivateSubnet

    refs = NetworkRefs(
        vpc_id="vpc-1",
        security_group_id="sg-1",
        private_subnets=(PrivateSubnet(az_id="usw2-az2", subnet_id="subnet-1"),),
    )
    assert [g.name for g in group_specs(cfg, refs) if g.role == "compute"] == ["worker-group-1"]


def test_eks_nodes_run_the_lifecycle_entry_point_with_eks_parameters(synth):
    s = synth("eks")
    deployment = only(s.templates["cluster"], "Custom::CDKBucketDeployment")["Properties"]
    assert deployment["DestinationBucketKeyPrefix"] == "hyperpod/ml-eks/"
    # The lifecycle record's name, with the region CloudFormation fills in (a marker; tests/test_lifecycle_record.py).
    params = [
        json.loads(re.sub(r"<<marker:[^>]*>>", '"TOKEN"', p.read_text()))
        for p in s.out_dir.glob("asset.*/platform_parameters.json")
    ]
    assert [p.pop("lifecycle_record") for p in params] == [
        {"secret_name": "hyperpod-platform/ml-eks/lifecycle-record", "region": "TOKEN"}
    ]
    assert params == [
        {
            "version": 1,
            "orchestrator": "eks",
            "cluster_name": "ml-eks",
            "worker_groups": [{"instance_group_name": "training-p5"}, {"instance_group_name": "dev-g5"}],
        }
    ]
