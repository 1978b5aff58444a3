"""The platform's one configuration model: `from platform_config import PlatformConfig, load_config`.

Three layers, as in aws-parallelcluster: YAML is parsed strictly (no YAML-1.1 `yes`/`no` booleans, no
duplicate keys: `loading`), pydantic checks shapes and ranges (one module per section: `network`, `storage`,
`cluster`, `accounting`, `directory`, `login_access`, `budgets`, `users`, `studio`, `eks`, `eks_governance`,
`observability`, `deployment`, held together by `model.PlatformConfig`), and the semantic rules check what spans
fields (`rules.RULES`, each section's rules beside its model). Every problem is reported at once as
`path: value — what is allowed`. Facts read from files (`facts`, `chart_pin`) are apart from the model and the
loading; what the platform derives from a config (`day2`, `accounting_plan`) is here too. Nothing here calls AWS.
"""

from platform_config.errors import ConfigError
from platform_config.loading import DEFAULT_CONFIG_PATH, context_overrides, load_config, parse_config
from platform_config.model import PlatformConfig, json_schema

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "ConfigError",
    "PlatformConfig",
    "context_overrides",
    "json_schema",
    "load_config",
    "parse_config",
]
