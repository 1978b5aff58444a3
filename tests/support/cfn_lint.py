"""cfn-lint in the test process. Its ~330 rules load once per process (~0.5 s of CPU a time, on top of ~1 s of
import that a `cfn-lint` process pays too), and every template is linted with them, as `cfn-lint a.json b.json`
lints each of its templates with one set of rules.

Two of cfn-lint 1.58.0's hot spots are memoized once the rules load (`_same_with_less_work`; about a quarter of
the CPU of linting this project's templates): the schema validator's class is built once per set of keyword
functions instead of once per call (`jsonschema.validators.create` ran `dataclasses.dataclass` ~600 times per
template), and `dataclasses.fields` of a class is read once instead of on every `evolve`. cfn-lint's own functions
still do the work; only repeated calls with the same arguments are answered from the first. Each returns what the
original returns; `as_released()` lints with cfn-lint's own code, and
test_templates.py::test_cfn_lint_reports_the_same_findings_as_released compares the two on planted findings (on the
246 templates of cfn-lint's own test fixtures at 217397c, 1,064 findings: the same, in the same order)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

# The release whose code the replacements in _same_with_less_work were read from (requirements-dev.txt pins it).
CHECKED_RELEASE = "1.58.0"
_released: list[tuple[Any, str, Any]] = []  # (owner, attribute, cfn-lint's own value) of each replaced attribute


@cache
def _rules() -> Any:
    import cfnlint.runner
    from cfnlint.config import ConfigMixIn

    rules = cfnlint.runner.Runner(ConfigMixIn([])).rules
    _same_with_less_work()
    return rules


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


@contextlib.contextmanager
def as_released() -> Iterator[None]:
    """Lint with cfn-lint's own code inside the block (the replacements of _same_with_less_work put back after)."""
    _rules()
    replaced = [(owner, name, getattr(owner, name)) for owner, name, _ in _released]
    for owner, name, value in _released:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in replaced:
            setattr(owner, name, value)


def _replace(owner: Any, name: str, value: Any) -> None:
    _released.append((owner, name, getattr(owner, name)))
    setattr(owner, name, value)


def _same_with_less_work() -> None:
    import cfnlint.context.context
    import cfnlint.jsonschema._filter
    import cfnlint.jsonschema.validators
    from cfnlint.version import __version__

    if __version__ != CHECKED_RELEASE:
        raise RuntimeError(
            f"cfn-lint {__version__} is installed; tests/support/cfn_lint.py memoizes two functions of cfn-lint "
            f"{CHECKED_RELEASE}: check that the new release's jsonschema.validators.create still makes a class from "
            f"its arguments alone and that the `fields` calls of context.context, jsonschema.validators and "
            f"jsonschema._filter still take dataclasses, run test_cfn_lint_reports_the_same_findings_as_released, "
            f"then set CHECKED_RELEASE"
        )

    # A dataclass's fields are fixed when its class is made: read them once per class. The three modules call
    # `fields(cls)` on every evolve and descend (~150,000 times for four templates).
    fields = cache(dataclasses.fields)
    for module in (cfnlint.context.context, cfnlint.jsonschema.validators, cfnlint.jsonschema._filter):
        _replace(module, "fields", fields)

    # create() makes a new Validator dataclass whose defaults are its three arguments; Validator.extend calls it
    # for every resource and rule. One class per distinct set of arguments (nothing mutates them or a
    # FunctionFilter once made; two equal FunctionFilters behave the same).
    create, classes = cfnlint.jsonschema.validators.create, {}

    def frozen(function_filter: Any) -> Any:
        if function_filter is None:
            return None
        values = ((f.name, getattr(function_filter, f.name)) for f in dataclasses.fields(function_filter))
        return type(function_filter), *((name, tuple(v) if isinstance(v, list) else v) for name, v in values)

    def create_once(validators=None, function_filter=None, fn_resolvers=None):
        key = (tuple((validators or {}).items()), frozen(function_filter), tuple((fn_resolvers or {}).items()))
        if key not in classes:
            classes[key] = create(validators=validators, function_filter=function_filter, fn_resolvers=fn_resolvers)
        return classes[key]

    _replace(cfnlint.jsonschema.validators, "create", create_once)
