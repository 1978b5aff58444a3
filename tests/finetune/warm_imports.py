"""The modules examples/finetune's steps import, imported once in the forkserver of tests/finetune/workflow.py
(forked_steps.py holds what its processes run). A process of the training venv spends most of its start importing torch,
transformers, peft and MLflow (~9 s of CPU each, docs/testing.md); a process forked from this server starts with
them in place. The steps' own code runs unchanged, each in a fresh process.

The garbage collector is off during the imports (they make no garbage worth collecting; its passes over the growing
heap cost ~1 s of CPU) and what they made is then frozen (gc.freeze): a forked step's collections no longer walk the
server's ~800,000 objects, each walk writing to the header of every one and so copying the heap page by page (~0.3 s
of rank 0's checkpoint save went to one such collection).
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

gc.disable()

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
from transformers.conversion_mapping import get_checkpoint_conversion_mapping  # noqa: E402
from transformers.models.qwen2 import modeling_qwen2  # noqa: E402,F401

import evaluate  # noqa: E402,F401
import train  # noqa: E402,F401

# The table of checkpoint conversions transformers builds on a process's first from_pretrained (~750 compiled patterns).
get_checkpoint_conversion_mapping("qwen2")

gc.freeze()
gc.enable()

if len(os.listdir("/proc/self/task")) != 1:
    # The forkserver forks this process for every worker: a thread here would be copied mid-flight.
    raise RuntimeError(f"the forkserver has {len(os.listdir('/proc/self/task'))} threads after its imports")
