"""Which resources a template change would replace or delete, read from the CloudFormation resource schemas.

Compares two synthesized cloud assemblies (before / after a config change) the way CloudFormation decides an
update: a resource is replaced when a create-only property (the schema's `createOnlyProperties`, plus
`conditionalCreateOnlyProperties`, which may replace) changes, when its type changes, or when a create-only
property refers to a resource that is itself replaced (Ref / Fn::GetAtt, or Fn::GetStackOutput of an output that
does). Conditions are evaluated with each parameter's default (`make deploy` passes the config's value as that
default), so a parameter flip that drops a resource shows up as a deletion.

The schemas are the ones cfn-lint bundles (a copy of the CloudFormation registry per region). A few schemas
omit properties the CloudFormation documentation marks "Update requires: Replacement"; those are added from the
documentation in DOCUMENTED_CREATE_ONLY.

Used by the day-2 test matrix (tests/test_day2.py) and from the command line:
    python -m cli.template_replacements BEFORE_CDK_OUT AFTER_CDK_OUT
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from collections.abc import Iterator


from cli.preconditions import missing_assembly

# Resources that hold data or identity: never replaced or deleted by a routine update.
STATEFUL_TYPES = frozenset(
    {
        "AWS::FSx::FileSystem",
        "AWS::FSx::DataRepositoryAssociation",
        "AWS::S3::Bucket",
        "AWS::KMS::Key",
        "AWS::SageMaker::Domain",
        "AWS::SageMaker::UserProfile",
        "AWS::SageMaker::Cluster",
        "AWS::EKS::Cluster",
        "AWS::SecretsManager::Secret",
        "AWS::RDS::DBCluster",
        "AWS::RDS::DBInstance",
        "AWS::SageMaker::MlflowTrackingServer",
    }
)

# "Update requires: Replacement" in the CloudFormation User Guide, missing from the bundled registry schema.
# AWS::FSx::FileSystem LustreConfiguration (docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/
# aws-properties-fsx-filesystem-lustreconfiguration.html): DeploymentType, DriveCacheType and
# PerUnitStorageThroughput "Update requires: Replacement"; AWS::FSx::FileSystem StorageType: Replacement.
# (StorageCapacity is "Update requires: No interruption" there, increases only: UpdateFileSystem cannot shrink.)
DOCUMENTED_CREATE_ONLY = {
    "AWS::FSx::FileSystem": (
        "/properties/StorageType",
        "/properties/LustreConfiguration/DeploymentType",
        "/properties/LustreConfiguration/DriveCacheType",
        "/properties/LustreConfiguration/PerUnitStorageThroughput",
    ),
}

MISSING = object()


@cache
def create_only_paths(resource_type: str, region: str = "us-west-2") -> tuple[str, ...]:
    """Create-only property paths ("/properties/A/B") of a type; () for custom resources (Custom::*, whose
    replacement is decided by their handler's physical id) and types without a schema."""
    if not resource_type.startswith("AWS::"):
        return ()
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    except Exception:  # noqa: BLE001 - cfn-lint raises its own not-found types per version
        return ()
    paths = [*schema.get("createOnlyProperties", []), *schema.get("conditionalCreateOnlyProperties", [])]
    paths += DOCUMENTED_CREATE_ONLY.get(resource_type, ())
    return tuple(dict.fromkeys(paths))


def name_paths(resource_type: str, region: str = "us-west-2") -> tuple[str, ...]:
    """Create-only properties that name the resource (BucketName, ClusterName, StudioLifecycleConfigName, ...)."""
    return tuple(
        p
        for p in create_only_paths(resource_type, region)
        if p.count("/") == 2 and p.endswith("Name") and not p.endswith("KeyName")
    )


@dataclass(frozen=True)
class Finding:
    stack: str  # template file name
    logical_id: str
    resource_type: str
    action: str  # "replace" or "delete"
    reason: str  # the create-only property (and old -> new) or why it is deleted
    stateful: bool
    custom_name: str  # the fixed name that makes a replacement fail, "" if none

    def __str__(self) -> str:
        named = f", custom name {self.custom_name!r}" if self.custom_name else ""
        return f"{self.stack}: {self.logical_id} ({self.resource_type}{named}) would be {self.action}d: {self.reason}"


# --- evaluating a template under its parameter defaults -------------------------------------------------------


def _conditions(template: dict) -> dict[str, bool]:
    params = {name: p.get("Default") for name, p in template.get("Parameters", {}).items()}
    raw = template.get("Conditions", {})
    done: dict[str, bool] = {}

    def value(expr: Any) -> Any:
        if isinstance(expr, dict) and "Ref" in expr and expr["Ref"] in params:
            return params[expr["Ref"]]
        return expr

    def evaluate(expr: Any) -> bool:
        if isinstance(expr, dict):
            if "Condition" in expr:
                return condition(expr["Condition"])
            if "Fn::Equals" in expr:
                left, right = (value(v) for v in expr["Fn::Equals"])
                return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)
            if "Fn::Not" in expr:
                return not evaluate(expr["Fn::Not"][0])
            if "Fn::And" in expr:
                return all(evaluate(e) for e in expr["Fn::And"])
            if "Fn::Or" in expr:
                return any(evaluate(e) for e in expr["Fn::Or"])
        raise ValueError(f"cannot evaluate condition {expr!r}")

    def condition(name: str) -> bool:
        if name not in done:
            done[name] = evaluate(raw[name])
        return done[name]

    for name in raw:
        condition(name)
    return done


def _resolve(value: Any, conditions: dict[str, bool]) -> Any:
    if isinstance(value, dict):
        if "Fn::If" in value:
            name, if_true, if_false = value["Fn::If"]
            return _resolve(if_true if conditions[name] else if_false, conditions)
        if value == {"Ref": "AWS::NoValue"}:
            return MISSING
        out = {k: _resolve(v, conditions) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not MISSING}
    if isinstance(value, list):
        return [v for v in (_resolve(v, conditions) for v in value) if v is not MISSING]
    return value


def effective_resources(template: dict) -> dict[str, dict]:
    """Resources that exist under the parameter defaults, with Fn::If resolved."""
    conditions = _conditions(template)
    return {
        logical_id: _resolve(resource, conditions)
        for logical_id, resource in template.get("Resources", {}).items()
        if "Condition" not in resource or conditions[resource["Condition"]]
    }


def _at(properties: dict, path: str) -> Any:
    node: Any = {"properties": properties}
    for part in path.strip("/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def _references(value: Any) -> Iterator[tuple[str, str]]:
    """("resource", logical id) for Ref/GetAtt, ("output", "stack/output") for Fn::GetStackOutput."""
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            yield "resource", value["Ref"]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            yield "resource", target[0] if isinstance(target, list) else str(target).split(".")[0]
        if "Fn::GetStackOutput" in value:
            ref = value["Fn::GetStackOutput"]
            yield "output", f"{ref.get('StackName')}/{ref.get('OutputName')}"
        for v in value.values():
            yield from _references(v)
    elif isinstance(value, list):
        for v in value:
            yield from _references(v)


def _dump(value: Any) -> str:
    return "(absent)" if value is MISSING else json.dumps(value, sort_keys=True)[:120]


def compare(
    before: dict[str, dict],
    after: dict[str, dict],
    *,
    region: str = "us-west-2",
    stack_names: dict[str, str] | None = None,
) -> list[Finding]:
    """`before`/`after`: template file name -> template. `stack_names` maps file name -> deployed stack name
    (for Fn::GetStackOutput); defaults to the file name without `.template.json`."""
    names = stack_names or {f: f.removesuffix(".template.json") for f in {*before, *after}}
    findings: list[Finding] = []
    replaced_outputs: set[str] = set()
    # Upstream stacks first, so replaced outputs are known before their consumers: iterate to a fixpoint.
    for _ in range(len(before) + 1):
        findings, changed = [], False
        for file, old_template in before.items():
            if file not in after:
                continue  # a whole stack left: `cdk deploy` never deletes stacks
            old, new = effective_resources(old_template), effective_resources(after[file])
            replaced: dict[str, str] = {}
            while True:
                grew = False
                for logical_id, resource in new.items():
                    if logical_id not in old or logical_id in replaced:
                        continue
                    previous = old[logical_id]
                    if previous["Type"] != resource["Type"]:
                        replaced[logical_id], grew = f"type {previous['Type']} -> {resource['Type']}", True
                        continue
                    for path in create_only_paths(resource["Type"], region):
                        was = _at(previous.get("Properties", {}), path)
                        now = _at(resource.get("Properties", {}), path)
                        if was != now:
                            replaced[logical_id] = f"{path.removeprefix('/properties/')}: {_dump(was)} -> {_dump(now)}"
                        else:
                            hit = next(
                                (
                                    ref
                                    for kind, ref in _references(now)
                                    if (kind == "resource" and ref in replaced)
                                    or (kind == "output" and ref in replaced_outputs)
                                ),
                                None,
                            )
                            if hit is None:
                                continue
                            replaced[logical_id] = (
                                f"{path.removeprefix('/properties/')} refers to {hit}, which is replaced"
                            )
                        grew = True
                        break
                if not grew:
                    break
            for logical_id, reason in replaced.items():
                findings.append(
                    _finding(file, logical_id, old[logical_id], "replace", reason, region, new=new[logical_id])
                )
            for logical_id in old.keys() - new.keys():
                findings.append(
                    _finding(
                        file,
                        logical_id,
                        old[logical_id],
                        "delete",
                        "no longer in the template (or its condition is now false)",
                        region,
                    )
                )
            for output, spec in after[file].get("Outputs", {}).items():
                key = f"{names[file]}/{output}"
                if key not in replaced_outputs and any(
                    kind == "resource" and ref in replaced for kind, ref in _references(spec.get("Value"))
                ):
                    replaced_outputs.add(key)
                    changed = True
        if not changed:
            break
    return sorted(findings, key=lambda f: (f.stack, f.logical_id))


def _finding(
    file: str, logical_id: str, resource: dict, action: str, reason: str, region: str, new: dict | None = None
) -> Finding:
    """`custom_name` is set when a replacement keeps a fixed name: CloudFormation creates the replacement before
    deleting the original, so the create fails on the name (a new name, e.g. a content hash, is fine)."""
    props = resource.get("Properties", {})
    new_props = (new or resource).get("Properties", {})
    custom = next(
        (
            v
            for p in name_paths(resource["Type"], region)
            if isinstance(v := _at(props, p), str) and (new is None or _at(new_props, p) == v)
        ),
        "",
    )
    return Finding(
        stack=file,
        logical_id=logical_id,
        resource_type=resource["Type"],
        action=action,
        reason=reason,
        stateful=resource["Type"] in STATEFUL_TYPES,
        custom_name=custom,
    )


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _policy_documents(resource: dict) -> Iterator[dict]:
    props = resource.get("Properties", {})
    if resource.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        yield props.get("PolicyDocument") or {}
    if resource.get("Type") == "AWS::IAM::Role":
        for policy in props.get("Policies") or []:
            yield policy.get("PolicyDocument") or {}


def _grants(template: dict) -> set[tuple[str, str, str, str]]:
    """(logical id, effect, action, resource) for every statement of every IAM policy, role and managed-policy
    attachment in the template; intrinsic functions are kept as their JSON."""
    grants = set()
    for logical_id, resource in template.get("Resources", {}).items():
        for document in _policy_documents(resource):
            statements = document.get("Statement") or []
            for statement in statements if isinstance(statements, list) else [statements]:
                actions = statement.get("Action", statement.get("NotAction", []))
                targets = statement.get("Resource", statement.get("NotResource", "*"))
                for action in actions if isinstance(actions, list) else [actions]:
                    for target in targets if isinstance(targets, list) else [targets]:
                        grants.add((logical_id, statement.get("Effect", "Allow"), _show(action), _show(target)))
        if resource.get("Type") == "AWS::IAM::Role":
            for arn in resource.get("Properties", {}).get("ManagedPolicyArns") or []:
                grants.add((logical_id, "Allow", "managed policy", _show(arn)))
    return grants


def iam_widening(before: dict, after: dict) -> list[str]:
    """What a template change adds to what IAM allows: Allow statements (action on resource) and managed policies
    that are new, and Deny statements that are gone; one line each, by logical id."""
    old, new = _grants(before), _grants(after)
    lines = [f"{lid}: + {action} on {target}" for lid, effect, action, target in sorted(new - old) if effect == "Allow"]
    lines += [
        f"{lid}: - Deny {action} on {target}" for lid, effect, action, target in sorted(old - new) if effect == "Deny"
    ]
    return lines


def load_assembly(out_dir: Path) -> dict[str, dict]:
    """Every template (top-level and nested) of a cloud assembly, by file name."""
    return {p.name: json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("*.template.json"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cli.template_replacements",
        description=__doc__.split("\n\n")[0],
        epilog="Prints one line per replaced or deleted resource (STATEFUL first when "
        "it holds data); exit status 1 when a stateful or custom-named one is.",
    )
    parser.add_argument("before", type=Path, help="the cloud assembly before the change (a cdk.out)")
    parser.add_argument("after", type=Path, help="the cloud assembly after it")
    args = parser.parse_args(argv)
    for out_dir in (args.before, args.after):
        problem = missing_assembly(out_dir)
        if problem:
            print(f"template_replacements: {problem}", file=sys.stderr)
            return 2
    findings = compare(load_assembly(args.before), load_assembly(args.after))
    for finding in findings:
        print(("STATEFUL " if finding.stateful else "") + str(finding))
    return 1 if any(f.stateful or f.custom_name for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
