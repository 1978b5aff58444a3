"""examples/slurm: what the examples promise, checked without a cluster (tests/e2e submits them to real Slurm)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from support.paths import ROOT
from platform_config import PlatformConfig
from platform_config.storage import checkpoint_dir

EXAMPLES = ROOT / "examples" / "slurm"


def directives(name: str) -> dict[str, str]:
    text = (EXAMPLES / name).read_text()
    return dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(\S+))?$", text, re.M))


def test_there_is_an_example_for_efa_training_and_containers():
    assert sorted(p.name for p in EXAMPLES.glob("*.sbatch")) == [
        "container.sbatch",
        "nccl-all-reduce.sbatch",
        "train-auto-resume.sbatch",
    ]


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (make system-deps)")
def test_examples_pass_shellcheck():
    result = subprocess.run(
        ["shellcheck", "-s", "bash", *map(str, EXAMPLES.glob("*.sbatch"))], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_multi_node_examples_take_whole_nodes_and_use_efa():
    for name in ("nccl-all-reduce.sbatch", "train-auto-resume.sbatch"):
        d = directives(name)
        assert "exclusive" in d and int(d["nodes"]) >= 2, name
        assert "export FI_PROVIDER=efa" in (EXAMPLES / name).read_text()


def test_training_resumes_and_checkpoints_under_the_s3_linked_path():
    text = (EXAMPLES / "train-auto-resume.sbatch").read_text()
    assert re.search(r"^srun --auto-resume=1 ", text, re.M)
    cfg = PlatformConfig()
    default = f"{cfg.storage.lustre.mount_path}{checkpoint_dir(cfg.storage)}"
    assert f'CHECKPOINT_ROOT="${{CHECKPOINT_ROOT:-{default}}}"' in text
    linked = f"{cfg.storage.lustre.mount_path}{cfg.storage.lustre.data_repository.file_system_path}/"
    assert default.startswith(linked)


def test_container_example_goes_through_pyxis():
    assert re.search(r"^srun --container-image=", (EXAMPLES / "container.sbatch").read_text(), re.M)


def test_auto_resume_launch_takes_the_first_node_of_a_long_list_as_rendezvous(tmp_path):
    """Run in a stand-in allocation of 20,002 nodes (~218 KB of names, over three times what a pipe holds): the
    rendezvous is the first node, and reading the list does not kill the job (a `| head -n 1` closes the pipe early;
    under pipefail scontrol's SIGPIPE fails the script)."""
    for name, body in (
        ("scontrol", "echo node-a; echo node-b; seq -f 'node-%g' 20000"),
        ("srun", f'printf "%s " "$@" > {tmp_path}/srun.args'),
    ):
        (tmp_path / name).write_text(f"#!/bin/bash\n{body}\n")
        (tmp_path / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NAME": "t",
        "USER": "alice",
        "CHECKPOINT_ROOT": str(tmp_path / "ckpt"),
        "SLURM_SUBMIT_DIR": "/home/sagemaker-user/studio-fsx/repo",
    }
    result = subprocess.run(
        ["bash", str(EXAMPLES / "train-auto-resume.sbatch")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    srun = (tmp_path / "srun.args").read_text()
    assert "--rdzv-endpoint=node-a:29500 --rdzv-id=7 " in srun
    # The script from the directory the job starts in (the cluster's path), not Studio's submit path.
    assert f" {ROOT}/examples/train_elastic.py " in srun, srun
