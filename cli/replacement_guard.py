"""Replacement guard: `make deploy` goes through here so nothing stateful is replaced or deleted by surprise.

    python -m cli.replacement_guard deploy [--allow LOGICAL_ID ...] [--allow-all] [-- extra cdk args]
    python -m cli.replacement_guard diff   [-- extra cdk args]
    python -m cli.replacement_guard parameters        # the --parameters the config implies

deploy:
 1. synthesizes (CONFIG from the environment, default config/default.yaml, as `-c config=`);
 2. compares the config's create-only inputs with the deployed storage stack's snapshot (template metadata,
    platform_config/day2.py) and refuses edits that can never be in place, naming the config key;
 3. on a first deployment, deploys and protects (step 6); every `cdk deploy` runs with `--concurrency` set to the
    most stacks the assembly's dependency graph lets deploy side by side (cli/stack_graph.py);
 4. otherwise creates change sets for every stack (`cdk deploy --method=prepare-change-set`, nested stacks
    included) and reads them (DescribeChangeSet): any stateful resource that would be replaced (Replacement True
    or Conditional) or removed stops the deployment, naming the stack, resource, type, physical id and the
    properties that require recreation; `--allow LOGICAL_ID` (or `--allow-all`) lets a named one through;
 5. executes the change sets (`cdk deploy --method=execute-change-set`);
 6. sets on every stack (and nested stack) a stack policy that denies Update:Replace and Update:Delete on its
    stateful resources, so a deployment that bypasses this tool is stopped by CloudFormation itself. An allowed
    resource is left out of the policy for the duration of that deployment.

Every template parameter (e.g. the Studio stack's SharedFSx) is passed explicitly with the config's value (the
synthesized template's default), so the YAML and the deployed stack cannot silently differ; a value set by hand
with `aws cloudformation deploy --parameter-overrides` is overwritten by the next `make deploy`.

Shapes follow botocore's CloudFormation model (DescribeChangeSet, GetTemplate, SetStackPolicy).

deploy and diff need AWS credentials: without them (or when a `cdk` step or an AWS call fails) one line on stderr says
what stopped it, and the exit status is non-zero.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cli.preconditions import missing_credentials, one_line  # noqa: E402
from cli.stack_graph import concurrency, stack_dependencies  # noqa: E402
from cli.template_replacements import STATEFUL_TYPES  # noqa: E402
from platform_config.day2 import SNAPSHOT_METADATA_KEY, check_day2  # noqa: E402

CHANGE_SET = "hyperpod-replacement-guard"
CDK_PARAMETERS = frozenset({"BootstrapVersion"})  # the CDK's own, resolved from SSM


@dataclass(frozen=True)
class Stack:
    name: str
    region: str | None
    template: dict[str, Any]
    template_file: Path


def assembly_stacks(out_dir: Path) -> list[Stack]:
    manifest = json.loads((out_dir / "manifest.json").read_text())
    stacks = []
    for artifact in manifest["artifacts"].values():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        props = artifact["properties"]
        region = artifact.get("environment", "").rsplit("/", 1)[-1]
        path = out_dir / props["templateFile"]
        stacks.append(Stack(name=props.get("stackName", path.name.removesuffix(".template.json")),
                            region=None if region.startswith("unknown") else region,
                            template=json.loads(path.read_text()), template_file=path))
    return stacks


def parameter_arguments(stacks: Iterable[Stack]) -> list[str]:
    """`--parameters STACK:NAME=VALUE` for every template parameter the platform defines."""
    args = []
    for stack in stacks:
        for name, spec in stack.template.get("Parameters", {}).items():
            if name in CDK_PARAMETERS or "Default" not in spec:
                continue
            args += ["--parameters", f"{stack.name}:{name}={spec['Default']}"]
    return args


# --- change sets ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Violation:
    stack: str
    logical_id: str
    resource_type: str
    physical_id: str
    action: str          # "replace", "may replace" or "delete"
    causes: tuple[str, ...]

    def __str__(self) -> str:
        why = f" because of {', '.join(self.causes)}" if self.causes else ""
        return (f"{self.stack}: {self.logical_id} ({self.resource_type} {self.physical_id or '(no physical id)'}) "
                f"would be {'deleted' if self.action == 'delete' else self.action + 'd'}{why}")


def describe_changes(cfn, stack_name: str, change_set: str) -> list[tuple[str, dict[str, Any]]]:
    """(stack name, ResourceChange) for every change in the change set and in its nested change sets. An absent
    change set (the CLI deletes one that holds no changes) means no changes."""
    from botocore.exceptions import ClientError
    changes: list[tuple[str, dict[str, Any]]] = []
    # A nested change set is named by its ARN, which needs no stack name.
    kwargs: dict[str, Any] = {"ChangeSetName": change_set}
    if not change_set.startswith("arn:"):
        kwargs["StackName"] = stack_name
    while True:
        try:
            page = cfn.describe_change_set(**kwargs)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ChangeSetNotFound":
                return changes
            raise
        for change in page.get("Changes", []):
            resource = change.get("ResourceChange")
            if not resource:
                continue
            changes.append((page.get("StackName", stack_name), resource))
            if resource.get("ChangeSetId") and resource.get("ResourceType") == "AWS::CloudFormation::Stack":
                changes += describe_changes(cfn, resource.get("PhysicalResourceId") or stack_name,
                                            resource["ChangeSetId"])
        if not page.get("NextToken"):
            return changes
        kwargs["NextToken"] = page["NextToken"]


def violations(changes: Iterable[tuple[str, dict[str, Any]]]) -> list[Violation]:
    found = []
    for stack, change in changes:
        if change.get("ResourceType") not in STATEFUL_TYPES:
            continue
        action = change.get("Action")
        replacement = change.get("Replacement")
        if action == "Remove":
            kind = "delete"
        elif action == "Modify" and replacement in ("True", "Conditional"):
            kind = "replace" if replacement == "True" else "may replace"
        else:
            continue
        causes = []
        for detail in change.get("Details", []):
            target = detail.get("Target", {})
            if target.get("RequiresRecreation") in ("Always", "Conditionally"):
                name = target.get("Name") or target.get("Attribute", "")
                cause = f"{target.get('Attribute', '')} {name}".strip()
                if detail.get("CausingEntity"):
                    cause += f" (from {detail['CausingEntity']})"
                causes.append(f"{cause} [{target['RequiresRecreation'].lower()} requires recreation]")
        found.append(Violation(stack=stack, logical_id=change.get("LogicalResourceId", ""),
                               resource_type=change["ResourceType"], physical_id=change.get("PhysicalResourceId", ""),
                               action=kind, causes=tuple(dict.fromkeys(causes))))
    return found


def blocking(found: list[Violation], allowed: set[str], allow_all: bool) -> list[Violation]:
    return [] if allow_all else [v for v in found if v.logical_id not in allowed]


# --- day-2 rules against the deployed snapshot ------------------------------------------------------------------

def deployed_snapshot(cfn, stack_name: str) -> dict[str, Any] | None:
    """The snapshot in the deployed storage stack's template, None when the stack does not exist yet."""
    from botocore.exceptions import ClientError
    try:
        body = cfn.get_template(StackName=stack_name, TemplateStage="Original")["TemplateBody"]
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", "")
        if error.response.get("Error", {}).get("Code") == "ValidationError" and "does not exist" in message:
            return None
        raise
    template = body if isinstance(body, dict) else json.loads(body)
    return (template.get("Metadata") or {}).get(SNAPSHOT_METADATA_KEY, {})


# --- stack policies ------------------------------------------------------------------------------------------------

def stateful_ids(template: dict[str, Any]) -> list[str]:
    return sorted(lid for lid, r in template.get("Resources", {}).items() if r.get("Type") in STATEFUL_TYPES)


def stack_policy(protected: Iterable[str]) -> dict[str, Any]:
    statements: list[dict[str, Any]] = [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}]
    resources = [f"LogicalResourceId/{lid}" for lid in sorted(protected)]
    if resources:
        statements.append({"Effect": "Deny", "Action": ["Update:Replace", "Update:Delete"], "Principal": "*",
                           "Resource": resources})
    return {"Statement": statements}


def protect(cfn, stack: Stack, out_dir: Path, allowed: set[str]) -> list[str]:
    """Set the stack policy on the stack and its nested stacks; returns the stacks it was set on."""
    done = []
    cfn.set_stack_policy(StackName=stack.name, StackPolicyBody=json.dumps(
        stack_policy(set(stateful_ids(stack.template)) - allowed)))
    done.append(stack.name)
    nested_templates = {lid: r.get("Metadata", {}).get("aws:asset:path")
                        for lid, r in stack.template.get("Resources", {}).items()
                        if r.get("Type") == "AWS::CloudFormation::Stack"}
    if not nested_templates:
        return done
    for resource in cfn.describe_stack_resources(StackName=stack.name).get("StackResources", []):
        path = nested_templates.get(resource.get("LogicalResourceId"))
        if not path or not resource.get("PhysicalResourceId"):
            continue
        nested = json.loads((out_dir / path).read_text())
        cfn.set_stack_policy(StackName=resource["PhysicalResourceId"], StackPolicyBody=json.dumps(
            stack_policy(set(stateful_ids(nested)) - allowed)))
        done.append(resource["PhysicalResourceId"])
    return done


# --- orchestration -------------------------------------------------------------------------------------------------

def _cdk(*args: str) -> None:
    command = [str(ROOT / "node_modules" / ".bin" / "cdk"), *args]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def _client(region: str | None):
    import boto3
    return boto3.client("cloudformation", region_name=region)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cli.replacement_guard", description=__doc__.split("\n\n")[0],
                                     epilog="CONFIG (environment) names the config file, default config/default.yaml.")
    parser.add_argument("command", choices=["deploy", "diff", "parameters"])
    parser.add_argument("--allow", action="append", default=[], metavar="LOGICAL_ID",
                        help="let this stateful resource be replaced or deleted (repeatable)")
    parser.add_argument("--allow-all", action="store_true", help="let every replacement and deletion through")
    parser.add_argument("--out", default="cdk.out")
    parser.add_argument("cdk_args", nargs="*", help="after --: passed to cdk")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = os.environ.get("CONFIG", "config/default.yaml")
    out_dir = ROOT / args.out
    context = ["-c", f"config={config}", "--output", args.out]

    _cdk("synth", "--quiet", "--no-notices", *context)
    stacks = assembly_stacks(out_dir)
    params = parameter_arguments(stacks)
    if args.command == "parameters":
        print(" ".join(params))
        return 0
    if args.command == "diff":
        _cdk("diff", "--all", "--no-notices", *context, *params, *args.cdk_args)
        return 0

    allowed = set(args.allow)
    storage = next(s for s in stacks if SNAPSHOT_METADATA_KEY in s.template.get("Metadata", {}))
    cfn = _client(storage.region)
    previous = deployed_snapshot(cfn, storage.name)
    # As many stacks at once as the assembly's dependency graph lets run side by side (cli/stack_graph.py).
    deploy = ["deploy", "--all", "--no-notices", "--require-approval", "never",
              "--concurrency", str(concurrency(stack_dependencies(out_dir))), *context, *params, *args.cdk_args]
    if previous is None:
        print(f"{storage.name} does not exist yet: first deployment")
        _cdk(*deploy)
    else:
        errors, warnings = check_day2(previous, storage.template["Metadata"][SNAPSHOT_METADATA_KEY])
        for warning in warnings:
            print(f"warning: {warning}")
        if errors and not args.allow_all:
            print(f"refusing to deploy {config}: {len(errors)} edit(s) can never be deployed in place:")
            for error in errors:
                print(f"  - {error}")
            return 1
        _cdk(*deploy, "--method=prepare-change-set", "--change-set-name", CHANGE_SET)
        found = []
        for stack in stacks:
            found += violations(describe_changes(_client(stack.region), stack.name, CHANGE_SET))
        for violation in found:
            print(("allowed: " if violation not in blocking(found, allowed, args.allow_all) else "") + str(violation))
        stop = blocking(found, allowed, args.allow_all)
        if stop:
            print(f"refusing to deploy: {len(stop)} stateful resource(s) would be replaced or deleted (data, "
                  "identity or a fixed name would be lost). Rerun with --allow LOGICAL_ID for each one you mean "
                  "(make deploy ALLOW='Id1 Id2'), after moving its data.")
            return 1
        if allowed or args.allow_all:
            for stack in stacks:
                protect(_client(stack.region), stack, out_dir,
                        allowed | (set(stateful_ids(stack.template)) if args.allow_all else set()))
        _cdk(*deploy, "--method=execute-change-set", "--change-set-name", CHANGE_SET)
    for stack in stacks:
        print("stack policy set on", ", ".join(protect(_client(stack.region), stack, out_dir, set())))
    return 0


def main(argv: list[str] | None = None) -> int:
    """run(), stopped with one line on stderr when it cannot do its job: no credentials for deploy or diff (checked
    before the synth, which takes a while), a failed `cdk` step (its own output is above), a failed AWS call."""
    from botocore.exceptions import BotoCoreError, ClientError
    command = parse_args(argv).command
    problem = missing_credentials() if command in ("deploy", "diff") else None
    if problem:
        print(f"{command}: {problem}", file=sys.stderr)
        return 2
    try:
        return run(argv)
    except subprocess.CalledProcessError as exc:
        print(f"{command}: `cdk {exc.cmd[1]}` failed with exit status {exc.returncode} (its output is above)",
              file=sys.stderr)
        return exc.returncode or 1
    except (BotoCoreError, ClientError) as exc:
        print(f"{command}: {one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
