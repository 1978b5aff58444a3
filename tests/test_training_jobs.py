"""Elastic training job examples: typed inputs, the rendered HyperPodPyTorchJob manifests, and train_elastic.py."""
from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from support.paths import ROOT
from support.job_crd import CRD, CRD_TEXT, crd_errors
from support.modules import load_module
from support.process_tree import descendants
from platform_config import ConfigError
from manifests.team_identities import StudioFiles
from platform_config.eks import DEFAULT_KUBERNETES
from manifests.training_jobs import load_jobs, parse_jobs, render_job
import render_examples

TEAMS = ("research", "production")
GIDS = {"research": 3001, "production": 3002}
PRIORITY_CLASSES = ("inference", "training", "experimentation")
MANIFESTS = ROOT / "examples" / "manifests"
train_elastic = load_module(ROOT / "examples" / "train_elastic.py")


def committed() -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(MANIFESTS.glob("*.yaml"))}


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
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate",
                                      "metadata": {"name": f"{manifest['metadata']['name']}-{replica['name']}",
                                                   "namespace": manifest["metadata"]["namespace"]},
                                      "template": replica["template"]}, DEFAULT_KUBERNETES, strict=True)


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
    assert {"name": "datasets", "persistentVolumeClaim": {"claimName": "fsx-datasets", "readOnly": True}} in pod["volumes"]


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
        "faultDeadlineSeconds": 600, "startupDeadlineSeconds": 900, "workloadMode": "elastic",
        "restartPolicy": {"evalPeriodSeconds": 3600, "numRestartBeforeFullJobRestart": 3},
        "logMonitoringConfiguration": [{"name": "stall", "logPattern": ".*loss.*", "expectedStartCutOffInSeconds": 120}],
        "ttlSecondsAfterFinished": 3600, "activeDeadlineSeconds": 86400, "suspend": False}
    assert crd_errors(manifest) == []


def test_committed_crd_equals_a_fresh_generation_from_the_pinned_model():
    import generate_job_crd as generator
    git_dir = Path(os.environ.get("HYPERPOD_CLI_GIT_DIR", "/work/.mirror/aws+sagemaker-hyperpod-cli/repo"))
    assert CRD_TEXT.startswith("# GENERATED by tools/generate_job_crd.py")
    assert generator.COMMIT in CRD_TEXT and generator.MODEL_BLOB in CRD_TEXT
    if not (git_dir / "objects").is_dir() and not (git_dir / ".git").is_dir():
        pytest.skip(f"no clone of {generator.REPO} at {git_dir} (set HYPERPOD_CLI_GIT_DIR)")
    assert generator.render(git_dir) == CRD_TEXT



@pytest.mark.parametrize("mutate, error", [
    (lambda m: m["spec"]["elasticPolicy"].update(minReplica=1),
     "spec/elasticPolicy: Additional properties are not allowed ('minReplica' was unexpected)"),
    (lambda m: m["spec"]["runPolicy"].update(faultDeadline=60),
     "spec/runPolicy: Additional properties are not allowed ('faultDeadline' was unexpected)"),
    (lambda m: m["spec"]["runPolicy"].update(jobMaxRetryCount="10"),
     "spec/runPolicy/jobMaxRetryCount: '10' is not of type 'integer'"),
    (lambda m: m["spec"].update(nprocPerNode=8), "spec/nprocPerNode: 8 is not of type 'string'"),
    (lambda m: m.update(kind="HyperPodPytorchJob"), "kind: 'HyperPodPytorchJob' is not one of ['HyperPodPyTorchJob']"),
])
def test_crd_schema_catches_mistakes(mutate, error):
    manifest = copy.deepcopy(committed()["llama-sft-elastic.yaml"])
    mutate(manifest)
    assert crd_errors(manifest) == [error]


# ---------------------------------------------------------------------------------------------- typed inputs
BASE = {"name": "job-a", "team": "research", "priority": "training", "image": "repo.example/train:1.0",
        "command": ["hyperpodrun"], "args": ["--nproc-per-node=8", "train.py"], "instance_type": "ml.p5.48xlarge",
        "accelerators_per_pod": 8, "nproc_per_node": 8, "global_batch_size": 192, "micro_batch_size": 2,
        "checkpoint_dir": "/fsx/ckpt/job-a", "elastic_policy": {"min_replicas": 1, "max_replicas": 4}}
DROP = object()


def with_(path: str, value) -> dict:
    """A one-job file with one dotted path of the job set to value (DROP removes the key)."""
    job = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = job
    for part in parents:
        node = node[part]
    if value is DROP:
        del node[last]
    else:
        node[last] = value
    return {"jobs": [job]}


def errors_of(data) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_jobs(data, "jobs.yaml", teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    return info.value.errors


KUBE_NAME = ("must be a Kubernetes name: 1-63 lowercase letters, digits and '-', starting and ending with a letter "
             "or digit")
UNPINNED = "must be pinned: an explicit tag other than 'latest' (repo:1.2.3) or a digest (repo@sha256:<64 hex>)"
FSX_DIR = "must be a directory under /fsx, where the FSx claim fsx-claim is mounted"
INVALID = [
    ("name uppercase", with_("name", "Job-A"), f"jobs[0].name: 'Job-A' — {KUBE_NAME}"),
    ("name too long", with_("name", "a" * 64), f"jobs[0].name: '{'a' * 64}' — {KUBE_NAME}"),
    ("team too long for the queue label", with_("team", "t" * 41),
     f"jobs[0].team: '{'t' * 41}' — must be a team name: 1-40 lowercase letters, digits and '-', starting and "
     "ending with a letter or digit"),
    ("unknown team", with_("team", "vision"),
     "jobs[0].team: 'vision' is not a team in the platform's task governance config; allowed: production, research"),
    ("unknown priority", with_("priority", "urgent"),
     "jobs[0].priority: 'urgent' is not a priority class in the platform's task governance config; allowed: "
     "experimentation, inference, training"),
    ("image latest", with_("image", "repo.example/train:latest"),
     f"jobs[0].image: 'repo.example/train:latest' — {UNPINNED}"),
    ("image untagged behind a registry port", with_("image", "registry:5000/train"),
     f"jobs[0].image: 'registry:5000/train' — {UNPINNED}"),
    ("image short digest", with_("image", "train@sha256:abc123"),
     f"jobs[0].image: 'train@sha256:abc123' — {UNPINNED}"),
    ("instance type not ml.*", with_("instance_type", "p5.48xlarge"),
     "jobs[0].instance_type: 'p5.48xlarge' — not an instance type HyperPod clusters accept; did you mean one of "
     "'ml.p5.48xlarge', 'ml.p5e.48xlarge', 'ml.p5.4xlarge'? allowed: one of the types CreateCluster accepts "
     "(config/facts/cluster_instance_types.json, from botocore's ClusterInstanceType), such as ml.g5.8xlarge"),
    ("unknown accelerator", with_("accelerator", "amd.com/gpu"),
     "jobs[0].accelerator: 'amd.com/gpu' — Input should be 'nvidia.com/gpu' or 'aws.amazon.com/neurondevice'"),
    ("GPU resource on Trainium", with_("instance_type", "ml.trn1.32xlarge"),
     "jobs[0].accelerator: 'nvidia.com/gpu' on 'ml.trn1.32xlarge'; this instance type exposes "
     "aws.amazon.com/neurondevice"),
    ("checkpoint outside FSx", with_("checkpoint_dir", "/tmp/ckpt"),
     f"jobs[0].checkpoint_dir: '/tmp/ckpt' — {FSX_DIR}"),
    ("checkpoint escapes FSx", with_("checkpoint_dir", "/fsx/../etc"),
     f"jobs[0].checkpoint_dir: '/fsx/../etc' — {FSX_DIR}"),
    ("min replicas zero", with_("elastic_policy.min_replicas", 0),
     "jobs[0].elastic_policy.min_replicas: 0 — Input should be greater than or equal to 1"),
    ("min above max", with_("elastic_policy", {"min_replicas": 4, "max_replicas": 2}),
     "jobs[0].elastic_policy.min_replicas: 4 is greater than max_replicas 2; min_replicas must be at most "
     "max_replicas"),
    ("step and discrete values",
     with_("elastic_policy", {"min_replicas": 1, "max_replicas": 4, "replica_increment_step": 1,
                              "replica_discrete_values": [2, 4]}),
     "jobs[0].elastic_policy: both replica_increment_step and replica_discrete_values are set; set at most one"),
    ("step never reaches max", with_("elastic_policy.replica_increment_step", 2),
     "jobs[0].elastic_policy.replica_increment_step: 2 never reaches max_replicas 4 from min_replicas 1; use a step "
     "that divides 3"),
    ("discrete values not increasing", with_("elastic_policy.replica_discrete_values", [4, 2]),
     "jobs[0].elastic_policy.replica_discrete_values: [4, 2] — must be strictly increasing, each size once"),
    ("discrete values repeated", with_("elastic_policy.replica_discrete_values", [2, 2, 4]),
     "jobs[0].elastic_policy.replica_discrete_values: [2, 2, 4] — must be strictly increasing, each size once"),
    ("discrete values above max", with_("elastic_policy.replica_discrete_values", [2, 8]),
     "jobs[0].elastic_policy.replica_discrete_values: [8] outside min_replicas..max_replicas (1..4)"),
    ("discrete value zero", with_("elastic_policy.replica_discrete_values", [0, 2]),
     "jobs[0].elastic_policy.replica_discrete_values[0]: 0 — Input should be greater than 0"),
    ("graceful shutdown too short", with_("elastic_policy.graceful_shutdown_timeout_seconds", 10),
     "jobs[0].elastic_policy.graceful_shutdown_timeout_seconds: 10 — Input should be greater than or equal to 30"),
    ("global batch breaks at one size", with_("global_batch_size", 256),
     "jobs[0].global_batch_size: 256 is not divisible by replicas × nproc_per_node × micro_batch_size at 3 "
     "replica(s) (at 3: 3 × 8 × 2 = 48); every size the job can scale to must divide it"),
    ("launcher disagrees on processes", with_("args", ["--nproc-per-node=4", "train.py"]),
     "jobs[0].args[0]: '--nproc-per-node=4' disagrees with nproc_per_node 8; make them equal"),
    ("reserved env", with_("env", {"CHECKPOINT_DIR": "/fsx/other"}),
     "jobs[0].env.CHECKPOINT_DIR: set by the renderer (from checkpoint_dir); remove it here"),
    ("env name", with_("env", {"1BAD": "x"}),
     "jobs[0].env key: '1BAD' — must be an environment variable name such as NCCL_DEBUG"),
    ("unknown key", with_("elastic_policy.min_replica", 1),
     "jobs[0].elastic_policy.min_replica: unknown key; allowed here: min_replicas, max_replicas, "
     "replica_increment_step, replica_discrete_values, graceful_shutdown_timeout_seconds, scaling_timeout_seconds, "
     "faulty_scale_down_timeout_seconds"),
    ("signal coordination is the renderer's", with_("env", {"HYPERPOD_SIGNAL_COORDINATION": "disabled"}),
     "jobs[0].env.HYPERPOD_SIGNAL_COORDINATION: set by the renderer (always 'distributed': the elastic agent "
     "reports scaling events only then); remove it here"),
    ("empty command", with_("command", []),
     "jobs[0].command: [] — List should have at least 1 item after validation, not 0"),
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
    assert info.value.errors == ['YAML: duplicate key \'jobs\'   in "<unicode string>", line 2, column 1:     jobs: []'
                                 '     ^']


# ---------------------------------------------------------------------------------------------- train_elastic.py
def test_train_elastic_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None; sys.path.insert(0, 'examples'); import train_elastic; "
            "print(train_elastic.accumulation_steps(8, 2, 2))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "2"), result.stderr


def test_a_finished_rank_exits_even_if_finalization_would_block():
    """exit_without_finalizing: the code is the process's, everything printed arrives, and nothing left running (here
    a thread that never ends, which a normal exit joins) holds the process."""
    code = ("import sys, threading; sys.path.insert(0, 'examples'); import train_elastic; "
            "threading.Thread(target=threading.Event().wait).start(); print('trained', end=''); "
            "print('and written', file=sys.stderr, end=''); train_elastic.exit_without_finalizing(3)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (3, "trained", "and written")


def run_or_dump_stacks(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """cmd to its end, or after `timeout` a failure showing where every Python process of it was: SIGABRT to it and
    every process under it (torchrun starts each worker in a session of its own), whose Python processes
    (PYTHONFAULTHANDLER) print every thread's stack before they die."""
    proc = subprocess.Popen(cmd, env={**env, "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = [proc.pid, *descendants(proc.pid)]  # before any dies: orphans would no longer be found
        for sig in (signal.SIGABRT, signal.SIGKILL):
            for pid in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            try:
                out, err = proc.communicate(timeout=30)
                break
            except subprocess.TimeoutExpired:
                out = err = ""
        pytest.fail(f"{cmd[2:5]} did not end within {timeout} s; its stacks:\n{err[-12000:]}\n{out[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_a_hung_run_fails_in_bounded_time_with_the_stacks_of_its_workers_in_their_own_sessions(tmp_path):
    hang = "import time; time.sleep(600)"
    launcher = ("import subprocess, sys, time; "
                f"print(subprocess.Popen([sys.executable, '-c', {hang!r}], start_new_session=True).pid, "
                f"file=open({str(tmp_path / 'worker')!r}, 'w')); time.sleep(600)")
    with pytest.raises(pytest.fail.Exception) as failed:
        run_or_dump_stacks([sys.executable, "-c", launcher], env=dict(os.environ), timeout=3)
    assert "did not end within 3 s" in str(failed.value) and "Fatal Python error: Aborted" in str(failed.value)
    worker = int((tmp_path / "worker").read_text())
    with contextlib.suppress(FileNotFoundError):  # gone, or a zombie its new parent has not reaped yet
        assert Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_train_elastic_logs_one_mlflow_run_across_a_resize(tmp_path):
    """The example job for real on the CPU (gloo) in the training venv: 2 processes train 4 steps and checkpoint, then
    1 process resumes at step 4 and finishes 6. A local MLflow file store stands in for the tracking server: one run,
    `loss` and `world_size` at every step, the resumed half in the same run (its id kept in meta.json)."""
    python = ROOT / ".venv-train" / "bin" / "python"
    if not (ROOT / ".venv-train" / ".installed").is_file():
        pytest.fail("the training venv is missing: run `make train-venv` (make test builds it)")
    mlruns, ckpt = tmp_path / "mlruns", tmp_path / "ckpt"
    env = os.environ | {"MLFLOW_TRACKING_URI": mlruns.as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true",
                        "MLFLOW_EXPERIMENT_NAME": "research-elastic", "OMP_NUM_THREADS": "1"}

    def torchrun(processes: int, steps: int) -> None:
        result = run_or_dump_stacks(
            [str(python), "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
             str(ROOT / "examples" / "train_elastic.py"), "--checkpoint-dir", str(ckpt), "--global-batch-size", "4",
             "--steps", str(steps), "--checkpoint-every", "2", "--features", "4"], env=env, timeout=180)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    torchrun(2, 4)
    torchrun(1, 6)
    read = subprocess.run([str(python), str(ROOT / "tests" / "finetune" / "read_mlflow.py"), mlruns.as_uri()],
                          env=env, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-3000:]
    (run,) = json.loads(read.stdout)["runs"]
    assert run["status"] == "FINISHED"
    assert run["history"]["world_size"] == [[1, 2.0], [2, 2.0], [3, 2.0], [4, 2.0], [5, 1.0], [6, 1.0]]
    assert [step for step, _ in run["history"]["loss"]] == [1, 2, 3, 4, 5, 6]
    assert all(loss > 0 for _, loss in run["history"]["loss"])
    assert json.loads((ckpt / "step-000000006" / "meta.json").read_text())["mlflow_run_id"]


def test_train_elastic_logs_nothing_without_a_tracking_uri():
    code = ("import os, sys; os.environ.pop('MLFLOW_TRACKING_URI', None); sys.modules['mlflow'] = None; "
            "sys.path.insert(0, 'examples'); import train_elastic; print(train_elastic.start_mlflow_run(None))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "None"), result.stderr


@pytest.mark.parametrize("global_batch, world_size, micro_batch, steps", [
    (768, 16, 4, 12), (768, 48, 4, 4), (768, 64, 4, 3), (1024, 32, 2, 16), (96, 12, 2, 4), (8, 8, 1, 1),
])
def test_accumulation_keeps_the_global_batch(global_batch, world_size, micro_batch, steps):
    assert train_elastic.accumulation_steps(global_batch, world_size, micro_batch) == steps
    assert steps * world_size * micro_batch == global_batch


def test_accumulation_rejects_an_indivisible_world_size():
    with pytest.raises(ValueError) as info:
        train_elastic.accumulation_steps(768, 40, 4)
    assert str(info.value) == "global batch 768 is not divisible by world_size × micro_batch = 40 × 4 = 160"


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 6, 12])
def test_each_step_covers_its_global_batch_once_at_any_world_size(world_size):
    step, global_batch, micro = 5, 24, 2
    seen = [i for rank in range(world_size)
            for r in train_elastic.rank_samples(step, global_batch, world_size, rank, micro) for i in r]
    assert sorted(seen) == list(range(step * global_batch, (step + 1) * global_batch))


def _checkpoint(root, step, complete=True):
    path = root / train_elastic.checkpoint_name(step)
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"shard")
    if complete:
        (path / "meta.json").write_text('{"step": %d}' % step)
    return path


def test_latest_checkpoint_ignores_partial_saves(tmp_path):
    assert train_elastic.latest_checkpoint(tmp_path / "missing") is None
    assert train_elastic.latest_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 100)
    newest = _checkpoint(tmp_path, 200)
    (tmp_path / "step-000000300.tmp").mkdir()               # interrupted save: never renamed
    _checkpoint(tmp_path, 400, complete=False)                # no meta.json
    (tmp_path / "step-000000500").write_text("not a dir")
    (tmp_path / "step-600").mkdir()                           # not our naming scheme
    assert train_elastic.latest_checkpoint(tmp_path) == newest


def test_commit_publishes_atomically_and_prune_keeps_the_newest(tmp_path):
    tmp = tmp_path / f"{train_elastic.checkpoint_name(300)}.tmp"
    tmp.mkdir()
    (tmp / "__0_0.distcp").write_bytes(b"shard")
    assert train_elastic.latest_checkpoint(tmp_path) is None
    final = train_elastic.commit_checkpoint(tmp, {"step": 300, "global_batch_size": 768})
    assert final == tmp_path / "step-000000300" and not tmp.exists()
    assert train_elastic.latest_checkpoint(tmp_path) == final
    assert sorted(p.name for p in final.iterdir()) == ["__0_0.distcp", "meta.json"]

    _checkpoint(tmp_path, 100)
    _checkpoint(tmp_path, 200)
    assert [p.name for p in train_elastic.prune_checkpoints(tmp_path, keep=2)] == ["step-000000100"]
    (tmp_path / "step-000000400.tmp").mkdir()
    assert [p.name for p in train_elastic.remove_partial(tmp_path)] == ["step-000000400.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000000200", "step-000000300"]


# ---------------------------------------------------------------------------------------------- jobs that run
FINETUNE_MANIFESTS = ROOT / "examples" / "finetune" / "manifests"


def every_rendered_job() -> dict[str, dict]:
    """Every HyperPodPyTorchJob the examples ship: examples/manifests and the fine-tuning workflow's."""
    jobs = dict(committed())
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
    assert env["MLFLOW_TRACKING_URI"] == {"name": "MLFLOW_TRACKING_URI", "valueFrom": {"configMapKeyRef": {
        "name": "mlflow", "key": "tracking-uri", "optional": True}}}


def test_jobs_without_an_image_run_the_platforms_training_image():
    platform = render_examples.PLATFORM.eks.training_image
    assert platform and "111122223333" in platform  # the example config's value, which users replace once
    images = {name: job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"]
              for name, job in committed().items()}
    assert set(images.values()) == {platform}
    assert "image:" not in "".join(line.split("#")[0] for line in
                                   (ROOT / "examples" / "elastic-jobs.yaml").read_text().splitlines())


def test_a_job_with_no_image_anywhere_is_refused_and_its_own_image_wins():
    (job,) = parse_jobs(with_("image", DROP), teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    with pytest.raises(ConfigError) as info:
        render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS)
    assert info.value.errors == ["image: not set, and the platform config has no eks.training_image; build "
                                 "examples/finetune/Dockerfile, push it, and give its pinned name in either"]
    rendered = render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS,
                          default_image="registry.example/train:2.0")
    assert rendered["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == \
        "registry.example/train:2.0"
    (own,) = parse_jobs({"jobs": [BASE]}, teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    rendered = render_job(own, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS,
                          default_image="registry.example/train:2.0")
    assert rendered["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == BASE["image"]


def test_the_platforms_training_image_must_be_pinned():
    from support.variants import eks_config, VARIANT_FILES
    with pytest.raises(ConfigError) as info:
        eks_config(VARIANT_FILES["eks"], eks={"training_image": "registry.example/train:latest"})
    assert any(e.startswith("eks.training_image: 'registry.example/train:latest' — must be pinned") for e in info.value.errors)


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
    borrow = own * team.get("borrow_limit_percent", 50) // 100 if team.get("sharing", "LendAndBorrow") == \
        "LendAndBorrow" else 0
    lent = sum(guaranteed(t) for t in teams if t is not team and t["instance_type"] == itype
               and t.get("sharing", "LendAndBorrow") != "DontLend")
    cluster = sum(g["instance_count"] for g in config["cluster"]["instance_groups"]
                  if g["role"] == "compute" and g["instance_type"] == itype) * gpus
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
    assert admissible_gpus(config, "research") == ("ml.p5.48xlarge", 24)    # 2 guaranteed + 50 % borrowed
    assert admissible_gpus(config, "production") == ("ml.p5.48xlarge", 16)  # Lend: never borrows
    assert render_examples.REACH == {"research": ("ml.p5.48xlarge", 24), "production": ("ml.p5.48xlarge", 16),
                                     "developers": ("ml.g5.8xlarge", 2)}


def test_a_job_its_team_can_never_be_admitted_for_is_refused():
    reach = {"research": ("ml.p5.48xlarge", 24)}
    with pytest.raises(ConfigError) as info:
        parse_jobs({"jobs": [BASE]}, "jobs.yaml", teams=TEAMS, priority_classes=PRIORITY_CLASSES, reach=reach)
    assert info.value.errors == [
        "jobs[0].elastic_policy.max_replicas: 4 pod(s) × 8 nvidia.com/gpu = 32; team 'research' can be admitted for "
        "at most 24 on ml.p5.48xlarge (guarantee plus what it may borrow), so that size never runs; allowed: "
        "max_replicas up to 3"]
    with pytest.raises(ConfigError) as info:
        parse_jobs(with_("instance_type", "ml.p4d.24xlarge"), "jobs.yaml", teams=TEAMS,
                   priority_classes=PRIORITY_CLASSES, reach=reach)
    assert info.value.errors == [
        "jobs[0].instance_type: 'ml.p4d.24xlarge'; team 'research' has quota on ml.p5.48xlarge only, so Kueue never "
        "admits it elsewhere (eks.task_governance.teams)"]
    three = {"jobs": [{**BASE, "global_batch_size": 96,
                       "elastic_policy": {"min_replicas": 1, "max_replicas": 3}}]}
    assert parse_jobs(three, teams=TEAMS, priority_classes=PRIORITY_CLASSES, reach=reach)


STUDIO_FILES = {"research": {"alice": StudioFiles(claim="studio-alice", directory="/data/studio/alice",
                                                  mount_path="/fsx/data/studio/alice", uid=10001, gid=10001)}}


def test_a_job_with_a_user_runs_as_them_in_their_studio_files():
    (job,) = parse_jobs({"jobs": [{**BASE, "team": "research", "user": "alice",
                                   "checkpoint_dir": "/fsx/data/studio/alice/ckpt"}]},
                        teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    pod = render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS,
                     studio_files=STUDIO_FILES)["spec"]["replicaSpecs"][0]["template"]["spec"]
    sc = pod["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (10001, 10001, GIDS["research"])
    assert {"name": "agent-config", "emptyDir": {}} in pod["volumes"]
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": "studio-alice"}} in pod["volumes"]
    assert {"name": "fsx", "mountPath": "/fsx/data/studio/alice"} in pod["containers"][0]["volumeMounts"]


@pytest.mark.parametrize("team, user, checkpoint, expected", [
    ("production", "alice", "/fsx/data/studio/alice/ckpt",
     "user: 'alice' is not a member of team 'production' with Studio files; allowed: (none: the team has no members)"),
    ("research", "bob", "/fsx/data/studio/bob/ckpt",
     "user: 'bob' is not a member of team 'research' with Studio files; allowed: alice"),
    ("research", "alice", "/fsx/checkpoints/x",
     "checkpoint_dir: '/fsx/checkpoints/x' is outside /fsx/data/studio/alice, where alice's Studio files are mounted; "
     "put it under that directory"),
    ("research", "alice", "/fsx/data/studio/alice2/x",
     "checkpoint_dir: '/fsx/data/studio/alice2/x' is outside /fsx/data/studio/alice, where alice's Studio files are "
     "mounted; put it under that directory"),
])
def test_a_job_user_must_be_a_member_and_checkpoint_in_their_files(team, user, checkpoint, expected):
    (job,) = parse_jobs({"jobs": [{**BASE, "team": team, "user": user, "checkpoint_dir": checkpoint}]},
                        teams=TEAMS, priority_classes=PRIORITY_CLASSES)
    with pytest.raises(ConfigError) as info:
        render_job(job, teams=TEAMS, priority_classes=PRIORITY_CLASSES, team_gids=GIDS, studio_files=STUDIO_FILES)
    assert info.value.errors == [expected]


def test_a_checkpoint_of_another_global_batch_is_refused_and_one_of_the_same_resumes(tmp_path):
    assert train_elastic.resumable_checkpoint(tmp_path, 8, "hint") == (None, {})
    for step, batch in ((10, 8), (20, 16)):
        tmp = tmp_path / f"{train_elastic.checkpoint_name(step)}.tmp"
        tmp.mkdir()
        train_elastic.commit_checkpoint(tmp, {"step": step, "global_batch_size": batch, "world_size": 2})
    with pytest.raises(SystemExit, match=r"trained with global batch 16, not 8; keep it"):
        train_elastic.resumable_checkpoint(tmp_path, 8, "keep it")
    latest, meta = train_elastic.resumable_checkpoint(tmp_path, 16, "hint")
    assert latest.name == train_elastic.checkpoint_name(20) and meta["step"] == 20
