"""Step 2: turn the instruction dataset into tokenized training and evaluation files on FSx.

    python prepare_data.py --args args.yaml --work-dir /fsx/...      (after download_model.py: it needs the tokenizer)

Reads dataset.file of the Hub dataset at dataset.revision (or a local .jsonl), holds out dataset.eval_samples
records chosen by a seeded hash of each record's position, formats each record as a prompt and a response, and writes
work_dir/data/{train,eval}.jsonl and manifest.json (counts, source, sha256 of each file). The same inputs give the
same bytes. Runs on a CPU in a Studio space; needs transformers (for the tokenizer), not torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from collections.abc import Iterable

from args import Args, Layout, step_inputs

PROMPT = "### Instruction:\n{instruction}\n\n{context}### Response:\n"
CONTEXT = "### Context:\n{context}\n\n"


def format_prompt(instruction: str, context: str = "") -> str:
    return PROMPT.format(
        instruction=instruction.strip(), context=CONTEXT.format(context=context.strip()) if context.strip() else ""
    )


def read_jsonl(path: Path) -> list[dict]:
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{number}: not JSON ({exc.msg})") from None
    return records


def fetch_dataset(a: Args, layout: Layout) -> Path:
    """The dataset file: the local path, or the Hub file at the pinned revision (downloaded once into work_dir)."""
    if a.dataset.id.startswith("/"):
        return Path(a.dataset.id)
    from huggingface_hub import hf_hub_download  # a dependency of transformers

    return Path(
        hf_hub_download(
            repo_id=a.dataset.id,
            repo_type="dataset",
            filename=a.dataset.file,
            revision=a.dataset.revision,
            local_dir=layout.work_dir / "raw",
        )
    )


def split_key(seed: int, index: int) -> str:
    return hashlib.sha256(f"{seed}:{index}".encode()).hexdigest()


def examples(a: Args, records: list[dict]) -> Iterable[dict]:
    d = a.dataset
    for index, record in enumerate(records):
        missing = [f for f in (d.instruction_field, d.response_field) if not isinstance(record.get(f), str)]
        if missing:
            raise SystemExit(
                f"record {index}: no string field {', '.join(missing)}; set dataset.instruction_field "
                f"and dataset.response_field to this dataset's keys ({', '.join(sorted(record))})"
            )
        context = record.get(d.context_field, "") if d.context_field else ""
        yield {
            "id": index,
            "prompt": format_prompt(record[d.instruction_field], context or ""),
            "response": record[d.response_field].strip(),
        }


def tokenize(example: dict, tokenizer, max_seq_len: int) -> dict | None:
    """input_ids = [bos] prompt response eos, truncated to max_seq_len; None when the prompt alone does not fit."""
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    prompt = bos + tokenizer(example["prompt"], add_special_tokens=False)["input_ids"]
    response = tokenizer(example["response"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    if len(prompt) >= max_seq_len:
        return None
    return example | {"input_ids": (prompt + response)[:max_seq_len], "prompt_tokens": len(prompt)}


def write_jsonl_atomic(path: Path, rows: list[dict]) -> str:
    tmp = path.with_name(path.name + ".tmp")
    data = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode()
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def prepare(a: Args, layout: Layout) -> dict:
    from transformers import AutoTokenizer

    source = fetch_dataset(a, layout)
    records = read_jsonl(source)
    if a.dataset.max_samples:
        records = records[: a.dataset.max_samples]
    if len(records) <= a.dataset.eval_samples:
        raise SystemExit(
            f"dataset.eval_samples: {a.dataset.eval_samples} — the dataset has only {len(records)} "
            "records; hold out fewer so some remain for training"
        )
    tokenizer = AutoTokenizer.from_pretrained(layout.model_dir)
    if tokenizer.eos_token_id is None:
        raise SystemExit(f"{layout.model_dir}: the tokenizer has no eos token; the model cannot learn to stop")
    held_out = set(sorted(range(len(records)), key=lambda i: split_key(a.training.seed, i))[: a.dataset.eval_samples])
    splits: dict[str, list[dict]] = {"train": [], "eval": []}
    dropped = 0
    for example in examples(a, records):
        row = tokenize(example, tokenizer, a.training.max_seq_len)
        if row is None:
            dropped += 1
            continue
        splits["eval" if example["id"] in held_out else "train"].append(row)
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "source": a.dataset.id,
        "revision": a.dataset.revision,
        "file": a.dataset.file,
        "records": len(records),
        "dropped_prompt_too_long": dropped,
        "max_seq_len": a.training.max_seq_len,
        "seed": a.training.seed,
        "tokenizer": str(layout.model_dir),
        "splits": {},
    }
    for name, rows in splits.items():
        digest = write_jsonl_atomic(layout.data_dir / f"{name}.jsonl", rows)
        manifest["splits"][name] = {
            "examples": len(rows),
            "tokens": sum(len(r["input_ids"]) for r in rows),
            "sha256": digest,
        }
    (layout.data_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    a, layout = step_inputs(__doc__, argv)
    manifest = prepare(a, layout)
    print(json.dumps(manifest["splits"], sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
