"""The deployed platform of `make destroy`'s tests (tests/test_destroy.py, tests/test_destroy_studio.py): the
synthesized assembly's stacks created in moto from stand-ins, the retained file system, and what moto 5.2 lacks
answered per operation on the otherwise real clients. tests/test_destroy.py's docstring says what and why."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.validate import validate_parameters

import cli.destroy as destroy
from support.moto_server import reset, session

REGION = "us-west-2"
NAME = "ml-cluster"
MUTATING = {
    "UpdateTerminationProtection",
    "DeleteStack",
    "DeleteFileSystem",
    "CreateBackup",
    "CreateDataRepositoryTask",
}


def moto_session(endpoint: str, monkeypatch) -> boto3.Session:
    """An empty moto account, AWS_ENDPOINT_URL at it, no profile, destroy's polls not waiting: the `aws` fixture."""
    reset(endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(destroy, "POLL_SECONDS", 0.0)
    return session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)


# --- what moto lacks ---------------------------------------------------------------------------------------------


def answered(session, operation_model, parsed: dict[str, Any], status: int = 200):
    if status == 200:
        validate_parameters(parsed, operation_model.output_shape)  # raises on a shape botocore would not return
    return AWSResponse(None, status, {}, None), parsed


class Calls:
    """Every API call the clients of `session` make, in order (service, operation, parameters); "ANSWER" entries mark
    when the confirmation prompt was answered."""

    def __init__(self, session) -> None:
        self.log: list[tuple[str, str, dict[str, Any]]] = []
        session.events.register("before-parameter-build", self._record)

    def _record(self, model, params, **_):
        self.log.append((model.service_model.service_id.hyphenize(), model.name, dict(params)))

    def names(self, *operations: str) -> list[tuple[str, Any]]:
        return [(op, p.get("StackName") or p.get("FileSystemId")) for _, op, p in self.log if op in operations]


class Protection:
    """CloudFormation's termination protection, which moto 5.2 does not implement (see the module docstring)."""

    def __init__(self, session, calls: Calls) -> None:
        self.flags: dict[str, bool] = {}
        self.ids: dict[str, str] = {}
        self.calls = calls
        events = session.events
        events.register("after-call.cloudformation.CreateStack", self._created)
        events.register("after-call.cloudformation.DescribeStacks", self._describe)
        events.register("before-call.cloudformation.UpdateTerminationProtection", self._update)
        events.register("before-call.cloudformation.DeleteStack", self._delete)

    def _params(self, operation: str) -> dict[str, Any]:
        return next(p for _, op, p in reversed(self.calls.log) if op == operation)

    def _name(self, name_or_id: str) -> str:
        return self.ids.get(name_or_id, name_or_id)

    def _created(self, parsed, **_):
        params = self._params("CreateStack")
        self.ids[parsed["StackId"]] = params["StackName"]
        self.flags[params["StackName"]] = bool(params.get("EnableTerminationProtection"))

    def _describe(self, parsed, **_):
        for stack in parsed.get("Stacks", []):
            stack["EnableTerminationProtection"] = self.flags.get(stack["StackName"], False)

    def _update(self, model, **_):
        params = self._params("UpdateTerminationProtection")
        name = self._name(params["StackName"])
        self.flags[name] = params["EnableTerminationProtection"]
        return answered(None, model, {"StackId": next(i for i, n in self.ids.items() if n == name)})

    def _delete(self, model, **_):
        name = self._name(self._params("DeleteStack")["StackName"])
        if self.flags.get(name):
            return answered(
                None,
                model,
                {
                    "Error": {
                        "Code": "ValidationError",
                        "Message": (f"Stack [{name}] cannot be deleted while TerminationProtection is enabled"),
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                status=400,
            )
        return None  # moto deletes it


class Associations:
    """FSx data repository associations and export tasks (not in moto 5.2), from the storage template's association.
    An association is a resource of its stack (DeletionPolicy Delete): it goes when that stack is deleted."""

    def __init__(self, session, calls: Calls, protection: Protection) -> None:
        self.by_file_system: dict[str, list[dict[str, Any]]] = {}
        self.owner: dict[str, str] = {}  # association id -> stack name
        self.tasks: dict[str, dict[str, Any]] = {}
        self.calls, self.protection = calls, protection
        events = session.events
        events.register("before-call.fsx.DescribeDataRepositoryAssociations", self._describe)
        events.register("before-call.fsx.CreateDataRepositoryTask", self._create_task)
        events.register("before-call.fsx.DescribeDataRepositoryTasks", self._describe_tasks)
        events.register("after-call.cloudformation.DeleteStack", self._stack_deleted)

    def link(self, file_system_id: str, association: dict[str, Any], stack: str) -> None:
        association_id = f"dra-{len(self.owner):017x}"
        self.owner[association_id] = stack
        self.by_file_system.setdefault(file_system_id, []).append(
            {"AssociationId": association_id, "FileSystemId": file_system_id, "Lifecycle": "AVAILABLE", **association}
        )

    def _stack_deleted(self, parsed, **_):
        if "Error" in parsed:
            return
        stack = self.protection._name(self.protection._params("DeleteStack")["StackName"])
        for file_system_id, found in self.by_file_system.items():
            found[:] = [a for a in found if self.owner[a["AssociationId"]] != stack]

    def _describe(self, model, **_):
        params = next(p for _, op, p in reversed(self.calls.log) if op == "DescribeDataRepositoryAssociations")
        wanted = {v for f in params.get("Filters", []) if f["Name"] == "file-system-id" for v in f["Values"]}
        return answered(
            None,
            model,
            {"Associations": [a for fs, found in self.by_file_system.items() if fs in wanted for a in found]},
        )

    def _create_task(self, model, **_):
        params = next(p for _, op, p in reversed(self.calls.log) if op == "CreateDataRepositoryTask")
        task = {
            "TaskId": f"task-{len(self.tasks):017x}",
            "Lifecycle": "SUCCEEDED",
            "Type": params["Type"],
            "CreationTime": 0,
            "FileSystemId": params["FileSystemId"],
        }
        self.tasks[task["TaskId"]] = task
        return answered(None, model, {"DataRepositoryTask": {**task, "Lifecycle": "PENDING"}})

    def _describe_tasks(self, model, **_):
        params = next(p for _, op, p in reversed(self.calls.log) if op == "DescribeDataRepositoryTasks")
        return answered(None, model, {"DataRepositoryTasks": [self.tasks[t] for t in params["TaskIds"]]})


# --- the deployed platform in moto -------------------------------------------------------------------------------

STAND_IN_PROPERTIES = {
    "AWS::EC2::VPC": ("CidrBlock",),
    "AWS::EC2::Subnet": ("VpcId", "CidrBlock"),
    "AWS::EC2::SecurityGroup": ("GroupDescription", "VpcId"),
}


# Retained resources moto's CloudFormation can create, with only what moto needs (a key policy): their physical ids are
# what `make destroy` names them by.
RETAINED_STAND_INS = {
    "AWS::Logs::LogGroup": {},
    "AWS::S3::Bucket": {},
    "AWS::KMS::Key": {"KeyPolicy": {"Version": "2012-10-17", "Statement": []}},
}


def stand_in(template: dict[str, Any]) -> dict[str, Any]:
    """The template's VPC, subnets and security groups that it makes itself (not from another stack's outputs,
    which moto cannot read), with the properties moto needs, under their logical ids; its retained log groups,
    buckets and keys; a placeholder besides."""
    resources = {
        lid: {"Type": r["Type"], "Properties": {k: r["Properties"][k] for k in keep}}
        for lid, r in template["Resources"].items()
        for keep in [STAND_IN_PROPERTIES.get(r["Type"])]
        if keep and "Fn::GetStackOutput" not in json.dumps(r)
    }
    resources |= {
        lid: {"Type": r["Type"], "Properties": RETAINED_STAND_INS[r["Type"]]}
        for lid, r in template["Resources"].items()
        if r.get("DeletionPolicy") == "Retain" and r["Type"] in RETAINED_STAND_INS
    }
    resources["StandIn"] = {"Type": "AWS::CloudFormation::WaitConditionHandle"}
    return {"Resources": resources}


class Platform:
    def __init__(self, session, out_dir: Path) -> None:
        self.session, self.out_dir = session, out_dir
        self.calls = Calls(session)
        self.protection = Protection(session, self.calls)
        self.associations = Associations(session, self.calls, self.protection)
        self.cfn = session.client("cloudformation")
        self.fsx = session.client("fsx")
        manifest = json.loads((out_dir / "manifest.json").read_text())["artifacts"]
        self.artifacts = {n: a for n, a in manifest.items() if a["type"] == "aws:cloudformation:stack"}
        self.templates = {
            n: json.loads((out_dir / a["properties"]["templateFile"]).read_text()) for n, a in self.artifacts.items()
        }

    def deploy(self) -> None:
        for name, artifact in self.artifacts.items():
            self.cfn.create_stack(
                StackName=name,
                TemplateBody=json.dumps(stand_in(self.templates[name])),
                EnableTerminationProtection=artifact["properties"]["terminationProtection"],
            )
        self.calls.log.clear()

    def physical_id(self, stack: str, output_name: str) -> str:
        value = self.templates[stack]["Outputs"][output_name]["Value"]  # {"Ref": id} or {"Fn::GetAtt": [id, "GroupId"]}
        logical = value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]
        resources = self.cfn.describe_stack_resources(StackName=stack)["StackResources"]
        return next(r["PhysicalResourceId"] for r in resources if r["LogicalResourceId"] == logical)

    def resolve(self, value: Any) -> str:
        out = value["Fn::GetStackOutput"]
        return self.physical_id(out["StackName"], out["OutputName"])

    def file_system(self, *, platform_tags: bool = True) -> str:
        """The retained file system as the storage template describes it (subnet, security group, tags, association)."""
        storage = self.templates[f"{NAME}-storage"]["Resources"]
        lid, fs = next((lid, r) for lid, r in storage.items() if r["Type"] == "AWS::FSx::FileSystem")
        props = fs["Properties"]
        created = self.fsx.create_file_system(
            FileSystemType=props["FileSystemType"],
            StorageCapacity=props["StorageCapacity"],
            StorageType=props["StorageType"],
            SubnetIds=[self.resolve(s) for s in props["SubnetIds"]],
            SecurityGroupIds=[self.resolve(s) for s in props["SecurityGroupIds"]],
            LustreConfiguration={"DeploymentType": props["LustreConfiguration"]["DeploymentType"]},
            Tags=props["Tags"] if platform_tags else [{"Key": "owner", "Value": "someone else"}],
        )["FileSystem"]
        for association in storage.values():
            if association["Type"] == "AWS::FSx::DataRepositoryAssociation" and association["Properties"][
                "FileSystemId"
            ] == {"Ref": lid}:
                self.associations.link(
                    created["FileSystemId"],
                    {
                        "FileSystemPath": association["Properties"]["FileSystemPath"],
                        "DataRepositoryPath": "s3://ml-cluster-data-bucket/",
                    },
                    f"{NAME}-storage",
                )
        self.calls.log.clear()
        return created["FileSystemId"]

    def backups_complete(self) -> None:
        """moto 5.2 creates every FSx backup CREATING and never moves it on; FSx makes it AVAILABLE when done."""

        def available(parsed, **_):
            for backup in parsed.get("Backups", []):
                backup["Lifecycle"] = "AVAILABLE"

        self.session.events.register("after-call.fsx.DescribeBackups", available)

    def backups_refused(self) -> None:
        """FSx refusing a backup (moto 5.2 backs up anything)."""
        self.session.events.register(
            "before-call.fsx.CreateBackup",
            lambda model, **_: answered(
                None,
                model,
                {
                    "Error": {"Code": "BadRequest", "Message": "test: FSx refused the backup"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                status=400,
            ),
        )

    def status(self) -> dict[str, str]:
        """Every stack of the assembly: its status, DELETE_COMPLETE once DescribeStacks no longer lists it."""
        listed = {s["StackName"]: s["StackStatus"] for s in self.cfn.describe_stacks()["Stacks"]}
        return {name: listed.get(name, "DELETE_COMPLETE") for name in self.artifacts}

    def file_system_ids(self) -> set[str]:
        return {f["FileSystemId"] for f in self.fsx.describe_file_systems()["FileSystems"]}


def answer(monkeypatch, text: str, calls: Calls) -> None:
    """stdin holds `text`; reading it is marked in the call log."""

    class Stdin(io.StringIO):
        def readline(self, *args):
            calls.log.append(("user", "ANSWER", {}))
            return super().readline(*args)

    monkeypatch.setattr("sys.stdin", Stdin(text))


def destroy_main(platform: Platform, *args: str) -> int:
    return destroy.main([str(platform.out_dir), *args], session=platform.session)


def retained(platform: Platform) -> set[tuple[str, str]]:
    return {
        (stack, lid)
        for stack, t in platform.templates.items()
        for lid, r in t["Resources"].items()
        if r.get("DeletionPolicy") == "Retain"
    }
