"""Elastic training job examples: typed inputs (the bad-input table), the rendered HyperPodPyTorchJob manifests and the
CRD they are checked against."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import kubernetes_validate
import pytest

from support.docs import stated_count
from support.job_files import BASE, GIDS, MANIFESTS, PRIORITY_CLASSES, TEAMS, committed, with_
from support.job_crd import CRD, CRD_TEXT, crd_errors
from platform_config import ConfigError
from platform_config.eks import DEFAULT_KUBERNETES
from manifests.training_jobs import load_jobs, parse_jobs, render_job
import render_examples


# ---------------------------------------------------------------------------------------------- manifests
def test_committed_manifests_equal_a_fresh_render():
    assert {p.name: p.read_text() for p in MANIFESTS.glob("*.yaml")} == render_examples.rendered()


def test_check_mode_reports_stale_missing_and_extra_files(tmp_path, capsys):
    out = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, out)
    assert render_examples.main(["--check", "--out", str(out)]) == 0
    (out / "bert-ablation.yaml").write_text("# edited by hand\n")
    (out / "llama-sft-elastic.yaml").unlink()
    (out / "old-job.yaml").write_text("{}\n")
    assert render_examples.main(["--check", "--out", str(out)]) == 1
    assert capsys.readouterr().err.splitlines()[:3] == [
        f"{out}/llama-sft-elastic.yaml: missing",
        f"{out}/old-job.yaml: not produced by any job (stale)",
        f"{out}/bert-ablation.yaml: differs from a fresh render",
    ]
    assert render_examples.main(["--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.yaml")) == sorted(render_examples.rendered())


def test_examples_use_both_scaling_styles():
    policies = {m["metadata"]["name"]: m["spec"]["elasticPolicy"] for m in committed().values()}
    assert policies["llama-sft-elastic"]["replicaIncrementStep"] == 1
    assert policies["gpt-pretrain"]["replicaDiscreteValues"] == [1, 2]
    assert policies["bert-ablation"]["replicaIncrementStep"] == 1  # neither given: any size, stated explicitly


def test_shipped_crd_is_a_valid_custom_resource_definition():
    kubernetes_validate.validate(CRD, DEFAULT_KUBERNETES, strict=True)


@pytest.mark.parametrize("name", sorted(p.name for p in MANIFESTS.glob("*.yaml")))
def test_manifest_validates_against_the_crd_schema(name):
    assert crd_errors(committed()[name]) == []


@pytest.mark.parametrize("name", sorted(p.name for p in MANIFESTS.glob("*.yaml")))
def test_pod_template_is_a_valid_core_object(name):
    manifest = committed()[name]
    for replica in manifest["spec"]["replicaSpecs"]:
        kubernetes_validate.validate(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {
                    "name": f"{manifest['metadata']['name']}-{replica['name']}",
                    "namespace": manifest["metadata"]["namespace"],
                },
                "template": replica["template"],
            },
            DEFAULT_KUBERNETES,
            strict=True,
        )


@pytest.mark.parametrize("name", sorted(p.name for p in MANIFESTS.glob("*.yaml")))
def test_pods_meet_pod_security_restricted_with_the_team_group(name):
    manifest = committed()[name]
    team = manifest["metadata"]["namespace"].removeprefix("hyperpod-ns-")
    (replica,) = manifest["spec"]["replicaSpecs"]
    pod = replica["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["fsGroup"] == render_examples.TEAM_GIDS[team]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in pod["containers"]:
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert {"name": "datasets", "persistentVolumeClaim": {"claimName": "fsx-datasets", "readOnly": True}} in pod[
        "volumes"
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in MANIFESTS.glob("*.yaml")))
def test_manifest_follows_task_governance_and_mounts_fsx(name):
    manifest = committed()[name]
    meta, spec = manifest["metadata"], manifest["spec"]
    team = meta["namespace"].removeprefix("hyperpod-ns-")
    assert team in TEAMS
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == f"hyperpod-ns-{team}-localqueue"
    assert meta["labels"]["kueue.x-k8s.io/priority-class"].removesuffix("-priority") in PRIORITY_CLASSES
    assert all(len(v) <= 63 for v in meta["labels"].values())
    (replica,) = spec["replicaSpecs"]
    assert replica["replicas"] == spec["elasticPolicy"]["minReplicas"]
    assert replica["maxReplicas"] == spec["elasticPolicy"]["maxReplicas"]
    pod = replica["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # The job's user's Studio files, read-write at their cluster path (the path their Studio space has too), with the
    # checkpoints; it runs as them, with Studio's gid for them.
    (user,) = [u for u in render_examples.PLATFORM.users if u.uid == pod["securityContext"]["runAsUser"]]
    files = render_examples.STUDIO_FILES[team][user.name]
    assert files.mount_path == f"/fsx/data/studio/{user.name}"
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": f"studio-{user.name}"}} in pod["volumes"]
    assert {"name": "fsx", "mountPath": files.mount_path} in container["volumeMounts"]
    assert pod["securityContext"]["runAsGroup"] == user.group_id
    assert env["CHECKPOINT_DIR"].startswith(files.mount_path + "/")
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert pod["nodeSelector"]["node.kubernetes.io/instance-type"].startswith("ml.")
    # The pods carry the job's Kueue labels (task governance admits pods by them), as AWS's CLI sets them; the script
    # comes from the user's files; the job's uid gets a writable HOME; MLflow artifacts go through presigned URLs.
    assert replica["template"]["metadata"]["labels"] == meta["labels"]
    script = next(a for a in container["args"] if a.endswith(".py"))
    assert script.startswith(files.mount_path + "/hyperpod-examples/")
    assert env["HOME"] == "/home/job" and {"name": "home", "emptyDir": {}} in pod["volumes"]
    assert {"name": "home", "mountPath": "/home/job"} in container["volumeMounts"]
    assert env["SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED"] == "true"


def test_crd_accepts_every_run_policy_field_of_the_upstream_model():
    manifest = copy.deepcopy(committed()["llama-sft-elastic.yaml"])
    manifest["spec"]["runPolicy"] |= {
        "faultDeadlineSeconds": 600,
        "startupDeadlineSeconds": 900,
        "workloadMode": "elastic",
        "restartPolicy": {"evalPeriodSeconds": 3600, "numRestartBeforeFullJobRestart": 3},
        "logMonitoringConfiguration": [
            {"name": "stall", "logPattern": ".*loss.*", "expectedStartCutOffInSeconds": 120}
        ],
        "ttlSecondsAfterFinished": 3600,
        "activeDeadlineSeconds": 86400,
        "suspend": False,
    }
    assert crd_errors(manifest) == []


def test_committed_crd_equals_a_fresh_generation_from_the_pinned_model():
    import generate_job_crd as generator

    git_dir = Path(os.environ.get("HYPERPOD_CLI_GIT_DIR", "/work/.mirror/aws+sagemaker-hyperpod-cli/repo"))
    assert CRD_TEXT.startswith("# GENERATED by tools/generate_job_crd.py")
    assert generator.COMMIT in CRD_TEXT and generator.MODEL_BLOB in CRD_TEXT
    if not (git_dir / "objects").is_dir() and not (git_dir / ".git").is_dir():
        pytest.skip(f"no clone of {generator.REPO} at {git_dir} (set HYPERPOD_CLI_GIT_DIR)")
    assert generator.render(git_dir) == CRD_TEXT


@pytest.mark.parametrize(
    "mutate, error",
    [
        (
            lambda m: m["spec"]["elasticPolicy"].update(minReplica=1),
            "spec/elasticPolicy: Additional properties are not allowed ('minReplica' was unexpected)",
        ),
        (
            lambda m: m["spec"]["runPolicy"].update(faultDeadline=60),
            "spec/runPolicy: Additional properties are not allowed ('faultDeadline' was unexpected)",
        ),
        (
            lambda m: m["spec"]["runPolicy"].update(jobMaxRetryCount="10"),
            "spec/runPolicy/jobMaxRetryCount: '10' is not of type 'integer'",
        ),
        (lambda m: m["spec"].update(nprocPerNode=8), "spec/nprocPerNode: 8 is not of type 'string'"),
        (
            lambda m: m.update(kind="HyperPodPytorchJob"),
            "kind: 'HyperPodPytorchJob' is not one of ['HyperPodPyTorchJob']",
        ),
    ],
)
def test_crd_schema_catches_mistakes(mutate, error):
    manifest = copy.deepcopy(committed()["llama-sft-elastic.yaml"])
    mutate(manifest)
    assert crd_errors(manifest) == [error]


# ---------------------------------------------------------------------------------------------- typed inputs
def errors_of(data) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_jobs(data, "jobs.yaml", teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    return info.value.errors


KUBE_NAME = (
    "must be a Kubernetes name: 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit"
)
UNPINNED = "must be pinned: an explicit tag other than 'latest' (repo:1.2.3) or a digest (repo@sha256:<64 hex>)"
FSX_DIR = "must be a directory under /fsx, where the FSx claim fsx-claim is mounted"
INVALID = [
    ("name uppercase", with_("name", "Job-A"), f"jobs[0].name: 'Job-A' — {KUBE_NAME}"),
    ("name too long", with_("name", "a" * 64), f"jobs[0].name: '{'a' * 64}' — {KUBE_NAME}"),
    (
        "team too long for the queue label",
        with_("team", "t" * 41),
        f"jobs[0].team: '{'t' * 41}' — must be a team name: 1-40 lowercase letters, digits and '-', starting and "
        "ending with a letter or digit",
    ),
    (
        "unknown team",
        with_("team", "vision"),
        "jobs[0].team: 'vision' is not a team in the platform's task governance config; allowed: production, research",
    ),
    (
        "unknown priority",
        with_("priority", "urgent"),
        "jobs[0].priority: 'urgent' is not a priority class in the platform's task governance config; allowed: "
        "experimentation, inference, training",
    ),
    (
        "image latest",
        with_("image", "repo.example/train:latest"),
        f"jobs[0].image: 'repo.example/train:latest' — {UNPINNED}",
    ),
    (
        "image untagged behind a registry port",
        with_("image", "registry:5000/train"),
        f"jobs[0].image: 'registry:5000/train' — {UNPINNED}",
    ),
    ("image short digest", with_("image", "train@sha256:abc123"), f"jobs[0].image: 'train@sha256:abc123' — {UNPINNED}"),
    (
        "instance type not ml.*",
        with_("instance_type", "p5.48xlarge"),
        "jobs[0].instance_type: 'p5.48xlarge' — not an instance type HyperPod clusters accept; did you mean one of "
        "'ml.p5.48xlarge', 'ml.p5e.48xlarge', 'ml.p5.4xlarge'? allowed: one of the types CreateCluster accepts "
        "(config/facts/cluster_instance_types.json, from botocore's ClusterInstanceType), such as ml.g5.8xlarge",
    ),
    (
        "unknown accelerator",
        with_("accelerator", "amd.com/gpu"),
        "jobs[0].accelerator: 'amd.com/gpu' — Input should be 'nvidia.com/gpu' or 'aws.amazon.com/neurondevice'",
    ),
    (
        "GPU resource on Trainium",
        with_("instance_type", "ml.trn1.32xlarge"),
        "jobs[0].accelerator: 'nvidia.com/gpu' on 'ml.trn1.32xlarge'; this instance type exposes "
        "aws.amazon.com/neurondevice",
    ),
    (
        "checkpoint outside FSx",
        with_("checkpoint_dir", "/tmp/ckpt"),
        f"jobs[0].checkpoint_dir: '/tmp/ckpt' — {FSX_DIR}",
    ),
    (
        "checkpoint escapes FSx",
        with_("checkpoint_dir", "/fsx/../etc"),
        f"jobs[0].checkpoint_dir: '/fsx/../etc' — {FSX_DIR}",
    ),
    (
        "min replicas zero",
        with_("elastic_policy.min_replicas", 0),
        "jobs[0].elastic_policy.min_replicas: 0 — Input should be greater than or equal to 1",
    ),
    (
        "min above max",
        with_("elastic_policy", {"min_replicas": 4, "max_replicas": 2}),
        "jobs[0].elastic_policy.min_replicas: 4 is greater than max_replicas 2; min_replicas must be at most "
        "max_replicas",
    ),
    (
        "step and discrete values",
        with_(
            "elastic_policy",
            {"min_replicas": 1, "max_replicas": 4, "replica_increment_step": 1, "replica_discrete_values": [2, 4]},
        ),
        "jobs[0].elastic_policy: both replica_increment_step and replica_discrete_values are set; set at most one",
    ),
    (
        "step never reaches max",
        with_("elastic_policy.replica_increment_step", 2),
        "jobs[0].elastic_policy.replica_increment_step: 2 never reaches max_replicas 4 from min_replicas 1; use a step "
        "that divides 3",
    ),
    (
        "discrete values not increasing",
        with_("elastic_policy.replica_discrete_values", [4, 2]),
        "jobs[0].elastic_policy.replica_discrete_values: [4, 2] — must be strictly increasing, each size once",
    ),
    (
        "discrete values repeated",
        with_("elastic_policy.replica_discrete_values", [2, 2, 4]),
        "jobs[0].elastic_policy.replica_discrete_values: [2, 2, 4] — must be strictly increasing, each size once",
    ),
    (
        "discrete values above max",
        with_("elastic_policy.replica_discrete_values", [2, 8]),
        "jobs[0].elastic_policy.replica_discrete_values: [8] outside min_replicas..max_replicas (1..4)",
    ),
    (
        "discrete value zero",
        with_("elastic_policy.replica_discrete_values", [0, 2]),
        "jobs[0].elastic_policy.replica_discrete_values[0]: 0 — Input should be greater than 0",
    ),
    (
        "graceful shutdown too short",
        with_("elastic_policy.graceful_shutdown_timeout_seconds", 10),
        "jobs[0].elastic_policy.graceful_shutdown_timeout_seconds: 10 — Input should be greater than or equal to 30",
    ),
    (
        "global batch breaks at one size",
        with_("global_batch_size", 256),
        "jobs[0].global_batch_size: 256 is not divisible by replicas × nproc_per_node × micro_batch_size at 3 "
        "replica(s) (at 3: 3 × 8 × 2 = 48); every size the job can scale to must divide it",
    ),
    (
        "launcher disagrees on processes",
        with_("args", ["--nproc-per-node=4", "train.py"]),
        "jobs[0].args[0]: '--nproc-per-node=4' disagrees with nproc_per_node 8; make them equal",
    ),
    (
        "reserved env",
        with_("env", {"CHECKPOINT_DIR": "/fsx/other"}),
        "jobs[0].env.CHECKPOINT_DIR: set by the renderer (from checkpoint_dir); remove it here",
    ),
    (
        "env name",
        with_("env", {"1BAD": "x"}),
        "jobs[0].env key: '1BAD' — must be an environment variable name such as NCCL_DEBUG",
    ),
    (
        "unknown key",
        with_("elastic_policy.min_replica", 1),
        "jobs[0].elastic_policy.min_replica: unknown key; allowed here: min_replicas, max_replicas, "
        "replica_increment_step, replica_discrete_values, graceful_shutdown_timeout_seconds, scaling_timeout_seconds, "
        "faulty_scale_down_timeout_seconds",
    ),
    (
        "signal coordination is the renderer's",
        with_("env", {"HYPERPOD_SIGNAL_COORDINATION": "disabled"}),
        "jobs[0].env.HYPERPOD_SIGNAL_COORDINATION: set by the renderer (always 'distributed': the elastic agent "
        "reports scaling events only then); remove it here",
    ),
    (
        "empty command",
        with_("command", []),
        "jobs[0].command: [] — List should have at least 1 item after validation, not 0",
    ),
]


@pytest.mark.parametrize("data, expected", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_job_reports_the_exact_error(data, expected):
    assert errors_of(data) == [expected]


def test_valid_base_job_renders():
    (job,) = parse_jobs({"jobs": [BASE]}, teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    assert crd_errors(render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS)) == []


def test_errors_are_collected_together():
    data = {"jobs": [BASE, {**BASE, "team": "vision", "priority": "urgent"}]}
    assert errors_of(data) == [
        "jobs[1].team: 'vision' is not a team in the platform's task governance config; allowed: production, research",
        "jobs[1].priority: 'urgent' is not a priority class in the platform's task governance config; allowed: "
        "experimentation, inference, training",
        "jobs[1].name: 'job-a' is already used by jobs[0]; job names must be unique in a job file (each manifest is "
        "written as <name>.yaml)",
    ]


def test_root_must_be_a_mapping():
    assert errors_of([BASE]) == ["<root>: list — a job file is a mapping with a 'jobs' list"]


def test_render_job_checks_governance_names_it_is_given():
    (job,) = parse_jobs({"jobs": [BASE]}, teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    with pytest.raises(ConfigError) as info:
        render_job(job, teams=["production"], priority_classes=[], team_gids=GIDS)
    assert info.value.errors == [
        "team: 'research' is not a team in the platform's task governance config; allowed: production",
        "priority: 'training' is not a priority class in the platform's task governance config; allowed: "
        "(none configured)",
    ]


def test_job_files_are_read_strictly(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: []\njobs: []\n")
    with pytest.raises(ConfigError) as info:
        load_jobs(path, teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    assert info.value.errors == [
        "YAML: duplicate key 'jobs'   in \"<unicode string>\", line 2, column 1:     jobs: []     ^"
    ]


def test_docs_state_the_size_of_the_bad_job_table():
    assert stated_count(r"the elastic job inputs \((\d+) bad-input cases\)") == len(INVALID)
