"""What the processes tests/finetune/workflow.py forks run: light to import, since the parent imports it to name these
functions to the forkserver, where warm_imports.py has already imported what they use."""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path

FINETUNE = Path(__file__).resolve().parents[2] / "examples" / "finetune"


def _output_to(path: Path) -> None:
    """This process's stdout and stderr into `path` (the file descriptors: what C code writes lands there too)."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _environment(env: dict[str, str | None]) -> None:
    if "warm_imports" not in sys.modules:  # the forkserver passes over a preload that raises ImportError
        raise RuntimeError("the forkserver has not imported warm_imports: import it in the training venv to see why")
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def train_worker(argv: list[str], env: dict[str, str | None], logs: str) -> int:
    """One rank of train.py, started by torch's elastic agent: its pid where the parent finds it to signal it, its
    output in a file of its rank. train.main, not the script's `__main__` line: that ends the process with os._exit,
    which the agent's multiprocessing start would wait on forever (the return value never arrives)."""
    rank = os.environ["RANK"]
    _environment(env)
    _output_to(Path(logs) / f"rank-{rank}.out")
    (Path(logs) / f"rank-{rank}.pid").write_text(str(os.getpid()))
    sys.path.insert(0, str(FINETUNE))
    import train

    return train.main(argv)


def script(path: str, argv: list[str], env: dict[str, str | None], output: str) -> None:
    """`python path argv...` in this forked process: the script as __main__, its exit status that of the process."""
    _environment(env)
    _output_to(Path(output))
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(path))  # as `python path` does
    runpy.run_path(path, run_name="__main__")


def rouge_of_predictions(predictions: str, output: str) -> None:
    """evaluate.rouge over predictions.jsonl's fine-tuned answers and their references."""
    sys.path.insert(0, str(FINETUNE))
    import evaluate

    rows = [json.loads(line) for line in Path(predictions).read_text().splitlines()]
    scores = evaluate.rouge([r["finetuned"] for r in rows], [r["reference"] for r in rows])
    _output_to(Path(output))
    print(json.dumps(scores))


def rouge_of_cases(cases: list[list[list[str]]], output: str) -> None:
    """evaluate.rouge of each (predictions, references) case."""
    sys.path.insert(0, str(FINETUNE))
    import evaluate

    scores = [evaluate.rouge(predictions, references) for predictions, references in cases]
    _output_to(Path(output))
    print(json.dumps(scores))
