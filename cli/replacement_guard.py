"""Replacement guard: `make deploy` goes through here so nothing stateful is replaced or deleted by surprise.

    python -m cli.replacement_guard deploy [STACK ...] [--allow LOGICAL_ID ...] [--allow-all] [--no-rollback]
                                           [--profile P] [--assembly DIR] [-- extra cdk args]
    python -m cli.replacement_guard plan   [STACK ...] [--allow ...]   # deploy's dry run
    python -m cli.replacement_guard diff   [STACK ...] [-- extra cdk args]
    python -m cli.replacement_guard parameters        # the --parameters the config implies

deploy:
 1. synthesizes once (CONFIG from the environment, default config/default.yaml, as `-c config=`); every later `cdk`
    command reads that assembly (`--app cdk.out`), so what was checked is what deploys (`--assembly DIR`: deploy an
    assembly synthesized before, without synthesizing);
 2. compares the config's create-only inputs with the deployed storage stack's snapshot (template metadata,
    platform_config/day2.py) and refuses edits that can never be in place, naming the config key;
 3. on a first deployment, `cdk deploy` of every stack with `--concurrency` set to the most stacks the assembly's
    dependency graph lets deploy side by side (cli/stack_graph.py), then step 6;
 4. otherwise prepares a change set per stack (`cdk deploy --method=prepare-change-set`, one name per run, nested
    stacks included) and reads them (DescribeChangeSet): any stateful resource that would be replaced (Replacement
    True or Conditional) or removed stops the deployment, naming the stack, resource, type, physical id and the
    properties that require recreation; `--allow LOGICAL_ID` (or `--allow-all`) lets a named one through;
 5. executes the change sets with CloudFormation's ExecuteChangeSet, stack by stack in the order of the stack graph,
    independent stacks side by side, each stack's events one line each, and HyperPod's node progress every 30 s
    (cli/watch.py). The pinned CDK CLI cannot do this step: `--method=execute-change-set` takes exactly one stack and
    refuses `--parameters` (aws-cdk 2.1148.1, lib/cli/cli.js determineDeploymentMethod); the parameters are already
    in the change sets. The first failed stack stops the run (the running ones finish) with its first failed
    resource's reason. `--no-rollback` keeps a failed stack as it failed (DisableRollback);
 6. sets on every stack (and nested stack) a stack policy that denies Update:Replace and Update:Delete on its
    stateful resources, so a deployment that bypasses this tool is stopped by CloudFormation itself. An allowed
    resource is left out of the policy only while its change set executes: the policy is set back whatever happens.
Whatever stops a day-2 run (a refusal, a failed execution, a failed `cdk` step, Ctrl-C), the change sets it
prepared and did not execute are deleted, and so is a new stack that exists only as a change set.

plan is deploy up to the verdict: per stack the resource changes, the parameters that change value, what IAM would
newly allow (cli/template_replacements.py iam_widening) and the refused or allowed replacements and deletions; then
the change sets are deleted. Exit status 1 when deploy would refuse.

Every template parameter (e.g. the Studio stack's SharedFSx) is passed explicitly with the config's value (the
synthesized template's default), so the YAML and the deployed stack cannot silently differ; a value set by hand
with `aws cloudformation deploy --parameter-overrides` is overwritten by the next `make deploy`.

Shapes follow botocore's CloudFormation model (DescribeChangeSet, ExecuteChangeSet, GetTemplate, SetStackPolicy).

deploy, plan and diff need AWS credentials: without them (or when a `cdk` step or an AWS call fails) one line on
stderr says what stopped it, and the exit status is non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from cli.preconditions import missing_assembly, missing_credentials, one_line
from cli.watch import node_watcher
from cli.stack_graph import concurrency, stack_dependencies
from cli.template_replacements import STATEFUL_TYPES, iam_widening
from platform_config.day2 import SNAPSHOT_METADATA_KEY, check_day2

ROOT = Path(__file__).resolve().parent.parent

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
        stacks.append(
            Stack(
                name=props.get("stackName", path.name.removesuffix(".template.json")),
                region=None if region.startswith("unknown") else region,
                template=json.loads(path.read_text()),
                template_file=path,
            )
        )
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
    action: str  # "replace", "may replace" or "delete"
    causes: tuple[str, ...]

    def __str__(self) -> str:
        why = f" because of {', '.join(self.causes)}" if self.causes else ""
        return (
            f"{self.stack}: {self.logical_id} ({self.resource_type} {self.physical_id or '(no physical id)'}) "
            f"would be {'deleted' if self.action == 'delete' else self.action + 'd'}{why}"
        )


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
                changes += describe_changes(
                    cfn, resource.get("PhysicalResourceId") or stack_name, resource["ChangeSetId"]
                )
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
        found.append(
            Violation(
                stack=stack,
                logical_id=change.get("LogicalResourceId", ""),
                resource_type=change["ResourceType"],
                physical_id=change.get("PhysicalResourceId", ""),
                action=kind,
                causes=tuple(dict.fromkeys(causes)),
            )
        )
    return found


def blocking(found: list[Violation], allowed: set[str], allow_all: bool) -> list[Violation]:
    return [] if allow_all else [v for v in found if v.logical_id not in allowed]


# --- day-2 rules against the deployed snapshot ------------------------------------------------------------------


def template_body(body: str | dict[str, Any]) -> dict[str, Any]:
    """GetTemplate's TemplateBody as a dict. botocore turns a JSON body into a dict itself; the CDK CLI submits
    templates as YAML (checked with aws-cdk 2.1148.1), which CloudFormation returns as a string, in long form (no
    `!Ref` tags)."""
    if isinstance(body, dict):
        return body
    import yaml

    return yaml.safe_load(body)


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
    template = template_body(body)
    return (template.get("Metadata") or {}).get(SNAPSHOT_METADATA_KEY, {})


# --- stack policies ------------------------------------------------------------------------------------------------


def stateful_ids(template: dict[str, Any]) -> list[str]:
    return sorted(lid for lid, r in template.get("Resources", {}).items() if r.get("Type") in STATEFUL_TYPES)


def stack_policy(protected: Iterable[str]) -> dict[str, Any]:
    statements: list[dict[str, Any]] = [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}]
    resources = [f"LogicalResourceId/{lid}" for lid in sorted(protected)]
    if resources:
        statements.append(
            {"Effect": "Deny", "Action": ["Update:Replace", "Update:Delete"], "Principal": "*", "Resource": resources}
        )
    return {"Statement": statements}


def protect(cfn, stack: Stack, out_dir: Path, allowed: set[str]) -> list[str]:
    """Set the stack policy on the stack and its nested stacks; returns the stacks it was set on."""
    done = []
    cfn.set_stack_policy(
        StackName=stack.name, StackPolicyBody=json.dumps(stack_policy(set(stateful_ids(stack.template)) - allowed))
    )
    done.append(stack.name)
    nested_templates = {
        lid: r.get("Metadata", {}).get("aws:asset:path")
        for lid, r in stack.template.get("Resources", {}).items()
        if r.get("Type") == "AWS::CloudFormation::Stack"
    }
    if not nested_templates:
        return done
    for resource in cfn.describe_stack_resources(StackName=stack.name).get("StackResources", []):
        path = nested_templates.get(resource.get("LogicalResourceId"))
        if not path or not resource.get("PhysicalResourceId"):
            continue
        nested = json.loads((out_dir / path).read_text())
        cfn.set_stack_policy(
            StackName=resource["PhysicalResourceId"],
            StackPolicyBody=json.dumps(stack_policy(set(stateful_ids(nested)) - allowed)),
        )
        done.append(resource["PhysicalResourceId"])
    return done


# --- running the CDK CLI and CloudFormation -------------------------------------------------------------------------


def _cdk(*args: str) -> None:
    command = [str(ROOT / "node_modules" / ".bin" / "cdk"), *args]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def synth_command(config: str, out: str) -> list[str]:
    return ["synth", "--quiet", "--no-notices", "-c", f"config={config}", "--output", out]


def deploy_command(
    out: str,
    names: list[str],
    parallel: int,
    params: list[str],
    options: argparse.Namespace,
    change_set: str | None = None,
) -> list[str]:
    """`cdk deploy` of the synthesized assembly `out` (no second synth): every stack, or only `names`; with
    `change_set`, the change sets are prepared, not executed (the guard executes them)."""
    command = [
        "deploy",
        *(names + ["--exclusively"] if names else ["--all"]),
        "--app",
        out,
        "--no-notices",
        "--require-approval",
        "never",
        "--concurrency",
        str(parallel),
        *params,
    ]
    if change_set:
        command += ["--method=prepare-change-set", "--change-set-name", change_set]
    elif options.no_rollback:
        command.append("--no-rollback")
    if options.profile:
        command += ["--profile", options.profile]
    return command + list(options.cdk_args)


def diff_command(out: str, names: list[str], params: list[str], options: argparse.Namespace) -> list[str]:
    command = ["diff", *(names or ["--all"]), "--app", out, "--no-notices", *params]
    return command + (["--profile", options.profile] if options.profile else []) + list(options.cdk_args)


@dataclass
class Clients:
    """boto3 clients per region, from one session (the --profile the CDK CLI is given)."""

    profile: str | None = None

    def __post_init__(self) -> None:
        import boto3

        self.session = boto3.Session(profile_name=self.profile)
        self._made: dict[tuple[str, str | None], Any] = {}

    def __call__(self, service: str, region: str | None):
        if (service, region) not in self._made:
            self._made[service, region] = self.session.client(service, region_name=region)
        return self._made[service, region]


def prepared_change_set(cfn, stack: str, change_set: str) -> dict[str, Any] | None:
    """The change set `change_set` of `stack` (DescribeChangeSet's first page), None when there is none (the CLI
    deletes one that holds no changes)."""
    from botocore.exceptions import ClientError

    try:
        return cfn.describe_change_set(StackName=stack, ChangeSetName=change_set)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ChangeSetNotFound":
            return None
        raise


def stack_status(cfn, stack: str) -> str | None:
    from botocore.exceptions import ClientError

    try:
        return cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except ClientError as error:
        if "does not exist" in error.response.get("Error", {}).get("Message", ""):
            return None
        raise


def delete_change_sets(clients: Clients, stacks: Iterable[Stack], change_set: str) -> list[str]:
    """Deletes `change_set` wherever it was made and not executed; a stack that exists only because of it (a new stack
    in REVIEW_IN_PROGRESS, no resources) goes with it. Returns what it deleted."""
    deleted = []
    for stack in stacks:
        cfn = clients("cloudformation", stack.region)
        found = prepared_change_set(cfn, stack.name, change_set)
        if not found or found.get("ExecutionStatus") in ("EXECUTE_COMPLETE", "EXECUTE_IN_PROGRESS", "EXECUTE_FAILED"):
            continue
        cfn.delete_change_set(ChangeSetName=found["ChangeSetId"], StackName=stack.name)
        deleted.append(f"{stack.name}/{change_set}")
        if stack_status(cfn, stack.name) == "REVIEW_IN_PROGRESS":
            cfn.delete_stack(StackName=stack.name)
            deleted.append(f"{stack.name} (created for the change set only)")
    return deleted


DONE = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE")


class ExecutionFailed(Exception):
    pass


class Interrupted(Exception):
    pass


def wait_for_stack(
    cfn, stack: str, since: datetime, poll: float, on_event=print, stop: threading.Event | None = None
) -> str:
    """Polls the stack until it leaves *_IN_PROGRESS, one line per new event (this stack's own, not interleaved with
    the others' raw output); returns the final status. Raises ExecutionFailed with the first failed resource's
    reason (the cause, not the cascade of cancellations after it) unless the stack ends in DONE."""
    seen: set[str] = set()
    first_failure = None
    while True:
        events = []
        for page in cfn.get_paginator("describe_stack_events").paginate(StackName=stack):
            fresh = [e for e in page["StackEvents"] if e["Timestamp"] >= since and e["EventId"] not in seen]
            events += fresh
            if len(fresh) < len(page["StackEvents"]):
                break
        for event in reversed(events):  # oldest first
            seen.add(event["EventId"])
            why = event.get("ResourceStatusReason") or ""
            resource = f"{event['LogicalResourceId']} ({event['ResourceType']})"
            on_event(f"{stack}: {resource} {event['ResourceStatus']}" + (f" {one_line(Exception(why))}" if why else ""))
            if event["ResourceStatus"].endswith("_FAILED") and first_failure is None and why:
                first_failure = f"{resource}: {why}"
        status = stack_status(cfn, stack) or "DELETE_COMPLETE"
        if not status.endswith("_IN_PROGRESS"):
            if status not in DONE:
                raise ExecutionFailed(f"{stack} ended {status}" + (f": {first_failure}" if first_failure else ""))
            return status
        if (stop or threading.Event()).wait(poll):
            raise Interrupted(stack)


def execute(
    clients: Clients,
    stacks: list[Stack],
    deps: dict[str, set[str]],
    prepared: dict[str, dict[str, Any]],
    *,
    parallel: int,
    no_rollback: bool,
    poll: float,
    while_waiting=None,
) -> list[str]:
    """ExecuteChangeSet for every prepared stack in the order of the stack graph: a stack starts once every stack it
    depends on is done, up to `parallel` at once. Stops starting stacks at the first failure and raises
    ExecutionFailed once the running ones are done. Returns the stacks executed. `while_waiting()` is called every
    `poll` seconds while any stack runs (the node-progress watcher)."""
    by_name = {s.name: s for s in stacks}
    pending = [s.name for s in stacks]
    done: set[str] = set()
    executed: list[str] = []
    failures: list[str] = []
    running: dict[Future, str] = {}

    def run_one(name: str) -> None:
        cfn = clients("cloudformation", by_name[name].region)
        since = datetime.now(UTC) - timedelta(seconds=5)
        cfn.execute_change_set(
            ChangeSetName=prepared[name]["ChangeSetId"],
            StackName=name,
            **({"DisableRollback": True} if no_rollback else {}),
        )
        print(f"{name}: executing change set {prepared[name]['ChangeSetName']}", flush=True)
        wait_for_stack(cfn, name, since, poll, stop=stop)

    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=max(parallel, 1)) as pool:
        try:
            _schedule(
                pool, run_one, pending, running, done, executed, failures, deps, prepared, parallel, poll, while_waiting
            )
        except KeyboardInterrupt:
            stop.set()  # the waiting threads end; CloudFormation goes on with what it started
            raise KeyboardInterrupt(
                f"interrupted: CloudFormation goes on with {', '.join(running.values())}; "
                "`make status` shows where they are"
            ) from None
    if failures:
        raise ExecutionFailed("; ".join(failures))
    return executed


def _schedule(
    pool, run_one, pending, running, done, executed, failures, deps, prepared, parallel, poll, while_waiting
) -> None:
    """execute()'s loop: start what may start, wait for one to finish, watch the nodes meanwhile."""
    while pending or running:
        for name in list(pending):
            if failures or len(running) >= parallel:
                break
            if deps.get(name, set()) & set(pending + list(running.values())):
                continue  # something it depends on has not finished
            pending.remove(name)
            if name not in prepared:
                done.add(name)
                continue
            running[pool.submit(run_one, name)] = name
            executed.append(name)
        if failures and not running:
            break
        if not running:
            continue
        finished, _ = wait(running, timeout=poll, return_when=FIRST_COMPLETED)
        for future in finished:
            name = running.pop(future)
            try:
                future.result()
                done.add(name)
            except ExecutionFailed as error:
                failures.append(str(error))
        if not finished and while_waiting:
            while_waiting()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m cli.replacement_guard",
        description=__doc__.split("\n\n")[0],
        epilog="CONFIG (environment) names the config file, default config/default.yaml."
        " Arguments after -- go to the CDK CLI as they are.",
    )
    parser.add_argument("command", choices=["deploy", "plan", "diff", "parameters"])
    parser.add_argument(
        "stacks", nargs="*", metavar="STACK", help="only these stacks (default: every stack of the assembly)"
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="LOGICAL_ID",
        help="let this stateful resource be replaced or deleted (repeatable)",
    )
    parser.add_argument("--allow-all", action="store_true", help="let every replacement and deletion through")
    parser.add_argument("--out", default="cdk.out", help="where the synthesis writes the assembly")
    parser.add_argument(
        "--assembly", metavar="DIR", help="deploy this synthesized assembly as it is (no synthesis; CONFIG is not read)"
    )
    parser.add_argument("--profile", help="the AWS profile for the CDK CLI and every AWS call")
    parser.add_argument(
        "--no-rollback",
        action="store_true",
        help="a failed stack stays as it failed (debugging a lifecycle script); the next deploy "
        "or a rollback (aws cloudformation rollback-stack) moves on",
    )
    parser.add_argument("--poll", type=float, default=30.0, help=argparse.SUPPRESS)
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)  # after --: passed to the CDK CLI as they are
    args = parser.parse_intermixed_args(argv[:split])
    args.cdk_args = argv[split + 1 :]
    return args


def run(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = os.environ.get("CONFIG", "config/default.yaml")
    out = args.assembly or args.out
    out_dir = ROOT / out
    if args.assembly and missing_assembly(out_dir):
        print(f"{args.command}: {missing_assembly(out_dir)}", file=sys.stderr)
        return 2
    if not args.assembly:
        _cdk(*synth_command(config, out))  # the only synthesis: every cdk command below reads this assembly
    stacks = assembly_stacks(out_dir)
    if args.stacks:
        unknown = sorted(set(args.stacks) - {s.name for s in stacks})
        if unknown:
            print(
                f"{args.command}: no stack {', '.join(unknown)} in {out}; its stacks: "
                f"{', '.join(s.name for s in stacks)}",
                file=sys.stderr,
            )
            return 2
        stacks = [s for s in stacks if s.name in args.stacks]
    params = parameter_arguments(stacks)
    if args.command == "parameters":
        print(" ".join(params))
        return 0
    if args.command == "diff":
        _cdk(*diff_command(out, args.stacks, params, args))
        return 0
    return deploy(args, stacks, out, params, Clients(args.profile))


def deploy(args: argparse.Namespace, stacks: list[Stack], out: str, params: list[str], clients: Clients) -> int:
    out_dir = ROOT / out
    plan = args.command == "plan"
    allowed = set(args.allow)
    deps = {name: d & {s.name for s in stacks} for name, d in stack_dependencies(out_dir).items()}
    deps = {s.name: deps.get(s.name, set()) for s in stacks}
    parallel = concurrency(deps)
    storage = next((s for s in stacks if SNAPSHOT_METADATA_KEY in s.template.get("Metadata", {})), None)
    previous = deployed_snapshot(clients("cloudformation", storage.region), storage.name) if storage else {}
    if previous is None:
        assert storage is not None  # previous is None only when the storage stack was looked up and not found
        print(f"{storage.name} does not exist yet: first deployment, every stack is created")
        if plan:
            for stack in stacks:
                print(f"  {stack.name}: create {len(stack.template.get('Resources', {}))} resources")
            return 0
        watching = threading.Event()
        tick = node_watcher(clients, stacks, args.poll)
        watcher = threading.Thread(target=_watch, args=(tick, args.poll, watching), daemon=True)
        watcher.start()
        try:
            _cdk(*deploy_command(out, args.stacks, parallel, params, args))
        finally:
            watching.set()
        protect_all(clients, stacks, out_dir)
        return 0
    if storage:
        errors, warnings = check_day2(previous, storage.template["Metadata"][SNAPSHOT_METADATA_KEY])
        for warning in warnings:
            print(f"warning: {warning}")
        if errors and not args.allow_all:
            print(f"refusing to deploy: {len(errors)} edit(s) can never be deployed in place:")
            for error in errors:
                print(f"  - {error}")
            return 1
    by_name = {s.name: s for s in stacks}
    change_set = f"{CHANGE_SET}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    started = False
    try:
        _cdk(*deploy_command(out, args.stacks, parallel, params, args, change_set=change_set))
        prepared = {}
        for stack in stacks:
            change_set_found = prepared_change_set(clients("cloudformation", stack.region), stack.name, change_set)
            if change_set_found:
                prepared[stack.name] = change_set_found
        changes = {
            name: describe_changes(clients("cloudformation", by_name[name].region), name, prepared[name]["ChangeSetId"])
            for name in prepared
        }
        found = violations(c for name in prepared for c in changes[name])
        stop = blocking(found, allowed, args.allow_all)
        if plan:
            print_plan(clients, stacks, prepared, changes)
        for violation in found:
            print(("refused: " if violation in stop else "allowed: ") + str(violation))
        if stop:
            print(
                f"refusing to deploy: {len(stop)} stateful resource(s) would be replaced or deleted (data, "
                "identity or a fixed name would be lost). Rerun with --allow LOGICAL_ID for each one you mean "
                "(make deploy ALLOW='Id1 Id2'), after moving its data."
            )
            return 1
        if plan:
            return 0
        started = True
        if not prepared:
            print("no changes: every stack is as deployed")
            return 0
        if allowed or args.allow_all:
            for stack in stacks:
                if (
                    stack.name in prepared
                    and stack_status(clients("cloudformation", stack.region), stack.name) != "REVIEW_IN_PROGRESS"
                ):
                    protect(
                        clients("cloudformation", stack.region),
                        stack,
                        out_dir,
                        allowed | (set(stateful_ids(stack.template)) if args.allow_all else set()),
                    )
        try:
            execute(
                clients,
                stacks,
                deps,
                prepared,
                parallel=parallel,
                no_rollback=args.no_rollback,
                poll=args.poll,
                while_waiting=node_watcher(clients, stacks, args.poll),
            )
        except ExecutionFailed as failure:
            print(
                f"deploy failed: {failure}. `make diagnose` says why and what to do; `make status` shows where "
                "each stack and node is.",
                file=sys.stderr,
            )
            return 1
    finally:
        for what in delete_change_sets(clients, stacks, change_set):
            print(f"deleted change set {what}")
        if started:  # every stateful resource protected, the allowed ones again, also after a failed execution
            protect_all(clients, stacks, out_dir)
    return 0


def print_plan(
    clients: Clients,
    stacks: list[Stack],
    prepared: dict[str, dict[str, Any]],
    changes: dict[str, list[tuple[str, dict[str, Any]]]],
) -> None:
    """The guard's verdict per stack: what changes, parameters that change value, what IAM would newly allow."""
    for stack in stacks:
        if stack.name not in prepared:
            print(f"{stack.name}: no changes")
            continue
        cfn = clients("cloudformation", stack.region)
        counts: dict[str, int] = {}
        for _, change in changes[stack.name]:
            counts[change.get("Action", "?")] = counts.get(change.get("Action", "?"), 0) + 1
        what = ", ".join(f"{n} {action.lower()}" for action, n in sorted(counts.items())) or "no resource changes"
        status = stack_status(cfn, stack.name)
        print(f"{stack.name}: {'new stack, ' if status == 'REVIEW_IN_PROGRESS' else ''}{what}")
        if status == "REVIEW_IN_PROGRESS":
            continue
        deployed = cfn.describe_stacks(StackName=stack.name)["Stacks"][0]
        old = {p["ParameterKey"]: p.get("ParameterValue") for p in deployed.get("Parameters", [])}
        for parameter in prepared[stack.name].get("Parameters", []):
            key, value = parameter["ParameterKey"], parameter.get("ParameterValue")
            if key not in CDK_PARAMETERS and old.get(key) != value:
                print(f"  parameter {key}: {old.get(key, '(none)')} -> {value}")
        body = cfn.get_template(StackName=stack.name, TemplateStage="Original")["TemplateBody"]
        for line in iam_widening(template_body(body), stack.template):
            print(f"  IAM widens: {line}")


def _watch(tick, poll: float, stop: threading.Event) -> None:
    """The node-progress watcher beside a `cdk deploy` (first deployment), until `stop` is set."""
    while tick and not stop.wait(poll):
        tick()


def protect_all(clients: Clients, stacks: list[Stack], out_dir: Path) -> None:
    for stack in stacks:
        cfn = clients("cloudformation", stack.region)
        if stack_status(cfn, stack.name) in (None, "REVIEW_IN_PROGRESS", "DELETE_COMPLETE"):
            continue
        print("stack policy set on", ", ".join(protect(cfn, stack, out_dir, set())))


def main(argv: list[str] | None = None) -> int:
    """run(), stopped with one line on stderr when it cannot do its job: no credentials for deploy or diff (checked
    before the synth, which takes a while), a failed `cdk` step (its own output is above), a failed AWS call."""
    from botocore.exceptions import BotoCoreError, ClientError

    parsed = parse_args(argv)
    command = parsed.command
    problem = missing_credentials(parsed.profile) if command in ("deploy", "plan", "diff") else None
    if problem:
        print(f"{command}: {problem}", file=sys.stderr)
        return 2
    try:
        return run(argv)
    except subprocess.CalledProcessError as exc:
        print(
            f"{command}: `cdk {exc.cmd[1]}` failed with exit status {exc.returncode} (its output is above)",
            file=sys.stderr,
        )
        return exc.returncode or 1
    except (BotoCoreError, ClientError) as exc:
        print(f"{command}: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # the change sets not executed are deleted on the way out
        print(f"{command}: {exc or 'interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
