"""The key reference of docs/configuration.md, generated from the config model (platform_config/): every key with its
type, default, allowed values and description. The descriptions are the models' `Field(description=...)`, which
config/schema.json carries too, so editors show the same text.

    .venv/bin/python tools/config_reference.py           # rewrites the generated part of docs/configuration.md
    .venv/bin/python tools/config_reference.py --check   # exit 1 when it is stale (tests/test_config_reference.py)

`make docs` runs the first. Only the part between the BEGIN and END markers is generated; the text around it is
written by hand.
"""

from __future__ import annotations

import argparse
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union
from collections.abc import Iterator

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from platform_config import PlatformConfig  # noqa: E402

DOC = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- BEGIN GENERATED: tools/config_reference.py (make docs); do not edit by hand -->"
END = "<!-- END GENERATED -->"


def _unwrap(annotation: Any) -> tuple[Any, list[Any], bool]:
    """(the type without Optional and Annotated, the Annotated metadata, whether null is allowed)."""
    metadata: list[Any] = []
    nullable = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation, *extra = typing.get_args(annotation)
            for item in extra:  # a Field(...) inside Annotated carries its constraints in its own metadata
                metadata += item.metadata if isinstance(item, FieldInfo) else [item]
        elif origin in (Union, types.UnionType) and type(None) in typing.get_args(annotation):
            nullable = True
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007 - built at run time from a tuple
        else:
            return annotation, metadata, nullable


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _range(metadata: list[Any], unit: str = "") -> str | None:
    low = next((m.ge for m in metadata if isinstance(m, annotated_types.Ge)), None)
    high = next((m.le for m in metadata if isinstance(m, annotated_types.Le)), None)
    if low is not None and high is not None:
        return f"{low:,}–{high:,}{unit}"
    if low is not None:
        return f"≥ {low:,}{unit}"
    if high is not None:
        return f"≤ {high:,}{unit}"
    return None


def _lengths(metadata: list[Any], what: str, one: str) -> str | None:
    low = next((m.min_length for m in metadata if isinstance(m, annotated_types.MinLen)), None)
    high = next((m.max_length for m in metadata if isinstance(m, annotated_types.MaxLen)), None)
    if low and high:
        return f"{low}–{high} {what}"
    if high is not None:
        return f"at most {high} {what}"
    if low:
        return f"at least {low} {one if low == 1 else what}"
    return None


def _checks(metadata: list[Any]) -> list[str]:
    """What a string's own checks (platform_config.fields.pattern and friends) say is allowed."""
    return [m.func.allowed for m in metadata if hasattr(getattr(m, "func", None), "allowed")]


def describe(annotation: Any, metadata: list[Any]) -> tuple[str, list[str]]:
    """(type, what is allowed) of a field's annotation and its constraints."""
    inner, extra, nullable = _unwrap(annotation)
    metadata = [*metadata, *extra]
    origin = typing.get_origin(inner)
    allowed: list[str] = []
    if origin is Literal:
        values = typing.get_args(inner)
        kind = "integer" if all(isinstance(v, int) for v in values) else "string"
        allowed.append(", ".join(f"`{v}`" for v in values) if len(values) > 1 else f"`{values[0]}`")
    elif origin is list:
        item_type, item_allowed = describe(typing.get_args(inner)[0], [])
        kind = "list of objects" if item_type == "object" else f"list of {item_type}s"
        allowed += [f"each: {a}" for a in item_allowed]
        allowed += filter(None, [_lengths(metadata, "entries", "entry")])
    elif origin is dict:
        (key_type, key_allowed), (value_type, value_allowed) = (describe(a, []) for a in typing.get_args(inner))
        kind = f"map of {key_type} to {value_type}"
        allowed += [f"keys: {a}" for a in key_allowed] + [f"values: {a}" for a in value_allowed]
    elif _is_model(inner):
        kind = "object"
    elif inner is bool:
        kind = "boolean"
    elif inner is int:
        kind = "integer"
        allowed += filter(None, [_range(metadata)])
    elif inner is str:
        kind = "string"
        allowed += _checks(metadata) or list(filter(None, [_lengths(metadata, "characters", "character")]))
    else:
        raise TypeError(f"no rendering for {inner!r}")
    return kind + (" or null" if nullable else ""), allowed


def _yaml(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_defaults=True)
    elif isinstance(value, list):
        value = [v.model_dump(exclude_defaults=True) if isinstance(v, BaseModel) else v for v in value]
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf, sort_keys=False).strip()


def default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.get_default(call_default_factory=True)  # our factories take no validated data
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return ""  # its keys are listed below it
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int):
        return f"`{value}`"
    return f"`{_yaml(value)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


Row = tuple[str, str, str, str, str]


def field_rows(
    path: str, field: FieldInfo, later: list[tuple[str, type[BaseModel]]], *, flatten: bool = True
) -> Iterator[Row]:
    """The row of one key and, with `flatten`, the rows of its keys when it is an object. A list of objects gets a
    table of its own: (its path, the item model) is appended to `later`."""
    kind, allowed = describe(field.annotation, field.metadata)
    yield path, kind, default(field), "; ".join(allowed), field.description or ""
    inner = _unwrap(field.annotation)[0]
    if _is_model(inner) and flatten:
        for name, child in inner.model_fields.items():
            yield from field_rows(f"{path}.{name}", child, later)
    elif typing.get_origin(inner) is list and _is_model(_unwrap(typing.get_args(inner)[0])[0]):
        later.append((f"{path}[]", _unwrap(typing.get_args(inner)[0])[0]))


def table(rows: list[Row]) -> list[str]:
    lines = ["| Key | Type | Default | Allowed | Description |", "|---|---|---|---|---|"]
    lines += [
        f"| `{path}` | {kind} | {_cell(value)} | {_cell(allowed)} | {_cell(text)} |"
        for path, kind, value, allowed, text in rows
    ]
    return lines


def reference() -> str:
    """The generated part of docs/configuration.md: a table of the top-level keys, then one per section and one per
    list of objects (after the table that holds the list), in the model's order."""
    later: list[tuple[str, type[BaseModel]]] = []
    top: list[Row] = []
    for name, field in PlatformConfig.model_fields.items():
        top += field_rows(name, field, later, flatten=False)
        if _is_model(_unwrap(field.annotation)[0]):
            later.append((name, _unwrap(field.annotation)[0]))
    out = [BEGIN, "", "### Top-level keys", "", *table(top)]
    queue = later
    while queue:
        path, model = queue.pop(0)
        nested: list[tuple[str, type[BaseModel]]] = []
        body = [
            row for name, field in model.model_fields.items() for row in field_rows(f"{path}.{name}", field, nested)
        ]
        out += ["", f"### `{path}`", ""]
        if model.__doc__:
            out += [" ".join(model.__doc__.split()), ""]
        out += table(body)
        queue = nested + queue
    return "\n".join(out + ["", END])


def rendered(document: str) -> str:
    """`document` with its generated part replaced by the current reference."""
    start, end = document.index(BEGIN), document.index(END) + len(END)
    return document[:start] + reference() + document[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/configuration.md is stale")
    args = parser.parse_args(argv)
    current = DOC.read_text()
    fresh = rendered(current)
    if args.check:
        if fresh != current:
            print(f"{DOC.relative_to(ROOT)} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
