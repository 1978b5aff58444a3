"""tests/support/warm_python.py: a call of the warm `python` runs and ends as the interpreter itself would (each case
run both ways and compared), passes on the signals its process is sent, refuses what it cannot run as `python`
would, and a hung call's stacks reach the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.process_tree import run_or_dump_stacks
from support.warm_python import Warm, warm

PRELOADED = "textwrap"  # what the test server imports first; no case below imports it

SHOW = """\
import os, sys
print(sys.argv, sys.path[0], __file__, __name__, os.getcwd(), os.environ.get("CALLER"), sys.stdin.read())
print(type(sys.stdout.buffer).__name__, sys.stdout.write_through, sys.stderr.line_buffering, file=sys.stderr)
"""
CASES = {
    "exit": (SHOW + "sys.exit(int(sys.argv[1]))\n", ["3"]),
    "raise": ("raise ValueError('boom')\n", []),
    # os._exit skips the flush: a buffered print is lost, an unbuffered one (-u) is not
    "os_exit": ("import os; print('printed'); os._exit(4)\n", []),
    "signal": ("import os, signal; print('dying'); os.kill(os.getpid(), signal.SIGKILL)\n", []),
    # the server filled inspect's table of module files: a call's frames still resolve to the modules they are in
    "inspect": (
        "import inspect, json\ndef where():\n    return [(f.function, inspect.getmodule(f.frame).__name__, f.code_context)"
        " for f in inspect.stack() if f.filename == __file__]\nprint(where(), inspect.getmodule(json.dumps).__name__)\n",
        [],
    ),
    "threads": (
        "import threading, time; threading.Thread(target=lambda: (time.sleep(0.2), print('joined'))).start()\n",
        [],
    ),
}
WAITS_FOR_SIGNALS = """\
import signal, sys
def stop(signum, frame):
    print("got", signal.Signals(signum).name, flush=True)
    sys.exit(signum)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGUSR1, stop)
print("waiting", flush=True)
signal.pause()
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Warm]:
    directory = tmp_path_factory.mktemp("warm")
    for name, (code, _) in CASES.items():
        (directory / f"case_{name}.py").write_text(code)
    (directory / "waits.py").write_text(WAITS_FOR_SIGNALS)
    with warm(Path(sys.executable), [PRELOADED], directory, dict(os.environ)) as started:
        yield started


def _both(server: Warm, argv: list[str]) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """`python ARGV` run by the interpreter and by the warm stand-in, in the server's directory."""
    directory = server.command.parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"CALLER": "the caller's"}
    return tuple(  # type: ignore[return-value]
        subprocess.run([python, *argv], cwd=directory, env=env, input="its input", capture_output=True, text=True)
        for python in (sys.executable, str(server.command))
    )


@pytest.mark.parametrize("unbuffered", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_a_call_runs_and_ends_as_the_interpreter_does(server, case, unbuffered):
    argv = ["-u"] * unbuffered + [f"case_{case}.py", *CASES[case][1]]
    real, stand_in = _both(server, argv)
    assert stand_in.returncode == real.returncode
    assert stand_in.stdout == real.stdout
    # A traceback's frames are the stand-in's too; its last line is the script's.
    assert stand_in.stderr.splitlines()[-1:] == real.stderr.splitlines()[-1:]


def test_a_module_runs_as_main_as_with_dash_m(server):
    (server.command.parent / "shown.py").write_text(SHOW)
    real, stand_in = _both(server, ["-m", "shown"])
    assert (stand_in.returncode, stand_in.stdout, stand_in.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.stdout.startswith(f"['{server.command.parent / 'shown.py'}'] {server.command.parent} ")


def test_a_call_starts_with_the_server_s_imports(server):
    code = f"import sys; print({PRELOADED!r} in sys.modules)"
    (server.command.parent / "preloaded.py").write_text(code)
    real, stand_in = _both(server, ["preloaded.py"])
    assert (real.stdout, stand_in.stdout) == ("False\n", "True\n")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1])
def test_a_signal_to_the_call_reaches_its_process(server, signum):
    for python in (sys.executable, str(server.command)):
        process = subprocess.Popen([python, "waits.py"], cwd=server.command.parent, stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "waiting\n"
        process.send_signal(signum)
        assert (process.wait(timeout=30), process.stdout.read()) == (signum, f"got {signum.name}\n"), python


@pytest.mark.parametrize(
    "argv, refusal",
    [
        (["-c", "print(1)"], "warm_python runs `python [-u] SCRIPT ARGS...` or `python [-u] -m MODULE ARGS...`"),
        (["-m", PRELOADED], f"{PRELOADED} was imported by the server: `python -m {PRELOADED}` runs it in a fresh"),
    ],
)
def test_what_it_cannot_run_as_python_would_is_refused(server, argv, refusal):
    result = subprocess.run([server.command, *argv], cwd=server.command.parent, capture_output=True, text=True)
    assert result.returncode == 1 and refusal in result.stderr and not result.stdout


def test_a_hung_call_fails_in_bounded_time_with_its_stacks(server):
    (server.command.parent / "hangs.py").write_text(
        "import time\ndef waiting_forever():\n    time.sleep(600)\nwaiting_forever()\n"
    )
    with pytest.raises(pytest.fail.Exception) as failed:
        run_or_dump_stacks(
            [str(server.command), str(server.command.parent / "hangs.py")],
            env=dict(os.environ),
            timeout=3,
            also_under=(server.pid,),
        )
    assert "did not end within 3 s" in str(failed.value) and "in waiting_forever" in str(failed.value)


def test_a_server_that_is_not_ready_in_time_fails_the_test(tmp_path, monkeypatch):
    import support.warm_python

    (tmp_path / "slow_to_import.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(support.warm_python, "READY_TIMEOUT", 1)
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    with pytest.raises(RuntimeError, match=r"not ready within 1 s \(importing \['slow_to_import'\]\)"):
        with warm(Path(sys.executable), ["slow_to_import"], tmp_path, env):
            pass
