"""Values that every resource of a nested stack shares, handed in once per stack instead of once per resource.

A token string in a resource's properties (a reference to a resource of the parent stack, or a name built from
pseudo parameters such as AWS::Region) is found, split and resolved by CDK at every occurrence, and each reference
out of a nested stack is looked up again to find its parameter. A nested stack of 90 Studio users repeats the same
handful of values hundreds of times. `NestedInputs.value` turns each into plain CloudFormation once:
- a reference to a resource of the parent stack: the nested stack parameter CDK itself creates for it, under the
  same construct id (so the same name: "referenceto" + the target's unique id + the attribute, aws-cdk-lib
  core/lib/private/refs.ts `createNestedStackParameter`), used as {"Ref": name}. Deployed nested stacks keep
  their parameters and every property reads exactly as before;
- a value made of pseudo parameters only: its resolved form, the same Fn::Join CDK would render;
- anything else (a literal, a reference to another top-level stack, a mix): unchanged, for CDK to handle.

`logical_id` computes the logical id of a resource created directly in the stack, which reading `logical_id`
would cost a round trip to the jsii kernel per resource.
"""
from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk

_NOT_ALPHANUMERIC = re.compile(r"[^A-Za-z0-9]")
_MAX_ID_LEN = 255


def top_level_logical_id(construct_id: str) -> str:
    """CDK's logical id for a resource whose parent is the stack itself: the id's letters and digits (aws-cdk-lib
    core/lib/private/uniqueid.ts `makeUniqueId`, one path component, at most 255 characters)."""
    candidate = _NOT_ALPHANUMERIC.sub("", construct_id)
    if not candidate or len(candidate) > _MAX_ID_LEN:
        raise ValueError(f"{construct_id!r}: CDK derives this logical id with a hash; read resource.logical_id")
    return candidate


def _pseudo_only(value: Any) -> bool:
    """True when a resolved value refers to nothing but pseudo parameters (AWS::Region, AWS::AccountId, ...)."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return isinstance(value["Ref"], str) and value["Ref"].startswith("AWS::")
        return all(k in ("Fn::Join", "Fn::Sub", "Fn::Select", "Fn::Split") and _pseudo_only(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_pseudo_only(v) for v in value)
    return isinstance(value, (str, int, float, bool))


class NestedInputs:
    def __init__(self, stack: cdk.NestedStack) -> None:
        self._stack = stack
        self._parent_path = stack.nested_stack_parent.node.path
        self._values: dict[str, Any] = {}
        self._logical_ids_checked = False

    def value(self, value: Any) -> Any:
        """`value` as plain CloudFormation for resources directly in this nested stack (see the module's doc)."""
        if not isinstance(value, str):
            return value
        if value not in self._values:
            self._values[value] = self._convert(value)
        return self._values[value]

    def _convert(self, value: str) -> Any:
        if not cdk.Token.is_unresolved(value):
            return value
        resolved = self._stack.resolve(value)
        if _pseudo_only(resolved):
            return resolved
        reference = cdk.Tokenization.reverse(value, fail_concat=False)
        if not isinstance(reference, cdk.Reference) or cdk.Stack.of(reference.target).node.path != self._parent_path:
            return value
        construct_id = f"reference-to-{cdk.Names.unique_id(reference.target)}{reference.display_name}"
        parameter = self._stack.node.try_find_child(construct_id)
        if parameter is None:
            parameter = cdk.CfnParameter(self._stack, construct_id, type="String")
            self._stack.set_parameter(parameter.logical_id, value)
        return {"Ref": parameter.logical_id}

    def logical_id(self, resource: cdk.CfnResource, construct_id: str) -> str:
        """The logical id of `resource`, created in this stack as `construct_id`; the first one is checked against
        CDK's own answer, so a change of CDK's rule fails the synth instead of leaving dangling references."""
        computed = top_level_logical_id(construct_id)
        if not self._logical_ids_checked:
            actual = self._stack.get_logical_id(resource)  # `logical_id` itself is a token until synthesis
            if actual != computed:
                raise RuntimeError(f"{construct_id}: CDK named it {actual!r}, expected {computed!r}")
            self._logical_ids_checked = True
        return computed
