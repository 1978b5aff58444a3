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
  (tests/e2e/slurm_cluster.free_port) and keep every file under their own mkdtemp directory.
- Tests that share a module- or class-scoped fixture run on one worker, so that fixture is set up once per run.
- Everything else is spread over the workers test by test. The longest units of work (LONGEST) are handed out first.
- A session-scoped fixture runs once per worker; if it is expensive and its result can live in files, share it
  through `shared_dir` and `exclusive` below, as `synth` does.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from platform_config import PlatformConfig
from support.paths import ROOT
from support.variants import cdk_json_context, variant_config

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

if TYPE_CHECKING:  # aws_cdk starts a Node.js kernel: imported where synthesis needs it, not by every process
    from aws_cdk.assertions import Template
    from stacks.platform import Platform

STACK_ROLES = ("network", "storage", "slurm-login", "eks", "cluster", "studio", "eks-access", "observability")


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Holds an exclusive lock on `lock` (created if missing) across processes: the xdist workers of one run."""
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this run that every xdist worker sees: the parent of the workers' own basetemps (each is
    <run basetemp>/popen-gwN), or the basetemp itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


class Synthesized:
    """One config variant's cloud assembly (`out_dir`, shared by the workers: read only), its templates, and on
    demand the live constructs (`platform`)."""

    def __init__(self, variant: str, config: PlatformConfig, out_dir: Path, platform: Platform | None,
                 private_root: Path) -> None:
        self.variant, self.config, self.out_dir = variant, config, out_dir
        self._platform, self._private_root = platform, private_root
        # by stack role: network / storage / slurm-login / eks / cluster / studio / eks-access / observability
        self.templates: dict[str, dict[str, Any]] = {
            role: json.loads((out_dir / f"{config.name}-{role}.template.json").read_text())
            for role in STACK_ROLES if (out_dir / f"{config.name}-{role}.template.json").exists()}
        # nested stack templates by file name
        self.nested: dict[str, dict[str, Any]] = {
            p.name: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.nested.template.json"))}

    @property
    def nag_reports(self) -> dict[str, dict[str, Any]]:
        """cdk-nag's AwsSolutionsChecks().validate_scope report on each stack of the app that wrote `out_dir`, by
        stack name (recorded beside it by the worker that synthesized it)."""
        return json.loads((self.out_dir.parent / f"{self.variant}.nag.json").read_text())

    @property
    def platform(self) -> Platform:
        """The constructs of a synthesized app of this variant: the one that wrote `out_dir` when this worker wrote
        it, else this worker's own synthesis (same config, same code) into a directory of its own."""
        if self._platform is None:
            out_dir = Path(tempfile.mkdtemp(prefix=f"{self.variant}-", dir=self._private_root))
            self._platform = _synthesize(self.variant, out_dir, stage_assets=False)[1]
        return self._platform

    def template(self, role: str) -> Template:
        from aws_cdk.assertions import Template
        return Template.from_json(self.templates[role])

    def template_path(self, role: str) -> Path:
        return self.out_dir / f"{self.config.name}-{role}.template.json"

    def all_template_paths(self) -> list[Path]:
        return [self.template_path(role) for role in self.templates] + [self.out_dir / n for n in self.nested]


def _synthesize(variant: str, out_dir: Path, *, stage_assets: bool = True) -> tuple[PlatformConfig, Platform]:
    import aws_cdk as cdk
    from stacks.platform import add_security_checks, build_platform

    config = variant_config(variant)
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context(stage_assets=stage_assets))
    platform = build_platform(app, config, allow_chart_stand_in=True)
    add_security_checks(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    return config, platform


def _nag_reports(platform: Platform) -> dict[str, dict[str, Any]]:
    """AwsSolutionsChecks' report on each synthesized stack, by stack name: success and the violated rules."""
    from cdk_nag import AwsSolutionsChecks

    reports = {}
    for stack in platform.stacks:
        report = AwsSolutionsChecks().validate_scope(stack)
        reports[stack.stack_name] = {"success": report.success, "violations": [v.rule_name for v in report.violations]}
    return reports


@cache
def _synth(variant: str, shared_root: str, private_root: str) -> Synthesized:
    """Once per run across the workers: the first to take the variant's lock synthesizes into the shared directory
    and marks it done; the others (and later runs of this function) read what it wrote."""
    root = Path(shared_root) / "synth"
    root.mkdir(exist_ok=True)
    out_dir, done = root / variant, root / f"{variant}.done"
    platform = None
    with exclusive(root / f"{variant}.lock"):
        if done.exists():
            config = variant_config(variant)
        else:  # first here, or the worker before failed half-way (its error is this one's too)
            shutil.rmtree(out_dir, ignore_errors=True)
            config, platform = _synthesize(variant, out_dir)
            (root / f"{variant}.nag.json").write_text(json.dumps(_nag_reports(platform)))
            done.touch()
    return Synthesized(variant, config, out_dir, platform, Path(private_root))


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> str:
    return str(shared_dir(tmp_path_factory))


@pytest.fixture(scope="session")
def synth(synth_root, tmp_path_factory):
    """synth("default") -> Synthesized; synthesized once per run, shared by the workers."""
    private_root = str(tmp_path_factory.mktemp("cdk-platform"))
    return lambda variant: _synth(variant, synth_root, private_root)




E2E = ROOT / "tests" / "e2e"
# The longest units of work (a group, or a test that runs anywhere) and what one worker spends on each, in seconds of
# `make test` on 2 cores (docs/testing.md): they are handed out first, longest first, so that none starts late and
# ends the run alone. Any other unit counts half a second a test (a group of many quick tests before a single one).
# The figures only order the work; a stale one costs minutes, never a result.
LONGEST = {
    "e2e": 265,
    "tests/test_finetune.py": 85,
    "tests/test_studio_tools.py::test_the_built_bundle_installs_offline_and_hyp_and_jq_run": 42,
    "tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[large]": 25,
    "tests/test_destroy.py": 20,
    "tests/test_preflight.py": 18,
    "tests/test_attach_cli.py": 15,
    "tests/test_preflight_attach.py": 10,
    "tests/test_destroy_studio.py": 10,
    "tests/test_training_jobs.py::test_train_elastic_logs_one_mlflow_run_across_a_resize": 17,
    "tests/test_parallel_suite.py": 14,
    "tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[multi_az]": 11,
    **{f"tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[{variant}]": 5
       for variant in ("default", "existing_vpc", "containers", "eks", "research", "eks_shared", "metrics",
                       "eks_metrics", "directory")},
}
GROUPS_DIR = "PLATFORM_TEST_GROUPS_DIR"  # where the xdist workers leave their group tables for the controller


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist group an item runs in (the rules in this module's docstring): its `xdist_group` mark's name, "e2e"
    under tests/e2e, its module when it shares a module- or class-scoped fixture; None when it may run anywhere."""
    for mark in item.iter_markers("xdist_group"):
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    if E2E in item.path.parents:
        return "e2e"
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and any(d.scope in ("module", "class", "package")
                                for defs in info.name2fixturedefs.values() for d in defs):
        return item.nodeid.split("::")[0]
    return None


def pytest_configure(config: pytest.Config) -> None:
    """On the xdist controller: a directory for the workers' group tables (workers inherit the environment)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    directory = tempfile.mkdtemp(prefix="pytest-groups-")
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


def longest_first(items: list, groups: dict[str, str]) -> list:
    """The items by the estimated length of their unit of work (LONGEST), longest first; units of the same length, and
    each unit's own items, keep their order. The scheduler hands the units out in the order their items come in."""
    units = [groups.get(item.nodeid, item.nodeid) for item in items]
    tests = Counter(units)
    return [item for _, item in sorted(zip(units, items), key=lambda pair: -LONGEST.get(pair[0], tests[pair[0]] / 2))]


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


class GroupScheduling(LoadScopeScheduling):
    """xdist's `--dist loadgroup`, with the groups from the tables the workers wrote: a group is one unit of work for
    one worker; larger units are handed out first. (xdist 3.8.0 passes groups as a suffix it writes into
    Item._nodeid, which pytest 9.2 no longer reads: its loadgroup silently spreads a group over the workers,
    https://github.com/pytest-dev/pytest-xdist/issues/1386.)"""

    _groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            tables = sorted(Path(os.environ[GROUPS_DIR]).glob("*.json"))
            if not tables:
                raise RuntimeError(f"no xdist group table in {os.environ[GROUPS_DIR]}: tests/conftest.py's "
                                   "pytest_collection_modifyitems did not run on the workers")
            self._groups = {}
            for table in tables:
                self._groups.update(json.loads(table.read_text()))
        # tests/e2e is never spread over the workers, whatever the tables say.
        return "e2e" if nodeid.startswith("tests/e2e/") else self._groups.get(nodeid, nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") in ("load", "loadgroup") and os.environ.get(GROUPS_DIR):
        config.option.loadscopereorder = False  # the workers' collection is in the order to hand out (longest_first)
        return GroupScheduling(config, log)
    return None
