"""Elastic training skeleton for a HyperPodPyTorchJob: the checkpoint/resume pattern elastic jobs need.

When the operator scales the job, every rank checkpoints and exits, and the job restarts at a different world size
from the newest *complete* checkpoint. Three rules make that safe:

1. Checkpoints are atomic. All ranks write their shards into `step-N.tmp`; after a barrier rank 0 writes
   `meta.json` and renames the directory to `step-N`. An interrupted save leaves only a `.tmp` directory, which
   resume ignores (and rank 0 deletes at start).
2. The global batch never changes. Gradient accumulation steps = global_batch / (world_size × micro_batch), so the
   optimizer sees the same batch, and the same learning-rate schedule, at every size. Sizes that do not divide the
   global batch are an error here and are rejected earlier by manifests/training_jobs.py.
3. Data position is counted in samples. After step N the job has consumed N × global_batch samples whatever the
   world size was, so a resumed run continues at the next unseen sample.

With MLFLOW_TRACKING_URI set (the manifests take it from the team's ConfigMap `mlflow`: the tracking server's ARN, which
the image's sagemaker-mlflow plugin accepts), rank 0 logs `loss` and `world_size` at every step to one MLflow run
that survives restarts: its id is kept in meta.json. MLFLOW_EXPERIMENT_NAME names the experiment (default
`elastic-training`).

The helpers above `train` are plain Python and tested without torch; torch and mlflow are imported only inside `train`.
Launch with hyperpodrun (the manifests in examples/manifests do), or torchrun for a local smoke test.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path
from typing import NoReturn

CHECKPOINT = re.compile(r"step-(\d{9})")
META = "meta.json"


def accumulation_steps(global_batch: int, world_size: int, micro_batch: int) -> int:
    if min(global_batch, world_size, micro_batch) < 1:
        raise ValueError(
            f"global batch {global_batch}, world size {world_size} and micro batch {micro_batch} must all be at least 1"
        )
    per_step = world_size * micro_batch
    if global_batch % per_step:
        raise ValueError(
            f"global batch {global_batch} is not divisible by world_size × micro_batch = "
            f"{world_size} × {micro_batch} = {per_step}"
        )
    return global_batch // per_step


def rank_samples(step: int, global_batch: int, world_size: int, rank: int, micro_batch: int) -> list[range]:
    """Global sample indices `rank` trains on at `step`, one range per micro-batch.

    Micro-batch k of rank r is [base + (k·world_size + r)·micro_batch, +micro_batch), so together the ranks cover
    step·global_batch .. (step+1)·global_batch exactly once at any world size.
    """
    accum = accumulation_steps(global_batch, world_size, micro_batch)
    base = step * global_batch
    starts = (base + (k * world_size + rank) * micro_batch for k in range(accum))
    return [range(start, start + micro_batch) for start in starts]


def checkpoint_name(step: int) -> str:
    return f"step-{step:09d}"


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint: a `step-NNNNNNNNN` directory holding meta.json; anything else is ignored."""
    root = Path(root)
    if not root.is_dir():
        return None
    complete = [p for p in root.iterdir() if CHECKPOINT.fullmatch(p.name) and (p / META).is_file()]
    return max(complete, key=lambda p: p.name, default=None)


def remove_partial(root: str | Path) -> list[Path]:
    """Delete what interrupted saves left behind (`*.tmp`); returns the removed paths."""
    partial = sorted(p for p in Path(root).glob("*.tmp"))
    for p in partial:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    return partial


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def commit_checkpoint(tmp_dir: Path, meta: dict) -> Path:
    """Rank 0, once every rank has written into `step-N.tmp`: seal it with meta.json and rename it to `step-N`."""
    final = tmp_dir.with_name(tmp_dir.name.removesuffix(".tmp"))
    write_json_atomic(tmp_dir / META, meta)
    if final.exists():  # this step was committed before a restart; keep the first copy
        shutil.rmtree(tmp_dir)
        return final
    os.rename(tmp_dir, final)  # atomic on POSIX file systems, Lustre included
    fd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # make the rename itself durable
    finally:
        os.close(fd)
    return final


def prune_checkpoints(root: str | Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` complete checkpoints; returns the removed paths."""
    complete = sorted(p for p in Path(root).iterdir() if CHECKPOINT.fullmatch(p.name))
    old = complete[:-keep] if keep > 0 else []
    for p in old:
        shutil.rmtree(p)
    return old


def resumable_checkpoint(root: str | Path, global_batch: int, hint: str) -> tuple[Path | None, dict]:
    """The newest complete checkpoint under root and its meta.json, or (None, {}). One trained with another global
    batch is refused (the data position and the loss curve would not continue): `hint` says what to do instead."""
    latest = latest_checkpoint(root)
    if latest is None:
        return None, {}
    meta = json.loads((latest / META).read_text())
    if meta["global_batch_size"] != global_batch:
        raise SystemExit(
            f"{latest} was trained with global batch {meta['global_batch_size']}, not {global_batch}; {hint}"
        )
    return latest, meta


def exit_without_finalizing(code: int) -> NoReturn:
    """Ends a rank whose work is done and written: output flushed, then os._exit, so that no torch object is freed.
    Call it while the model is still referenced, not after the function holding it has returned: freeing a DDP model
    can deadlock. Its Reducer may hold the last reference to the process group and, bound without releasing the GIL,
    frees it with the GIL held; ~ProcessGroupGloo then joins its worker threads, and a worker that has just finished a
    collective may still be dropping that work's tensors, which takes the GIL when Python created them. Seen about once
    in 15 CPU test runs on a loaded machine, as a rank whose only frame was the line that called train()."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def start_mlflow_run(run_id: str | None):
    """The MLflow module with a run started (resumed when `run_id` is given), or None without MLFLOW_TRACKING_URI."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        return None
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", "elastic-training"))
    mlflow.start_run(run_id=run_id)
    return mlflow


def train(args: argparse.Namespace) -> NoReturn:
    import contextlib

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.nn.parallel import DistributedDataParallel

    try:
        from hyperpod_elastic_agent.elastic_event_handler import elastic_event_detected
    except ImportError:  # plain torchrun: no scaling events

        def elastic_event_detected() -> bool:
            return False

    cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    accum = accumulation_steps(args.global_batch_size, world, args.micro_batch_size)

    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Linear(args.features, 1).to(device), device_ids=[local_rank] if cuda else None
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    root = Path(args.checkpoint_dir)
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        remove_partial(root)
    dist.barrier()

    step, run_id = 0, None
    latest, meta = resumable_checkpoint(
        root, args.global_batch_size, "resume with the same global batch or a new checkpoint dir"
    )
    if latest is not None:
        model_state, optim_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optim_state}
        dcp.load(state, checkpoint_id=str(latest))  # DCP reshards to the current world size
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
        step, run_id = meta["step"], meta.get("mlflow_run_id")
        if rank == 0:
            print(f"resumed from {latest.name} (world size {meta['world_size']} -> {world}, accumulation {accum})")

    tracking = start_mlflow_run(run_id) if rank == 0 else None
    if tracking is not None:
        run_id = tracking.active_run().info.run_id

    def save() -> None:
        tmp = root / f"{checkpoint_name(step)}.tmp"
        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(tmp))
        dist.barrier()  # every rank's shard is written before rank 0 publishes the directory
        if rank == 0:
            commit_checkpoint(
                tmp,
                {
                    "step": step,
                    "global_batch_size": args.global_batch_size,
                    "samples_seen": step * args.global_batch_size,
                    "world_size": world,
                    "mlflow_run_id": run_id,
                },
            )
            prune_checkpoints(root, args.keep)
        dist.barrier()

    while step < args.steps:
        optimizer.zero_grad(set_to_none=True)
        loss = torch.zeros((), device=device)
        for k, samples in enumerate(rank_samples(step, args.global_batch_size, world, rank, args.micro_batch_size)):
            index = torch.tensor(list(samples), dtype=torch.float32, device=device)[:, None]
            x = torch.sin(index * torch.arange(1, args.features + 1, device=device))  # a pure function of the index
            y = x.sum(dim=1, keepdim=True)
            with contextlib.nullcontext() if k == accum - 1 else model.no_sync():  # all-reduce once per step
                micro = torch.nn.functional.mse_loss(model(x), y) / accum
                micro.backward()
            loss += micro.detach()
        optimizer.step()
        step += 1
        if tracking is not None:  # rank 0's share of the global batch: cheap, and comparable across world sizes
            tracking.log_metrics({"loss": loss.item(), "world_size": world}, step=step)

        # Every rank must agree, or some would enter the collective save while others keep training.
        event = torch.tensor([int(elastic_event_detected())], device=device)
        dist.all_reduce(event, op=dist.ReduceOp.MAX)
        if event.item() or step % args.checkpoint_every == 0 or step == args.steps:
            save()
        if event.item():
            if rank == 0:
                print(f"scaling event at step {step}: checkpointed, exiting for restart at the new world size")
            break

    if tracking is not None:
        tracking.end_run()
    dist.destroy_process_group()
    exit_without_finalizing(0)  # here, with the model still referenced: see exit_without_finalizing


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description="Elastic training with atomic checkpoints on FSx.")
    parser.add_argument("--checkpoint-dir", default=env("CHECKPOINT_DIR"))
    parser.add_argument("--global-batch-size", type=int, default=int(env("GLOBAL_BATCH_SIZE", "0")) or None)
    parser.add_argument("--micro-batch-size", type=int, default=int(env("MICRO_BATCH_SIZE", "1")))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--keep", type=int, default=2, help="complete checkpoints to keep")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--features", type=int, default=16)
    args = parser.parse_args(argv)
    if not args.checkpoint_dir or not args.global_batch_size:
        parser.error("--checkpoint-dir and --global-batch-size (or CHECKPOINT_DIR and GLOBAL_BATCH_SIZE) are required")
    return args


if __name__ == "__main__":
    train(parse_args())
