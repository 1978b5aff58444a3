"""The shipped job examples as the platform runs them: the elastic agent as any user, MLflow as their team, the
platform's training image, admission under each team's quota at every size, and a job user's Studio files."""

from __future__ import annotations

import copy
import functools

import pytest
import yaml

from support.data import DROP
from support.job_files import BASE, GIDS, PRIORITY_CLASSES, TEAMS, committed, with_
from support.paths import ROOT
from platform_config import ConfigError
from manifests.team_identities import StudioFiles
from manifests.training_jobs import parse_jobs, render_job
import render_examples


# ---------------------------------------------------------------------------------------------- jobs that run
FINETUNE_MANIFESTS = ROOT / "examples" / "finetune" / "manifests"


def every_rendered_job() -> dict[str, dict]:
    """Every HyperPodPyTorchJob the examples ship: examples/manifests and the fine-tuning workflow's (read once per
    process: three parametrizations at collection and each of their tests ask; a copy of its own for each caller)."""
    return copy.deepcopy(_every_rendered_job())


@functools.cache
def _every_rendered_job() -> dict[str, dict]:
    jobs = committed()
    for path in sorted(FINETUNE_MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc["kind"] == "HyperPodPyTorchJob":
                jobs[f"finetune/{path.name}"] = doc
    return jobs


@pytest.mark.parametrize("name", sorted(every_rendered_job()))
def test_every_shipped_job_lets_the_elastic_agent_run_as_any_user(name):
    """hyperpod-elastic-agent 1.1.3 reports scaling events only with HYPERPOD_SIGNAL_COORDINATION=distributed, and
    its rendezvous creates /opt/ml/input/config: a pod-owned emptyDir there works whatever uid the pod runs as."""
    pod = every_rendered_job()[name]["spec"]["replicaSpecs"][0]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["HYPERPOD_SIGNAL_COORDINATION"] == {"name": "HYPERPOD_SIGNAL_COORDINATION", "value": "distributed"}
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/opt/ml/input/config")
    assert {"name": mount["name"], "emptyDir": {}} in pod["volumes"]


@pytest.mark.parametrize("name", sorted(every_rendered_job()))
def test_every_shipped_job_reaches_mlflow_as_its_team(name):
    """The team's service account (EKS Pod Identity: the team's job role) and the tracking server's ARN from the
    namespace's ConfigMap, optional so a platform without MLflow runs the job unchanged."""
    pod = every_rendered_job()[name]["spec"]["replicaSpecs"][0]["template"]["spec"]
    assert pod["serviceAccountName"] == "training-job"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["MLFLOW_TRACKING_URI"] == {
        "name": "MLFLOW_TRACKING_URI",
        "valueFrom": {"configMapKeyRef": {"name": "mlflow", "key": "tracking-uri", "optional": True}},
    }


def test_jobs_without_an_image_run_the_platforms_training_image():
    platform = render_examples.PLATFORM.eks.training_image
    assert platform and "111122223333" in platform  # the example config's value, which users replace once
    images = {
        name: job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"]
        for name, job in committed().items()
    }
    assert set(images.values()) == {platform}
    assert "image:" not in "".join(
        line.split("#")[0] for line in (ROOT / "examples" / "elastic-jobs.yaml").read_text().splitlines()
    )


def test_a_job_with_no_image_anywhere_is_refused_and_its_own_image_wins():
    (job,) = parse_jobs(with_("image", DROP), teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    with pytest.raises(ConfigError) as info:
        render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS)
    assert info.value.errors == [
        "image: not set, and the platform config has no eks.training_image; build "
        "examples/finetune/Dockerfile, push it, and give its pinned name in either"
    ]
    rendered = render_job(
        job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS, default_image="registry.example/train:2.0"
    )
    assert (
        rendered["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"]
        == "registry.example/train:2.0"
    )
    (own,) = parse_jobs({"jobs": [BASE]}, teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    rendered = render_job(
        own, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS, default_image="registry.example/train:2.0"
    )
    assert rendered["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == BASE["image"]


def test_the_platforms_training_image_must_be_pinned():
    from support.variants import eks_config, VARIANT_FILES

    with pytest.raises(ConfigError) as info:
        eks_config(VARIANT_FILES["eks"], eks={"training_image": "registry.example/train:latest"})
    assert any(
        e.startswith("eks.training_image: 'registry.example/train:latest' — must be pinned") for e in info.value.errors
    )


# ---------------------------------------------------------------------------------------------- admissibility
def admissible_gpus(config: dict, team_name: str) -> tuple[str, int]:
    """Worked out from the example config's YAML and the accelerator facts, apart from the code: a team's ClusterQueue
    admits its guarantee plus at most borrow_limit_percent of it (LendAndBorrow only), and can borrow only what other
    teams lend (their guarantees on that type, unless DontLend), within the cluster's instances of that type."""
    import json

    per_instance = json.loads((ROOT / "config" / "facts" / "accelerators.json").read_text())["accelerators"]
    teams = config["eks"]["task_governance"]["teams"]
    team = next(t for t in teams if t["name"] == team_name)
    itype = team["instance_type"]
    gpus = per_instance[itype]["count"]

    def guaranteed(t):
        return t["accelerators"] if "accelerators" in t else t["instance_count"] * gpus

    own = guaranteed(team)
    borrow = (
        own * team.get("borrow_limit_percent", 50) // 100
        if team.get("sharing", "LendAndBorrow") == "LendAndBorrow"
        else 0
    )
    lent = sum(
        guaranteed(t)
        for t in teams
        if t is not team and t["instance_type"] == itype and t.get("sharing", "LendAndBorrow") != "DontLend"
    )
    cluster = (
        sum(
            g["instance_count"]
            for g in config["cluster"]["instance_groups"]
            if g["role"] == "compute" and g["instance_type"] == itype
        )
        * gpus
    )
    return itype, min(own + min(borrow, lent), cluster)


@pytest.mark.parametrize("name", sorted(every_rendered_job()))
def test_every_example_job_can_be_admitted_at_every_size_under_its_teams_quota(name):
    config = yaml.safe_load((ROOT / "config" / "examples" / "eks.yaml").read_text())
    job = every_rendered_job()[name]
    team = job["metadata"]["namespace"].removeprefix("hyperpod-ns-")
    itype, most = admissible_gpus(config, team)
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    assert pod["nodeSelector"]["node.kubernetes.io/instance-type"] == itype
    per_pod = pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]
    assert job["spec"]["elasticPolicy"]["maxReplicas"] * per_pod <= most


def test_the_example_quotas_are_what_the_job_comments_say():
    config = yaml.safe_load((ROOT / "config" / "examples" / "eks.yaml").read_text())
    assert admissible_gpus(config, "research") == ("ml.p5.48xlarge", 24)  # 2 guaranteed + 50 % borrowed
    assert admissible_gpus(config, "production") == ("ml.p5.48xlarge", 16)  # Lend: never borrows
    assert render_examples.REACH == {
        "research": ("ml.p5.48xlarge", 24),
        "production": ("ml.p5.48xlarge", 16),
        "developers": ("ml.g5.8xlarge", 2),
    }


def test_a_job_its_team_can_never_be_admitted_for_is_refused():
    reach = {"research": ("ml.p5.48xlarge", 24)}
    with pytest.raises(ConfigError) as info:
        parse_jobs({"jobs": [BASE]}, "jobs.yaml", teams=TEAMS, priority_classes=PRIORITY_CLASSES, reach=reach)
    assert info.value.errors == [
        "jobs[0].elastic_policy.max_replicas: 4 pod(s) × 8 nvidia.com/gpu = 32; team 'research' can be admitted for "
        "at most 24 on ml.p5.48xlarge (guarantee plus what it may borrow), so that size never runs; allowed: "
        "max_replicas up to 3"
    ]
    with pytest.raises(ConfigError) as info:
        parse_jobs(
            with_("instance_type", "ml.p4d.24xlarge"),
            "jobs.yaml",
            teams=TEAMS,
            priority_classes=PRIORITY_CLASSES,
            reach=reach,
        )
    assert info.value.errors == [
        "jobs[0].instance_type: 'ml.p4d.24xlarge'; team 'research' has quota on ml.p5.48xlarge only, so Kueue never "
        "admits it elsewhere (eks.task_governance.teams)"
    ]
    three = {"jobs": [{**BASE, "global_batch_size": 96, "elastic_policy": {"min_replicas": 1, "max_replicas": 3}}]}
    assert parse_jobs(three, teams=TEAMS, priority_classes=PRIORITY_CLASSES, reach=reach)


STUDIO_FILES = {
    "research": {
        "alice": StudioFiles(
            claim="studio-alice",
            directory="/data/studio/alice",
            mount_path="/fsx/data/studio/alice",
            uid=10001,
            gid=10001,
        )
    }
}


def test_a_job_with_a_user_runs_as_them_in_their_studio_files():
    (job,) = parse_jobs(
        {"jobs": [{**BASE, "team": "research", "user": "alice", "checkpoint_dir": "/fsx/data/studio/alice/ckpt"}]},
        teams=TEAMS,
        priority_classes=PRIORITY_CLASSES,
    )
    pod = render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS, studio_files=STUDIO_FILES)[
        "spec"
    ]["replicaSpecs"][0]["template"]["spec"]
    sc = pod["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (10001, 10001, GIDS["research"])
    assert {"name": "agent-config", "emptyDir": {}} in pod["volumes"]
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": "studio-alice"}} in pod["volumes"]
    assert {"name": "fsx", "mountPath": "/fsx/data/studio/alice"} in pod["containers"][0]["volumeMounts"]


@pytest.mark.parametrize(
    "team, user, checkpoint, expected",
    [
        (
            "production",
            "alice",
            "/fsx/data/studio/alice/ckpt",
            "user: 'alice' is not a member of team 'production' with Studio files; allowed: (none: the team has no members)",
        ),
        (
            "research",
            "bob",
            "/fsx/data/studio/bob/ckpt",
            "user: 'bob' is not a member of team 'research' with Studio files; allowed: alice",
        ),
        (
            "research",
            "alice",
            "/fsx/checkpoints/x",
            "checkpoint_dir: '/fsx/checkpoints/x' is outside /fsx/data/studio/alice, where alice's Studio files are mounted; "
            "put it under that directory",
        ),
        (
            "research",
            "alice",
            "/fsx/data/studio/alice2/x",
            "checkpoint_dir: '/fsx/data/studio/alice2/x' is outside /fsx/data/studio/alice, where alice's Studio files are "
            "mounted; put it under that directory",
        ),
    ],
)
def test_a_job_user_must_be_a_member_and_checkpoint_in_their_files(team, user, checkpoint, expected):
    (job,) = parse_jobs(
        {"jobs": [{**BASE, "team": team, "user": user, "checkpoint_dir": checkpoint}]},
        teams=TEAMS,
        priority_classes=PRIORITY_CLASSES,
    )
    with pytest.raises(ConfigError) as info:
        render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS, studio_files=STUDIO_FILES)
    assert info.value.errors == [expected]
