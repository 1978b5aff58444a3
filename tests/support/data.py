"""Nested config and job data changed at one dotted path, for tables of bad input."""

from __future__ import annotations

from typing import Any

DROP = object()  # as a value: remove the key instead of setting it


def set_path(data: Any, path: str, value: Any, *, separator: str = ".") -> Any:
    """Sets data[a][b][c] = value for the path "a.b.c" (a part made of digits indexes a list; missing mappings on
    the way are created) and returns data. `value` DROP deletes the key."""
    *parents, last = path.split(separator)
    node = data
    for part in parents:
        key: Any = int(part) if part.isdigit() and isinstance(node, list) else part
        if isinstance(node, dict) and key not in node:
            node[key] = {}
        node = node[key]
    key = int(last) if last.isdigit() and isinstance(node, list) else last
    if value is DROP:
        del node[key]
    else:
        node[key] = value
    return data
