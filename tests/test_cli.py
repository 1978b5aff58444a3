"""The user commands (cli/) as people run them: each has --help, and each that cannot do its job says why in one line
on stderr and exits non-zero, never with a traceback and never by reporting every check as skipped.

No AWS credentials here means what a fresh laptop or CI has: no AWS_* variables, config and credentials files that
hold nothing, and no instance metadata."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_main import run_main
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


# One case per command runs as `python -m cli.<name>` in an interpreter of its own: the exit status, stdout and stderr
# the shell sees, through the module's `__main__` block (a failing case, so that the status reaching the shell is not
# just 0). The other cases call the same main() in this process with the same environment: what they check is main()'s
# behaviour, and a fresh interpreter importing boto3 and pydantic costs ~0.4 s of CPU each. A traceback there is an
# exception out of main(), which fails the test as it would fail the process.
IN_A_PROCESS = {
    ("-m", "cli.attach", "--help"),  # attach's entry point is run(), not main()
    ("-m", "cli.preflight", "--config", "config/default.yaml"),
    ("-m", "cli.connect", "--config", "config/default.yaml", "controller"),
    ("-m", "cli.replacement_guard", "diff"),
    ("-m", "cli.status", "--config", "config/default.yaml"),
    ("-m", "cli.logs", "--config", "config/default.yaml", "worker-group-1:0"),
    ("-m", "cli.diagnose", "--config", "config/default.yaml"),
    ("-m", "cli.watch", "ml-cluster"),
    ("-m", "cli.stack_graph", "{missing}"),
    ("-m", "cli.summarize", "{missing}", "--config", "config/default.yaml"),
    ("-m", "cli.template_replacements", "{missing}", "{missing}"),
    ("-m", "cli.destroy", "{missing}"),
    ("-m", "cli.sizing", "--config", "{config}"),
}


def test_every_command_runs_as_a_process_at_least_once():
    assert sorted(a[1].removeprefix("cli.") for a in IN_A_PROCESS) == sorted(COMMANDS)


@pytest.fixture
def run(monkeypatch, capsys):
    """run("-m", "cli.<name>", *argv, template=...) -> CompletedProcess, as `python -m cli.<name> argv` without AWS
    credentials; `template` is the case as IN_A_PROCESS spells it, when that differs from the arguments."""
    env = no_credentials_env()

    def run_(*args: str, template: tuple[str, ...] | None = None) -> subprocess.CompletedProcess:
        if (template or args) in IN_A_PROCESS:
            # None of these paths needs the CDK's Node.js process, which importing anything of constructs/ starts
            # (the constructs library's jsii kernel, ~0.4 s of CPU: cli/connect.py and cli/preflight.py import their
            # construct facts where they use them). A Node.js that cannot start makes such an import a traceback.
            return subprocess.run(
                [sys.executable, *args],
                cwd=ROOT,
                env=env | {"JSII_NODE": "false"},
                capture_output=True,
                text=True,
                timeout=120,
            )
        assert args[0] == "-m", args
        with monkeypatch.context() as patch:
            patch.chdir(ROOT)
            for name in [n for n in os.environ if n not in env]:
                patch.delenv(name)
            for name, value in env.items():
                patch.setenv(name, value)
            return run_main(args[1], args[2:], capsys)

    return run_


def test_every_command_module_is_listed():
    """Every module of cli/ that runs as `python -m cli.<name>` is a command tested here; the others are libraries."""
    runnable = sorted(p.stem for p in (ROOT / "cli").glob("*.py") if 'if __name__ == "__main__"' in p.read_text())
    assert runnable == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command, run):
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
def test_without_credentials_one_line_and_a_failure(args, run):
    """Before: `make preflight` printed six CANNOT CHECK lines and exited 0, `make connect` ended in a
    NoCredentialsError traceback. deploy and diff stop before their synth."""
    result = run(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "no AWS credentials" in lines[0] and "Traceback" not in result.stderr


def test_an_unknown_profile_is_one_line(run):
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
def test_without_a_synthesized_assembly_one_line_and_a_failure(args, tmp_path, run):
    missing = tmp_path / "cdk.out"
    result = run(*(a.format(missing=missing) for a in args), template=args)
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr == f"{args[1].split('.')[1]}: {missing}/manifest.json not found: no synthesized assembly "
        "there; run `make synth` first\n"
    )


@pytest.mark.parametrize("command", ["preflight", "sizing", "summarize"])
def test_a_refused_config_names_the_key_and_what_is_allowed_and_fails(command, tmp_path, run):
    config = tmp_path / "bad.yaml"
    config.write_text("name: demo\nbogus_key: 7\n")
    assembly = tmp_path / "cdk.out"  # summarize reads the config after the assembly
    assembly.mkdir()
    (assembly / "manifest.json").write_text('{"artifacts": {}}')
    before = ("{assembly}",) if command == "summarize" else ()
    result = run(
        "-m",
        f"cli.{command}",
        *(a.format(assembly=assembly) for a in before),
        "--config",
        str(config),
        template=("-m", f"cli.{command}", *before, "--config", "{config}"),
    )
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
    """What `make <target>` runs (dry run: nothing executes; the install steps count as done, synth-inputs too:
    otherwise `make -n` still runs its recursive `$(MAKE) deps studio-tools-if-wanted` to print what it would do)."""
    result = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "-o", "node_modules/.installed", "-o", "synth-inputs", target],
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
