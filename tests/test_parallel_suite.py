"""How the suite shares two cores (tests/conftest.py's docstring): which tests keep to one xdist worker, and that the
scheduler honours it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from support.paths import ROOT
from support.scheduling import GROUPS_DIR, LONGEST, GroupScheduling, longest_first, make_scheduler, xdist_group_of


class Groups:
    def pytest_collection_finish(self, session):
        self.groups = {item.nodeid: xdist_group_of(item) for item in session.items}
        self.fixtures = {item.nodeid: set(item.fixturenames) for item in session.items}


@pytest.fixture(scope="module")
def collected() -> Groups:
    """The group of every test of the suite, from a real collection of it."""
    recorder = Groups()
    with pytest.MonkeyPatch.context() as patch:  # a plain collection, even on an xdist worker
        patch.delenv("PYTEST_XDIST_WORKER", raising=False)
        patch.delenv(GROUPS_DIR, raising=False)
        assert (
            pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")], plugins=[recorder])
            == 0
        )
    return recorder


@pytest.fixture
def groups(collected) -> dict[str, str | None]:
    return collected.groups


def test_every_e2e_test_is_in_the_one_e2e_group_and_nothing_else_is(groups):
    e2e = {nodeid for nodeid in groups if nodeid.startswith("tests/e2e/")}
    assert len(e2e) >= 40
    assert {groups[nodeid] for nodeid in e2e} == {"e2e"}
    assert {nodeid for nodeid, group in groups.items() if group == "e2e"} == e2e


def test_a_module_fixture_keeps_its_users_together_and_other_tests_go_anywhere(collected, groups):
    # Most of test_connect's tests share its module-scoped moto server (`sagemaker`); test_sizing's share nothing.
    connect = {n: "sagemaker" in collected.fixtures[n] for n in groups if n.startswith("tests/test_connect.py::")}
    assert sum(connect.values()) >= 4 and not all(connect.values())
    assert {n: groups[n] for n in connect} == {
        n: "tests/test_connect.py" if uses else None for n, uses in connect.items()
    }
    assert {g for n, g in groups.items() if n.startswith("tests/test_sizing.py::")} == {None}


def test_an_xdist_group_mark_wins():
    class Mark:
        name, args, kwargs = "xdist_group", ("slurm-users",), {}

    class Item:
        nodeid, path = "tests/test_x.py::test_y", ROOT / "tests" / "test_x.py"

        def iter_markers(self, name):
            return iter([Mark()] if name == "xdist_group" else [])

    assert xdist_group_of(Item()) == "slurm-users"


def test_the_scheduler_reads_the_workers_tables_and_keeps_e2e_together_regardless(tmp_path, monkeypatch):
    monkeypatch.setenv(GROUPS_DIR, str(tmp_path))
    scheduler = object.__new__(GroupScheduling)  # _split_scope needs nothing from xdist's constructor
    with pytest.raises(RuntimeError, match="no xdist group table"):
        scheduler._split_scope("tests/test_a.py::test_one")
    (tmp_path / "gw0.json").write_text(
        json.dumps({"tests/test_a.py::test_one": "tests/test_a.py", "tests/e2e/test_b.py::test_two": "elsewhere"})
    )
    scheduler = object.__new__(GroupScheduling)
    assert scheduler._split_scope("tests/test_a.py::test_one") == "tests/test_a.py"
    assert scheduler._split_scope("tests/test_c.py::test_three") == "tests/test_c.py::test_three"
    assert scheduler._split_scope("tests/e2e/test_b.py::test_two") == "e2e"


# A tree of two modules for a real `pytest -n 2` run under the suite's own conftest.py (copied verbatim): in the first,
# four tests share a module-scoped fixture, which records each set-up with its worker, and two share nothing; the
# second shares nothing. Its tests do no work, so the run costs its three processes' start, not the suite's tests'.
SHARING_MODULE = """
import os
from pathlib import Path

import pytest

SETUPS = Path(os.environ["SHARED_FIXTURE_SETUPS"])


@pytest.fixture(scope="module")
def shared():
    with SETUPS.open("a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return "shared"


def test_shares_1(shared): pass
def test_alone_1(): pass
def test_shares_2(shared): pass
def test_shares_3(shared): pass
def test_alone_2(): pass
def test_shares_4(shared): pass
"""
SPREAD_MODULE = "\n".join(f"def test_free_{i}(): pass" for i in range(8))


def test_under_xdist_the_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path):
    """A real two-worker run, with the suite's conftest.py and scheduler: the tests that share a module-scoped fixture
    run on one worker, which sets it up once, while the others are spread (which tests of the suite share such a
    fixture, from its real collection: test_a_module_fixture_keeps_its_users_together_and_other_tests_go_anywhere)."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "pytest.ini").write_text("[pytest]\naddopts = -ra --strict-markers\n")
    (tree / "tests" / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tree / "tests" / "test_sharing.py").write_text(SHARING_MODULE)
    (tree / "tests" / "test_spread.py").write_text(SPREAD_MODULE + "\n")
    setups = tmp_path / "setups"
    # As `make test` starts it: not as a worker of this run (whose xdist and group-table variables it would inherit).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST") and k != GROUPS_DIR}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
        SHARED_FIXTURE_SETUPS=str(setups),
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", "tests"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ran = dict((nodeid, worker) for worker, nodeid in re.findall(r"^\[(gw\d)\] .*PASSED (\S+)", result.stdout, re.M))
    assert set(ran) == {
        f"tests/test_sharing.py::test_{t}" for t in ("shares_1", "shares_2", "shares_3", "shares_4")
    } | {f"tests/test_sharing.py::test_alone_{i}" for i in (1, 2)} | {
        f"tests/test_spread.py::test_free_{i}" for i in range(8)
    }, result.stdout
    sharing = {worker for nodeid, worker in ran.items() if "::test_shares_" in nodeid}
    assert len(sharing) == 1, result.stdout
    assert setups.read_text().split() == list(sharing), result.stdout  # set up once, on that worker
    assert set(ran.values()) == {"gw0", "gw1"}, result.stdout  # the rest was spread


def test_the_longest_units_are_handed_out_first_and_the_rest_keep_their_order(groups):
    class Item:
        def __init__(self, nodeid):
            self.nodeid = nodeid

    collection = [Item(nodeid) for nodeid in groups]
    table = {nodeid: group for nodeid, group in groups.items() if group}
    order = [item.nodeid for item in longest_first(collection, table)]
    assert sorted(order) == sorted(groups)
    units = [table.get(nodeid, nodeid) for nodeid in order]
    assert set(LONGEST) <= set(units), "a unit LONGEST names is no longer collected"
    # Each unit's tests come together, and the units come by their estimate, longest first.
    starts = {}
    for index, unit in enumerate(units):
        starts.setdefault(unit, index)
        assert starts[unit] == index or units[index - 1] == unit, f"{unit} is split"
    firsts = list(starts)
    assert firsts[:4] == [
        "e2e",
        "day2",
        "tests/test_finetune.py",
        "tests/test_studio_tools.py::test_the_built_bundle_installs_offline_and_hyp_and_jq_run",
    ]
    estimates = [LONGEST.get(unit, units.count(unit) / 2) for unit in firsts]
    assert estimates == sorted(estimates, reverse=True)
    # Single tests of the same estimate keep the collection's order.
    singles = [nodeid for nodeid in order if nodeid not in table and nodeid not in LONGEST]
    assert singles == [nodeid for nodeid in groups if nodeid not in table and nodeid not in LONGEST]


def test_the_scheduler_keeps_the_workers_order():
    class Option:
        dist, loadscopereorder = "loadgroup", True

    class Config:
        option = Option()

        def getvalue(self, name):
            return getattr(self.option, name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(GROUPS_DIR, "unused")
        patch.setattr(GroupScheduling, "__init__", lambda self, config, log: None)
        scheduler = make_scheduler(Config(), log=None)
    assert isinstance(scheduler, GroupScheduling)
    assert Config.option.loadscopereorder is False  # xdist would otherwise order the units by their number of tests


def test_lint_and_bats_yield_the_cores_to_pytest():
    """`make test-suite` starts lint and bats at a lower priority than pytest, so they run whenever a pytest worker
    waits on its daemons instead of leaving that core idle (the Makefile's FILLER_NICE). Read from the recipe: `make -n`
    would run it (its lines call $(MAKE))."""
    recipe = re.search(r"^test-suite:\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe, "no test-suite recipe in the Makefile"
    commands = recipe[1].replace("\\\n", " ").split(";")
    started = {
        part: [c for c in commands if re.search(pattern, c)]
        for part, pattern in (
            ("lint", r"\$\(MAKE\) .*\blint\b"),
            ("bats", r"\bbats \$\(BATS_JOBS\)"),
            ("pytest", r"-m pytest"),
        )
    }
    assert all(len(found) == 1 for found in started.values()), started
    assert all(re.search(r"\bnice -n \$\(FILLER_NICE\) ", started[part][0]) for part in ("lint", "bats")), started
    assert "nice" not in started["pytest"][0], started
    value = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", "print-value: ; @echo $(FILLER_NICE)", "print-value"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert value.isdigit() and int(value) > 0, value
