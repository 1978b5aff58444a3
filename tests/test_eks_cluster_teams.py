"""The EKS orchestrator's teams: FSx directories and claims for pods, quotas, the Kubernetes objects it applies,
task governance."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest

from support.paths import ROOT
from support.variants import EKS_KUBERNETES_VERSION, eks_config, VARIANT_FILES
from platform_config import ConfigError
from platform_config.eks_governance import team_gid
from constructs.task_governance import CFN_REGIONS, governance_resource_type
from support.template import kubernetes_manifests, kubernetes_objects, only, resources


# ---------------------------------------------------------------------------------------------- Kubernetes objects
def test_each_team_mounts_its_own_directory_and_shared_datasets_read_only(synth):
    s = synth("eks")
    t = s.templates["cluster"]
    # The members' Studio partitions are claimed beside these: tests/test_eks_team_files.py.
    objects = [o for o in kubernetes_objects(t) if "studio-" not in o["metadata"]["name"]]
    claims = {
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "PersistentVolumeClaim"
    }
    teams = ("research", "production", "developers")
    assert claims == {(f"hyperpod-ns-{team}", claim) for team in teams for claim in ("fsx-claim", "fsx-datasets")}
    volumes = {
        o["spec"]["claimRef"]["namespace"] + "/" + o["spec"]["claimRef"]["name"]: o["spec"]
        for o in objects
        if o["kind"] == "PersistentVolume"
    }
    mount = "TOKEN"  # the file system's mount name, a deploy-time value
    for team in teams:
        own, shared = volumes[f"hyperpod-ns-{team}/fsx-claim"], volumes[f"hyperpod-ns-{team}/fsx-datasets"]
        assert own["csi"]["volumeAttributes"]["mountname"] == f"{mount}/data/eks/teams/{team}"
        assert own["accessModes"] == ["ReadWriteMany"] and own["csi"]["readOnly"] is False
        assert shared["csi"]["volumeAttributes"]["mountname"] == f"{mount}/data/eks/datasets"
        assert shared["accessModes"] == ["ReadOnlyMany"] and shared["csi"]["readOnly"] is True
    for spec in volumes.values():
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"  # Delete would delete the file system
        assert spec["csi"]["driver"] == "fsx.csi.aws.com"
    # kubelet tells CSI volumes apart by driver and handle: two directories must not share one.
    assert len({spec["csi"]["volumeHandle"] for spec in volumes.values()}) == len(volumes) - len(teams) + 1
    directories = {
        r["Properties"]["RelativePath"]: r["Properties"] for r in resources(t, "Custom::FsxPartition").values()
    }
    gids = {team.name: team_gid(team) for team in s.config.eks.task_governance.teams}
    assert {p: (d["Gid"], d["Mode"]) for p, d in directories.items()} == {
        "eks/datasets": ("0", "0755"),
        **{f"eks/teams/{n}": (str(g), "2770") for n, g in gids.items()},
    }
    assert len(set(gids.values())) == len(gids)
    (volumes_id,) = [k for k in kubernetes_manifests(t) if k.startswith("FsxVolumes")]
    assert set(resources(t, "Custom::FsxPartition")) <= set(t["Resources"][volumes_id]["DependsOn"])


def test_team_resource_quotas_equal_guaranteed_plus_borrowable(synth):
    quotas = {
        o["metadata"]["namespace"]: o["spec"]["hard"]
        for o in kubernetes_objects(synth("eks").templates["cluster"])
        if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "accelerators"
    }
    assert {ns: q["requests.nvidia.com/gpu"] for ns, q in quotas.items()} == {
        "hyperpod-ns-research": "24",  # 2 x p5 (16 GPUs) + 50% borrow limit
        "hyperpod-ns-production": "16",  # Lend: no borrowing
        "hyperpod-ns-developers": "2",  # DontLend, 2 accelerators
    }


def test_cpu_and_memory_are_capped_where_autoscaling_could_provision_for_them(synth):
    objects = kubernetes_objects(synth("eks_shared").templates["cluster"])
    quotas = {
        o["metadata"]["namespace"]: o["spec"]["hard"]
        for o in objects
        if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "accelerators"
    }
    assert quotas["hyperpod-ns-research"] | {} == {
        "requests.nvidia.com/gpu": "24",
        "requests.cpu": "576",
        "requests.memory": "6144Gi",
    }
    defaults = {o["metadata"]["namespace"] for o in objects if o["kind"] == "LimitRange"}
    assert defaults == set(quotas)  # a compute quota rejects pods without requests unless defaults exist
    with pytest.raises(ConfigError) as info:
        teams = [
            {**t.model_dump(exclude_none=True), "max_vcpu": None}
            for t in eks_config(VARIANT_FILES["eks"]).eks.task_governance.teams
        ]
        eks_config(VARIANT_FILES["eks"], eks={"autoscaling": {"enabled": True}, "task_governance": {"teams": teams}})
    assert (
        "eks.task_governance.teams[0].max_vcpu: not set with eks.autoscaling.enabled: true; give the team a CPU "
        "and memory cap, or nodes are added for whatever it requests" in info.value.errors
    )


@pytest.mark.parametrize("variant", ["eks", "eks_shared"])
def test_every_kubernetes_object_validates_against_kubernetes_schemas(synth, variant):
    objects = kubernetes_objects(synth(variant).templates["cluster"])
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, EKS_KUBERNETES_VERSION, strict=True)


# ---------------------------------------------------------------------------------------------- governance
def test_scheduler_config_and_one_quota_per_team(synth):
    t = synth("eks").templates["cluster"]
    # us-west-2's CloudFormation has ComputeQuota but not ClusterSchedulerConfig.
    scheduler = only(t, "Custom::ClusterSchedulerConfig")["Properties"]
    assert scheduler["SchedulerConfig"] == {
        "PriorityClasses": [
            {"Name": "inference", "Weight": 90},
            {"Name": "training", "Weight": 70},
            {"Name": "experimentation", "Weight": 30},
        ],
        "FairShare": "Enabled",
    }
    quotas = {
        q["Properties"]["ComputeQuotaTarget"]["TeamName"]: q["Properties"]
        for q in resources(t, "AWS::SageMaker::ComputeQuota").values()
    }
    assert set(quotas) == {"research", "production", "developers"}
    assert quotas["research"]["ComputeQuotaConfig"] == {
        "ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "Count": 2}],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50},
        "PreemptTeamTasks": "LowerPriority",
    }
    assert quotas["developers"]["ComputeQuotaConfig"]["ComputeQuotaResources"] == [
        {"InstanceType": "ml.g5.8xlarge", "Accelerators": 2}
    ]
    assert quotas["production"]["ComputeQuotaConfig"]["ResourceSharingConfig"] == {"Strategy": "Lend"}


@pytest.mark.parametrize(
    "region, scheduler, quota",
    [
        ("us-east-1", "AWS::SageMaker::ClusterSchedulerConfig", "AWS::SageMaker::ComputeQuota"),
        ("us-west-2", "Custom::ClusterSchedulerConfig", "AWS::SageMaker::ComputeQuota"),
        ("us-west-1", "AWS::SageMaker::ClusterSchedulerConfig", "Custom::ComputeQuota"),
        (None, "Custom::ClusterSchedulerConfig", "Custom::ComputeQuota"),
    ],
)
def test_native_governance_types_where_cloudformation_has_them(region, scheduler, quota):
    assert governance_resource_type("AWS::SageMaker::ClusterSchedulerConfig", region) == scheduler
    assert governance_resource_type("AWS::SageMaker::ComputeQuota", region) == quota


def test_region_table_matches_cfn_lint_registry_schemas():
    import cfnlint

    providers = ROOT.joinpath(cfnlint.__file__).parent / "data" / "schemas" / "providers"
    commercial = [p for p in providers.glob("*.json") if re.fullmatch(r"[a-z]{2}-[a-z]+-\d", p.stem)]
    for cfn_type, regions in CFN_REGIONS.items():
        actual = {p.stem for p in commercial if cfn_type in json.loads(p.read_text())}
        assert actual == set(regions), f"{cfn_type}: update CFN_REGIONS in constructs/task_governance.py"
