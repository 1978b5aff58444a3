"""The one exception the config package raises: every problem of a config, one line each."""

from __future__ import annotations


class ConfigError(Exception):
    """Invalid configuration; `errors` holds one human-readable line per problem."""

    def __init__(self, source: str, errors: list[str]):
        self.source = source
        self.errors = errors
        super().__init__(f"{len(errors)} configuration error(s) in {source}:\n" + "\n".join(f"  - {e}" for e in errors))
