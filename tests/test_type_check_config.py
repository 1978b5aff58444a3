"""pyproject.toml's mypy set-up: every aws-cdk-lib module the checked code imports is followed (type-checked against),
the rest of aws-cdk-lib is skipped. A new `from aws_cdk import aws_ecr` would otherwise read as Any and check nothing."""

from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from pathlib import Path

from support.paths import ROOT

MYPY = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
_SPEC = importlib.util.find_spec("aws_cdk")
assert _SPEC and _SPEC.submodule_search_locations
CDK_PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))


def cdk_modules_imported(files: list[Path]) -> set[str]:
    """aws_cdk and its submodules as the files import them: `import aws_cdk.x`, `from aws_cdk.x import y` and
    `from aws_cdk import aws_x` (a submodule, not a name of the core module such as Stack)."""
    found: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "aws_cdk"}
            elif (
                isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "aws_cdk"
            ):
                found.add(node.module or "")
                if node.module == "aws_cdk":
                    found |= {f"aws_cdk.{a.name}" for a in node.names if (CDK_PACKAGE / a.name).is_dir()}
    return found


def checked_files() -> list[Path]:
    excluded = MYPY.get("exclude", [])
    files = []
    for entry in MYPY["files"]:
        path = ROOT / entry
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            relative = file.relative_to(ROOT).as_posix()
            if not any(re.search(pattern, relative) for pattern in excluded):
                files.append(file)
    return files


def overrides(setting: str, value: str) -> set[str]:
    return {m for o in MYPY["overrides"] if o.get(setting) == value for m in o["module"]}


def test_every_aws_cdk_module_the_checked_code_imports_is_followed_and_no_other():
    imported = cdk_modules_imported(checked_files())
    assert "aws_cdk.aws_ec2" in imported and "aws_cdk" in imported  # the scan sees the project's imports
    assert overrides("follow_imports", "normal") == imported


def test_the_rest_of_aws_cdk_lib_is_skipped():
    assert "aws_cdk.*" in overrides("follow_imports", "skip")


def test_the_scan_finds_each_import_form(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "import aws_cdk as cdk\n"
        "import aws_cdk.aws_sqs\n"
        "from aws_cdk.aws_iam import Role\n"
        "from aws_cdk import Stack, aws_ecr as ecr\n"
        "from . import aws_cdk_helpers\n"
    )
    assert cdk_modules_imported([source]) == {"aws_cdk", "aws_cdk.aws_sqs", "aws_cdk.aws_iam", "aws_cdk.aws_ecr"}
