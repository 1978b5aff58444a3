"""A CloudFormation value as text, for comparing an ARN or a name CDK wrote as Fn::Join."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(value: Any, refs: Mapping[str, str] | None = None, *, token: str | None = None) -> str:
    """`value` with Fn::Join joined and Fn::Select resolved. A Ref named in `refs` becomes its value there. Anything
    else known only at deploy time (another Ref, Fn::GetAtt, any other function) becomes `token` when one is given;
    without one a Ref is written <Name>, an attribute <LogicalId.Attribute>, and any other function is an error."""
    refs = refs or {}
    if isinstance(value, str):
        return value
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError(f"not a CloudFormation string value: {value!r}")
    ((function, argument),) = value.items()
    if function == "Fn::Join":
        separator, parts = argument
        return separator.join(flatten(part, refs, token=token) for part in parts)
    if function == "Fn::Select" and isinstance(argument[1], list):
        return flatten(argument[1][int(argument[0])], refs, token=token)
    if function == "Ref" and argument in refs:
        return refs[argument]
    if token is not None:
        return token
    if function == "Ref":
        return f"<{argument}>"
    if function == "Fn::GetAtt":
        return "<{}.{}>".format(*argument)
    raise ValueError(f"cannot write {function} as text: {value!r}")
