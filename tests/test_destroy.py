"""`make destroy` (cli/destroy.py) against the synthesized assembly of the default config and a moto server.

The stacks are created in moto under the assembly's names, with its termination protection, from stand-in templates
generated from the real ones: the network's VPC, subnets and security groups under their own logical ids (moto's
CloudFormation creates those), one placeholder elsewhere (it cannot create FSx, SageMaker, Lambda-backed custom
resources, ... and `Fn::GetStackOutput`). The retained FSx file system is created through moto's FSx API in the subnet
and security group the storage template points it at (followed through the network template's outputs), with the
tags the template gives it: what a deployed platform leaves once its storage stack is deleted.

What moto 5.2 lacks is answered here, per operation, on the otherwise real clients (botocore's `before-call` event,
the mechanism of botocore.stub.Stubber; a Stubber would intercept every call on its client, moto's included):
- CloudFormation termination protection: moto has no UpdateTerminationProtection, does not return
  EnableTerminationProtection from DescribeStacks and deletes a protected stack. `Protection` keeps the flag per
  stack from CreateStack and refuses DeleteStack on a protected stack with CloudFormation's documented ValidationError
  ("... cannot be deleted while TerminationProtection is enabled",
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-protect-stacks.html).
- FSx data repository associations and tasks (DescribeDataRepositoryAssociations, CreateDataRepositoryTask,
  DescribeDataRepositoryTasks): `Associations` answers them from the template's association; every answer is checked
  against botocore's output shape, as Stubber does.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cli.destroy as destroy
from cli.stack_graph import ancestors, stack_dependencies
from support.destroy_harness import (
    MUTATING,
    NAME,
    REGION,
    RETAINED_STAND_INS,
    Platform,
    answer,
    destroy_main,
    moto_session,
    retained,
)
from support.moto_server import no_credentials_env
from support.paths import ROOT


@pytest.fixture
def aws(moto_endpoint, monkeypatch):
    return moto_session(moto_endpoint, monkeypatch)


@pytest.fixture
def platform(synth, aws):
    deployed = Platform(aws, synth("default").out_dir)
    deployed.deploy()
    return deployed


# --- tests -------------------------------------------------------------------------------------------------------


def test_the_order_is_the_graph_reversed(synth):
    deps = stack_dependencies(synth("default").out_dir)
    order = destroy.deletion_order(deps)
    assert sorted(order) == sorted(deps)
    for i, stack in enumerate(order):
        # everything a stack depends on is deleted after it
        assert ancestors(deps, stack) <= set(order[i + 1 :]), stack
    assert order[0] == f"{NAME}-observability" and order[-1] == f"{NAME}-network"


def test_a_wrong_name_changes_nothing(platform, monkeypatch, capsys):
    fs = platform.file_system()
    answer(monkeypatch, f"{NAME}-storage\n", platform.calls)
    before = platform.status()

    assert destroy_main(platform) == 1
    out = capsys.readouterr().out
    assert out.rstrip().endswith("Not confirmed: nothing was changed.")
    assert ("user", "ANSWER", {}) in platform.calls.log
    assert not [op for _, op, _ in platform.calls.log if op in MUTATING]
    assert platform.status() == before and set(before.values()) == {"CREATE_COMPLETE"}
    assert platform.protection.flags == {
        n: a["properties"]["terminationProtection"] for n, a in platform.artifacts.items()
    }
    assert fs in platform.file_system_ids()


def test_no_answer_changes_nothing(platform, monkeypatch):
    answer(monkeypatch, "", platform.calls)
    assert destroy_main(platform) == 1
    assert not [op for _, op, _ in platform.calls.log if op in MUTATING]


def test_the_plan_names_what_goes_and_what_stays(platform, monkeypatch, capsys):
    fs = platform.file_system()
    answer(monkeypatch, "no\n", platform.calls)
    destroy_main(platform)
    out = capsys.readouterr().out
    plan, kept = out.split("Kept in the account")
    order = [
        line.split(". ", 1)[1].split(" [")[0] for line in plan.splitlines() if line[:4].strip().rstrip(".").isdigit()
    ]
    assert order == destroy.deletion_order(stack_dependencies(platform.out_dir))
    # every Retain resource of every template is listed as kept, and nothing else: "<stack>: <type> <physical id>
    # (<logical id>): kept", the physical id as the deployed stack lists it
    lines = [line for line in kept.splitlines()[1:] if line.startswith("  ") and not line.startswith("   ")]
    listed = {(line.split(": ")[0].strip(), line.rsplit(" (", 1)[1].split(")")[0]) for line in lines}
    assert listed == retained(platform)
    assert {r for _, r in listed} >= {"LustreFileSystem4AFDAE78", "DataBucketE3889A50", "VpcFlowLogGroupBF601037"}
    types = {(stack, lid): r["Type"] for stack, t in platform.templates.items() for lid, r in t["Resources"].items()}
    named = 0
    for line in lines:
        stack, rest = line.strip().split(": ", 1)
        logical = line.rsplit(" (", 1)[1].split(")")[0]
        physical = {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in platform.cfn.list_stack_resources(StackName=stack)["StackResourceSummaries"]
        }.get(logical)
        assert rest.startswith(f"{types[stack, logical]} {physical or '(not in the deployed stack)'} ({logical}): ")
        named += physical is not None
    assert named == len([1 for s, lid in retained(platform) if types[s, lid] in RETAINED_STAND_INS])
    # the logs key every stack has under one logical id: told apart by its physical id
    logs_keys = [line.split()[2] for line in lines if "(LogsKeyA6AB43B2)" in line]
    assert len(logs_keys) == len(set(logs_keys)) >= 4
    assert f"FSx file system(s) {fs} use its subnets" in plan
    assert "termination protection on (turned off just before its deletion)" in plan


def test_confirmed_it_deletes_in_reverse_order_and_keeps_the_network_while_fsx_uses_it(platform, monkeypatch, capsys):
    fs = platform.file_system()
    answer(monkeypatch, f"{NAME}\n", platform.calls)
    deps = stack_dependencies(platform.out_dir)
    state_at_delete = {}
    platform.session.events.register(
        "before-call.cloudformation.DeleteStack",
        lambda **_: state_at_delete.update({platform.calls.log[-1][2]["StackName"]: platform.status()}),
    )

    assert destroy_main(platform) == 0
    out = capsys.readouterr().out
    deleted = [platform.protection.ids[s] for op, s in platform.calls.names("DeleteStack")]
    assert deleted == [s for s in destroy.deletion_order(deps) if s != f"{NAME}-network"]
    for stack_id, seen in state_at_delete.items():
        stack = platform.protection.ids[stack_id]
        dependents = {s for s in deps if stack in ancestors(deps, s)}
        assert all(seen[d] == "DELETE_COMPLETE" for d in dependents), (stack, seen)
    # protection goes off only after the answer, each right before that stack's deletion, only where it was on
    log = [(op, p.get("StackName")) for _, op, p in platform.calls.log]
    first_change = next(i for i, (op, _) in enumerate(log) if op in MUTATING)
    assert log.index(("ANSWER", None)) < first_change
    protected = [n for n, a in platform.artifacts.items() if a["properties"]["terminationProtection"]]
    assert sorted(s for op, s in platform.calls.names("UpdateTerminationProtection")) == sorted(
        s for s in protected if s != f"{NAME}-network"
    )
    for op, stack in platform.calls.names("UpdateTerminationProtection"):
        after = log[log.index((op, stack)) + 1 :]
        assert next(o for o, s in after if o == "DeleteStack" and platform.protection.ids.get(s) == stack)
    # the network and the file system stay; how to finish is printed
    status = platform.status()
    assert status[f"{NAME}-network"] == "CREATE_COMPLETE"
    assert fs in platform.file_system_ids()
    assert f"{NAME}-network KEPT: FSx file system(s) {fs} still use its subnets" in out
    assert f"aws fsx delete-file-system --region {REGION} --file-system-id {fs}" in out
    assert not platform.calls.names("DeleteFileSystem", "CreateBackup")
    # the association goes with the storage stack: the export to S3 runs before, and only once
    changes = [(op, platform.protection.ids.get(s, s)) for op, s in platform.calls.names(*MUTATING)]
    assert changes.index(("CreateDataRepositoryTask", fs)) < changes.index(("DeleteStack", f"{NAME}-storage"))
    assert changes.count(("CreateDataRepositoryTask", fs)) == 1


def test_a_rerun_once_fsx_is_gone_deletes_the_network(platform, monkeypatch, capsys):
    fs = platform.file_system()
    assert destroy_main(platform, "--yes") == 0
    platform.fsx.delete_file_system(FileSystemId=fs)
    platform.calls.log.clear()
    assert destroy_main(platform, "--yes") == 0
    assert [platform.protection.ids[s] for _, s in platform.calls.names("DeleteStack")] == [f"{NAME}-network"]
    assert platform.status()[f"{NAME}-network"] == "DELETE_COMPLETE"


def test_deleting_the_linked_file_system_needs_its_own_acknowledgement(platform, capsys):
    platform.file_system()
    assert destroy_main(platform, "--yes", "--delete-file-systems") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"destroy: {NAME}-storage LustreFileSystem4AFDAE78: linked to S3")
    assert "--without-backup" in err
    assert platform.calls.log == []  # refused before any AWS call


def mutations(platform: Platform) -> list[tuple[str, str]]:
    return [(op, platform.protection.ids.get(s, s)) for op, s in platform.calls.names(*MUTATING)]


def test_delete_file_systems_exports_then_deletes_fsx_then_the_network(platform, capsys):
    """The association goes with the storage stack; then the file system is backed up if FSx takes it (whether FSx
    backs up a file system whose associations were deleted is not documented: both answers are tested)."""
    fs = platform.file_system()
    platform.backups_complete()
    assert destroy_main(platform, "--yes", "--delete-file-systems", "--without-backup") == 0
    log = mutations(platform)
    assert (
        log.index(("CreateDataRepositoryTask", fs))
        < log.index(("DeleteStack", f"{NAME}-storage"))
        < log.index(("CreateBackup", fs))
        < log.index(("DeleteFileSystem", fs))
        < log.index(("DeleteStack", f"{NAME}-network"))
    )
    assert log[-1] == ("DeleteStack", f"{NAME}-network")
    assert fs not in platform.file_system_ids()
    assert set(platform.status().values()) == {"DELETE_COMPLETE"}
    out = capsys.readouterr().out
    assert f"then: FSx {fs}: deleted WITHOUT a backup (linked to S3" in out  # the plan: linked in the template


def test_a_backup_fsx_refuses_is_skipped_only_with_without_backup(platform, capsys):
    fs = platform.file_system()
    platform.backups_refused()
    assert destroy_main(platform, "--yes", "--delete-file-systems", "--without-backup") == 0
    log = mutations(platform)
    assert log.index(("CreateBackup", fs)) < log.index(("DeleteFileSystem", fs))
    assert fs not in platform.file_system_ids()
    assert f"FSx {fs}: no backup possible (An error occurred (BadRequest)" in capsys.readouterr().out


def test_a_rerun_with_delete_file_systems_after_the_storage_stack_is_gone(platform, capsys):
    fs = platform.file_system()
    platform.backups_complete()
    assert destroy_main(platform, "--yes") == 0
    assert platform.status()[f"{NAME}-network"] == "CREATE_COMPLETE"
    capsys.readouterr()
    platform.calls.log.clear()
    assert destroy_main(platform, "--yes", "--delete-file-systems", "--without-backup") == 0
    assert f"then: FSx {fs}: deleted WITHOUT a backup" in capsys.readouterr().out
    assert mutations(platform) == [("CreateBackup", fs), ("DeleteFileSystem", fs), ("DeleteStack", f"{NAME}-network")]
    assert fs not in platform.file_system_ids()


def test_a_file_system_not_of_this_platform_keeps_the_network(platform, capsys):
    foreign = platform.file_system(platform_tags=False)
    assert destroy_main(platform, "--yes", "--delete-file-systems", "--without-backup") == 0
    assert foreign in platform.file_system_ids()
    assert not platform.calls.names("DeleteFileSystem")
    assert platform.status()[f"{NAME}-network"] == "CREATE_COMPLETE"
    assert f"{NAME}-network KEPT: FSx file system(s) {foreign}" in capsys.readouterr().out


def test_without_backup_alone_is_refused(platform, capsys):
    assert destroy_main(platform, "--yes", "--without-backup") == 2
    assert capsys.readouterr().err == "destroy: --without-backup applies only with --delete-file-systems\n"


def without_associations(out_dir: Path, tmp_path: Path) -> Path:
    """A copy of the assembly's manifest and templates whose storage template has no data repository association:
    a file system FSx can back up."""
    copy = tmp_path / "assembly"
    copy.mkdir()
    for path in out_dir.glob("*.json"):
        data = json.loads(path.read_text())
        if path.name == f"{NAME}-storage.template.json":
            data["Resources"] = {
                lid: r for lid, r in data["Resources"].items() if r["Type"] != "AWS::FSx::DataRepositoryAssociation"
            }
        (copy / path.name).write_text(json.dumps(data))
    return copy


def test_a_file_system_fsx_can_back_up_is_backed_up_before_it_is_deleted(synth, aws, tmp_path, capsys):
    platform = Platform(aws, without_associations(synth("default").out_dir, tmp_path))
    platform.deploy()
    fs = platform.file_system()

    platform.backups_complete()

    assert destroy_main(platform, "--yes", "--delete-file-systems") == 0  # no --without-backup needed
    changes = platform.calls.names("CreateBackup", "DeleteFileSystem")
    assert changes == [("CreateBackup", fs), ("DeleteFileSystem", fs)]
    backups = platform.fsx.describe_backups()["Backups"]  # still there after its file system is gone
    assert len(backups) == 1 and {"Key": "deleted-by", "Value": f"make destroy {NAME}"} in backups[0]["Tags"]
    assert set(platform.status().values()) == {"DELETE_COMPLETE"}
    assert "backed up (the backup is kept), then deleted" in capsys.readouterr().out


def test_without_a_backup_and_without_the_acknowledgement_the_file_system_and_network_stay(
    synth, aws, tmp_path, capsys
):
    platform = Platform(aws, without_associations(synth("default").out_dir, tmp_path))
    platform.deploy()
    fs = platform.file_system()
    platform.backups_refused()
    assert destroy_main(platform, "--yes", "--delete-file-systems") == 1
    err = capsys.readouterr().err
    assert err == (
        f"destroy: FSx {fs}: no backup possible (An error occurred (BadRequest) when calling the "
        "CreateBackup operation: test: FSx refused the backup) and --without-backup was not given: not "
        "deleted\n"
    )
    assert fs in platform.file_system_ids()
    assert not platform.calls.names("DeleteFileSystem")
    assert platform.status()[f"{NAME}-network"] == "CREATE_COMPLETE"


def test_a_stack_that_fails_to_delete_stops_the_run(platform, capsys):
    """CloudFormation reports DELETE_FAILED asynchronously (e.g. a resource still in use); moto deletes at once, so
    DescribeStacks is made to answer DELETE_FAILED for the Studio stack once its deletion was asked for."""
    failing = []

    def fail_studio(parsed, **_):
        for stack in parsed.get("Stacks", []):
            if stack["StackId"] in failing:
                stack["StackStatus"] = "DELETE_FAILED"

    platform.session.events.register("after-call.cloudformation.DescribeStacks", fail_studio)
    platform.session.events.register(
        "before-call.cloudformation.DeleteStack",
        lambda **_: (
            failing.append(next(i for i, n in platform.protection.ids.items() if n == f"{NAME}-studio"))
            if platform.protection.ids.get(platform.calls.log[-1][2]["StackName"]) == f"{NAME}-studio"
            else None
        ),
    )

    assert destroy_main(platform, "--yes") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"destroy: {NAME}-studio ended DELETE_FAILED") and err.count("\n") == 1
    deleted = [platform.protection.ids[s] for _, s in platform.calls.names("DeleteStack")]
    assert deleted == [f"{NAME}-observability", f"{NAME}-cluster", f"{NAME}-studio"]


def test_a_stack_that_does_not_finish_deleting_stops_the_run_at_the_limit_with_progress(platform, monkeypatch, capsys):
    """DescribeStacks keeps answering DELETE_IN_PROGRESS for the observability stack (the first deleted) after its
    deletion was asked for; with the stack limit at 0 minutes the run stops there, saying so, and deletes nothing
    else."""
    asked = []
    platform.session.events.register("before-call.cloudformation.DeleteStack", lambda **_: asked.append(1))

    def in_progress(parsed, **_):
        for stack in parsed.get("Stacks", []):
            if asked and platform.protection.ids.get(stack["StackId"]) == f"{NAME}-observability":
                stack["StackStatus"] = "DELETE_IN_PROGRESS"

    platform.session.events.register("after-call.cloudformation.DescribeStacks", in_progress)
    monkeypatch.setitem(destroy.LIMIT_MINUTES, "stack", 0)

    assert destroy_main(platform, "--yes") == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"destroy: {NAME}-observability still DELETE_IN_PROGRESS after 0 min (the limit is 0 min): "
        "nothing was undone; check it in the console and run `make destroy` again\n"
    )
    assert [platform.protection.ids[s] for _, s in platform.calls.names("DeleteStack")] == [f"{NAME}-observability"]


def test_a_wait_prints_each_new_state_and_a_line_every_progress_interval(monkeypatch, capsys):
    states = iter(["CREATING", "CREATING", "UPDATING", "UPDATING", "AVAILABLE"])
    clock = iter([0.0, 0.0, 30.0, 120.0, 200.0, 210.0])  # the start, then one reading per poll
    monkeypatch.setattr(destroy, "clock", lambda: next(clock))
    monkeypatch.setattr(destroy, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(destroy, "PROGRESS_SECONDS", 60.0)
    assert (
        destroy._wait("backup b-1", lambda: next(states), done={"AVAILABLE"}, failed={"FAILED"}, limit_seconds=3600)
        == "AVAILABLE"
    )
    assert capsys.readouterr().out.splitlines() == [
        "  backup b-1: CREATING, 0 of at most 60 min",  # first state
        "  backup b-1: UPDATING, 2 of at most 60 min",  # a new state
        "  backup b-1: UPDATING, 3 of at most 60 min",  # the same state, a progress interval later
    ]


def test_nested_stacks_are_read_with_their_parent(synth):
    """Per-user Studio profiles live in nested stacks (deleted with the Studio stack): their resources count among
    what it deletes and their retained ones among what is kept."""
    s = synth("containers")
    stacks = destroy.read_assembly(s.out_dir)
    assert sorted(n for stack in stacks.values() for n in stack.nested) == sorted(s.nested) != []
    for artifact_id, stack in stacks.items():
        templates = [json.loads((s.out_dir / f).read_text()) for f in [stack.template_file, *stack.nested]]
        resources = [(lid, r) for t in templates for lid, r in t["Resources"].items()]
        assert sum(stack.deleted.values()) == sum(r.get("DeletionPolicy") != "Retain" for _, r in resources)
        assert {k.logical_id for k in stack.kept} == {
            lid for lid, r in resources if r.get("DeletionPolicy") == "Retain"
        }


def test_importing_it_calls_nothing(tmp_path):
    """No AWS client, not even boto3, at import time."""
    code = "import sys, cli.destroy; print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=no_credentials_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


def test_without_credentials_one_line_and_nothing_asked(synth, monkeypatch, capsys):
    """main() with no AWS credentials (tests/test_cli.py runs `python -m cli.destroy` in a process of its own): one
    line, and the question is never asked (an answer waits on stdin)."""
    env = no_credentials_env()
    for name in [n for n in os.environ if n not in env]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.stdin", io.StringIO("ml-cluster\n"))
    assert destroy.main([str(synth("default").out_dir)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and sys.stdin.read() == "ml-cluster\n"
    assert captured.err.startswith("destroy: no AWS credentials") and captured.err.count("\n") == 1
