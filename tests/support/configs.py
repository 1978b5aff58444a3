"""Config data for the config layer's tests: a small Slurm config, one key of it changed, the errors a config is
refused with, and the semantic rules a table of refused configs reaches (tests/test_config.py and
tests/test_config_cluster.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from platform_config import ConfigError, parse_config, rules
from support.data import set_path

CONTROLLER = {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1}
WORKERS = {
    "name": "workers",
    "role": "compute",
    "instance_type": "ml.g5.8xlarge",
    "instance_count": 2,
    "partitions": ["gpu"],
}


def base() -> dict[str, Any]:
    return {"name": "test", "cluster": {"instance_groups": [copy.deepcopy(CONTROLLER), copy.deepcopy(WORKERS)]}}


def with_(path: str, value: Any) -> dict[str, Any]:
    """base() with one dotted path (list indexes as numbers) set to value."""
    return set_path(base(), path, value)


def errors_of(data: dict[str, Any], source: str = "test.yaml") -> list[str]:
    """The errors parse_config refuses `data` with (fails if it accepts it)."""
    with pytest.raises(ConfigError) as info:
        parse_config(data, source)
    return info.value.errors


def rules_refusing(rows, monkeypatch) -> set[str]:
    """The semantic rules (platform_config.rules.RULES) whose own errors carry some row's expected message; a row the
    schema refuses (a shape, a range) reaches none."""
    reached: set[str] = set()

    def recorded(rule):
        def run(cfg):
            errors = rule(cfg)
            reached.update(rule.__name__ for expected in expecting if any(expected in e for e in errors))
            return errors

        run.__name__ = rule.__name__
        return run

    monkeypatch.setattr(rules, "RULES", tuple(recorded(rule) for rule in rules.RULES))
    for _, data, expected in rows:
        expecting = [expected]
        errors_of(data)
    return reached
