"""A nested stack of many plain resources (a thousand Studio users) as one CloudFormation template built in Python.

Through jsii every resource is a round trip to the kernel (which deserialises its properties), and every token
string in its properties is found, split and resolved by CDK at each occurrence, a reference out of a nested stack
looked up again per occurrence for its parameter. For 90 users per nested stack that is hundreds of each.
`NestedTemplate` instead:
- turns each shared value into plain CloudFormation once (`value`):
  - a reference to another stack's resource: a nested stack parameter named as CDK names the ones it creates
    ("referenceto" + the target's unique id + the attribute, aws-cdk-lib core/lib/private/refs.ts
    `createNestedStackParameter`), used as {"Ref": name}: deployed nested stacks keep their parameters and the
    properties read exactly as before (a reference to the storage stack, which CDK wrote into the nested stack as
    Fn::GetStackOutput, now arrives as such a parameter, with the same value);
  - a value made of pseudo parameters only (AWS::Region, ...): its resolved form, the Fn::Join CDK renders;
- includes the template with one `CfnInclude` (`include`), keeping every logical id.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import cloudformation_include as cfn_include

_NOT_ALPHANUMERIC = re.compile(r"[^A-Za-z0-9]")
_MAX_ID_LEN = 255


def top_level_logical_id(construct_id: str) -> str:
    """CDK's logical id for a resource whose parent is the stack itself: the id's letters and digits (aws-cdk-lib
    core/lib/private/uniqueid.ts `makeUniqueId`, one path component, at most 255 characters). The per-user resources
    were `cdk.CfnResource(nested_stack, "Profile-<user>")` and keep those logical ids."""
    candidate = _NOT_ALPHANUMERIC.sub("", construct_id)
    if not candidate or len(candidate) > _MAX_ID_LEN:
        raise ValueError(f"{construct_id!r}: CDK derives this logical id with a hash")
    return candidate


def _pseudo_only(value: Any) -> bool:
    """True when a resolved value refers to nothing but pseudo parameters (AWS::Region, AWS::AccountId, ...)."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return isinstance(value["Ref"], str) and value["Ref"].startswith("AWS::")
        return all(k in ("Fn::Join", "Fn::Select", "Fn::Split") and _pseudo_only(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_pseudo_only(v) for v in value)
    return isinstance(value, (str, int, float, bool))


class NestedTemplate:
    def __init__(self, stack: cdk.NestedStack) -> None:
        self._stack = stack
        self._converted: dict[str, Any] = {}
        self._passed: dict[str, str] = {}  # nested stack parameter -> the parent's value

    def value(self, value: Any) -> Any:
        """`value` as plain CloudFormation for this nested stack's template (see the module's doc)."""
        if not isinstance(value, str):
            return value
        if value not in self._converted:
            self._converted[value] = self._convert(value)
        return self._converted[value]

    def _convert(self, value: str) -> Any:
        if not cdk.Token.is_unresolved(value):
            return value
        resolved = self._stack.resolve(value)
        if _pseudo_only(resolved):
            return resolved
        reference = cdk.Tokenization.reverse(value, fail_concat=False)
        if not isinstance(reference, cdk.Reference):
            raise ValueError(f"{value!r}: neither a reference nor made of pseudo parameters; pass its parts")
        # A reference to the parent: CDK's own parameter name. To another stack (the storage stack's file system):
        # CDK referred to it directly in the nested stack (Fn::GetStackOutput); now the parent passes it in.
        name = top_level_logical_id(f"reference-to-{cdk.Names.unique_id(reference.target)}{reference.display_name}")
        self._passed[name] = value
        return {"Ref": name}

    def include(self, template: dict[str, Any], *, dehydrated: list[str]) -> cfn_include.CfnInclude:
        """Adds the parameters `value` handed out to `template` and includes it in the nested stack.

        `dehydrated` resources stay unparsed: plain CfnResources, as `cdk.CfnResource` made them before (typed L1s
        would take the platform's tags, which these never had in the template), but CfnInclude drops their
        Condition and DependsOn and, under its own id, prefixes their logical ids. So the include's id is
        "Default", which CDK leaves out of logical ids (core/lib/private/uniqueid.ts HIDDEN_ID): each resource's
        logical id is its template key, as if it stood directly in the stack. Resources with a condition or
        dependencies must be parsed (custom resources are not taggable either)."""
        parameters = {**template.get("Parameters", {}), **{name: {"Type": "String"} for name in self._passed}}
        with tempfile.TemporaryDirectory(prefix="nested-template-") as folder:
            path = Path(folder) / "template.json"
            path.write_text(json.dumps({**template, "Parameters": parameters}))
            included = cfn_include.CfnInclude(
                self._stack, "Default", template_file=str(path), dehydrated_resources=dehydrated
            )
        included.override_logical_id("IncludedTemplate")  # its own id ("Default" alone) would be empty
        for name, value in self._passed.items():
            self._stack.set_parameter(name, value)
        return included
