"""Writes a tiny, randomly initialised causal LM and its tokenizer into a model directory, as download_model.py
would: no download. The tokenizer is a byte-level BPE of 400 tokens trained on the fixture's own text; the model is a Qwen2
(the default model's architecture) of two layers, from a config and a fixed seed.

Usage (in the training venv): python tiny_model.py FIXTURE.jsonl MODEL_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]


def main(fixture: Path, out: Path) -> None:
    texts = []
    for line in fixture.read_text().splitlines():
        record = json.loads(line)
        texts += [record["instruction"], record["context"], record["response"], "### Instruction: Context: Response:"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.save_pretrained(out)
    torch.manual_seed(1234)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    Qwen2ForCausalLM(config).save_pretrained(out)
    print(json.dumps({"vocab": len(fast), "parameters": sum(p.numel() for p in Qwen2ForCausalLM(config).parameters())}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
