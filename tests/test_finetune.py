"""examples/finetune run for real on the CPU: data preparation, the elastic training loop through two resizes, and
the ROUGE evaluation, in the training venv (.venv-train, built by `make train-venv` from the hashed CPU lock; the
main venv stays free of torch). No network: a committed fixture dataset and a tiny random model from a config.

The elastic run: 2 processes train and take hyperpod-elastic-agent's elastic event (SIGUSR1 to one rank, agreed by
its elastic_event_detected() with HYPERPOD_SIGNAL_COORDINATION=distributed), checkpoint and exit; 3 processes
resume from that checkpoint and take a second event; 2 processes resume again and finish. A reference run of 1
process trains the same steps without interruption. Same global batch, same records at every step, same loss.
tests/finetune/workflow.py runs the steps in processes forked from one that has imported the heavy libraries once (the
second preparation in the driving process itself, for another hash seed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from support.paths import ROOT
from support.process_tree import run_or_dump_stacks

FINETUNE = ROOT / "examples" / "finetune"
TRAIN_VENV = ROOT / ".venv-train"
PYTHON = TRAIN_VENV / "bin" / "python"
FIXTURE = ROOT / "tests" / "fixtures" / "finetune" / "instructions.jsonl"
# The smallest global batch that every world size here (1, 2, 3) divides: its 12 steps (72 samples) cross the 21
# training records' epoch boundary three times, twice mid-step. The evaluation answers fewer prompts than the 8 held out.
GLOBAL_BATCH, STEPS, EVAL_SAMPLES = 6, 12, 4


def _venv() -> Path:
    if not (TRAIN_VENV / ".installed").is_file():
        pytest.fail("the training venv is missing: run `make train-venv` (make test builds it)")
    return PYTHON


def tiny_args(tmp: Path) -> Path:
    data = yaml.safe_load((FINETUNE / "args.yaml").read_text())
    data["name"] = "tiny-test"
    data["dataset"] = {
        "id": str(FIXTURE),
        "eval_samples": 8,
        "instruction_field": "instruction",
        "context_field": "context",
        "response_field": "response",
    }
    data["training"].update(
        max_seq_len=64,
        global_batch_size=GLOBAL_BATCH,
        micro_batch_size=1,
        max_steps=STEPS,
        learning_rate=0.01,
        warmup_steps=2,
        checkpoint_every=100,
        quantization="none",
        lora={"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"},
    )
    data["evaluation"] = {"samples": EVAL_SAMPLES, "max_new_tokens": 8}
    # MLflow publishes system metrics only for sampling intervals that end before the run does: a phase here
    # trains for about a second.
    data["mlflow"]["system_metrics_interval_seconds"] = 0.2
    data["slurm"].update(nodes=1, gpus_per_node=2)
    data["eks"].update(gpus_per_pod=1, elastic={"min_replicas": 1, "max_replicas": 3, "replica_increment_step": 1})
    path = tmp / "args.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _steps(progress: Path) -> list[dict]:
    return [json.loads(line) for line in progress.read_text().splitlines()] if progress.exists() else []


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """tests/finetune/workflow.py runs the steps (see its docstring: each is forked from a process that has imported
    torch, transformers, peft and MLflow once, the training runs under torch's elastic agent)."""
    python = _venv()
    tmp = tmp_path_factory.mktemp("finetune")
    request = tmp / "request.json"
    request.write_text(
        json.dumps({"tmp": str(tmp), "args": str(tiny_args(tmp)), "fixture": str(FIXTURE), "rouge_cases": ROUGE_INPUTS})
    )
    env = os.environ | {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    # This process's hash seed; the forkserver's is 1: the two preparations differ in it.
    env["PYTHONHASHSEED"] = "2"
    try:
        result = run_or_dump_stacks(
            [str(python), str(ROOT / "tests" / "finetune" / "workflow.py"), str(request)], env, 600
        )
    except pytest.fail.Exception as failed:
        pytest.fail(f"{failed}\n{_logs(tmp)}")
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}\n{_logs(tmp)}"
    paths = {"tmp": tmp, "work": tmp / "work", "ckpt": tmp / "checkpoints", "reference": tmp / "reference"}
    return paths | json.loads(result.stdout.splitlines()[-1])


def _logs(tmp: Path) -> str:
    """The ends of the steps' outputs (each forked step and rank writes its own)."""
    return "\n".join(f"--- {p.relative_to(tmp)}\n{p.read_text()[-3000:]}" for p in sorted(tmp.glob("logs/**/*.out")))


def _starts(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"event": "start"')]


# ---------------------------------------------------------------------------------------------- data preparation
def test_preparation_holds_out_eval_records_and_masks_prompts(workflow):
    data = workflow["work"] / "data"
    manifest = json.loads((data / "manifest.json").read_text())
    train = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    held = [json.loads(line) for line in (data / "eval.jsonl").read_text().splitlines()]
    records = FIXTURE.read_text().splitlines()
    kept = {r["id"] for r in train} | {r["id"] for r in held}
    dropped = set(range(len(records))) - kept
    assert manifest["records"] == len(records) == len(train) + len(held) + manifest["dropped_prompt_too_long"]
    assert len(dropped) == manifest["dropped_prompt_too_long"] > 0  # max_seq_len 64: the longest prompts go
    assert all(json.loads(records[i])["context"] for i in dropped)
    assert len(held) == 8 and not {r["id"] for r in train} & {r["id"] for r in held}
    for row in train + held:
        source = json.loads(records[row["id"]])
        assert row["response"] == source["response"]
        assert row["prompt"].startswith(f"### Instruction:\n{source['instruction']}\n\n")
        assert ("### Context:\n" in row["prompt"]) == bool(source["context"])
        assert row["prompt"].endswith("### Response:\n") and 0 < row["prompt_tokens"] < len(row["input_ids"]) <= 64


def test_preparation_is_deterministic(workflow):
    """Prepared twice, in two processes with different hash seeds: the same bytes."""
    first = (workflow["work"] / "data" / "train.jsonl").read_bytes()
    assert Path(workflow["prepared_again"]).read_bytes() == first


# ---------------------------------------------------------------------------------------------- elastic training
def test_each_phase_resumes_from_the_last_checkpoint_at_its_world_size(workflow):
    starts = [_starts(out)[0] for out in workflow["phases"]]
    assert [s["world_size"] for s in starts] == [2, 3, 2]
    assert [s["accumulation"] for s in starts] == [3, 2, 3]  # 6 / (world × micro batch 1)
    assert starts[0]["resumed_from"] is None and starts[0]["step"] == 0
    assert all(s["elastic_events"] == "hyperpod-elastic-agent (distributed)" for s in starts)
    assert all(s["fsdp_layer_groups"] == 2 for s in starts)
    progress = _steps(workflow["ckpt"] / "progress.jsonl")
    events = [p["step"] for p in progress if p["elastic_event"]]
    assert len(events) == 2 and events[0] < events[1] < STEPS
    assert starts[1]["resumed_from"] == f"step-{events[0]:09d}" and starts[1]["step"] == events[0]
    assert starts[2]["resumed_from"] == f"step-{events[1]:09d}" and starts[2]["step"] == events[1]


def test_global_batch_and_data_position_continue_across_resizes(workflow):
    progress = _steps(workflow["ckpt"] / "progress.jsonl")
    reference = _steps(workflow["reference"] / "progress.jsonl")
    assert [p["step"] for p in progress] == list(range(1, STEPS + 1))  # every step once, none lost or repeated
    first, second = [p["step"] for p in progress if p["elastic_event"]]
    assert [p["world_size"] for p in progress] == [2] * first + [3] * (second - first) + [2] * (STEPS - second)
    assert all(p["samples"] == GLOBAL_BATCH and p["samples_seen"] == p["step"] * GLOBAL_BATCH for p in progress)
    assert all(p["accumulation"] * p["world_size"] == GLOBAL_BATCH for p in progress)
    assert [r["world_size"] for r in reference] == [1] * STEPS
    # The records each step trained on, over all ranks, are the ones the uninterrupted run trained on.
    assert [p["rows_sha256"] for p in progress] == [r["rows_sha256"] for r in reference]
    assert [p["tokens"] for p in progress] == [r["tokens"] for r in reference]


def test_loss_curve_continues_where_it_was(workflow):
    progress = _steps(workflow["ckpt"] / "progress.jsonl")
    reference = _steps(workflow["reference"] / "progress.jsonl")
    for mine, theirs in zip(progress, reference, strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-4, abs=1e-5), mine["step"]
        assert mine["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=1e-3, abs=1e-6), mine["step"]
        assert mine["learning_rate"] == pytest.approx(theirs["learning_rate"], rel=1e-12)
    assert progress[-1]["loss"] < progress[0]["loss"]


def test_checkpoints_are_sharded_per_world_size_and_the_adapter_is_exported(workflow):
    ckpt = workflow["ckpt"]
    final = ckpt / f"step-{STEPS:09d}"
    meta = json.loads((final / "meta.json").read_text())
    assert meta | {"mlflow_run_id": None} == {
        "step": STEPS,
        "global_batch_size": GLOBAL_BATCH,
        "world_size": 2,
        "samples_seen": STEPS * GLOBAL_BATCH,
        "finished": True,
        "mlflow_run_id": None,
    }
    assert sorted(p.name for p in final.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert not list(ckpt.glob("*.tmp"))
    assert len([p for p in ckpt.glob("step-*")]) <= 2  # keep_checkpoints
    adapter = json.loads((ckpt / "adapter" / "adapter_config.json").read_text())
    assert (
        adapter["r"] == 4
        and adapter["lora_alpha"] == 8
        and (ckpt / "adapter" / "adapter_model.safetensors").stat().st_size
    )
    assert (ckpt / "DONE").is_file()


# ---------------------------------------------------------------------------------------------- MLflow
def test_one_mlflow_run_holds_params_every_step_system_metrics_and_rouge(workflow):
    (run,) = workflow["mlflow"]["runs"]
    progress = _steps(workflow["ckpt"] / "progress.jsonl")
    assert run["name"] == "tiny-test" and run["status"] == "FINISHED"
    assert run["params"]["training.global_batch_size"] == str(GLOBAL_BATCH)
    assert run["params"]["model.id"] == "Qwen/Qwen2.5-0.5B"
    loss = run["history"]["loss"]
    assert [step for step, _ in loss] == list(range(1, STEPS + 1))
    assert [value for _, value in loss] == pytest.approx([p["loss"] for p in progress])
    assert [v for _, v in run["history"]["world_size"]] == [p["world_size"] for p in progress]
    node = os.uname().nodename
    assert {f"system/{node}/cpu_utilization_percentage", f"system/{node}/system_memory_usage_megabytes"} <= set(
        run["metrics"]
    )
    rouge = json.loads((workflow["work"] / "eval" / "rouge.json").read_text())
    assert run["metrics"]["eval_finetuned_rougeLsum"] == pytest.approx(rouge["finetuned"]["rougeLsum"])
    assert run["metrics"]["eval_base_rouge1"] == pytest.approx(rouge["base"]["rouge1"])


# ---------------------------------------------------------------------------------------------- evaluation
def test_evaluation_scores_base_and_finetuned_answers(workflow):
    rouge = json.loads((workflow["work"] / "eval" / "rouge.json").read_text())
    predictions = [
        json.loads(line) for line in (workflow["work"] / "eval" / "predictions.jsonl").read_text().splitlines()
    ]
    held = [json.loads(line)["id"] for line in (workflow["work"] / "data" / "eval.jsonl").read_text().splitlines()]
    assert rouge["samples"] == len(predictions) == EVAL_SAMPLES < len(held)
    assert [p["id"] for p in predictions] == held[:EVAL_SAMPLES]
    for model in ("base", "finetuned"):
        assert set(rouge[model]) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
        assert all(0.0 <= v <= 1.0 for v in rouge[model].values())
    # evaluate.rouge over the fine-tuned answers written, in a process of its own: the scores written are theirs.
    assert workflow["recomputed_rouge"] == pytest.approx(rouge["finetuned"])


ROUGE_CASES = [
    # (prediction, reference, expected F1 by the definitions: unigram, bigram and longest-common-subsequence overlap)
    ("the cat sat", "the cat sat", {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0, "rougeLsum": 1.0}),
    ("dogs bark loudly", "the cat sat", {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0, "rougeLsum": 0.0}),
    # 2 of 3 unigrams, 1 of 2 bigrams, LCS 2
    ("the cat ran", "the cat sat", {"rouge1": 2 / 3, "rouge2": 1 / 2, "rougeL": 2 / 3, "rougeLsum": 2 / 3}),
    # order reversed: unigrams all match, no bigram, LCS 1; Lsum matches each line to the best sentence: also 1/3
    ("c b a", "a b c", {"rouge1": 1.0, "rouge2": 0.0, "rougeL": 1 / 3, "rougeLsum": 1 / 3}),
    # two sentences swapped: L sees one LCS of 2 in 4; Lsum scores per reference line: all 4 tokens found
    ("c d\na b", "a b\nc d", {"rouge1": 1.0, "rouge2": 2 / 3, "rougeL": 1 / 2, "rougeLsum": 1.0}),
]


# Each case's prediction and reference as evaluate.rouge takes them, then two predictions scored 1 and 0: their mean.
ROUGE_INPUTS = [*[([p], [r]) for p, r, _ in ROUGE_CASES], (["the cat sat", "dogs bark loudly"], ["the cat sat"] * 2)]


def test_rouge_matches_its_definitions(workflow):
    """evaluate.rouge over ROUGE_INPUTS, in a process forked by the workflow (what a process of the training venv
    imports for it, it has)."""
    *scores, mean = workflow["rouge_of_cases"]
    for (prediction, reference, expected), got in zip(ROUGE_CASES, scores, strict=True):
        assert got == pytest.approx(expected), (prediction, reference)
    assert mean["rouge1"] == pytest.approx(0.5)  # the mean of 1 and 0
