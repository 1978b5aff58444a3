"""examples/finetune's workflow for tests/test_finetune.py, driven from one process of the training venv: the tiny
model, data preparation, the elastic run through two resizes, an uninterrupted reference, the evaluation, what MLflow
holds, ROUGE of test_finetune.py's cases, and the preparation once more.

A start of the training venv costs ~9 s of CPU importing torch, transformers, peft and MLflow (docs/testing.md), and
the workflow is ~20 processes. So each step runs in a process of its own forked from one forkserver that has
imported them (warm_imports.py); the training runs are started by torch's elastic agent, the one torchrun runs,
through its Python API with torchrun --standalone's rendezvous (a c10d store on localhost) and its forkserver start
method, and each rank runs train.main. The second preparation runs in this process, not forked: another hash seed
than the forkserver's.

Usage: python workflow.py REQUEST.json     (keys: tmp, args, fixture, rouge_cases; prints the result as JSON)
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import multiprocessing
import os
import runpy
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import forked_steps

HERE = Path(__file__).resolve().parent
FINETUNE = HERE.parents[1] / "examples" / "finetune"
STEP_TIMEOUT = 240


def _steps(progress: Path) -> int:
    return len(progress.read_text().splitlines()) if progress.exists() else 0


class Workflow:
    def __init__(self, tmp: Path, args: Path, fixture: Path, rouge_cases: list):
        self.tmp, self.args, self.fixture, self.rouge_cases = tmp, args, fixture, rouge_cases
        self.work, self.ckpt, self.reference = tmp / "work", tmp / "checkpoints", tmp / "reference"
        self.logs = tmp / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        # A local file store stands in for the tracking server (MLflow 3.17 wants the opt-in for it).
        self.mlflow_env = {"MLFLOW_TRACKING_URI": (tmp / "mlruns").as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}
        # Python 3.11's forkserver is started with `python -c` and ignores the sys.path it is given: its preloads
        # are found through PYTHONPATH. Its hash seed is not this process's, so the two preparations differ in it.
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        os.environ["PYTHONHASHSEED"] = "1"
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["warm_imports", "forked_steps"])

    def fork(self, name: str, target, *args) -> str:
        """target(*args, output) in a process forked from the forkserver; its output, or a failure that shows it."""
        output = self.logs / f"{name}.out"
        process = self.context.Process(target=target, args=(*args, str(output)))
        process.start()
        process.join(STEP_TIMEOUT)
        text = output.read_text() if output.exists() else ""
        if process.exitcode != 0:
            process.kill()
            raise SystemExit(f"{name}: exit code {process.exitcode}\n{text[-6000:]}")
        return text

    def script(self, name: str, path: Path, *argv, env: dict | None = None) -> str:
        return self.fork(name, forked_steps.script, str(path), [str(a) for a in argv], env or {})

    def train_argv(self, ckpt: Path) -> list[str]:
        return ["--args", str(self.args), "--work-dir", str(self.work), "--checkpoint-dir", str(ckpt)]

    def elastic(self, name: str, nproc: int, ckpt: Path, env: dict, signal_rank: int | None = None) -> str:
        """train.py on `nproc` ranks under torch's elastic agent, checkpointing to `ckpt`; with signal_rank, SIGUSR1 goes to that rank once
        the run has trained 2 steps of its own, as the HyperPod elastic agent does on a resize. Rank 0's output."""
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch

        logs = self.logs / name
        logs.mkdir()
        config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=nproc,
            run_id=str(uuid.uuid4()),
            rdzv_backend="c10d",
            rdzv_endpoint="localhost:0",
            max_restarts=0,
            start_method="forkserver",
        )
        stop, signalled = threading.Event(), []
        if signal_rank is not None:
            progress, before = ckpt / "progress.jsonl", _steps(ckpt / "progress.jsonl")

            def resize() -> None:
                deadline = time.monotonic() + STEP_TIMEOUT
                while _steps(progress) < before + 2:
                    if stop.wait(0.02) or time.monotonic() > deadline:
                        return
                os.kill(int((logs / f"rank-{signal_rank}.pid").read_text()), signal.SIGUSR1)
                signalled.append(signal_rank)

            threading.Thread(target=resize, daemon=True).start()
        try:
            elastic_launch(config, forked_steps.train_worker)(self.train_argv(ckpt), env, str(logs))
        except ChildFailedError as failed:
            outputs = "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(logs.glob("*.out")))
            raise SystemExit(f"{name}: {failed}\n{outputs}") from None
        finally:
            stop.set()
        if signal_rank is not None and not signalled:
            raise SystemExit(f"{name}: ended before rank {signal_rank} was signalled")
        return (logs / "rank-0.out").read_text()

    def run(self) -> dict:
        result: dict = {}
        self.script("tiny_model", HERE / "tiny_model.py", self.fixture, self.work / "model")
        result["prepared"] = self.script(
            "prepare", FINETUNE / "prepare_data.py", "--args", self.args, "--work-dir", self.work
        )
        result["phases"] = [
            self.elastic("phase-1", 2, self.ckpt, self.mlflow_env, signal_rank=1),
            self.elastic("phase-2", 3, self.ckpt, self.mlflow_env, signal_rank=2),
            self.elastic("phase-3", 2, self.ckpt, self.mlflow_env),
        ]
        # The reference: one process, uninterrupted, logging nowhere.
        self.elastic("reference", 1, self.reference, dict.fromkeys(self.mlflow_env))
        result["evaluated"] = self.script(
            "evaluate", FINETUNE / "evaluate.py", *self.train_argv(self.ckpt), env=self.mlflow_env
        )
        uri = self.mlflow_env["MLFLOW_TRACKING_URI"]
        result["mlflow"] = json.loads(self.script("read_mlflow", HERE / "read_mlflow.py", uri, env=self.mlflow_env))
        predictions = self.work / "eval" / "predictions.jsonl"
        result["recomputed_rouge"] = json.loads(self.fork("rouge", forked_steps.rouge_of_predictions, str(predictions)))
        result["rouge_of_cases"] = json.loads(self.fork("rouge-cases", forked_steps.rouge_of_cases, self.rouge_cases))
        result["prepared_again"] = self.prepare_again()
        return result

    def prepare_again(self) -> str:
        """prepare_data.py once more, into another work dir, in this process: not forked, so with another hash seed."""
        again = self.tmp / "again"
        again.mkdir()
        (again / "model").symlink_to(self.work / "model")
        argv = [str(FINETUNE / "prepare_data.py"), "--args", str(self.args), "--work-dir", str(again)]
        saved, sys.argv = sys.argv, argv
        sys.path.insert(0, str(FINETUNE))
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as exit:
            if exit.code:
                raise
        finally:
            sys.argv = saved
        return str(again / "data" / "train.jsonl")


def main(request: Path) -> None:
    # What this process imports, torch for the elastic agent and transformers for the second preparation, without the
    # garbage collector's passes over the growing heap (~1 s of CPU), and frozen: not walked again by later passes.
    gc.disable()
    import torch.distributed.launcher.api  # noqa: F401
    from transformers import AutoTokenizer  # noqa: F401

    gc.freeze()
    gc.enable()
    spec = json.loads(request.read_text())
    workflow = Workflow(Path(spec["tmp"]), Path(spec["args"]), Path(spec["fixture"]), spec["rouge_cases"])
    try:
        print(json.dumps(workflow.run()))
    finally:
        # Waited for, the forkserver and multiprocessing's resource tracker end with this process and their CPU
        # (the forked steps' included) counts as its children's.
        from multiprocessing import forkserver, resource_tracker

        forkserver._forkserver._stop()
        resource_tracker._resource_tracker._stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
