"""Step 3: LoRA fine-tuning (QLoRA on GPUs) under FSDP2, elastic across world sizes, logged to MLflow.

    torchrun --nproc-per-node=N train.py --args args.yaml --work-dir W --checkpoint-dir C     (Slurm, local)
    hyperpodrun --nproc-per-node=N --rdzv-backend=hyperpod train.py ...                       (HyperPodPyTorchJob)

What makes a resize safe (the helpers come from ../train_elastic.py):
- The global batch is constant: each rank runs global_batch / (world_size × micro_batch) micro-batches per step
  and the loss is normalised by the step's token count over all ranks, so a step computes the same gradient at every
  world size (up to floating-point summation order).
- The data position is a count of samples: step N trains global samples N·G … (N+1)·G-1, each mapped to a record by a
  seeded per-epoch permutation, whatever the world size was.
- Checkpoints are PyTorch Distributed Checkpoints of the sharded LoRA weights and optimizer state, written to
  `step-N.tmp` and published by renaming it; on start every rank loads the newest complete one, resharded to the
  current world size.
- HyperPod's elastic agent announces a resize with SIGUSR1; `elastic_event_detected()` of hyperpod-elastic-agent
  agrees on it across ranks when HYPERPOD_SIGNAL_COORDINATION=distributed (1.1.3 returns False otherwise), so every
  rank checkpoints at the same step and exits; the operator restarts the job at the new size.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import signal
import socket
import sys
import time
from dataclasses import asdict
from pathlib import Path
from collections.abc import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/: train_elastic.py
sys.path.insert(0, str(Path(__file__).resolve().parent))

from args import Args, Layout, step_inputs
from prepare_data import read_jsonl
from train_elastic import (
    accumulation_steps,
    checkpoint_name,
    commit_checkpoint,
    exit_without_finalizing,
    prune_checkpoints,
    rank_samples,
    remove_partial,
    resumable_checkpoint,
)

PROGRESS = "progress.jsonl"
DONE = "DONE"


# ---------------------------------------------------------------------------------------------- plain helpers
def learning_rate(step: int, lr: float, warmup: int, max_steps: int, min_ratio: float) -> float:
    """Linear warm-up over `warmup` steps, then cosine decay to lr·min_ratio at max_steps: a function of the step
    alone, so nothing about the schedule needs saving."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, max_steps - warmup)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


class SampleOrder:
    """Global sample index -> record index: a seeded permutation of the records for every epoch."""

    def __init__(self, records: int, seed: int):
        self.records, self.seed, self._epoch, self._order = records, seed, -1, []

    def __call__(self, sample: int) -> int:
        epoch, position = divmod(sample, self.records)
        if epoch != self._epoch:
            self._order = list(range(self.records))
            random.Random(f"{self.seed}:{epoch}").shuffle(self._order)
            self._epoch = epoch
        return self._order[position]


def flatten(prefix: str, value) -> dict[str, str]:
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out |= flatten(f"{prefix}.{k}" if prefix else k, v)
        return out
    return {prefix: ",".join(value) if isinstance(value, (list, tuple)) else str(value)}


# ---------------------------------------------------------------------------------------------- elastic event
def elastic_event_source() -> tuple[Callable[[], bool], str]:
    """hyperpod-elastic-agent's elastic_event_detected() where the image has the agent, else the same contract
    (SIGUSR1, agreed across ranks) without it. Call on every rank at the same point: it is a collective."""
    os.environ.setdefault("HYPERPOD_SIGNAL_COORDINATION", "distributed")  # read when the agent's module is imported
    try:
        from hyperpod_elastic_agent.elastic_event_handler import elastic_event_detected
    except ImportError:
        import torch
        import torch.distributed as dist

        received = {"usr1": False}
        signal.signal(signal.SIGUSR1, lambda *_: received.update(usr1=True))

        def detected() -> bool:
            flag = torch.tensor(
                [1.0 if received["usr1"] else 0.0],
                device=f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu",
            )
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            return flag.item() > 0

        return detected, "SIGUSR1 handler of train.py (hyperpod-elastic-agent not installed)"
    mode = os.environ["HYPERPOD_SIGNAL_COORDINATION"]
    if mode != "distributed":
        print(
            f"warning: HYPERPOD_SIGNAL_COORDINATION={mode}: hyperpod-elastic-agent will report no elastic "
            "event, and a resize stops the job after its graceful shutdown timeout without a checkpoint",
            file=sys.stderr,
        )
    return elastic_event_detected, f"hyperpod-elastic-agent ({mode})"


# ---------------------------------------------------------------------------------------------- MLflow
class Tracker:
    """MLflow on rank 0 (parameters, per-step metrics) and on each node's local rank 0 (system metrics), all in one
    run that survives restarts: its id is kept in the checkpoint. Off unless mlflow.tracking_arn or
    MLFLOW_TRACKING_URI is set; the ARN form needs the sagemaker-mlflow plugin (in the image)."""

    def __init__(self, a: Args, *, rank: int, local_rank: int, run_id: str | None):
        self.uri = a.mlflow.tracking_arn or os.environ.get("MLFLOW_TRACKING_URI", "")
        self.rank, self.mlflow, self.run_id = rank, None, run_id
        if not self.uri or local_rank != 0:
            return
        import mlflow

        mlflow.set_tracking_uri(self.uri)
        mlflow.set_experiment(a.mlflow.experiment)
        mlflow.set_system_metrics_sampling_interval(a.mlflow.system_metrics_interval_seconds)
        mlflow.set_system_metrics_samples_before_logging(1)
        mlflow.set_system_metrics_node_id(socket.gethostname())
        self.mlflow = mlflow
        if rank == 0:
            run = mlflow.start_run(run_id=run_id, run_name=None if run_id else a.name, log_system_metrics=True)
            self.run_id = run.info.run_id
            if run_id is None:
                mlflow.log_params(flatten("", asdict(a)))

    def attach(self, run_id: str | None) -> None:
        """Other nodes' local rank 0 joins the run rank 0 made, for their system metrics."""
        if self.mlflow is not None and self.rank != 0 and run_id:
            self.run_id = run_id
            self.mlflow.start_run(run_id=run_id, log_system_metrics=True)

    def log(self, metrics: dict[str, float], step: int) -> None:
        if self.mlflow is not None and self.rank == 0:
            self.mlflow.log_metrics(metrics, step=step)

    def close(self) -> None:
        if self.mlflow is not None:
            self.mlflow.end_run()


# ---------------------------------------------------------------------------------------------- model
def load_model(a: Args, layout: Layout, device, quantize: bool):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    kwargs: dict = {"dtype": torch.bfloat16 if device.type == "cuda" else torch.float32}
    if quantize:
        from transformers import BitsAndBytesConfig

        # 4-bit NF4 base weights stored as bf16 bytes, so FSDP shards them like any bf16 tensor (QLoRA).
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
            bnb_4bit_quant_storage=torch.bfloat16,
        )
        kwargs["device_map"] = {"": device}
    model = AutoModelForCausalLM.from_pretrained(layout.model_dir, **kwargs)
    model.config.use_cache = False
    if quantize:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    lora = a.training.lora
    targets = "all-linear" if lora.target_modules == ("all-linear",) else list(lora.target_modules)
    torch.manual_seed(a.training.seed)  # identical adapter initialisation on every rank
    return get_peft_model(
        model,
        LoraConfig(
            r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets, task_type="CAUSAL_LM"
        ),
    )


def shard(model, device) -> None:
    """FSDP2: one group per decoder layer (the classes transformers lists in _no_split_modules), then the rest."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    base = model.get_base_model()
    layer_classes = set(getattr(base, "_no_split_modules", None) or [])
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if device.type == "cuda"
        else MixedPrecisionPolicy()
    )
    layers = [m for m in model.modules() if type(m).__name__ in layer_classes]
    for layer in layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return len(layers)


def collate(rows: list[dict], pad_id: int):
    """Right-padded input ids, attention mask, and labels that score only the response tokens."""
    import torch

    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"])
        mask[i, :n] = 1
        labels[i, r["prompt_tokens"] : n] = ids[i, r["prompt_tokens"] : n]
    return ids, mask, labels


# ---------------------------------------------------------------------------------------------- training
def train(a: Args, layout: Layout) -> int:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = a.training
    accum = accumulation_steps(t.global_batch_size, world, t.micro_batch_size)
    detected, event_source = elastic_event_source()
    quantize = t.quantization == "4bit" or (t.quantization == "auto" and cuda)
    if quantize and not cuda:
        raise SystemExit("training.quantization: '4bit' — QLoRA needs GPUs (bitsandbytes); use auto or none on CPUs")

    rows = read_jsonl(layout.data_dir / "train.jsonl")
    order = SampleOrder(len(rows), t.seed)
    model = load_model(a, layout, device, quantize)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else model.config.eos_token_id
    layers = shard(model, device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=t.learning_rate, weight_decay=t.weight_decay)
    options = StateDictOptions(ignore_frozen_params=True)  # the frozen base comes from model_dir

    root = layout.checkpoint_dir
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        remove_partial(root)
    dist.barrier()
    step, run_id = 0, None
    latest, meta = resumable_checkpoint(
        root, t.global_batch_size, "keep training.global_batch_size or use a new checkpoint dir"
    )
    if latest is not None:
        model_state, optim_state = get_state_dict(model, optimizer, options=options)
        state = {"model": model_state, "optimizer": optim_state}
        dcp.load(state, checkpoint_id=str(latest))  # resharded to this world size
        # Not strict: the state holds only the trainable weights; dcp.load above fails if any of them is missing.
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
            options=StateDictOptions(ignore_frozen_params=True, strict=False),
        )
        step, run_id = meta["step"], meta.get("mlflow_run_id")

    tracker = Tracker(a, rank=rank, local_rank=local_rank, run_id=run_id)
    shared = [tracker.run_id]
    dist.broadcast_object_list(shared, src=0)
    tracker.attach(shared[0])
    if rank == 0:
        print(
            json.dumps(
                {
                    "event": "start",
                    "step": step,
                    "world_size": world,
                    "accumulation": accum,
                    "fsdp_layer_groups": layers,
                    "quantized": quantize,
                    "elastic_events": event_source,
                    "resumed_from": latest.name if latest else None,
                    "records": len(rows),
                }
            ),
            flush=True,
        )

    def save(finished: bool) -> None:
        tmp = root / f"{checkpoint_name(step)}.tmp"
        model_state, optim_state = get_state_dict(model, optimizer, options=options)
        dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(tmp))
        dist.barrier()  # every shard is on disk before rank 0 publishes the directory
        if rank == 0:
            commit_checkpoint(
                tmp,
                {
                    "step": step,
                    "global_batch_size": t.global_batch_size,
                    "world_size": world,
                    "samples_seen": step * t.global_batch_size,
                    "finished": finished,
                    "mlflow_run_id": tracker.run_id,
                },
            )
            prune_checkpoints(root, t.keep_checkpoints)
        dist.barrier()

    event = False
    while step < t.max_steps:
        started = time.perf_counter()
        lr = learning_rate(step, t.learning_rate, t.warmup_steps, t.max_steps, t.min_lr_ratio)
        for group in optimizer.param_groups:
            group["lr"] = lr
        micro = rank_samples(step, t.global_batch_size, world, rank, t.micro_batch_size)
        used = [order(s) for samples in micro for s in samples]
        batches = [collate([rows[order(s)] for s in samples], pad_id) for samples in micro]
        # Tokens scored and samples trained in this step, over all ranks (on the device: NCCL reduces GPU tensors).
        counts = torch.tensor(
            [float(sum(int((b[2][:, 1:] != -100).sum()) for b in batches)), float(len(used))], device=device
        )
        dist.all_reduce(counts)
        step_tokens = counts[0].item()
        loss_sum = torch.zeros((), dtype=torch.float32, device=device)
        for k, (ids, mask, labels) in enumerate(batches):
            model.set_requires_gradient_sync(k == accum - 1)  # reduce-scatter once per step
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            token_loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(),
                labels[:, 1:].flatten().to(device),
                ignore_index=-100,
                reduction="sum",
            )
            # FSDP averages gradients over ranks; × world turns that into the sum over all tokens of the step.
            (token_loss * world / step_tokens).backward()
            loss_sum += token_loss.detach().float()
        grad_norm = torch.nn.utils.clip_grad_norm_(trainable, t.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1

        dist.all_reduce(loss_sum)
        rows_used: list = [None] * world
        dist.all_gather_object(rows_used, used)
        event = detected()
        metrics = {
            "loss": loss_sum.item() / step_tokens,
            "learning_rate": lr,
            "grad_norm": float(grad_norm),
            "tokens": step_tokens,
            "samples": counts[1].item(),
            "samples_seen": step * t.global_batch_size,
            "world_size": world,
            "accumulation": accum,
            "step_seconds": time.perf_counter() - started,
        }
        if rank == 0:
            record = metrics | {
                "step": step,
                "rows_sha256": hashlib.sha256(
                    json.dumps(sorted(r for part in rows_used for r in part)).encode()
                ).hexdigest(),
                "elastic_event": event,
            }
            with open(root / PROGRESS, "a") as f:
                f.write(json.dumps(record, sort_keys=True) + "\n")
            print(json.dumps(record, sort_keys=True), flush=True)
        tracker.log(metrics, step)
        if event or step % t.checkpoint_every == 0 or step == t.max_steps:
            save(finished=step == t.max_steps)
        if event:
            if rank == 0:
                print(
                    json.dumps(
                        {
                            "event": "elastic",
                            "step": step,
                            "world_size": world,
                            "action": "checkpointed; exiting for the restart at the new world size",
                        }
                    ),
                    flush=True,
                )
            break

    if step == t.max_steps and not event:
        export_adapter(model, layout, rank)
    tracker.close()
    dist.barrier()
    dist.destroy_process_group()
    return 0


def export_adapter(model, layout: Layout, rank: int) -> None:
    """The LoRA adapter in PEFT's format (adapter_config.json, adapter_model.safetensors) for evaluate.py and
    serving, gathered from the shards on rank 0; DONE marks the run as finished."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=True)
    )
    if rank == 0:
        model.save_pretrained(layout.adapter_dir, state_dict=state)
        (layout.checkpoint_dir / DONE).write_text(json.dumps({"adapter": str(layout.adapter_dir)}) + "\n")


def main(argv: list[str] | None = None) -> int:
    a, layout = step_inputs(__doc__, argv)
    return train(a, layout)


if __name__ == "__main__":
    exit_without_finalizing(main())  # the rank is done; see train_elastic.exit_without_finalizing
