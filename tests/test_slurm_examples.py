"""examples/slurm: what the examples promise, checked without a cluster (tests/e2e submits them to real Slurm)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from platform_config import PlatformConfig
from platform_config.storage import checkpoint_dir

EXAMPLES = ROOT / "examples" / "slurm"


def directives(name: str) -> dict[str, str]:
    text = (EXAMPLES / name).read_text()
    return dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(\S+))?$", text, re.M))


def test_there_is_an_example_for_efa_training_and_containers():
    assert sorted(p.name for p in EXAMPLES.glob("*.sbatch")) == [
        "container.sbatch", "nccl-all-reduce.sbatch", "train-auto-resume.sbatch"]


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (make system-deps)")
def test_examples_pass_shellcheck():
    result = subprocess.run(["shellcheck", "-s", "bash", *map(str, EXAMPLES.glob("*.sbatch"))], capture_output=True,
                            text=True)
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
