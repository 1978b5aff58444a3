"""Step 1: download the base model (model.id at model.revision) from the Hugging Face Hub into work_dir/model.

    python download_model.py --args args.yaml --work-dir /fsx/...

Run it once, from a Studio space or a login node: every node then reads the same files from FSx instead of each
downloading them. Only the files a causal LM needs are fetched (weights as safetensors, configs, tokenizer). A gated
model needs HF_TOKEN in the environment. The revision is a commit, so the bytes are the same every time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from args import step_inputs

PATTERNS = ["*.json", "*.safetensors", "tokenizer.model", "*.txt", "*.tiktoken", "*.py"]


def main(argv: list[str] | None = None) -> int:
    a, layout = step_inputs(__doc__, argv)
    from huggingface_hub import snapshot_download  # a dependency of transformers

    path = snapshot_download(
        repo_id=a.model.id, revision=a.model.revision, local_dir=layout.model_dir, allow_patterns=PATTERNS
    )
    files = sorted(p.name for p in Path(path).iterdir() if p.is_file())
    if "config.json" not in files or not any(f.endswith(".safetensors") for f in files):
        raise SystemExit(f"{a.model.id}@{a.model.revision}: no config.json or safetensors weights in {files}")
    print(json.dumps({"model": a.model.id, "revision": a.model.revision, "dir": str(path), "files": files}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
