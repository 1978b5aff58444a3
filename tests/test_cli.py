"""The user commands (cli/) as people run them: each has --help, and each that cannot do its job says why in one line
on stderr and exits non-zero, never with a traceback and never by reporting every check as skipped.

No AWS credentials here means what a fresh laptop or CI has: no AWS_* variables, config and credentials files that
hold nothing, and no instance metadata."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.moto_server import no_credentials_env
from support.paths import ROOT

COMMANDS = (
    "preflight",
    "connect",
    "replacement_guard",
    "template_replacements",
    "stack_graph",
    "summarize",
    "sizing",
    "destroy",
    "watch",
    "status",
    "logs",
    "diagnose",
    "attach",
)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env or no_credentials_env(), capture_output=True, text=True, timeout=120
    )


def test_every_command_module_is_listed():
    """Every module of cli/ that runs as `python -m cli.<name>` is a command tested here; the others are libraries."""
    runnable = sorted(p.stem for p in (ROOT / "cli").glob("*.py") if 'if __name__ == "__main__"' in p.read_text())
    assert runnable == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command):
    result = run("-m", f"cli.{command}", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m cli.{command} ")
    assert result.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ("-m", "cli.preflight", "--config", "config/default.yaml"),
        ("-m", "cli.connect", "--config", "config/default.yaml", "controller"),
        ("-m", "cli.connect", "--config", "config/default.yaml", "login", "--print"),
        ("-m", "cli.replacement_guard", "diff"),
        ("-m", "cli.replacement_guard", "deploy"),
        ("-m", "cli.replacement_guard", "plan"),
        ("-m", "cli.status", "--config", "config/default.yaml"),
        ("-m", "cli.logs", "--config", "config/default.yaml", "worker-group-1:0"),
        ("-m", "cli.logs", "--config", "config/default.yaml", "--follow"),
        ("-m", "cli.diagnose", "--config", "config/default.yaml"),
        ("-m", "cli.diagnose", "--config", "config/default.yaml", "--bundle"),
        ("-m", "cli.watch", "ml-cluster"),
    ],
    ids=[
        "preflight",
        "connect",
        "connect-print",
        "diff",
        "deploy",
        "plan",
        "status",
        "logs",
        "logs-follow",
        "diagnose",
        "diagnose-bundle",
        "watch",
    ],
)
def test_without_credentials_one_line_and_a_failure(args):
    """Before: `make preflight` printed six CANNOT CHECK lines and exited 0, `make connect` ended in a
    NoCredentialsError traceback. deploy and diff stop before their synth."""
    result = run(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "no AWS credentials" in lines[0] and "Traceback" not in result.stderr


def test_an_unknown_profile_is_one_line():
    result = run("-m", "cli.preflight", "--profile", "nobody-has-this")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "preflight: nothing checked for config/default.yaml: The config profile (nobody-has-this) could not be found\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ("-m", "cli.stack_graph", "{missing}"),
        ("-m", "cli.summarize", "{missing}", "--config", "config/default.yaml"),
        ("-m", "cli.template_replacements", "{missing}", "{missing}"),
        ("-m", "cli.destroy", "{missing}"),
    ],
    ids=["graph", "summarize", "template_replacements", "destroy"],
)
def test_without_a_synthesized_assembly_one_line_and_a_failure(args, tmp_path):
    missing = tmp_path / "cdk.out"
    result = run(*(a.format(missing=missing) for a in args))
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr == f"{args[1].split('.')[1]}: {missing}/manifest.json not found: no synthesized assembly "
        "there; run `make synth` first\n"
    )


@pytest.mark.parametrize("command", ["preflight", "sizing", "summarize"])
def test_a_refused_config_names_the_key_and_what_is_allowed_and_fails(command, tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("name: demo\nbogus_key: 7\n")
    assembly = tmp_path / "cdk.out"  # summarize reads the config after the assembly
    assembly.mkdir()
    (assembly / "manifest.json").write_text('{"artifacts": {}}')
    result = run("-m", f"cli.{command}", *([str(assembly)] if command == "summarize" else []), "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        f"1 configuration error(s) in {config}:\n  - bogus_key: unknown key; allowed here: name, orchestrator,"
    ), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "target, module",
    [
        ("preflight", "cli.preflight"),
        ("connect", "cli.connect"),
        ("deploy", "cli.replacement_guard deploy"),
        ("diff", "cli.replacement_guard diff"),
        ("graph", "cli.stack_graph"),
        ("plan", "cli.replacement_guard plan"),
        ("status", "cli.status"),
        ("logs", "cli.logs"),
        ("diagnose", "cli.diagnose"),
        ("synth", "cli.summarize"),
        ("destroy", "cli.destroy"),
    ],
)
def test_make_targets_run_the_cli_commands(target, module):
    """What `make <target>` runs (dry run: nothing executes; the install steps count as done)."""
    result = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "-o", "node_modules/.installed", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert f"-m {module}" in result.stdout


def test_nothing_in_tools_is_a_user_command():
    """Every Makefile target a user runs goes through cli/; tools/ is for maintainers."""
    makefile = (ROOT / "Makefile").read_text()
    for command in COMMANDS:
        assert not Path(ROOT / "tools" / f"{command}.py").exists()
        assert f"tools/{command}.py" not in makefile
