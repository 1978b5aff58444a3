"""`make destroy` (cli/destroy.py) of an attach-mode platform: the apps and spaces people created in Studio go first,
after the question; the existing cluster's file system and network are never touched. The harness is
tests/support/destroy_harness.py (moto server, stand-in stacks, termination protection); Studio's apps and spaces, which moto
5.2 lacks (ListApps, DeleteApp, DescribeApp, ListSpaces, DeleteSpace, DescribeSpace), are answered per operation on
the real clients from `StudioApps` below, every answer checked against botocore's output shape."""

from __future__ import annotations

from typing import Any

import pytest

from botocore.awsrequest import AWSResponse

from support.destroy_harness import Calls, Platform, answer, destroy_main, moto_session
from support.destroy_harness import answered as _shaped_answer


@pytest.fixture
def aws(moto_endpoint, monkeypatch):
    return moto_session(moto_endpoint, monkeypatch)


def _answer(session, operation_model, parsed: dict[str, Any], status: int = 200):
    """The harness's answer (checked against the output shape); DeleteApp and DeleteSpace have no output shape."""
    if operation_model.output_shape is None and status == 200:
        return AWSResponse(None, 200, {}, None), parsed
    return _shaped_answer(session, operation_model, parsed, status)


NAME = "studio-front"
DOMAIN_NAME = f"{NAME}-studio"


class StudioApps:
    """A domain's apps and spaces: a deleted app is Deleted at the next DescribeApp; a deleted space is gone (its
    DescribeSpace answers ResourceNotFound). DeleteSpace is refused while an app of the space is not Deleted, as
    SageMaker refuses it."""

    def __init__(self, session, calls: Calls, domain_id: str, apps: list[dict[str, Any]], spaces: list[str]) -> None:
        self.calls, self.domain_id = calls, domain_id
        self.apps = {a["AppName"]: {"DomainId": domain_id, "Status": "InService", **a} for a in apps}
        self.spaces = set(spaces)
        for operation in ("ListApps", "DeleteApp", "DescribeApp", "ListSpaces", "DeleteSpace", "DescribeSpace"):
            session.events.register(f"before-call.sagemaker.{operation}", getattr(self, f"_{operation}"))

    def _params(self, operation: str) -> dict[str, Any]:
        return next(p for _, op, p in reversed(self.calls.log) if op == operation)

    def _ListApps(self, model, **_):
        return _answer(None, model, {"Apps": list(self.apps.values())})

    def _DeleteApp(self, model, **_):
        app = self.apps[self._params("DeleteApp")["AppName"]]
        app["Status"] = "Deleting"
        return _answer(None, model, {})

    def _DescribeApp(self, model, **_):
        app = self.apps[self._params("DescribeApp")["AppName"]]
        if app["Status"] == "Deleting":
            app["Status"] = "Deleted"
        return _answer(None, model, {k: v for k, v in app.items()})

    def _ListSpaces(self, model, **_):
        return _answer(
            None,
            model,
            {
                "Spaces": [
                    {"DomainId": self.domain_id, "SpaceName": s, "Status": "InService"} for s in sorted(self.spaces)
                ]
            },
        )

    def _DeleteSpace(self, model, **_):
        space = self._params("DeleteSpace")["SpaceName"]
        if any(a.get("SpaceName") == space and a["Status"] != "Deleted" for a in self.apps.values()):
            return _answer(
                None,
                model,
                {
                    "Error": {"Code": "ResourceInUse", "Message": f"space {space} has apps"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                status=400,
            )
        self.spaces.discard(space)
        return _answer(None, model, {})

    def _DescribeSpace(self, model, **_):
        space = self._params("DescribeSpace")["SpaceName"]
        if space not in self.spaces:
            return _answer(
                None,
                model,
                {
                    "Error": {"Code": "ResourceNotFound", "Message": "not found"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                status=400,
            )
        return _answer(None, model, {"DomainId": self.domain_id, "SpaceName": space, "Status": "InService"})


@pytest.fixture
def attached(synth, aws):
    """The attach example deployed (stand-ins), its domain in moto, two people's spaces with apps, and the existing
    cluster's file system, which the platform never created."""
    deployed = Platform(aws, synth("attach_slurm").out_dir)
    deployed.deploy()
    sagemaker = aws.client("sagemaker")
    domain = sagemaker.create_domain(
        DomainName=DOMAIN_NAME,
        AuthMode="IAM",
        VpcId="vpc-0a1b2c3d4e5f60718",
        SubnetIds=["subnet-0a1b2c3d4e5f60718"],
        DefaultUserSettings={"ExecutionRole": "arn:aws:iam::123456789012:role/studio"},
    )["DomainArn"].rsplit("/", 1)[1]
    studio = StudioApps(
        aws,
        deployed.calls,
        domain,
        spaces=["alice-lab", "bob-code"],
        apps=[
            {"AppType": "JupyterLab", "AppName": "default", "SpaceName": "alice-lab"},
            {"AppType": "CodeEditor", "AppName": "code", "SpaceName": "bob-code"},
        ],
    )
    file_system = aws.client("fsx").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=["subnet-0a1b2c3d4e5f60718"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2"},
    )["FileSystem"]["FileSystemId"]
    deployed.calls.log.clear()
    return deployed, studio, file_system


def test_apps_then_spaces_go_after_the_question_and_before_the_studio_stack(attached, monkeypatch, capsys):
    deployed, studio, file_system = attached
    answer(monkeypatch, f"{NAME}\n", deployed.calls)
    assert destroy_main(deployed) == 0
    out = capsys.readouterr().out
    assert (
        f"first: deletes the 2 app(s) and 2 space(s) people created in Studio domain {studio.domain_id}: apps "
        "JupyterLab default of alice-lab, CodeEditor code of bob-code; spaces alice-lab, bob-code"
    ) in out
    log = [(op, p) for _, op, p in deployed.calls.log]
    ops = [op for op, _ in log]
    asked = ops.index("ANSWER")
    first_delete = min(ops.index(op) for op in ("DeleteApp", "DeleteSpace", "DeleteStack"))
    assert asked < first_delete
    studio_stack = next(i for i, (op, p) in enumerate(log) if op == "DeleteStack" and "studio" in p["StackName"])
    deletions = [
        (op, p.get("AppName") or p.get("SpaceName"))
        for op, p in log[:studio_stack]
        if op in ("DeleteApp", "DeleteSpace")
    ]
    assert deletions == [
        ("DeleteApp", "default"),
        ("DeleteApp", "code"),
        ("DeleteSpace", "alice-lab"),
        ("DeleteSpace", "bob-code"),
    ]
    assert studio.spaces == set() and {a["Status"] for a in studio.apps.values()} == {"Deleted"}
    assert set(deployed.status().values()) == {"DELETE_COMPLETE"}


def test_attach_mode_never_touches_the_existing_file_system_cluster_or_network(attached, monkeypatch):
    deployed, _, file_system = attached
    assert destroy_main(deployed, "--yes", "--delete-file-systems", "--without-backup") == 0
    touched = [
        (service, op)
        for service, op, _ in deployed.calls.log
        if service in ("fsx", "ec2") or (service == "sagemaker" and "Cluster" in op)
    ]
    assert [t for t in touched if not t[1].startswith(("Describe", "List"))] == []
    assert file_system in deployed.file_system_ids()


def test_not_confirmed_deletes_no_app_and_no_space(attached, monkeypatch):
    deployed, studio, _ = attached
    answer(monkeypatch, "no\n", deployed.calls)
    assert destroy_main(deployed) == 1
    assert not [op for _, op, _ in deployed.calls.log if op.startswith("Delete")]
    assert studio.spaces == {"alice-lab", "bob-code"}
