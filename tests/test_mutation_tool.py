"""tools/mutation.py (`make mutation`): which mutants it makes of a module, that each is the module with exactly one
change, and that its table of targets names files that exist. The run itself is not part of `make test`."""

from __future__ import annotations

import ast
import sys
import textwrap

import pytest

from support.paths import ROOT
from tools import mutation

SOURCE = textwrap.dedent('''\
    """Module docstring: never mutated."""
    import logging

    LOG = logging.getLogger(__name__)
    TAG = "hyperpod:force-uid-change"


    def allowed(tags: dict[str, str], owner: int, uid: int) -> bool:
        """Docstring."""
        LOG.info("checking %s", TAG)
        if owner != uid and tags.get(TAG, "").lower() != "true":
            raise ValueError(f"partition belongs to {owner}")
        return not tags or owner >= 10000
    ''')


def mutants() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for m in mutation.find_mutants("example.py", SOURCE):
        found.setdefault(m.operator, []).append(f"{m.original} -> {m.replacement}")
    return found


def test_each_kind_of_plausible_bug_is_made_and_docstrings_logs_and_messages_are_left_alone():
    found = mutants()
    # the original as written, the replacement as the runner writes it
    assert found["string"] == [
        "\"hyperpod:force-uid-change\" -> 'hyperpod:force-uid-changex'",
        "\"\" -> 'x'",
        "\"true\" -> 'truex'",
    ]
    assert found["compare"] == [
        "owner != uid -> (owner == uid)",
        "tags.get(TAG, \"\").lower() != \"true\" -> (tags.get(TAG, '').lower() == 'true')",
        "owner >= 10000 -> (owner > 10000)",
    ]
    assert found["and/or"] == [
        'owner != uid and tags.get(TAG, "").lower() != "true" -> (owner != uid or '
        "tags.get(TAG, '').lower() != 'true')",
        "not tags or owner >= 10000 -> (not tags and owner >= 10000)",
    ]
    assert found["delete raise"] == ['raise ValueError(f"partition belongs to {owner}") -> pass']
    assert found["drop not"] == ["not tags -> (tags)"]
    assert found["number"] == ["10000 -> 10001"]
    assert found["return None"] == ["return not tags or owner >= 10000 -> return None"]
    everything = str(found)
    assert "Docstring" not in everything and "checking" not in everything  # docstrings, the log call
    assert everything.count("partition belongs") == 1  # in the deleted raise only: f-string text is not mutated


def test_a_mutant_is_the_module_with_exactly_that_one_change():
    for m in mutation.find_mutants("example.py", SOURCE):
        mutated = mutation.apply(SOURCE, m)
        ast.parse(mutated)
        assert mutated != SOURCE
        before, after = SOURCE.splitlines(), mutated.splitlines()
        assert len(before) == len(after)
        changed = [i + 1 for i, (a, b) in enumerate(zip(before, after)) if a != b]
        assert changed == [m.line], m


def test_keys_tell_apart_the_same_change_twice_in_one_function():
    source = "def f(a):\n    return a == 1 or a == 1\n"
    keys = [m.key for m in mutation.find_mutants("f.py", source) if m.operator == "compare"]
    assert len(keys) == 2 and len(set(keys)) == 2 and keys[1].endswith(" #2")


def test_a_changed_run_is_killed_and_an_unchanged_one_survives(tmp_path, monkeypatch):
    """The runner's verdicts from real pytest runs (forks of this process) on a module and its test."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "guard.py").write_text("def refuse(value):\n    return value != 'true'\n")
    (tmp_path / "test_guard.py").write_text(
        "import guard\n\ndef test_refuses():\n    assert guard.refuse('yes') and not guard.refuse('true')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(mutation, "PYTEST", ["-p", "no:cacheprovider", "-q", "-x", "-p", "no:xdist"])
    # As mutation.main sets it: each run compiles guard.py as it is now. With bytecode written, a rewrite of the same
    # size within the second of the first run's .pyc (mtime and size match) would run the stale unmutated code.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    runs = [["test_guard.py"]]
    trace = tmp_path / "trace.json"
    assert mutation.run_tests(runs, timeout=60, trace=(str(tmp_path / "guard.py"), trace)) == "survived"
    assert 2 in set(__import__("json").loads(trace.read_text()))
    (tmp_path / "guard.py").write_text("def refuse(value):\n    return value == 'true'\n")
    assert mutation.run_tests(runs, timeout=60) == "killed"
    # A run that never ends (asleep, not spinning: the runner's deadline and kill are the same either way, and a
    # sleeping fork costs no CPU while the deadline passes).
    (tmp_path / "guard.py").write_text("import time\n\ndef refuse(value):\n    while True:\n        time.sleep(60)\n")
    assert mutation.run_tests(runs, timeout=3) == "timeout"


@pytest.mark.parametrize("module", sorted(mutation.TARGETS))
def test_every_target_and_its_test_files_exist(module):
    assert (ROOT / module).is_file()
    for run in mutation.TARGETS[module]:
        assert all((ROOT / arg).is_file() for arg in run if arg.startswith("tests/")), run


def test_a_mutant_inside_a_statement_that_spans_lines_is_covered_by_the_statements_head():
    """Python reports a line event where an instruction starts: an element on a later line of a multi-line literal
    may have none, so coverage is judged by the enclosing statement (an `if` by its head, not its body)."""
    source = 'FIELDS = (\n    "containers",\n    "initContainers",\n)\nif FIELDS:\n    print(\n        "x")\n'
    by_text = {m.original: m.statement for m in mutation.find_mutants("f.py", source)}
    assert by_text['"initContainers"'] == (1, 4)
    assert by_text["FIELDS"] == (5, 5)
