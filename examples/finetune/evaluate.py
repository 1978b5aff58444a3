"""Step 4: ROUGE-1/2/L/Lsum of the fine-tuned model against the base model on the held-out records.

    python evaluate.py --args args.yaml --work-dir W --checkpoint-dir C

Both models answer the first evaluation.samples prompts of data/eval.jsonl greedily (deterministic), and
rouge-score (Google's ROUGE-1.5.5 reimplementation, Porter stemming) compares each answer with the reference.
ROUGE-Lsum treats each line as a sentence. Writes eval/predictions.jsonl and eval/rouge.json and, when the run
logged to MLflow, adds the scores to that run. One process: a GPU if there is one, else the CPU.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from args import Args, Layout, step_inputs
from prepare_data import read_jsonl

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def rouge(predictions: list[str], references: list[str]) -> dict[str, float]:
    """Mean F1 of each ROUGE type over the pairs."""
    from rouge_score import rouge_scorer

    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for prediction, reference in zip(predictions, references, strict=True):
        scores = scorer.score(reference, prediction)  # (target, prediction)
        for kind in ROUGE_TYPES:
            totals[kind] += scores[kind].fmeasure
    return {kind: totals[kind] / len(predictions) for kind in ROUGE_TYPES}


def generate(model, tokenizer, rows: list[dict], max_new_tokens: int, device) -> list[str]:
    import torch

    answers = []
    for row in rows:
        prompt = torch.tensor([row["input_ids"][: row["prompt_tokens"]]], device=device)
        with torch.no_grad():
            out = model.generate(
                input_ids=prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            )
        answers.append(tokenizer.decode(out[0, prompt.shape[1] :], skip_special_tokens=True).strip())
    return answers


def evaluate(a: Args, layout: Layout) -> dict:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (layout.adapter_dir / "adapter_config.json").is_file():
        raise SystemExit(f"{layout.adapter_dir}: no adapter; train.py writes it when training reaches max_steps")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    rows = read_jsonl(layout.data_dir / "eval.jsonl")[: a.evaluation.samples]
    references = [r["response"] for r in rows]
    tokenizer = AutoTokenizer.from_pretrained(layout.model_dir)
    model = AutoModelForCausalLM.from_pretrained(layout.model_dir, dtype=dtype).to(device).eval()
    answers = {"base": generate(model, tokenizer, rows, a.evaluation.max_new_tokens, device)}
    model = PeftModel.from_pretrained(model, layout.adapter_dir).to(device).eval()
    answers["finetuned"] = generate(model, tokenizer, rows, a.evaluation.max_new_tokens, device)

    scores = {name: rouge(predictions, references) for name, predictions in answers.items()}
    result = {
        "samples": len(rows),
        "model": a.model.id,
        "adapter": str(layout.adapter_dir),
        **scores,
        "improvement": {k: scores["finetuned"][k] - scores["base"][k] for k in ROUGE_TYPES},
    }
    layout.eval_dir.mkdir(parents=True, exist_ok=True)
    with open(layout.eval_dir / "predictions.jsonl", "w") as f:
        f.writelines(
            json.dumps(
                {
                    "id": row["id"],
                    "prompt": row["prompt"],
                    "reference": row["response"],
                    "base": base,
                    "finetuned": tuned,
                },
                sort_keys=True,
            )
            + "\n"
            for row, base, tuned in zip(rows, answers["base"], answers["finetuned"], strict=True)
        )
    (layout.eval_dir / "rouge.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    log_to_mlflow(a, layout, scores)
    return result


def log_to_mlflow(a: Args, layout: Layout, scores: dict[str, dict[str, float]]) -> None:
    uri = a.mlflow.tracking_arn or os.environ.get("MLFLOW_TRACKING_URI", "")
    run_id = None
    for meta in sorted(layout.checkpoint_dir.glob("step-*/meta.json")):
        run_id = json.loads(meta.read_text()).get("mlflow_run_id") or run_id
    if not uri or not run_id:
        return
    import mlflow

    mlflow.set_tracking_uri(uri)
    with mlflow.start_run(run_id=run_id):
        mlflow.log_metrics(
            {f"eval_{name}_{kind}": value for name, kinds in scores.items() for kind, value in kinds.items()}
        )
        mlflow.log_artifact(str(layout.eval_dir / "rouge.json"))


def main(argv: list[str] | None = None) -> int:
    a, layout = step_inputs(__doc__, argv)
    result = evaluate(a, layout)
    print(json.dumps({k: result[k] for k in ("base", "finetuned", "improvement")}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
