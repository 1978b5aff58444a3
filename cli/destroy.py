"""`make destroy`: delete a deployed platform stack by stack, in the reverse order of its stack graph, keeping what
holds data.

    python -m cli.destroy [cdk.out] [--yes] [--delete-file-systems [--without-backup]]

Everything it decides comes from the synthesized cloud assembly (manifest.json, the stack templates and their nested
stack templates), not from a list in this file:

 1. The order: a stack is deleted only once every stack that depends on it (the manifest's `dependencies`, what
    `cdk deploy` ordered by) is gone; nested stacks go with their parent.
 2. What is kept: every resource whose DeletionPolicy is Retain (or RetainExceptOnCreate) stays in the account after
    its stack is deleted (FSx, buckets, KMS keys, log groups, ...); a Snapshot resource is deleted after a final
    snapshot, which is kept. A kept resource that uses another stack's outputs (the file system sits in the network
    stack's subnet and security group) keeps that stack in use.
 3. Before asking anything it reads (never changes) the deployed stacks: which exist, which are protected, and which
    FSx file systems sit in the network stack's subnets. It prints the plan, then asks for the platform's name
    (`--yes` skips the question). A wrong answer changes nothing.
 4. Only then, stack by stack: termination protection off (if on), DeleteStack, wait until DELETE_COMPLETE. A stack
    that fails to delete stops the run, naming the resource and CloudFormation's reason; run it again once fixed
    (stacks already gone are skipped). Every wait is bounded (LIMIT_MINUTES) and prints its progress; at the limit
    the run stops and undoes nothing. What stays is named by type and physical id (ListStackResources), before the
    question and at the end.
 5. The stack that holds a retained FSx file system also holds its data repository association, which goes with
    it (the file system stays, no longer linked to S3). So before that stack is deleted, an EXPORT_TO_REPOSITORY
    task writes what is on the file system under its associations to S3, and must succeed.
 6. Before the stack that holds the Studio domain is deleted, the apps and spaces people created in Studio (which
    CloudFormation does not know, and which keep a user profile, and so the domain, from being deleted) are deleted:
    every app of the domain, waited until Deleted, then every space, waited until gone. The plan lists them before
    the question. The domain is found by the name its template gives it (DomainName).
 7. The network stack is kept while any FSx file system uses its subnets: the output says which and how to finish by
    hand (then `make destroy` again). With --delete-file-systems the platform's own file systems (those carrying
    every tag the template gives them) are deleted right after their stack, each after a backup where FSx takes one
    (a persistent file system not linked to a data repository), and the network goes last. FSx cannot back up a
    file system linked to S3 (CreateBackup, FSx API reference), so for the platform's (linked in its template)
    --delete-file-systems also needs --without-backup: what was under its association paths stays in S3, anything
    else on it is lost. A file system that is not the platform's keeps the network in every case.
 8. Attach mode (cluster.existing): the assembly holds no cluster, network or file system, so none is touched; the
    existing file system's interfaces lose only the platform's security group (its custom resource detaches it).

Region: each stack's own when the assembly pins one, else boto3's (AWS_REGION / AWS_PROFILE / config file); credentials
come from boto3's chain. Exit status: 0 done (a kept network included); 1 not confirmed (nothing changed) or a
deletion that failed; 2 bad input, no credentials or an AWS error. A failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from cli.preconditions import missing_assembly, missing_credentials, one_line
from cli.stack_graph import stack_dependencies
from platform_config.day2 import SNAPSHOT_METADATA_KEY

ROOT = Path(__file__).resolve().parent.parent

POLL_SECONDS = 15.0
PROGRESS_SECONDS = 60.0
clock = time.monotonic
# How long each wait may last before the run stops (it can be run again). Generous bounds on purpose: a stack with a
# HyperPod cluster waits for its instances to terminate; an export writes every changed file to S3.
LIMIT_MINUTES = {"stack": 90, "export": 12 * 60, "backup": 6 * 60, "file-system": 60, "studio": 30}
KEEPING_POLICIES = ("Retain", "RetainExceptOnCreate")
FSX = "AWS::FSx::FileSystem"
DRA = "AWS::FSx::DataRepositoryAssociation"
DOMAIN = "AWS::SageMaker::Domain"
# SageMaker's app and space states (DescribeApp Status, DescribeSpace Status; botocore's SageMaker model).
APP_GONE, APP_FAILED = {"Deleted"}, {"Failed"}
SPACE_FAILED = {"Delete_Failed", "Failed"}
# FSx: "you can create a backup only for file systems that have ... A Persistent deployment type; Are not linked to a
# data repository" (CreateBackup, https://docs.aws.amazon.com/goto/WebAPI/fsx-2018-03-01/CreateBackup, and botocore's
# FSx model); the Lustre guide's backup page, which the API reference links, says the same.
BACKUP_DOC = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-backups-fsx.html"


class Refused(Exception):
    """Bad input or an unsafe combination: one line, exit 2, nothing changed."""


class Failed(Exception):
    """A deletion that did not complete: one line, exit 1."""


class TimedOut(Failed):
    """A wait that reached its limit (LIMIT_MINUTES) with the thing still in progress."""


# --- the assembly ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kept:
    stack: str
    logical_id: str
    resource_type: str
    policy: str
    uses: frozenset[str] = frozenset()  # other stacks whose outputs it uses
    linked_to_s3: bool = False  # an FSx file system with a data repository association in its template
    tags: tuple[tuple[str, str], ...] = ()

    def describe(self, physical_id: str) -> str:
        """`<type> <physical id> (<logical id>): kept` -- the physical id tells apart resources of one logical id in
        several stacks (each stack's logs key) and is what the console and the CLI find it by."""
        what = "deleted after a final snapshot, which is kept" if self.policy == "Snapshot" else "kept"
        return f"{self.resource_type} {physical_id} ({self.logical_id}): {what}"


@dataclass
class AssemblyStack:
    name: str
    region: str | None
    template_file: str
    deleted: Counter = field(default_factory=Counter)  # resource type -> count, nested stacks included
    kept: list[Kept] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    domain_name: str | None = None  # the Studio domain's DomainName, when this stack holds it


def _references(value: Any, stacks: Iterable[str]) -> set[str]:
    """The stacks whose outputs `value` reads: Fn::GetStackOutput (weak references) and Fn::ImportValue of a CDK export
    (named `<stack>:...`)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Fn::GetStackOutput" and isinstance(inner, dict) and isinstance(inner.get("StackName"), str):
                found.add(inner["StackName"])
            elif key == "Fn::ImportValue" and isinstance(inner, str):
                found |= {s for s in stacks if inner.startswith(f"{s}:")}
            else:
                found |= _references(inner, stacks)
    elif isinstance(value, list):
        for inner in value:
            found |= _references(inner, stacks)
    return found


def _literal_tags(resource: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    tags = resource.get("Properties", {}).get("Tags") or []
    return tuple(
        sorted(
            (t["Key"], t["Value"])
            for t in tags
            if isinstance(t, dict) and isinstance(t.get("Key"), str) and isinstance(t.get("Value"), str)
        )
    )


def _asset_files(out_dir: Path, artifacts: dict[str, Any]) -> dict[str, str]:
    """S3 object key -> file in the assembly, from every asset manifest (how a nested stack's TemplateURL names its
    template when the resource carries no aws:asset:path metadata)."""
    files = {}
    for artifact in artifacts.values():
        if artifact.get("type") == "cdk:asset-manifest":
            manifest = json.loads((out_dir / artifact["properties"]["file"]).read_text())
            for asset in manifest.get("files", {}).values():
                for destination in asset.get("destinations", {}).values():
                    files[destination["objectKey"]] = asset["source"]["path"]
    return files


def _nested_template(resource: dict[str, Any], assets: dict[str, str]) -> str | None:
    path = resource.get("Metadata", {}).get("aws:asset:path")
    if path:
        return path
    url = json.dumps(resource.get("Properties", {}).get("TemplateURL", ""))
    return next((file for key, file in assets.items() if f"/{key}" in url), None)


def _walk(stack: AssemblyStack, out_dir: Path, template_file: str, names: set[str], assets: dict[str, str]) -> None:
    template = json.loads((out_dir / template_file).read_text())
    resources = template.get("Resources", {})
    # File systems an association in the same template links to S3 (its FileSystemId is a Ref to them).
    linked = {
        (r.get("Properties", {}).get("FileSystemId") or {}).get("Ref")
        for r in resources.values()
        if r.get("Type") == DRA and isinstance(r.get("Properties", {}).get("FileSystemId"), dict)
    }
    for lid, resource in resources.items():
        rtype = resource.get("Type", "")
        nested = _nested_template(resource, assets) if rtype == "AWS::CloudFormation::Stack" else None
        if nested and (out_dir / nested).is_file():
            stack.nested.append(nested)
            _walk(stack, out_dir, nested, names, assets)
        if rtype == DOMAIN and isinstance(resource.get("Properties", {}).get("DomainName"), str):
            stack.domain_name = resource["Properties"]["DomainName"]
        policy = resource.get("DeletionPolicy", "Delete")
        if policy in KEEPING_POLICIES or policy == "Snapshot":
            stack.kept.append(
                Kept(
                    stack=stack.name,
                    logical_id=lid,
                    resource_type=rtype,
                    policy=policy,
                    uses=frozenset(_references(resource.get("Properties", {}), names) - {stack.name}),
                    linked_to_s3=rtype == FSX and lid in linked,
                    tags=_literal_tags(resource),
                )
            )
        if policy not in KEEPING_POLICIES:
            stack.deleted[rtype] += 1


def read_assembly(out_dir: Path) -> dict[str, AssemblyStack]:
    artifacts = json.loads((out_dir / "manifest.json").read_text())["artifacts"]
    stacks: dict[str, AssemblyStack] = {}
    for artifact_id, artifact in artifacts.items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        props = artifact.get("properties", {})
        region = artifact.get("environment", "").rsplit("/", 1)[-1]
        stacks[artifact_id] = AssemblyStack(
            name=props.get("stackName", artifact_id),
            region=None if region.startswith("unknown") else region,
            template_file=props["templateFile"],
        )
    names = {s.name for s in stacks.values()}
    assets = _asset_files(out_dir, artifacts)
    for stack in stacks.values():
        _walk(stack, out_dir, stack.template_file, names, assets)
    return stacks


def deletion_order(deps: dict[str, set[str]]) -> list[str]:
    """Stacks in the order they can be deleted one at a time: a stack once no remaining stack depends on it
    (alphabetical among those ready at once, so the order is the same on every run)."""
    remaining = {s: set(d) & deps.keys() for s, d in deps.items()}
    order: list[str] = []
    while remaining:
        ready = sorted(s for s in remaining if not any(s in d for d in remaining.values()))
        if not ready:
            raise Refused(f"the stack graph has a cycle among {', '.join(sorted(remaining))}")
        order += ready
        for stack in ready:
            del remaining[stack]
    return order


def platform_name(out_dir: Path, stacks: dict[str, AssemblyStack]) -> str:
    """The config's name, as the storage stack's day-2 snapshot records it (what the user types to confirm)."""
    for stack in stacks.values():
        metadata = json.loads((out_dir / stack.template_file).read_text()).get("Metadata", {})
        name = metadata.get(SNAPSHOT_METADATA_KEY, {}).get("name")
        if name:
            return name
    raise Refused(f"{out_dir} holds no platform: no stack template carries {SNAPSHOT_METADATA_KEY} metadata")


# --- the account -----------------------------------------------------------------------------------------------------


@dataclass
class Deployed:
    stack_id: str
    status: str
    protected: bool


@dataclass(frozen=True)
class FileSystem:
    file_system_id: str
    deployment_type: str
    subnet_ids: tuple[str, ...]
    tags: tuple[tuple[str, str], ...]

    def carries(self, tags: Iterable[tuple[str, str]]) -> bool:
        return set(tags) <= set(self.tags)


@dataclass(frozen=True)
class StudioContent:
    domain_id: str
    apps: list[dict[str, Any]]  # ListApps entries: AppType, AppName, UserProfileName or SpaceName, Status
    spaces: list[str]

    @staticmethod
    def owner(app: dict[str, Any]) -> dict[str, str]:
        return {"SpaceName": app["SpaceName"]} if app.get("SpaceName") else {"UserProfileName": app["UserProfileName"]}

    def describe(self) -> str:
        apps = ", ".join(
            f"{a['AppType']} {a['AppName']} of {a.get('SpaceName') or a.get('UserProfileName')}" for a in self.apps
        )
        return (
            f"{len(self.apps)} app(s) and {len(self.spaces)} space(s) people created in Studio domain "
            f"{self.domain_id}"
            + (f": apps {apps}" if apps else "")
            + (f"; spaces {', '.join(self.spaces)}" if self.spaces else "")
        )


class Account:
    """The read and write calls, per region, on clients from one boto3 session (profile and region from its chain)."""

    def __init__(self, session) -> None:
        self.session = session
        self._clients: dict[tuple[str, str | None], Any] = {}

    def client(self, service: str, region: str | None):
        if (service, region) not in self._clients:
            self._clients[service, region] = self.session.client(service, region_name=region)
        return self._clients[service, region]

    def deployed(self, stack: AssemblyStack) -> Deployed | None:
        from botocore.exceptions import ClientError

        try:
            found = self.client("cloudformation", stack.region).describe_stacks(StackName=stack.name)["Stacks"]
        except ClientError as error:
            if "does not exist" in error.response.get("Error", {}).get("Message", ""):
                return None
            raise
        if not found or found[0]["StackStatus"] == "DELETE_COMPLETE":
            return None
        return Deployed(found[0]["StackId"], found[0]["StackStatus"], bool(found[0].get("EnableTerminationProtection")))

    def physical_ids(self, stack: AssemblyStack, types: Iterable[str]) -> set[str]:
        cfn = self.client("cloudformation", stack.region)
        wanted = set(types)
        return {
            r["PhysicalResourceId"]
            for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack.name)
            for r in page["StackResourceSummaries"]
            if r["ResourceType"] in wanted and r.get("PhysicalResourceId")
        }

    def resources(self, stack: AssemblyStack) -> dict[str, str]:
        """Logical id -> physical id of a deployed stack's resources, its nested stacks' included (ListStackResources,
        paginated: DescribeStackResources stops at 100)."""
        cfn = self.client("cloudformation", stack.region)
        found: dict[str, str] = {}
        todo = [stack.name]
        while todo:
            for page in cfn.get_paginator("list_stack_resources").paginate(StackName=todo.pop()):
                for r in page["StackResourceSummaries"]:
                    if not r.get("PhysicalResourceId"):
                        continue
                    if r["ResourceType"] == "AWS::CloudFormation::Stack":
                        todo.append(r["PhysicalResourceId"])
                    else:
                        found.setdefault(r["LogicalResourceId"], r["PhysicalResourceId"])
        return found

    def file_systems(self, region: str | None) -> list[FileSystem]:
        found = []
        for page in self.client("fsx", region).get_paginator("describe_file_systems").paginate():
            for fs in page["FileSystems"]:
                if fs.get("Lifecycle") != "DELETING":
                    found.append(
                        FileSystem(
                            file_system_id=fs["FileSystemId"],
                            deployment_type=(fs.get("LustreConfiguration") or {}).get("DeploymentType", ""),
                            subnet_ids=tuple(fs.get("SubnetIds", [])),
                            tags=tuple(sorted((t["Key"], t["Value"]) for t in fs.get("Tags", []))),
                        )
                    )
        return found

    def studio(self, region: str | None, domain_name: str) -> StudioContent | None:
        """The domain of that name and what people created in it: apps not yet Deleted, spaces."""
        sagemaker = self.client("sagemaker", region)
        domains = [
            d["DomainId"]
            for page in sagemaker.get_paginator("list_domains").paginate()
            for d in page["Domains"]
            if d["DomainName"] == domain_name
        ]
        if not domains:
            return None
        domain = domains[0]
        apps = [
            a
            for page in sagemaker.get_paginator("list_apps").paginate(DomainIdEquals=domain)
            for a in page["Apps"]
            if a.get("Status") not in APP_GONE
        ]
        spaces = [
            sp["SpaceName"]
            for page in sagemaker.get_paginator("list_spaces").paginate(DomainIdEquals=domain)
            for sp in page["Spaces"]
        ]
        return StudioContent(domain_id=domain, apps=apps, spaces=spaces)

    def associations(self, region: str | None, file_system_id: str) -> list[dict[str, Any]]:
        response = self.client("fsx", region).describe_data_repository_associations(
            Filters=[{"Name": "file-system-id", "Values": [file_system_id]}]
        )
        return [a for a in response.get("Associations", []) if a.get("Lifecycle") not in ("DELETING", "FAILED")]


def _wait(what: str, poll: Callable[[], str | None], done: set[str], failed: set[str], limit_seconds: float) -> str:
    """Poll until done, failed or `limit_seconds` have passed (then Failed: the run stops, nothing is undone, and
    `make destroy` again picks up where it stopped); a progress line whenever the state changes and every
    PROGRESS_SECONDS."""
    start = clock()
    last_state, last_line = None, start
    while True:
        state = poll()
        now = clock()
        elapsed = now - start
        if state is None or state in done:
            return state or "gone"
        if state in failed:
            raise Failed(f"{what} ended {state}")
        if elapsed >= limit_seconds:
            raise TimedOut(
                f"{what} still {state} after {elapsed / 60:.0f} min (the limit is {limit_seconds / 60:.0f} "
                "min): nothing was undone; check it in the console and run `make destroy` again"
            )
        if state != last_state or now - last_line >= PROGRESS_SECONDS:
            print(f"  {what}: {state}, {elapsed / 60:.0f} of at most {limit_seconds / 60:.0f} min", flush=True)
            last_state, last_line = state, now
        time.sleep(POLL_SECONDS)


# --- plan ------------------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    out_dir: Path
    name: str
    stacks: dict[str, AssemblyStack]
    order: list[str]  # assembly ids, deletion order
    delete_file_systems: bool
    without_backup: bool
    deployed: dict[str, Deployed | None] = field(default_factory=dict)
    file_systems: list[FileSystem] = field(default_factory=list)  # in the regions of the stacks that hold FSx
    subnets: dict[str, set[str]] = field(default_factory=dict)  # stack used by a kept FSx -> its subnet ids
    studio: dict[str, StudioContent] = field(default_factory=dict)  # stack holding the domain -> what is in it
    physical: dict[str, dict[str, str]] = field(default_factory=dict)  # stack name -> logical id -> physical id

    def kept_line(self, kept: Kept) -> str:
        if kept.stack not in self.physical:
            found = "(physical id unknown: its stack is not deployed)"
        else:
            found = self.physical[kept.stack].get(kept.logical_id, "(not in the deployed stack)")
        return f"{kept.stack}: {kept.describe(found)}"

    @property
    def kept(self) -> list[Kept]:
        return [k for s in self.order for k in self.stacks[s].kept]

    @property
    def kept_file_systems(self) -> list[Kept]:
        return [k for k in self.kept if k.resource_type == FSX and k.policy in KEEPING_POLICIES]

    def used_stacks(self) -> list[str]:
        """Stacks whose outputs a kept FSx file system uses (the network): kept while a file system sits in them."""
        names = {n for k in self.kept_file_systems for n in k.uses}
        return [a for a in self.order if self.stacks[a].name in names]

    def platforms(self, fs: FileSystem) -> bool:
        """The platform's own file system: it carries every tag the template gives a kept FSx file system."""
        return any(k.tags and fs.carries(k.tags) for k in self.kept_file_systems)

    def linked(self, fs: FileSystem) -> bool:
        return any(k.linked_to_s3 and k.tags and fs.carries(k.tags) for k in self.kept_file_systems)

    def holders(self, artifact_id: str, file_systems: list[FileSystem] | None = None) -> list[FileSystem]:
        subnets = self.subnets.get(artifact_id, set())
        return [
            fs for fs in (self.file_systems if file_systems is None else file_systems) if subnets & set(fs.subnet_ids)
        ]

    def ours(self) -> list[FileSystem]:
        return [fs for fs in self.file_systems if self.platforms(fs)]


def check_flags(plan: Plan) -> None:
    if plan.without_backup and not plan.delete_file_systems:
        raise Refused("--without-backup applies only with --delete-file-systems")
    if plan.delete_file_systems and not plan.without_backup:
        linked = [k for k in plan.kept_file_systems if k.linked_to_s3]
        if linked:
            names = ", ".join(f"{k.stack} {k.logical_id}" for k in linked)
            raise Refused(
                f"{names}: linked to S3 by a data repository association, and FSx cannot back up a file "
                f"system linked to S3 ({BACKUP_DOC}); add --without-backup to delete it without one "
                "(what is under its association paths is exported to and stays in S3; anything else on it "
                "is lost)"
            )


def render(plan: Plan) -> list[str]:
    lines = [
        (
            f"Platform {plan.name} ({plan.out_dir}): stacks are deleted in this order, each once the stacks that "
            "depend on it are gone:"
        )
    ]
    for i, artifact_id in enumerate(plan.order, 1):
        stack, deployed = plan.stacks[artifact_id], plan.deployed[artifact_id]
        state = (
            "not deployed: skipped"
            if deployed is None
            else deployed.status
            + (", termination protection on (turned off just before its deletion)" if deployed.protected else "")
        )
        lines.append(f"  {i}. {stack.name} [{state}]")
        holds_fsx = any(k in plan.kept_file_systems for k in stack.kept)
        if deployed is None:
            if holds_fsx and plan.delete_file_systems:
                lines += _file_system_fates(plan)
            continue
        holders = plan.holders(artifact_id)
        if holders and not (plan.delete_file_systems and all(plan.platforms(fs) for fs in holders)):
            lines.append(
                f"     KEPT: FSx file system(s) {', '.join(fs.file_system_id for fs in holders)} use its "
                "subnets"
                + (
                    ""
                    if plan.delete_file_systems
                    else " (rerun with --delete-file-systems to delete the platform's own first)"
                )
            )
            continue
        if artifact_id in plan.studio and (plan.studio[artifact_id].apps or plan.studio[artifact_id].spaces):
            lines.append(
                f"     first: deletes the {plan.studio[artifact_id].describe()} (their EFS home folders stay "
                "with the retained domain volume)"
            )
        if holds_fsx:
            for fs in plan.ours():
                lines.append(
                    f"     first: FSx {fs.file_system_id}: export to S3 of what is under its data "
                    "repository associations (must succeed: the associations go with this stack)"
                )
        nested = f", {len(stack.nested)} nested stack(s)" if stack.nested else ""
        types = ", ".join(f"{t} x{n}" for t, n in sorted(stack.deleted.items()))
        lines.append(f"     deletes {sum(stack.deleted.values())} resources{nested}: {types}")
        if holds_fsx and plan.delete_file_systems:
            lines += _file_system_fates(plan)
    lines.append("Kept in the account (DeletionPolicy in the templates):")
    for kept in plan.kept:
        if plan.delete_file_systems and kept in plan.kept_file_systems:
            lines.append(f"  {plan.kept_line(kept).rsplit(': ', 1)[0]}: deleted (--delete-file-systems)")
            continue
        lines.append(f"  {plan.kept_line(kept)}")
        if kept.linked_to_s3:
            lines.append(
                "      its data repository association is deleted with the stack (after the export): the "
                "file system stays, no longer linked to S3"
            )
    return lines


def _file_system_fates(plan: Plan) -> list[str]:
    return [
        f"     then: FSx {fs.file_system_id}: "
        + (
            "deleted WITHOUT a backup (linked to S3: FSx cannot back it up; --without-backup given; a backup is still "
            "taken if FSx accepts one once the association is gone)"
            if plan.linked(fs)
            else "backed up (the backup is kept), then deleted"
        )
        for fs in plan.ours()
    ]


# --- run -------------------------------------------------------------------------------------------------------------


def export_to_s3(account: Account, region: str | None, fs: FileSystem) -> None:
    fsx = account.client("fsx", region)
    if not account.associations(region, fs.file_system_id):
        print(f"FSx {fs.file_system_id}: no data repository association, nothing to export")
        return
    task = fsx.create_data_repository_task(
        FileSystemId=fs.file_system_id, Type="EXPORT_TO_REPOSITORY", Report={"Enabled": False}
    )["DataRepositoryTask"]
    print(f"FSx {fs.file_system_id}: exporting to S3 ({task['TaskId']}) ...", flush=True)
    _wait(
        f"export task {task['TaskId']} of {fs.file_system_id}",
        lambda: fsx.describe_data_repository_tasks(TaskIds=[task["TaskId"]])["DataRepositoryTasks"][0]["Lifecycle"],
        done={"SUCCEEDED"},
        failed={"FAILED", "CANCELED"},
        limit_seconds=LIMIT_MINUTES["export"] * 60,
    )
    print(f"FSx {fs.file_system_id}: exported")


def backup(account: Account, plan: Plan, region: str | None, fs: FileSystem) -> None:
    """A backup where FSx takes one; without one only with --without-backup."""
    from botocore.exceptions import ClientError

    fsx = account.client("fsx", region)
    refusal = None
    if not fs.deployment_type.startswith("PERSISTENT"):
        refusal = f"deployment type {fs.deployment_type or 'unknown'} (backups need a persistent one)"
    elif account.associations(region, fs.file_system_id):
        refusal = "linked to S3 by a data repository association"
    else:
        try:
            made = fsx.create_backup(
                FileSystemId=fs.file_system_id, Tags=[{"Key": "deleted-by", "Value": f"make destroy {plan.name}"}]
            )["Backup"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "BadRequest":
                raise
            refusal = one_line(error)
        else:
            print(f"FSx {fs.file_system_id}: backup {made['BackupId']} ...", flush=True)
            _wait(
                f"backup {made['BackupId']}",
                lambda: fsx.describe_backups(BackupIds=[made["BackupId"]])["Backups"][0]["Lifecycle"],
                done={"AVAILABLE"},
                failed={"FAILED", "DELETED"},
                limit_seconds=LIMIT_MINUTES["backup"] * 60,
            )
            print(f"FSx {fs.file_system_id}: backup {made['BackupId']} AVAILABLE (kept)")
            return
    if not plan.without_backup:
        raise Failed(
            f"FSx {fs.file_system_id}: no backup possible ({refusal}) and --without-backup was not given: not deleted"
        )
    print(f"FSx {fs.file_system_id}: no backup possible ({refusal}); deleting without one (--without-backup)")


def delete_file_system(account: Account, region: str | None, fs: FileSystem) -> None:
    from botocore.exceptions import ClientError

    fsx = account.client("fsx", region)
    fsx.delete_file_system(FileSystemId=fs.file_system_id, LustreConfiguration={"SkipFinalBackup": True})

    def lifecycle() -> str | None:
        try:
            found = fsx.describe_file_systems(FileSystemIds=[fs.file_system_id])["FileSystems"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "FileSystemNotFound":
                return None
            raise
        return found[0].get("Lifecycle", "DELETING") if found else None

    print(f"FSx {fs.file_system_id}: deleting ...", flush=True)
    _wait(
        f"deletion of FSx {fs.file_system_id}",
        lifecycle,
        done=set(),
        failed={"FAILED"},
        limit_seconds=LIMIT_MINUTES["file-system"] * 60,
    )
    print(f"FSx {fs.file_system_id}: deleted")


def delete_studio_content(account: Account, region: str | None, content: StudioContent) -> None:
    """Every app, waited until Deleted; then every space, waited until gone (a space with a running app cannot be
    deleted, and a profile with apps or spaces cannot either)."""
    from botocore.exceptions import ClientError

    sagemaker = account.client("sagemaker", region)
    for app in content.apps:
        key = {
            "DomainId": content.domain_id,
            "AppType": app["AppType"],
            "AppName": app["AppName"],
            **StudioContent.owner(app),
        }
        if app.get("Status") != "Deleting":
            sagemaker.delete_app(**key)
        print(f"Studio: deleting app {app['AppType']} {app['AppName']} ...", flush=True)

        def app_status(k: dict[str, str] = key) -> str | None:
            return sagemaker.describe_app(**k).get("Status")

        _wait(
            f"app {app['AppName']}",
            app_status,
            done=APP_GONE,
            failed=APP_FAILED,
            limit_seconds=LIMIT_MINUTES["studio"] * 60,
        )
    for space in content.spaces:
        sagemaker.delete_space(DomainId=content.domain_id, SpaceName=space)
        print(f"Studio: deleting space {space} ...", flush=True)

        def status(name: str = space) -> str | None:
            try:
                return sagemaker.describe_space(DomainId=content.domain_id, SpaceName=name).get("Status")
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") in ("ResourceNotFound", "ValidationException"):
                    return None
                raise

        _wait(f"space {space}", status, done=set(), failed=SPACE_FAILED, limit_seconds=LIMIT_MINUTES["studio"] * 60)
    print(f"Studio: {len(content.apps)} app(s) and {len(content.spaces)} space(s) of {content.domain_id} deleted")


def delete_stack(account: Account, stack: AssemblyStack, deployed: Deployed) -> None:
    cfn = account.client("cloudformation", stack.region)
    if deployed.protected:
        cfn.update_termination_protection(StackName=stack.name, EnableTerminationProtection=False)
        print(f"{stack.name}: termination protection turned off")
    cfn.delete_stack(StackName=deployed.stack_id)
    print(f"{stack.name}: deleting ...", flush=True)

    def status() -> str | None:
        return cfn.describe_stacks(StackName=deployed.stack_id)["Stacks"][0]["StackStatus"]

    try:
        _wait(
            stack.name,
            status,
            done={"DELETE_COMPLETE"},
            failed={"DELETE_FAILED"},
            limit_seconds=LIMIT_MINUTES["stack"] * 60,
        )
    except TimedOut:
        raise
    except Failed:
        reasons = [
            f"{e['LogicalResourceId']} ({e.get('ResourceType', '')}): {e.get('ResourceStatusReason', '')}"
            for e in cfn.describe_stack_events(StackName=deployed.stack_id).get("StackEvents", [])
            if e.get("ResourceStatus") == "DELETE_FAILED" and e.get("LogicalResourceId") != stack.name
        ]
        raise Failed(
            f"{stack.name} ended DELETE_FAILED: {'; '.join(reasons[:3]) or 'no reason given'}; fix it and "
            "run `make destroy` again (deleted stacks are skipped)"
        ) from None
    print(f"{stack.name}: deleted")


def finish_by_hand(stack: AssemblyStack, holders: list[FileSystem]) -> list[str]:
    region = f" --region {stack.region}" if stack.region else ""
    lines = [
        (
            f"{stack.name} KEPT: FSx file system(s) {', '.join(f.file_system_id for f in holders)} still use its "
            "subnets and security group, and CloudFormation cannot delete a subnet or security group in use."
        ),
        (
            "To finish by hand, once its data is where you want it (what was under its data repository associations "
            "was exported to S3 before they were deleted; anything else is only on the file system):"
        ),
    ]
    for fs in holders:
        lines.append(
            f"  aws fsx create-backup{region} --file-system-id {fs.file_system_id}   # optional: FSx takes "
            "one only from a persistent file system not linked to S3"
        )
        lines.append(
            f"  aws fsx delete-file-system{region} --file-system-id {fs.file_system_id} "
            "--lustre-configuration SkipFinalBackup=true"
        )
        lines.append(
            f"  aws fsx describe-file-systems{region} --file-system-ids {fs.file_system_id}   "
            "# until FileSystemNotFound"
        )
    lines.append(
        f"  make destroy   # again: deletes {stack.name} now that nothing uses it "
        f"(or: aws cloudformation delete-stack{region} --stack-name {stack.name})"
    )
    return lines


def confirmed(name: str, assume_yes: bool) -> bool:
    if assume_yes:
        return True
    try:
        answer = input(f"Type the platform name ({name}) to delete it as above: ")
    except EOFError:
        return False
    return answer.strip() == name


def _look(account: Account, plan: Plan) -> None:
    """Read only: which stacks exist, the FSx file systems where the platform keeps one, the subnets they may use."""
    plan.deployed = {a: account.deployed(plan.stacks[a]) for a in plan.order}
    plan.physical = {plan.stacks[a].name: account.resources(plan.stacks[a]) for a in plan.order if plan.deployed[a]}
    regions = {
        plan.stacks[a].region for a in plan.order if any(k in plan.kept_file_systems for k in plan.stacks[a].kept)
    }
    plan.file_systems = [fs for region in sorted(regions, key=str) for fs in account.file_systems(region)]
    plan.subnets = {
        a: account.physical_ids(plan.stacks[a], ["AWS::EC2::Subnet"]) for a in plan.used_stacks() if plan.deployed[a]
    }
    for a in plan.order:
        stack = plan.stacks[a]
        if stack.domain_name and plan.deployed[a] and (content := account.studio(stack.region, stack.domain_name)):
            plan.studio[a] = content


def run(argv: list[str] | None = None, session=None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.out_dir)
    problem = missing_assembly(out_dir)
    if problem:
        raise Refused(problem)
    stacks = read_assembly(out_dir)
    plan = Plan(
        out_dir=out_dir,
        name=platform_name(out_dir, stacks),
        stacks=stacks,
        order=deletion_order(stack_dependencies(out_dir)),
        delete_file_systems=args.delete_file_systems,
        without_backup=args.without_backup,
    )
    check_flags(plan)
    if session is None:
        problem = missing_credentials()
        if problem:
            raise Refused(problem)
        import boto3

        session = boto3.Session()
    account = Account(session)

    _look(account, plan)
    print("\n".join(render(plan)))
    if not any(plan.deployed.values()) and not (plan.delete_file_systems and plan.ours()):
        print(f"Nothing of {plan.name} is deployed: nothing to delete.")
        return 0
    if not confirmed(plan.name, args.yes):
        print("Not confirmed: nothing was changed.")
        return 1

    kept_stacks: list[tuple[AssemblyStack, list[FileSystem]]] = []
    for artifact_id in plan.order:
        stack, deployed = stacks[artifact_id], plan.deployed[artifact_id]
        holds_fsx = any(k in plan.kept_file_systems for k in stack.kept)
        if deployed is None:
            print(f"{stack.name}: not deployed, skipped")
        elif artifact_id in plan.subnets and (holders := plan.holders(artifact_id, account.file_systems(stack.region))):
            kept_stacks.append((stack, holders))
            print(f"{stack.name}: kept (FSx {', '.join(f.file_system_id for f in holders)} uses its subnets)")
        else:
            if holds_fsx:  # while its data repository associations exist: they go with this stack
                for fs in plan.ours():
                    export_to_s3(account, stack.region, fs)
            if artifact_id in plan.studio:  # read again: people may have made more since the plan was shown
                assert stack.domain_name is not None  # plan.studio holds only the stack with the domain
                content = account.studio(stack.region, stack.domain_name)
                if content is not None:
                    delete_studio_content(account, stack.region, content)
            delete_stack(account, stack, deployed)
        if holds_fsx and plan.delete_file_systems:
            for fs in plan.ours():
                backup(account, plan, stack.region, fs)
                delete_file_system(account, stack.region, fs)

    kept = [k for k in plan.kept if not (plan.delete_file_systems and k in plan.kept_file_systems)]
    print(f"\nDone. {len(kept)} retained resource(s) stay in the account; delete them yourself when you mean to:")
    print("\n".join(f"  {plan.kept_line(k)}" for k in kept))
    for stack, holders in kept_stacks:
        print("\n".join(finish_by_hand(stack, holders)))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cli.destroy", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default="cdk.out", help="the synthesized cloud assembly (make synth)")
    parser.add_argument("--yes", action="store_true", help="do not ask for the platform's name (non-interactive)")
    parser.add_argument(
        "--delete-file-systems",
        action="store_true",
        help="also delete the platform's retained FSx file systems (after the final export to S3, "
        "with a backup where FSx allows one), so the network stack can go too",
    )
    parser.add_argument(
        "--without-backup",
        action="store_true",
        help="with --delete-file-systems: accept deleting a file system FSx cannot back up (linked to "
        "S3: what is under its association paths stays in S3, anything else on it is lost)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, session=None) -> int:
    """run(), with one line on stderr when it stops: bad input or no credentials (2), not confirmed or a deletion
    that failed (1), an AWS error (2). `session` (a boto3.Session) is for tests; otherwise boto3's default chain."""
    from botocore.exceptions import BotoCoreError, ClientError

    parse_args(argv)  # --help and usage errors exit here, as argparse does
    try:
        return run(argv, session)
    except Refused as exc:
        print(f"destroy: {exc}", file=sys.stderr)
        return 2
    except Failed as exc:
        print(f"destroy: {exc}", file=sys.stderr)
        return 1
    except (BotoCoreError, ClientError) as exc:
        print(f"destroy: {one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
