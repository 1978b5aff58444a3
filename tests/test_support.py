"""What the tests import, as pytest.ini's `pythonpath` sets it up: every Lambda handler's folder is on it, no two
folders on it hold a module of the same name (the first on the path would silently stand in for the other), and
none, nor any module of tests/support, is named like an installed package."""

from __future__ import annotations

import configparser
from collections import defaultdict

from support.paths import ROOT


def pythonpath() -> list[str]:
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    return ini["pytest"]["pythonpath"].split()


def test_every_lambda_handler_folder_is_on_the_path():
    handlers = sorted(f"lambda/{p.name}" for p in (ROOT / "lambda").iterdir() if any(p.glob("*.py")))
    assert sorted(d for d in pythonpath() if d.startswith("lambda/")) == handlers


def test_no_two_folders_on_the_path_hold_a_module_of_one_name():
    holders: dict[str, list[str]] = defaultdict(list)
    files: dict[str, set[str]] = defaultdict(set)
    for folder in pythonpath():
        for entry in (ROOT / folder).iterdir():
            if entry.suffix == ".py" and entry.stem != "__init__":
                holders[entry.stem].append(folder)
                files[entry.stem].add(str(entry.resolve()))
            elif entry.is_dir() and (entry / "__init__.py").exists():
                holders[entry.name].append(folder)
                files[entry.name].add(str(entry.resolve()))
    # conftest.py is pytest's, imported by path; tests/ and tests/e2e each have their own. A module every holder
    # links to one file (lambda/shared/aws_clients.py, in each function's folder) is one module.
    assert {
        name: where for name, where in holders.items() if len(where) > 1 and name != "conftest" and len(files[name]) > 1
    } == {}


def test_no_module_on_the_path_or_in_support_shadows_an_installed_package():
    """tests/support is first on sys.path when one of its files runs as a script (support/moto_cloudformation.py):
    a support module named like an installed package (it was moto.py) would stand in for the package there."""
    import importlib.metadata

    installed = set(importlib.metadata.packages_distributions())
    shadowing = [
        f"{folder}/{entry.name}"
        for folder in [*pythonpath(), "tests/support"]
        for entry in (ROOT / folder).iterdir()
        if (entry.stem if entry.suffix == ".py" else entry.name if (entry / "__init__.py").exists() else None)
        in installed
    ]
    assert shadowing == []


def imports_of_test_modules(root) -> dict[str, set[str]]:
    """The modules each test module imports that are conftest or another test module (test_*), by file."""
    import ast

    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("test_*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        bad = {n for n in names if n.split(".")[-1] == "conftest" or n.split(".")[-1].startswith("test_")}
        if bad:
            found[str(path.relative_to(root))] = bad
    return found


def test_no_test_module_imports_conftest_or_another_test_module():
    assert imports_of_test_modules(ROOT / "tests") == {}


def test_the_import_rule_sees_both_forms(tmp_path):
    (tmp_path / "test_a.py").write_text("from test_day2 import _synth\nimport conftest\nfrom support.x import y\n")
    (tmp_path / "test_b.py").write_text("import json\nfrom support.day2_matrix import synth_change\n")
    assert imports_of_test_modules(tmp_path) == {"test_a.py": {"test_day2", "conftest"}}
