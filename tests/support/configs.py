"""Config data for the config layer's tests: a small Slurm config, one key of it changed, and the errors a config
is refused with."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from platform_config import ConfigError, parse_config
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
