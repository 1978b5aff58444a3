"""The modules examples/finetune's steps import, imported once in the forkserver of tests/finetune/workflow.py
(forked_steps.py holds what its processes run). A process of the training venv spends most of its start importing torch,
transformers, peft and MLflow (~9 s of CPU each, docs/testing.md); a process forked from this server starts with
them in place. The steps' own code runs unchanged, each in a fresh process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

FINETUNE = Path(__file__).resolve().parents[2] / "examples" / "finetune"
sys.path.insert(0, str(FINETUNE))

# What train.py, evaluate.py and prepare_data.py import inside their functions, and tiny_model.py at its top. Not
# hyperpod_elastic_agent: it reads HYPERPOD_SIGNAL_COORDINATION and takes SIGUSR1 when imported, which train.py
# arranges in each worker.
import mlflow  # noqa: E402,F401
import peft  # noqa: E402,F401
import rouge_score.rouge_scorer  # noqa: E402,F401
import tokenizers  # noqa: E402,F401
import torch  # noqa: E402,F401
import torch.distributed.checkpoint  # noqa: E402,F401
import torch.distributed.checkpoint.state_dict  # noqa: E402,F401
import torch.distributed.fsdp  # noqa: E402,F401
import transformers  # noqa: E402,F401
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402,F401
from transformers.models.qwen2 import modeling_qwen2  # noqa: E402,F401

import evaluate  # noqa: E402,F401
import train  # noqa: E402,F401

if len(os.listdir("/proc/self/task")) != 1:
    # The forkserver forks this process for every worker: a thread here would be copied mid-flight.
    raise RuntimeError(f"the forkserver has {len(os.listdir('/proc/self/task'))} threads after its imports")
