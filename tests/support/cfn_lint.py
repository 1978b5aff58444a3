"""cfn-lint in the test process. Its ~330 rules load once per process (~0.5 s of CPU a time, on top of ~1 s of
import that a `cfn-lint` process pays too), and every template is linted with them, as `cfn-lint a.json b.json`
lints each of its templates with one set of rules."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any


@cache
def _rules() -> Any:
    import cfnlint.runner
    from cfnlint.config import ConfigMixIn

    return cfnlint.runner.Runner(ConfigMixIn([])).rules


def lint(paths: Iterable[Path], *options: str) -> dict[Path, list[str]]:
    """cfn-lint's findings on each template (its errors and warnings, as `cfn-lint [options] path...` reports them
    and exits non-zero for), by path."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner.template.runner import run_template_by_file_paths

    paths = list(paths)
    found: dict[str, list[str]] = {}
    for match in run_template_by_file_paths(ConfigMixIn([*options, "--template", *map(str, paths)]), _rules()):
        found.setdefault(match.filename, []).append(str(match))
    return {path: found.get(str(path), []) for path in paths}
