"""The hash locks the Makefile installs (requirements.lock for synth and the user commands, requirements-dev.lock for
the tests; tools/lock_requirements.py writes them): each pins exactly what its requirements file pins, holds every
package those need on this Python and nothing else, and gives every package a sha256."""

from __future__ import annotations

import re
from importlib.metadata import distribution

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from support.paths import ROOT

ENTRY = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", re.MULTILINE)


def lock_entries(lock: str) -> dict[str, tuple[str, int]]:
    text = (ROOT / lock).read_text()
    entries = {canonicalize_name(n): (v, hashes.count("--hash=")) for n, v, hashes in ENTRY.findall(text)}
    assert len(entries) == text.count("=="), f"{lock}: a line that is not `name==version` with hashes"
    return entries


def requirements(path: str) -> list[Requirement]:
    found = []
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += requirements(line[3:])
        elif line:
            found.append(Requirement(line))
    return found


def closure(reqs: list[Requirement]) -> set[str]:
    """Every distribution the requirements need on this interpreter (markers evaluated, extras followed)."""
    seen: set[tuple[str, frozenset]] = set()
    names: set[str] = set()
    todo = [(r, frozenset(r.extras)) for r in reqs]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        names.add(name)
        for raw in distribution(name).requires or []:
            dep = Requirement(raw)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras | {""}):
                todo.append((dep, frozenset(dep.extras)))
    return names


@pytest.mark.parametrize(
    "source, lock", [("requirements.txt", "requirements.lock"), ("requirements-dev.txt", "requirements-dev.lock")]
)
def test_a_lock_pins_its_requirements_and_exactly_what_they_need(source, lock):
    entries = lock_entries(lock)
    for req in requirements(source):
        assert entries[canonicalize_name(req.name)][0] == str(req.specifier).removeprefix("==")
    assert set(entries) == closure(requirements(source))
    assert all(count >= 1 for _v, count in entries.values())


def test_the_synth_lock_is_the_dev_locks_subset_at_the_same_versions():
    synth, dev = lock_entries("requirements.lock"), lock_entries("requirements-dev.lock")
    assert {n: v for n, (v, _c) in synth.items()} == {n: dev[n][0] for n in synth}
    assert "pytest" in dev and "pytest" not in synth and "moto" not in synth
