"""A cli/ command's main() run in the test's process, as `python -m cli.<name> ARGS` runs it: the exit status and what it
printed. A fresh interpreter for each run costs ~0.4 s of CPU importing pydantic and boto3 again; tests/test_cli.py
starts every command once as a process of its own (its `__main__` block, the status and streams the shell sees).
`in_process` is the part app_main.py's run_app shares: a call's exit, as the interpreter would end a process with it."""

from __future__ import annotations

import importlib
import subprocess
from collections.abc import Callable, Sequence

import pytest


def in_process(
    args: list[str], call: Callable[[], int | None], capsys: pytest.CaptureFixture[str]
) -> subprocess.CompletedProcess:
    """`call()` with capsys's capture, as the process `args` would end: CompletedProcess(args, exit status, stdout,
    stderr). SystemExit's code is the status (a message, as `sys.exit("...")` gives, is printed to stderr with status
    1, as the interpreter does); any other exception is raised, as a traceback would end the process."""
    capsys.readouterr()
    try:
        code: int | str | None = call()
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    if isinstance(code, str):
        return subprocess.CompletedProcess(args, 1, out, f"{err}{code}\n")
    return subprocess.CompletedProcess(args, code or 0, out, err)


def run_main(module: str, argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess:
    """`module`'s main(argv) as `python -m module ARGV` runs it; argparse's exit (--help, a usage error) is its status."""
    return in_process(["python", "-m", module, *argv], lambda: importlib.import_module(module).main(list(argv)), capsys)
