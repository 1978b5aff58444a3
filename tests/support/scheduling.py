"""How the suite's work is shared over the xdist workers (the rules are in tests/conftest.py's docstring): the group
of each test, the longest units first, and the scheduler that keeps a group on one worker. conftest.py's hooks call
these."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from support.paths import ROOT

E2E = ROOT / "tests" / "e2e"
# The longest units of work (a group, or a test that runs anywhere) and what one worker spends on each, in seconds of
# `make test` on 2 cores (walls of a cold `make bench-test` at 669611c, the workers beside bats and lint): they are handed out first, longest first, so that none starts late and
# ends the run alone. Any other unit counts half a second a test (a group of many quick tests before a single one).
# The figures only order the work; a stale one costs minutes, never a result.
LONGEST = {
    "e2e": 335,
    "day2": 195,  # tests/test_day2.py: 44 syntheses and two `synth` variants, one worker (its xdist_group)
    "tests/test_finetune.py": 101,
    "tests/test_studio_tools.py::test_the_built_bundle_installs_offline_and_hyp_and_jq_run": 49,
    "tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[large]": 21,
    "tests/test_train_elastic.py::test_train_elastic_logs_one_mlflow_run_across_a_resize": 20,
    "tests/test_parallel_suite.py": 5,
    "tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[multi_az]": 15,
    **{
        f"tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[{variant}]": 5
        for variant in (
            "default",
            "existing_vpc",
            "containers",
            "eks",
            "research",
            "eks_shared",
            "metrics",
            "eks_metrics",
            "directory",
        )
    },
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
    if info is not None and any(
        d.scope in ("module", "class", "package") for defs in info.name2fixturedefs.values() for d in defs
    ):
        return item.nodeid.split("::")[0]
    return None


def longest_first(items: list, groups: dict[str, str]) -> list:
    """The items by the estimated length of their unit of work (LONGEST), longest first; units of the same length, and
    each unit's own items, keep their order. The scheduler hands the units out in the order their items come in."""
    units = [groups.get(item.nodeid, item.nodeid) for item in items]
    tests = Counter(units)
    return [item for _, item in sorted(zip(units, items), key=lambda pair: -LONGEST.get(pair[0], tests[pair[0]] / 2))]


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
                raise RuntimeError(
                    f"no xdist group table in {os.environ[GROUPS_DIR]}: tests/conftest.py's "
                    "pytest_collection_modifyitems did not run on the workers"
                )
            self._groups = {}
            for table in tables:
                self._groups.update(json.loads(table.read_text()))
        # tests/e2e is never spread over the workers, whatever the tables say.
        return "e2e" if nodeid.startswith("tests/e2e/") else self._groups.get(nodeid, nodeid)


def make_scheduler(config: pytest.Config, log) -> GroupScheduling | None:
    """The scheduler for `pytest_xdist_make_scheduler`: ours under --dist load/loadgroup, once the controller made the
    directory the workers write their group tables to; else xdist's own."""
    if config.getvalue("dist") in ("load", "loadgroup") and os.environ.get(GROUPS_DIR):
        config.option.loadscopereorder = False  # the workers' collection is in the order to hand out (longest_first)
        return GroupScheduling(config, log)
    return None
