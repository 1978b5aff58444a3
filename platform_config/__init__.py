"""The platform's one configuration model: `from platform_config import PlatformConfig, load_config`.

Three layers, as in aws-parallelcluster: YAML is parsed strictly (no YAML-1.1 `yes`/`no` booleans, no
duplicate keys: `loading`), pydantic checks shapes and ranges (one module per section: `network`, `storage`,
`cluster`, `accounting`, `directory`, `login_access`, `budgets`, `users`, `studio`, `eks`, `eks_governance`,
`observability`, `deployment`, held together by `model.PlatformConfig`), and the semantic rules check what spans
fields (`rules.RULES`, each section's rules beside its model). Every problem is reported at once as
`path: value — what is allowed`. Facts read from files (`facts`, `chart_pin`) are apart from the model and the
loading; what the platform derives from a config (`day2`, `accounting_plan`) is here too. Nothing here calls AWS.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from platform_config.errors import ConfigError

if TYPE_CHECKING:
    from platform_config.loading import DEFAULT_CONFIG_PATH, context_overrides, load_config, parse_config
    from platform_config.model import PlatformConfig, json_schema

# The model (pydantic, ~0.4 s of CPU to import) loads on first use of one of these names, not with the package: a
# tool that needs one file-reading module (tools/hyperpod_chart.py's `chart_pin`) does not build the model first.
_LAZY = {
    "DEFAULT_CONFIG_PATH": "platform_config.loading",
    "context_overrides": "platform_config.loading",
    "load_config": "platform_config.loading",
    "parse_config": "platform_config.loading",
    "PlatformConfig": "platform_config.model",
    "json_schema": "platform_config.model",
}

if not TYPE_CHECKING:  # mypy reads the imports above, so a misspelt name stays an error there

    def __getattr__(name: str) -> Any:
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value


__all__ = [
    "DEFAULT_CONFIG_PATH",
    "ConfigError",
    "PlatformConfig",
    "context_overrides",
    "json_schema",
    "load_config",
    "parse_config",
]
