"""Attach mode (cluster.existing): Studio as the front door of a HyperPod cluster this project did not build. The
config rules and the day-2 rule without CDK; the two attach examples synthesized once (Slurm: shared, on a file system
without an S3 link; EKS: per-user with MLflow, partitions through the file system's S3 link)."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from support.variants import VARIANT_FILES
from platform_config import parse_config
from platform_config.attach import BUILD_ONLY_RULES
from platform_config.day2 import check_day2, snapshot
from platform_config.rules import RULES
from support.iam import by_sid, resource_policy_statements
from support.iam_facts import statements as policy_statements
from support.template import all_resources, properties, resources
from support.configs import errors_of

SLURM = yaml.safe_load(VARIANT_FILES["attach_slurm"].read_text())
EKS = yaml.safe_load(VARIANT_FILES["attach_eks"].read_text())
ATTACH_VARIANTS = ("attach_slurm", "attach_eks")
IMAGE = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ubuntu@sha256:" + "0" * 64
# What attach mode must never create: the cluster, its network, its storage.
FORBIDDEN_TYPES = (
    "AWS::SageMaker::Cluster",
    "AWS::EKS::Cluster",
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EC2::NatGateway",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::RouteTable",
    "AWS::EC2::Route",
    "AWS::EC2::VPCEndpoint",
    "AWS::EC2::FlowLog",
    "AWS::FSx::FileSystem",
    "AWS::FSx::DataRepositoryAssociation",
    "AWS::SageMaker::ClusterSchedulerConfig",
    "Custom::FsxRootSquash",
)


def edited(base: dict, **changes) -> dict:
    """A deep copy of `base` with dotted keys set (None deletes)."""
    data = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


# ----------------------------------------------------------------------------------------------- config rules
def test_both_examples_are_attach_configs():
    slurm, eks = parse_config(SLURM), parse_config(EKS)
    assert slurm.cluster.existing.controller_group == "controller-machine"
    assert slurm.storage.lustre.existing.data_bucket is None  # a file system without an S3 link
    assert eks.cluster.existing.eks_cluster_name == "hyperpod-eks-cluster"
    assert not eks.shared_fsx and eks.studio.mlflow.enabled  # per-user partitions with MLflow


def test_build_only_rules_name_real_rules():
    """A misspelt name would silently keep a build rule in attach mode (or skip nothing)."""
    assert set(BUILD_ONLY_RULES) <= {rule.__name__ for rule in RULES}


@pytest.mark.parametrize(
    "key, message",
    [
        ("network__existing", "network.existing: not set with cluster.existing; name the existing cluster's VPC"),
        ("storage__lustre__existing", "storage.lustre.existing: not set with cluster.existing; name the file system"),
    ],
)
def test_attach_needs_the_network_and_file_system_named(key, message):
    assert any(e.startswith(message) for e in errors_of(edited(SLURM, **{key: None})))


def test_a_file_system_without_an_s3_link_needs_attach_mode():
    build = copy.deepcopy(SLURM)
    del build["cluster"]["existing"]
    build["cluster"]["instance_groups"] = [
        {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
        {
            "name": "workers",
            "role": "compute",
            "instance_type": "ml.g5.8xlarge",
            "instance_count": 1,
            "partitions": ["gpu"],
        },
    ]
    build["cluster"]["login_access"] = {"load_balancer": False}
    assert any(
        e.startswith("storage.lustre.existing.data_bucket: not set on a platform that builds its own cluster")
        for e in errors_of(build)
    )
    build["storage"]["lustre"]["existing"]["data_bucket"] = "datasets-bucket"
    parse_config(build)


def test_attach_needs_studio():
    assert any(
        e.startswith("studio.enabled: false with cluster.existing")
        for e in errors_of(edited(SLURM, studio__enabled=False))
    )


def test_the_cluster_arn_must_be_in_the_deployment_region():
    data = edited(SLURM, deployment__region="eu-west-1")
    data["network"]["existing"]["private_subnets"][0]["az_id"] = "euw1-az1"
    assert any(
        e.startswith(
            "cluster.existing.arn: 'arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6' "
            "is in region 'us-west-2', not deployment.region 'eu-west-1'"
        )
        for e in errors_of(data)
    )


def test_a_malformed_cluster_arn_names_the_key():
    errors = errors_of(edited(SLURM, cluster__existing__arn="arn:aws:sagemaker:us-west-2:1:cluster/x"))
    assert errors and errors[0].startswith(
        "cluster.existing.arn: 'arn:aws:sagemaker:us-west-2:1:cluster/x' — must be a HyperPod cluster ARN"
    )


@pytest.mark.parametrize("key", ["controller_group", "attach_role_arn"])
def test_slurm_attach_needs_the_controller_group_and_the_attach_role(key):
    errors = errors_of(edited(SLURM, **{f"cluster__existing__{key}": None}))
    assert (
        f"cluster.existing.{key}: not set with orchestrator: slurm; required to read the existing controller's "
        "Slurm client and auth material (`make attach`)" in errors
    )


def test_eks_keys_are_refused_on_slurm_and_slurm_keys_on_eks():
    errors = errors_of(edited(SLURM, cluster__existing__eks_cluster_name="x"))
    assert "cluster.existing.eks_cluster_name: 'x' with orchestrator: slurm; only an EKS cluster uses it" in errors
    errors = errors_of(edited(EKS, cluster__existing__controller_group="controller-machine"))
    assert (
        "cluster.existing.controller_group: 'controller-machine' with orchestrator: eks; only a Slurm cluster uses it"
    ) in errors


def test_eks_attach_needs_the_eks_cluster_name():
    assert any(
        e.startswith("cluster.existing.eks_cluster_name: not set with orchestrator: eks")
        for e in errors_of(edited(EKS, cluster__existing__eks_cluster_name=None))
    )


def test_eks_without_an_s3_link_needs_the_claim_to_make_partitions_with():
    unlinked = edited(EKS, storage__lustre__existing__data_bucket=None)
    assert any(
        e.startswith("cluster.existing.partition_claim: not set, and storage.lustre.existing has no data_bucket")
        for e in errors_of(unlinked)
    )
    errors = errors_of(edited(unlinked, cluster__existing__partition_claim="fsx-claim"))
    assert any(
        e.startswith("cluster.existing.partition_namespace, partition_claim and partition_image: set all three or none")
        for e in errors
    )
    parse_config(
        edited(
            unlinked,
            cluster__existing__partition_claim="fsx-claim",
            cluster__existing__partition_namespace="default",
            cluster__existing__partition_image=IMAGE,
        )
    )
    assert any(
        e.startswith("cluster.existing.partition_image: 'ubuntu:24.04' — must be a container image pinned by digest")
        for e in errors_of(edited(unlinked, cluster__existing__partition_image="ubuntu:24.04"))
    )
    parse_config(EKS)  # with an S3 link, partitions are imported from S3: no claim needed


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"cluster__accounting__enabled": True}, "cluster.accounting.enabled"),
        ({"cluster__login_access__load_balancer": True}, "cluster.login_access.load_balancer"),
        ({"cluster__login_access__run_as": True}, "cluster.login_access.run_as"),
        ({"cluster__pam_slurm_adopt": True}, "cluster.pam_slurm_adopt"),
        ({"cluster__budget": {"monthly_limit_usd": 100, "emails": ["a@example.org"]}}, "cluster.budget"),
        (
            {
                "observability__grafana": {
                    "enabled": True,
                    "viewer_group_ids": ["9067c5ed5d-0b3a8c3e-7f39-4b2e-9b2f-0123456789ab"],
                }
            },
            "observability.grafana.enabled",
        ),
    ],
)
def test_features_on_nodes_or_stacks_attach_mode_does_not_build_are_refused(changes, key):
    errors = errors_of(edited(SLURM, **changes))
    assert any(e.startswith(f"{key}: set with cluster.existing; attach mode cannot offer it") for e in errors), errors


def test_login_access_defaults_are_not_refused_and_build_nothing():
    """load_balancer and run_as are on by default; in attach mode they are unused, not errors."""
    from platform_config.login_access import login_load_balancer, session_run_as

    cfg = parse_config(SLURM)
    assert cfg.cluster.login_access.load_balancer and cfg.cluster.login_access.run_as  # the defaults
    assert not login_load_balancer(cfg) and not session_run_as(cfg)


def test_build_rules_do_not_apply_in_attach_mode_but_do_in_build_mode():
    """The instance groups are ignored in attach mode (the cluster exists); the same bad group fails a build config."""
    bad_groups = [{"name": "workers", "role": "compute", "instance_type": "ml.g5.8xlarge", "instance_count": 1}]
    parse_config(edited(SLURM, cluster__instance_groups=bad_groups))  # no controller group: fine, nothing is built
    build = edited(SLURM, cluster__instance_groups=bad_groups)
    del build["cluster"]["existing"]
    assert any("controller" in e for e in errors_of(build))


# ----------------------------------------------------------------------------------------------- day-2 rule
def test_switching_between_attach_and_build_is_refused_with_the_reason():
    attach = parse_config(SLURM)
    build_data = copy.deepcopy(SLURM)
    del build_data["cluster"]["existing"]
    build_data["cluster"]["instance_groups"] = [
        {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
        {
            "name": "workers",
            "role": "compute",
            "instance_type": "ml.g5.8xlarge",
            "instance_count": 1,
            "partitions": ["gpu"],
        },
    ]
    build_data["cluster"]["login_access"] = {"load_balancer": False}
    build_data["storage"]["lustre"]["existing"]["data_bucket"] = "datasets-bucket"
    build = parse_config(build_data)
    errors, _ = check_day2(snapshot(build), attach)
    assert any(
        e.startswith(
            "cluster.existing: build -> attach cannot be deployed in place: the deployed platform built its own cluster"
        )
        for e in errors
    ), errors
    errors, _ = check_day2(snapshot(attach), build)
    assert any(e.startswith("cluster.existing: attach -> build cannot be deployed in place") for e in errors), errors
    assert check_day2(snapshot(attach), attach) == ([], [])
    # A platform deployed before attach mode existed carries no "attach" key: it is a build platform.
    old = {k: v for k, v in snapshot(build).items() if k != "attach"}
    assert check_day2(old, build)[0] == [] and check_day2(old, attach)[0]


def test_attaching_another_cluster_is_refused():
    attach = parse_config(SLURM)
    other = parse_config(
        edited(SLURM, cluster__existing__arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/zzzzzzzzzzzz")
    )
    errors, _ = check_day2(snapshot(attach), other)
    assert any(e.startswith("cluster.existing.arn: ") for e in errors), errors


# ----------------------------------------------------------------------------------------------- synthesized
@pytest.mark.parametrize("variant", ATTACH_VARIANTS)
def test_attach_builds_no_cluster_network_or_storage(synth, variant):
    synthesized = synth(variant)
    bad = [(where, lid, r["Type"]) for where, lid, r in all_resources(synthesized) if r["Type"] in FORBIDDEN_TYPES]
    assert bad == []
    # Only what the article adds, in these stacks.
    expected = {"storage", "studio", *(("slurm-login",) if variant == "attach_slurm" else ("eks-access",))}
    assert set(synthesized.templates) == expected


@pytest.mark.parametrize("variant", ATTACH_VARIANTS)
def test_attach_passes_cdk_nag(synth, variant):
    reports = synth(variant).nag_reports
    assert reports and all(r["success"] for r in reports.values()), reports


@pytest.mark.parametrize("variant", ATTACH_VARIANTS)
def test_the_domain_lives_in_the_existing_vpc_with_both_lifecycle_configs(synth, variant):
    synthesized = synth(variant)
    cfg = synthesized.config
    studio = synthesized.templates["studio"]
    (domain,) = properties(studio, "AWS::SageMaker::Domain")
    assert domain["VpcId"] == cfg.network.existing.vpc_id
    assert domain["SubnetIds"] == [cfg.network.existing.private_subnets[0].id]
    configs = sorted(
        p["StudioLifecycleConfigAppType"] for p in properties(studio, "AWS::SageMaker::StudioLifecycleConfig")
    )
    assert configs == ["CodeEditor", "JupyterLab"]


@pytest.mark.parametrize("variant", ATTACH_VARIANTS)
def test_lustre_group_is_on_the_domain_and_attached_to_the_file_systems_interfaces(synth, variant):
    synthesized = synth(variant)
    (attach,) = properties(synthesized.templates["storage"], "Custom::FsxAccessGroup")
    assert attach["FileSystemId"] == synthesized.config.storage.lustre.existing.file_system_id
    studio = synthesized.templates["studio"]
    # Studio apps reach Lustre (988, 1018-1023) on the access group, and the file system's servers answer.
    lustre_out = {
        (p["FromPort"], p["ToPort"])
        for p in properties(studio, "AWS::EC2::SecurityGroupEgress")
        if "Lustre" in p["Description"] and "Studio apps" in p["Description"] and "on the cluster" in p["Description"]
    }
    lustre_in = {
        (p["FromPort"], p["ToPort"])
        for p in properties(studio, "AWS::EC2::SecurityGroupIngress")
        if "Lustre" in p["Description"]
    }
    assert lustre_out == lustre_in == {(988, 988), (1018, 1023)}
    (domain,) = properties(studio, "AWS::SageMaker::Domain")
    assert domain["DefaultUserSettings"]["SecurityGroups"] == [{"Fn::GetAtt": ["StudioAppsGroup", "GroupId"]}]


def test_without_an_s3_link_the_shared_partition_is_a_known_path_and_nothing_imports(synth):
    """No S3 link: no partition custom resource, no S3 marker rights, no profile-event rule; the domain mounts
    /data/studio/shared, which `make attach` creates on the controller."""
    synthesized = synth("attach_slurm")
    everything = all_resources(synthesized)
    assert [lid for _, lid, r in everything if r["Type"] in ("Custom::FsxPartition", "AWS::Events::Rule")] == []
    assert '"Sid": "PartitionMarkers"' not in json.dumps(synthesized.templates["studio"])
    (domain,) = [r["Properties"] for _, _, r in everything if r["Type"] == "AWS::SageMaker::Domain"]
    condition, shared, _ = domain["DefaultUserSettings"]["CustomFileSystemConfigs"]["Fn::If"]
    assert condition == "IsSharedFSx"
    assert shared == [
        {"FSxLustreFileSystemConfig": {"FileSystemId": "fs-0a1b2c3d4e5f60718", "FileSystemPath": "/data/studio/shared"}}
    ]


def test_per_user_profiles_carry_their_posix_identity_and_a_partition_imported_through_s3(synth):
    synthesized = synth("attach_eks")
    everything = all_resources(synthesized)
    partitions = {
        r["Properties"]["RelativePath"]: r["Properties"]
        for _, _, r in everything
        if r["Type"] == "Custom::FsxPartition"
    }
    profiles = {
        r["Properties"]["UserProfileName"]: r["Properties"]["UserSettings"]
        for _, _, r in everything
        if r["Type"] == "AWS::SageMaker::UserProfile"
    }
    assert set(profiles) == {"alice", "bob"}
    for user in synthesized.config.users:
        settings = profiles[user.name]
        assert settings["CustomPosixUserConfig"]["Uid"] == user.uid
        partition = partitions[f"studio/{user.name}"]
        assert (partition["Uid"], partition["Mode"], partition["FileSystemPath"]) == (str(user.uid), "0700", "/data")
        fsx = settings["CustomFileSystemConfigs"]["Fn::If"][1][0]["FSxLustreFileSystemConfig"]
        assert fsx["FileSystemPath"]["Fn::GetAtt"][1] == "Path"
    # Profiles created later get theirs from the CreateUserProfile rule, as in build mode.
    rules = [r for _, _, r in everything if r["Type"] == "AWS::Events::Rule"]
    assert any("CreateUserProfile" in json.dumps(r["Properties"]["EventPattern"]) for r in rules)


def test_per_user_mlflow_server_is_one_server_every_profile_role_may_use(synth):
    synthesized = synth("attach_eks")
    studio = synthesized.templates["studio"]
    servers = list(resources(studio, "AWS::SageMaker::MlflowTrackingServer"))
    assert len(servers) == 1
    uses = [s for _, s in policy_statements(studio) if s.get("Sid") == "UseMlflow"]
    assert uses and all(s["Resource"] == {"Fn::GetAtt": [servers[0], "TrackingServerArn"]} for s in uses)


@pytest.mark.parametrize("variant", ATTACH_VARIANTS)
def test_studio_may_describe_exactly_the_attached_cluster(synth, variant):
    synthesized = synth(variant)
    describe = [s for _, s in policy_statements(synthesized.templates["studio"]) if s.get("Sid") == "DescribeCluster"]
    assert describe and all(
        s["Resource"] == synthesized.config.cluster.existing.arn and "Condition" not in s for s in describe
    )


def test_eks_roles_get_access_entries_on_the_existing_eks_cluster_and_its_kube_context(synth):
    synthesized = synth("attach_eks")
    entries = properties(synthesized.templates["eks-access"], "AWS::EKS::AccessEntry")
    assert entries and {e["ClusterName"] for e in entries} == {"hyperpod-eks-cluster"}
    studio = json.dumps(synthesized.templates["studio"])
    assert ":eks:us-west-2:" in studio or "cluster/hyperpod-eks-cluster" in studio
    assert "EKS_CLUSTER_NAME=hyperpod-eks-cluster" in studio or '"hyperpod-eks-cluster"' in studio


def test_only_the_attach_role_writes_the_login_secret_and_the_client_bundle(synth):
    synthesized = synth("attach_slurm")
    role = synthesized.config.cluster.existing.attach_role_arn
    login = synthesized.templates["slurm-login"]
    writes = [
        s
        for s in resource_policy_statements(login, "AWS::SecretsManager::ResourcePolicy")
        if s["Sid"] in ("OnlyTheClusterWrites", "OnlyTheAttachStepWrites")
    ]
    assert len(writes) == 1  # the login secret (shared mode: no auth/jwt key secret)
    assert all(role in s["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] for s in writes)
    assert "cluster-execution" not in json.dumps(login)
    bucket_policy = [
        s
        for s in resource_policy_statements(synthesized.templates["storage"], "AWS::S3::BucketPolicy")
        if s.get("Sid") == "OnlyTheClusterWritesSlurmClientBundles"
    ]
    assert bucket_policy and role in bucket_policy[0]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]


@pytest.mark.parametrize("variant", ATTACH_VARIANTS)
def test_attach_stacks_are_termination_protected_and_carry_the_snapshot(synth, variant):
    synthesized = synth(variant)
    platform = synthesized.platform
    assert all(stack.termination_protection for stack in platform.stacks)
    metadata = synthesized.templates["storage"]["Metadata"]
    assert metadata["HyperPodPlatformCreateOnly"]["attach"] == synthesized.config.cluster.existing.arn


def test_per_user_slurm_attach_keeps_the_jwt_key_for_the_token_issuer_only(synth):
    """Per-user mode on an attached Slurm cluster: no cluster stack holds the auth/jwt key's secret, so the slurm-login
    stack does, written by the attach role only and read by the token issuer only; and still no cluster, network or
    storage resource, and cdk-nag passes."""
    synthesized = synth("attach_slurm_per_user")
    assert [r["Type"] for _, _, r in all_resources(synthesized) if r["Type"] in FORBIDDEN_TYPES] == []
    assert all(r["success"] for r in synthesized.nag_reports.values())
    role = synthesized.config.cluster.existing.attach_role_arn
    login = synthesized.templates["slurm-login"]
    (secret,) = [
        p for p in properties(login, "AWS::SecretsManager::Secret") if p.get("Name") == "studio-front/slurm-jwt-key"
    ]
    statements = by_sid(resource_policy_statements(login, "AWS::SecretsManager::ResourcePolicy"))
    assert role in statements["OnlyTheAttachStepWrites"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    reader = json.dumps(statements["OnlyTheTokenIssuerReads"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"])
    assert "slurm-tokens-" in reader
    studio = json.dumps(synthesized.templates["studio"])
    assert "studio-front/slurm-jwt-key" in studio  # the token issuer addresses it by name
