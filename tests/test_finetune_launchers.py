"""examples/finetune without torch: args.yaml's checks, the two launchers reading it, the image build file and the
locks. The workflow itself runs in tests/test_finetune.py."""

from __future__ import annotations

import copy
import os
import re
import shutil
import stat
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from support.modules import load_module
from support.paths import ROOT
from platform_config import PlatformConfig
from platform_config.eks import DEFAULT_KUBERNETES
from platform_config.storage import checkpoint_dir
from support.job_crd import crd_errors
import render_examples

FINETUNE = ROOT / "examples" / "finetune"
ft_args = load_module(FINETUNE / "args.py", "finetune_args")

ARGS = yaml.safe_load((FINETUNE / "args.yaml").read_text())
MANIFEST = FINETUNE / "manifests" / f"{ARGS['name']}.yaml"


def errors_of(mutate) -> list[str]:
    data = copy.deepcopy(ARGS)
    mutate(data)
    with pytest.raises(ft_args.ArgsError) as info:
        ft_args.parse_args_data(data, "args.yaml")
    return info.value.errors


# ---------------------------------------------------------------------------------------------- args.yaml
def test_shipped_args_are_valid_and_pin_model_and_dataset():
    a = ft_args.load_args(FINETUNE / "args.yaml")
    assert re.fullmatch(r"[0-9a-f]{40}", a.model.revision) and re.fullmatch(r"[0-9a-f]{40}", a.dataset.revision)
    assert (a.model.license, a.dataset.license) == ("Apache-2.0", "CC-BY-SA-3.0")


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d["training"].update(micro_batch_size=0), ["training.micro_batch_size: 0 — an integer >= 1"]),
        (
            lambda d: d.update(image="repo/train:latest"),
            [
                "image: 'repo/train:latest' — a pinned image: repository:tag (not 'latest') or repository@sha256:<64 hex>"
            ],
        ),
        (
            lambda d: d["model"].update(revision="main"),
            ["model.revision: 'main' — a 40-hex commit of the model repository, so every download is the same"],
        ),
        (
            lambda d: d["training"].update(global_batch_size=48),
            [
                "training.global_batch_size: 48 is not divisible by world size × micro_batch_size at slurm world size(s) [16] "
                "(micro_batch_size 2); the global batch stays constant through gradient accumulation, so every world size "
                "must divide it"
            ],
        ),
        (
            lambda d: d["eks"]["elastic"].update(max_replicas=3),
            [
                "training.global_batch_size: 64 is not divisible by world size × micro_batch_size at eks world size(s) [24] "
                "(micro_batch_size 2); the global batch stays constant through gradient accumulation, so every world size "
                "must divide it"
            ],
        ),
        (lambda d: d["training"].update(quantization="8bit"), ["training.quantization: '8bit' — auto, 4bit or none"]),
        (lambda d: d["training"].update(learning_rate="fast"), ["training.learning_rate: 'fast' — a number"]),
        (
            lambda d: d["training"].update(max_step=3),
            [
                "training.max_step: unknown key; allowed here: max_seq_len, global_batch_size, micro_batch_size, max_steps, "
                "learning_rate, warmup_steps, min_lr_ratio, weight_decay, max_grad_norm, seed, checkpoint_every, "
                "keep_checkpoints, quantization, lora"
            ],
        ),
        (lambda d: d.pop("image"), ["image: missing; this key is required"]),
        (
            lambda d: d["mlflow"].update(tracking_arn="arn:aws:s3:::bucket"),
            [
                "mlflow.tracking_arn: 'arn:aws:s3:::bucket' — empty, or "
                "arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>"
            ],
        ),
        (
            lambda d: d["slurm"].update(runtime="venv"),
            ["slurm.venv: '' — with runtime venv: the venv's absolute path on FSx"],
        ),
        (
            lambda d: d["dataset"].update(id="/data/train.csv"),
            ["dataset.id: '/data/train.csv' — a local file must be JSON lines (.jsonl)"],
        ),
    ],
    ids=[
        "micro batch",
        "latest image",
        "unpinned model",
        "slurm batch",
        "eks batch",
        "quantization",
        "type",
        "unknown key",
        "missing image",
        "mlflow arn",
        "venv path",
        "local csv",
    ],
)
def test_bad_args_get_an_error_naming_key_value_and_what_is_allowed(mutate, expected):
    assert errors_of(mutate) == expected


def test_args_file_is_read_strictly_and_errors_come_without_a_traceback(tmp_path):
    path = tmp_path / "args.yaml"
    path.write_text((FINETUNE / "args.yaml").read_text() + "name: again\n")
    result = subprocess.run([sys.executable, FINETUNE / "args.py", "check", path], capture_output=True, text=True)
    assert result.returncode == 1 and "duplicate key 'name'" in result.stderr and "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------- EKS manifest
def documents() -> list[dict]:
    return list(yaml.safe_load_all(MANIFEST.read_text()))


def test_committed_finetune_manifest_equals_a_fresh_render():
    assert {
        p.name: p.read_text() for p in (FINETUNE / "manifests").glob("*.yaml")
    } == render_examples.rendered_finetune()


def test_manifest_carries_args_yaml_and_the_image_it_names():
    config_map, job = documents()
    assert config_map["data"]["args.yaml"] == (FINETUNE / "args.yaml").read_text()
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == ARGS["image"]
    assert {"name": "finetune-args", "mountPath": "/etc/finetune", "readOnly": True} in container["volumeMounts"]
    assert {"name": "finetune-args", "configMap": {"name": config_map["metadata"]["name"]}} in pod["volumes"]
    assert config_map["metadata"]["namespace"] == job["metadata"]["namespace"] == f"hyperpod-ns-{ARGS['eks']['team']}"
    assert container["command"] == ["hyperpodrun"]
    # The job's user's Studio files, at the path their Studio space has them too (inside the S3 link): the scripts
    # are read from there, not from the image, so an edit in Studio reaches the next run.
    files = f"/fsx/data/studio/{ARGS['eks']['user']}"
    assert container["args"][:3] == [
        f"--nproc-per-node={ARGS['eks']['gpus_per_pod']}",
        "--rdzv-backend=hyperpod",
        f"{files}/hyperpod-examples/finetune/train.py",
    ]
    assert {"name": "fsx", "mountPath": files} in container["volumeMounts"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HYPERPOD_SIGNAL_COORDINATION"] == "distributed"
    assert env["GLOBAL_BATCH_SIZE"] == str(ARGS["training"]["global_batch_size"])
    assert env["CHECKPOINT_DIR"] == f"{files}/checkpoints/{ARGS['name']}"
    assert container["args"][-2:] == ["--work-dir", f"{files}/finetune/{ARGS['name']}"]
    assert {"name": "fsx", "mountPath": files} in container["volumeMounts"]


def test_manifest_is_a_valid_job_and_config_map():
    config_map, job = documents()
    assert crd_errors(job) == []
    kubernetes_validate.validate(config_map, DEFAULT_KUBERNETES, strict=True)
    kubernetes_validate.validate(
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "x", "namespace": job["metadata"]["namespace"]},
            "template": job["spec"]["replicaSpecs"][0]["template"],
        },
        DEFAULT_KUBERNETES,
        strict=True,
    )


def test_manifest_sizes_fit_the_teams_quota_and_keep_the_global_batch():
    """Every replica count the job may scale to keeps the global batch divisible, and the largest fits in what the
    team can hold in the EKS example config: its instances plus what it may borrow."""
    _, job = documents()
    policy = job["spec"]["elasticPolicy"]
    team = next(t for t in render_examples._GOVERNANCE.teams if t.name == ARGS["eks"]["team"])
    reachable = team.instance_count + team.instance_count * (team.borrow_limit_percent or 0) // 100
    assert team.instance_type == ARGS["eks"]["instance_type"] and policy["maxReplicas"] <= reachable
    for replicas in range(policy["minReplicas"], policy["maxReplicas"] + 1, policy["replicaIncrementStep"]):
        assert (
            ARGS["training"]["global_batch_size"]
            % (replicas * int(job["spec"]["nprocPerNode"]) * ARGS["training"]["micro_batch_size"])
            == 0
        )


def test_renderer_refuses_a_team_the_platform_does_not_have(tmp_path):
    data = copy.deepcopy(ARGS)
    data["eks"]["team"] = "vision"
    path = tmp_path / "args.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(Exception) as info:
        render_examples.rendered_finetune(path)
    assert "jobs[0].team: 'vision' is not a team in the platform's task governance config" in str(info.value)


# ---------------------------------------------------------------------------------------------- Slurm launcher
SBATCH = FINETUNE / "finetune.sbatch"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (make system-deps)")
def test_sbatch_passes_shellcheck():
    result = subprocess.run(["shellcheck", "-x", "-s", "bash", SBATCH], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_sbatch_checkpoints_under_the_platforms_s3_linked_path():
    cfg = PlatformConfig()
    default = f"{cfg.storage.lustre.mount_path}{checkpoint_dir(cfg.storage)}"
    assert f'CHECKPOINT_ROOT="${{CHECKPOINT_ROOT:-{default}}}"' in SBATCH.read_text()
    assert default.startswith(f"{cfg.storage.lustre.mount_path}{cfg.storage.lustre.data_repository.file_system_path}/")


def _fake(bin_dir, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_sbatch_submits_itself_with_the_nodes_and_partition_of_args_yaml(tmp_path):
    data = copy.deepcopy(ARGS)
    data["slurm"].update(nodes=4, partition="gpu")
    args = tmp_path / "args.yaml"
    args.write_text(yaml.safe_dump(data))
    _fake(tmp_path, "sbatch", f'printf "%s\\n" "$@" > {tmp_path}/submitted')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env |= {"PATH": f"{tmp_path}:{os.environ['PATH']}", "ARGS": str(args), "HOST_PYTHON": sys.executable}
    subprocess.run(["bash", SBATCH], check=True, env=env, cwd=ROOT)
    # Relative to the submit directory: the job starts at the cluster's path of it, which from Studio differs.
    assert (tmp_path / "submitted").read_text().splitlines() == [
        f"--job-name=finetune-{ARGS['name']}",
        "--nodes=4",
        "--partition=gpu",
        f"--export=ALL,FINETUNE_DIR=examples/finetune,ARGS={os.path.relpath(args, ROOT)}",
        str(SBATCH),
    ]


@pytest.mark.parametrize("code_on_fsx", [False, True])
def test_sbatch_in_a_job_runs_torchrun_per_node_in_the_image_then_evaluates(tmp_path, code_on_fsx):
    """Inside the allocation: srun (recorded) gets pyxis's form of args.yaml's image, torchrun with one process per
    GPU and the work and checkpoint directories; then evaluation on one node. The scripts are the submitted files:
    on FSx the container's FSx mount shows them, elsewhere their folder is mounted read-only as well."""
    work_root, ckpt_root = tmp_path / "work", tmp_path / "ckpt"
    (work_root / os.environ.get("USER", "root") / ARGS["name"] / "data").mkdir(parents=True)
    (work_root / os.environ.get("USER", "root") / ARGS["name"] / "data" / "train.jsonl").write_text("{}\n")
    _fake(tmp_path, "srun", f'printf "%s " "$@" >> {tmp_path}/sruns; echo >> {tmp_path}/sruns')
    # A long node list (a large allocation): the launcher must read all of it, or scontrol dies of SIGPIPE. 20,002
    # names, ~218 KB, over three times what a pipe holds (64 KiB): scontrol still writes after an early reader is gone.
    _fake(tmp_path, "scontrol", "echo node-a; echo node-b; seq -f 'node-%g' 20000")
    env = os.environ | {
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "HOST_PYTHON": sys.executable,
        # Studio's path of the submit directory, which the job's node does not have.
        "SLURM_SUBMIT_DIR": "/home/sagemaker-user/studio-fsx/repo",
        "FINETUNE_DIR": "examples/finetune",
        "ARGS": "examples/finetune/args.yaml",
        "WORK_ROOT": str(work_root),
        "CHECKPOINT_ROOT": str(ckpt_root),
        "USER": os.environ.get("USER", "root"),
    }
    fsx = str(ROOT.parent) if code_on_fsx else "/fsx"  # the checkout as if it were on FSx; else the default mount
    env.pop("FSX_MOUNT", None)
    if code_on_fsx:
        env["FSX_MOUNT"] = fsx
    subprocess.run(["bash", SBATCH], check=True, env=env, capture_output=True, cwd=ROOT)
    train, evaluate = (tmp_path / "sruns").read_text().splitlines()
    registry, repository = ARGS["image"].split("/", 1)
    examples = ROOT / "examples"
    mounts = f"{fsx}:{fsx}" if code_on_fsx else f"/fsx:/fsx,{examples}:{examples}:ro"
    assert train.startswith(
        f"--container-image={registry}#{repository} --container-mounts={mounts} "
        "--no-container-mount-home --auto-resume=1 torchrun --nnodes=2 --nproc-per-node=8 "
    )
    assert f"--rdzv-endpoint=node-a:29500 --rdzv-id=42 {examples}/finetune/train.py" in train
    ckpt = ckpt_root / env["USER"] / ARGS["name"]
    assert f"--work-dir {work_root / env['USER'] / ARGS['name']} --checkpoint-dir {ckpt}" in train
    assert f" --nodes=1 --ntasks=1 python {examples}/finetune/evaluate.py " in f" {evaluate}"


# ---------------------------------------------------------------------------------------------- image and locks
DOCKERFILE = (FINETUNE / "Dockerfile").read_text()


def _lock(kind: str) -> dict[str, tuple[str, str]]:
    text = (FINETUNE / f"requirements-{kind}.txt").read_text()
    pins = re.findall(r"^([a-z0-9-]+)==(\S+) \\\n    --hash=sha256:([0-9a-f]{64})$", text, re.M)
    assert len(pins) == text.count("=="), "every pin carries one sha256"
    return {name: (version, digest) for name, version, digest in pins}


def test_image_base_is_pinned_by_digest_and_deps_by_hash():
    (base,) = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert re.fullmatch(r"[a-z0-9./-]+@sha256:[0-9a-f]{64}", base)
    assert "pip install --require-hashes --no-deps -r /tmp/requirements-image.txt" in DOCKERFILE
    image = _lock("image")
    assert image["hyperpod-elastic-agent"][0] == "1.1.3"
    assert image["torch"][0] == "2.11.0"  # hyperpod-elastic-agent 1.1.3: torch>=2.4.0,<2.12.0


def test_image_user_owns_the_agents_rendezvous_directory_and_the_pods_get_their_own():
    uid = re.search(r"^ARG TRAIN_UID=(\d+)$", DOCKERFILE, re.M).group(1)
    assert re.search(
        r"install -d -o \"\$\{TRAIN_UID\}\" -g \"\$\{TRAIN_GID\}\" -m 0755 /opt/ml /opt/ml/input "
        r"/opt/ml/input/config",
        DOCKERFILE,
    )
    assert re.search(r"^USER \$\{TRAIN_UID\}:\$\{TRAIN_GID\}$", DOCKERFILE, re.M) and uid != "0"
    # On EKS the pods run as the job's user (a team member: the team's admission policy allows no other uid), not as
    # the image's; the agent's directory is then an emptyDir, which any uid may write.
    _, job = documents()
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    user = next(u for u in render_examples.PLATFORM.users if u.name == ARGS["eks"]["user"])
    assert pod["securityContext"]["runAsUser"] == user.uid
    assert {"name": "agent-config", "emptyDir": {}} in pod["volumes"]
    assert {"name": "agent-config", "mountPath": "/opt/ml/input/config"} in pod["containers"][0]["volumeMounts"]


def test_image_carries_dependencies_only():
    """The jobs run the scripts from the user's files (both launchers: the tests above and the manifests'), so an
    edit in Studio needs no image build: the image copies in the dependency lock and nothing else."""
    copied = [line.split()[1:-1] for line in DOCKERFILE.splitlines() if re.match(r"(COPY|ADD)\s", line)]
    assert copied == [["finetune/requirements-image.txt"]]
    assert "/workspace" not in DOCKERFILE


def test_cpu_and_image_locks_agree_on_the_workflows_libraries():
    cpu, image = _lock("cpu"), _lock("image")
    for name in (
        "transformers",
        "peft",
        "accelerate",
        "rouge-score",
        "mlflow-skinny",
        "sagemaker-mlflow",
        "hyperpod-elastic-agent",
        "tokenizers",
        "safetensors",
        "huggingface-hub",
        "pyyaml",
    ):
        assert cpu[name][0] == image[name][0], name
    assert cpu["torch"][0] == "2.13.0+cpu"  # the CPU build on this project's machines; the image has CUDA 2.11.0


@pytest.mark.parametrize("step", ["download_model.py", "prepare_data.py", "train.py", "evaluate.py"])
def test_every_step_refuses_a_bad_args_file_with_its_errors_and_exit_1(step, tmp_path):
    bad = tmp_path / "args.yaml"
    bad.write_text(yaml.safe_dump({**ARGS, "bogus": 1}))
    result = subprocess.run(
        [sys.executable, str(FINETUNE / step), "--args", str(bad), "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "bogus: unknown key" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "model").exists()


def test_the_evaluation_job_runs_evaluate_py_as_the_training_jobs_user_with_its_files():
    """The article's evaluation step on EKS: a batch/v1 Job (the team Role allows them), one GPU, the training job's
    user, files, labels and security context, evaluate.py from the user's Studio files."""
    _, training = documents()
    (evaluation,) = yaml.safe_load_all((FINETUNE / "manifests" / f"{ARGS['name']}-evaluate.yaml").read_text())
    assert evaluation["apiVersion"] == "batch/v1" and evaluation["kind"] == "Job"
    assert evaluation["metadata"]["labels"] == training["metadata"]["labels"]
    train_template = training["spec"]["replicaSpecs"][0]["template"]
    template = evaluation["spec"]["template"]
    assert template["metadata"] == train_template["metadata"]
    assert template["spec"]["securityContext"] == train_template["spec"]["securityContext"]
    assert template["spec"]["volumes"] == train_template["spec"]["volumes"]
    assert template["spec"]["restartPolicy"] == "Never" and evaluation["spec"]["backoffLimit"] == 0
    (container,) = template["spec"]["containers"]
    files = f"/fsx/data/studio/{ARGS['eks']['user']}"
    assert container["command"] == ["python", f"{files}/hyperpod-examples/finetune/evaluate.py"]
    assert container["args"] == [
        "--args",
        "/etc/finetune/args.yaml",
        "--work-dir",
        f"{files}/finetune/{ARGS['name']}",
        "--checkpoint-dir",
        f"{files}/checkpoints/{ARGS['name']}",
    ]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_make_examples_renders_the_users_image_not_the_placeholder(tmp_path):
    image = "444455556666.dkr.ecr.eu-west-1.amazonaws.com/my-finetune:2.0.1"
    assert (
        render_examples.main(["--image", image, "--out", str(tmp_path / "m"), "--finetune-out", str(tmp_path / "f")])
        == 0
    )
    texts = [p.read_text() for p in (tmp_path / "m").glob("*.yaml")] + [
        p.read_text() for p in (tmp_path / "f").glob("*.yaml")
    ]
    assert len(texts) == 5
    for text in texts:
        assert "111122223333" not in text
        assert image in text
    config_map, _ = [d for d in yaml.safe_load_all((tmp_path / "f" / f"{ARGS['name']}.yaml").read_text())]
    assert f"image: {image}" in config_map["data"]["args.yaml"]
    assert render_examples.main(["--image", "my-finetune:latest", "--out", str(tmp_path / "x")]) == 1
