"""examples/train_elastic.py run on the CPU (in .venv-train): without torch, a rank's exit, a hung run, one MLflow
run across a resize, gradient accumulation at any world size, and its checkpoints."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import ROOT
from support.modules import load_module
from support.process_tree import run_or_dump_stacks
from support.warm_python import warm

train_elastic = load_module(ROOT / "examples" / "train_elastic.py")


# ---------------------------------------------------------------------------------------------- train_elastic.py
def test_train_elastic_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None; sys.path.insert(0, 'examples'); import train_elastic; "
        "print(train_elastic.accumulation_steps(8, 2, 2))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "2"), result.stderr


def test_a_finished_rank_exits_even_if_finalization_would_block():
    """exit_without_finalizing: the code is the process's, everything printed arrives, and nothing left running (here
    a thread that never ends, which a normal exit joins) holds the process."""
    code = (
        "import sys, threading; sys.path.insert(0, 'examples'); import train_elastic; "
        "threading.Thread(target=threading.Event().wait).start(); print('trained', end=''); "
        "print('and written', file=sys.stderr, end=''); train_elastic.exit_without_finalizing(3)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (3, "trained", "and written")


def test_a_hung_run_fails_in_bounded_time_with_the_stacks_of_its_workers_in_their_own_sessions(tmp_path):
    hang = "import time; time.sleep(600)"
    launcher = (
        "import subprocess, sys, time; "
        f"print(subprocess.Popen([sys.executable, '-c', {hang!r}], start_new_session=True).pid, "
        f"file=open({str(tmp_path / 'worker')!r}, 'w')); time.sleep(600)"
    )
    with pytest.raises(pytest.fail.Exception) as failed:
        run_or_dump_stacks([sys.executable, "-c", launcher], env=dict(os.environ), timeout=3)
    assert "did not end within 3 s" in str(failed.value) and "Fatal Python error: Aborted" in str(failed.value)
    worker = int((tmp_path / "worker").read_text())
    with contextlib.suppress(FileNotFoundError):  # gone, or a zombie its new parent has not reaped yet
        assert Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


# What the run's processes import (torchrun's agent; the ranks: DDP, DCP and torch._dynamo, which torch imports on a
# rank's first step, ~1 s of CPU; MLflow; the reader), imported once by the warm server its processes fork from. Not
# hyperpod_elastic_agent: importing it takes SIGUSR1 and replaces torch.distributed.elastic's loggers.
WARM_MODULES = [
    "torch",
    "torch._dynamo",
    "torch.distributed.run",
    "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend",
    "torch.distributed.elastic.rendezvous.dynamic_rendezvous",
    "torch.distributed.checkpoint",
    "torch.distributed.checkpoint.state_dict",
    "torch.nn.parallel",
    "mlflow",
    "mlflow.tracking",
]


def test_train_elastic_logs_one_mlflow_run_across_a_resize(tmp_path):
    """The example job for real on the CPU (gloo) in the training venv: 2 processes train 4 steps and checkpoint, then
    1 process resumes at step 4 and finishes 6. A local MLflow file store stands in for the tracking server: one run,
    `loss` and `world_size` at every step, the resumed half in the same run (its id kept in meta.json).

    The venv's `torchrun` script and the `python -u train_elastic.py` its agent starts for each rank (PYTHON_EXEC,
    torchrun's own setting) are processes forked from one that imported torch and MLflow once
    (tests/support/warm_python.py): each runs as a started interpreter would and ends as it does, train_elastic.py's
    `__main__` exit included; those imports were ~3-5 s of CPU a process."""
    python = ROOT / ".venv-train" / "bin" / "python"
    if not (ROOT / ".venv-train" / ".installed").is_file():
        pytest.fail("the training venv is missing: run `make train-venv` (make test builds it)")
    mlruns, ckpt = tmp_path / "mlruns", tmp_path / "ckpt"
    env = os.environ | {
        "MLFLOW_TRACKING_URI": mlruns.as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "MLFLOW_EXPERIMENT_NAME": "research-elastic",
        "OMP_NUM_THREADS": "1",
    }
    with warm(python, WARM_MODULES, tmp_path, env) as server:
        env["PYTHON_EXEC"] = str(server.command)

        def torchrun(processes: int, steps: int) -> None:
            result = run_or_dump_stacks(
                [
                    str(server.command),
                    str(python.parent / "torchrun"),
                    "--standalone",
                    f"--nproc-per-node={processes}",
                    str(ROOT / "examples" / "train_elastic.py"),
                    "--checkpoint-dir",
                    str(ckpt),
                    "--global-batch-size",
                    "4",
                    "--steps",
                    str(steps),
                    "--checkpoint-every",
                    "2",
                    "--features",
                    "4",
                ],
                env=env,
                timeout=180,
                also_under=(server.pid,),
            )
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]

        torchrun(2, 4)
        torchrun(1, 6)
        read = subprocess.run(
            [str(server.command), str(ROOT / "tests" / "finetune" / "read_mlflow.py"), mlruns.as_uri()],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert read.returncode == 0, read.stderr[-3000:]
    (run,) = json.loads(read.stdout)["runs"]
    assert run["status"] == "FINISHED"
    assert run["history"]["world_size"] == [[1, 2.0], [2, 2.0], [3, 2.0], [4, 2.0], [5, 1.0], [6, 1.0]]
    assert [step for step, _ in run["history"]["loss"]] == [1, 2, 3, 4, 5, 6]
    assert all(loss > 0 for _, loss in run["history"]["loss"])
    assert json.loads((ckpt / "step-000000006" / "meta.json").read_text())["mlflow_run_id"]


def test_train_elastic_logs_nothing_without_a_tracking_uri():
    code = (
        "import os, sys; os.environ.pop('MLFLOW_TRACKING_URI', None); sys.modules['mlflow'] = None; "
        "sys.path.insert(0, 'examples'); import train_elastic; print(train_elastic.start_mlflow_run(None))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "None"), result.stderr


@pytest.mark.parametrize(
    "global_batch, world_size, micro_batch, steps",
    [
        (768, 16, 4, 12),
        (768, 48, 4, 4),
        (768, 64, 4, 3),
        (1024, 32, 2, 16),
        (96, 12, 2, 4),
        (8, 8, 1, 1),
    ],
)
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
    seen = [
        i
        for rank in range(world_size)
        for r in train_elastic.rank_samples(step, global_batch, world_size, rank, micro)
        for i in r
    ]
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
    (tmp_path / "step-000000300.tmp").mkdir()  # interrupted save: never renamed
    _checkpoint(tmp_path, 400, complete=False)  # no meta.json
    (tmp_path / "step-000000500").write_text("not a dir")
    (tmp_path / "step-600").mkdir()  # not our naming scheme
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
