"""A cli/ command's main() run in the test's process, as `python -m cli.<name> ARGS` runs it: the exit status and what it
printed. A fresh interpreter for each run costs ~0.4 s of CPU importing pydantic and boto3 again; tests/test_cli.py
starts every command once as a process of its own (its `__main__` block, the status and streams the shell sees)."""

from __future__ import annotations

import importlib
import subprocess
from collections.abc import Sequence

import pytest


def run_main(module: str, argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess:
    """`module`'s main(argv) with capsys's capture: CompletedProcess(args, exit status, stdout, stderr). argparse's exit
    (--help, a usage error) is its status; any other exception is raised, as a traceback would end the process."""
    capsys.readouterr()
    try:
        code = importlib.import_module(module).main(list(argv))
    except SystemExit as exit:
        code = exit.code
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(
        ["python", "-m", module, *argv], 0 if code is None else code, captured.out, captured.err
    )
