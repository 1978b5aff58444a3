"""Shared fixtures, and how the suite runs on several cores.

`make test` runs pytest under pytest-xdist (`-n $(nproc)`), with the scheduler below (GroupScheduling). The rules,
which every test follows without doing anything unless it touches the machine itself:

- Each config variant of `synth(...)` is synthesized once per run, by the first worker that asks for it, into a
  directory all workers share (the run's basetemp); the others wait on a file lock and read that cloud assembly.
  Never write into `synth(...).out_dir`: copy what you change into `tmp_path`. `.platform` (the live constructs) is
  the in-process synthesis of the worker that made the assembly; another worker synthesizes its own on first use.
- Tests under tests/e2e run on ONE worker, one after another, in file order (xdist group "e2e"): they create POSIX
  users and groups (alice and bob, the research example's users), write /etc/pam.d, and copy /etc into their
  namespaces, which no two of them may do at once. A test elsewhere that changes the machine (users, /etc, a fixed
  port or path) takes `@pytest.mark.xdist_group("e2e")` or moves to tests/e2e; any `xdist_group` mark is honoured. Real daemons bind free loopback ports
  (support.ports.free_port) and keep every file under their own mkdtemp directory.
- Tests that share a module- or class-scoped fixture run on one worker, so that fixture is set up once per run.
- Everything else is spread over the workers test by test. The longest units of work (LONGEST) are handed out first.
- A session-scoped fixture runs once per worker; if it is expensive and its result can live in files, share it
  through `shared_dir` and `exclusive` (tests/support/synthesis.py), as `synth` does.
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import shutil
import tempfile
from pathlib import Path

from support.scheduling import GROUPS_DIR

# The garbage collector of every pytest process (not of the programs the tests start): a young collection every
# 10,000 net allocations instead of 700, the older generations after 50 of the younger instead of 10. A worker's heap
# grows to ~400,000 objects (aws-cdk-lib's modules, cfn-lint's rules and schemas, the templates), which the default
# thresholds walk again and again: collections took 2.1-3.4 s of CPU in runs of 54-57 s (test_templates.py's default,
# eks and research cases; test_partition_scale, test_config, test_studio and test_destroy), 0.9-1.6 s with these.
# What is garbage is still collected, only in fewer and larger passes; pytest collects once more at the end.
gc.set_threshold(10_000, 50, 50)

# On a fresh checkout no module has bytecode yet, and the xdist workers, started together, would each compile the same
# test modules and the project's modules they import (~6 s of CPU a worker here, as much as the rest of its
# collection). They take turns instead, from here (before this file imports the project's modules) to the end of their
# collection: the first compiles and writes the bytecode, the next reads it. The lock is a file of the run's own
# (pytest_configure below makes the directory), released at pytest_collection_finish or when the worker exits. Only
# the workers of the controller that made the directory take it: a pytest run inside a test inherits the variables,
# and its controller, which collects nothing, would hold the lock its own workers wait for.
_collection_turn = None
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(GROUPS_DIR):
    _controller = Path(os.environ[GROUPS_DIR]) / "controller.pid"
    if _controller.is_file() and _controller.read_text() == str(os.getppid()):
        _collection_turn = open(_controller.with_name("collection.lock"), "a")
        fcntl.flock(_collection_turn, fcntl.LOCK_EX)

import pytest

from support.scheduling import E2E, longest_first, make_scheduler, xdist_group_of

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

# support.synthesis (the config model: pydantic, ~0.2-0.3 s of CPU to import) and support.moto_server are imported by
# the fixtures that use them, not here: every pytest process loads this file, and the xdist controller, the nested
# runs of tests/test_parallel_suite.py and the forks of tools/mutation.py never synthesize. A worker imports them while
# it collects the test modules that use them (under _collection_turn on a fresh checkout).


@pytest.fixture(scope="session")
def moto_endpoint():
    """A moto server for the process (one per xdist worker, started when a test first asks for it; ~2.5 s of CPU with
    the first use of its services; CloudFormation with the change-set behaviours of support/moto_cloudformation.py):
    every test that uses it empties it first with support.moto_server.reset. Session scope does not tie its users to
    one worker (conftest's docstring), so they spread like any test."""
    from support.moto_server import moto_server

    with moto_server() as url:
        yield url


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> str:
    from support.synthesis import shared_dir

    return str(shared_dir(tmp_path_factory))


@pytest.fixture(scope="session")
def synth(synth_root, tmp_path_factory):
    """synth("default") -> Synthesized; synthesized once per run, shared by the workers."""
    from support.synthesis import synthesized

    private_root = str(tmp_path_factory.mktemp("cdk-platform"))
    return lambda variant: synthesized(variant, synth_root, private_root)


def pytest_configure(config: pytest.Config) -> None:
    """On the xdist controller: a directory for the workers' group tables (workers inherit the environment)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    directory = tempfile.mkdtemp(prefix="pytest-groups-")
    (Path(directory) / "controller.pid").write_text(str(os.getpid()))
    os.environ[GROUPS_DIR] = directory
    config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the order in which the work is handed out (the longest first) and the group of every
    item, written where the controller's scheduler reads it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    table = {item.nodeid: group for item in items if (group := xdist_group_of(item))}
    items[:] = longest_first(items, table)
    if os.environ.get(GROUPS_DIR):
        partial = Path(os.environ[GROUPS_DIR]) / f"{worker}.json.partial"
        partial.write_text(json.dumps(table))
        partial.rename(partial.with_suffix(""))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The next worker's turn to collect (see _collection_turn)."""
    global _collection_turn
    if _collection_turn is not None:
        _collection_turn.close()
        _collection_turn = None


# The e2e tests change the machine; within one run they keep to one worker, and this lock keeps two runs on one machine
# (two worktrees, two developers) apart: a module holds it from its first test's setup to its last test's teardown.
E2E_MACHINE_LOCK = Path(tempfile.gettempdir()) / "hyperpod-platform-e2e.lock"
_e2e_lock = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    global _e2e_lock
    if _e2e_lock is None and E2E in item.path.parents:
        _e2e_lock = open(E2E_MACHINE_LOCK, "a")
        fcntl.flock(_e2e_lock, fcntl.LOCK_EX)
    try:
        return (yield)
    finally:
        if _e2e_lock is not None and (nextitem is None or nextitem.path != item.path):
            _e2e_lock.close()  # releases the lock; also released if this process dies
            _e2e_lock = None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    return make_scheduler(config, log)
