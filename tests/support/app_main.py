"""app.py run in the test's process, as `python app.py` runs it under the CDK CLI: its exit status and output. A
process of its own pays Python's imports, Node.js and aws-cdk-lib's start again (~2-3 s of CPU);
tests/test_config_loading.py runs app.py once as that process (CDK_CONTEXT_JSON in, the exit status and stderr the
CLI sees)."""

from __future__ import annotations

import functools
import runpy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.cli_main import in_process
from support.paths import ROOT


def run_app(
    context: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    outdir: Path | None = None,
) -> subprocess.CompletedProcess:
    """app.py as `__main__` from the repository root, its App given `context` (what the CLI passes in
    CDK_CONTEXT_JSON) and `outdir` (CDK_OUTDIR): CompletedProcess(args, exit status, stdout, stderr). An exception
    other than the app's exit is raised, as a traceback would end the process."""
    import aws_cdk

    given: dict[str, Any] = {"context": context} | ({"outdir": str(outdir)} if outdir is not None else {})

    def run() -> None:
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")

    with monkeypatch.context() as patch:
        patch.chdir(ROOT)
        patch.setattr(aws_cdk, "App", functools.partial(aws_cdk.App, **given))
        return in_process(["python", "app.py"], run, capsys)
