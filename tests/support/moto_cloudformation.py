"""moto server with three CloudFormation change-set behaviours of the real service that moto 5.2.5 lacks, for tests
that run the guard's whole flow (and the pinned CDK CLI) against it:

  python tests/support/moto_cloudformation.py -H 127.0.0.1 -p PORT

1. A change set named by name (not ARN) belongs to the stack named with it. moto looks names up across every stack,
   so with one change-set name for several stacks (what `cdk deploy --all --change-set-name` creates) it answers for
   the wrong stack.
2. DescribeChangeSet and ExecuteChangeSet of a missing change set fail with `ChangeSetNotFound` (HTTP 404), as
   CloudFormation's API reference says; DeleteChangeSet of a missing one succeeds: the CDK CLI sends one before it
   prepares a change set and then waits for DescribeChangeSet's ChangeSetNotFound (`cleanupOldChangeset` in
   node_modules/aws-cdk/lib/index.js, aws-cdk 2.1148.1), with no error handling around the delete. moto raises
   UnboundLocalError (HTTP 500) on that delete and a ValidationError on the describe.
3. A resource that fails while a change set executes fails the execution: the stack ends `UPDATE_ROLLBACK_COMPLETE`
   (`ROLLBACK_COMPLETE` for a new stack) with a `*_FAILED` event naming the resource and the error, the change set
   `EXECUTE_FAILED`. moto lets the exception escape from ExecuteChangeSet ("TODO: handle execution errors and
   implement rollback" in moto/cloudformation/models.py); CloudFormation answers the call and fails the stack. The
   rollback here keeps the stack's template and parameters, not the resources moto changed before the failure.
   After a successful execution the stack's change sets are gone, the executed one included (ExecuteChangeSet, API
   reference: "removes all change sets associated with the stack").

Everything else is moto's own behaviour, without the three costs support/moto_lean.py leaves out. This is the tests'
moto server (support/moto_server.py: each pytest process's `moto_endpoint`, shared by the guard's flow, `make destroy`'s
tests, the handlers' tests, ...). The three behaviours are patched in when the server first makes its CloudFormation
app, as the first CloudFormation request arrives: importing moto's CloudFormation costs ~1.6 s of CPU (its template
parser imports every service's models), which a server that is asked nothing of CloudFormation does not pay.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto.server import main

# Made by change_set_behaviours(): its base class is moto's CloudFormationError, imported with moto's CloudFormation.
ChangeSetNotFound: Any = None


def _find(backend, change_set_name: str, stack_name: str | None):
    if change_set_name in backend.change_sets:  # an ARN
        return backend.change_sets[change_set_name]
    for change_set in backend.change_sets.values():
        if change_set.change_set_name == change_set_name and stack_name in (
            None,
            "",
            change_set.stack_name,
            change_set.stack_id,
        ):
            return change_set
    raise ChangeSetNotFound(change_set_name)


def describe_change_set(self, change_set_name: str, stack_name: str | None = None):
    return _find(self, change_set_name, stack_name)


def delete_change_set(self, change_set_name: str, stack_name: str | None = None) -> None:
    try:
        del self.change_sets[_find(self, change_set_name, stack_name).change_set_id]
    except ChangeSetNotFound:
        pass


def execute_change_set(self, change_set_name: str, stack_name: str | None = None) -> None:
    change_set = _find(self, change_set_name, stack_name)
    stack = self.stacks[change_set.stack_id]
    kind = change_set.change_set_type  # CREATE or UPDATE
    stack._add_stack_event(f"{kind}_IN_PROGRESS", resource_status_reason="User Initiated")
    try:
        change_set.apply()
    except Exception as error:  # noqa: BLE001 - any resource failure fails the stack, as CloudFormation does
        resource = _failing_resource(change_set, error)
        stack._add_stack_event(
            f"{kind}_FAILED",
            resource_status_reason=f"{type(error).__name__}: {error}",
            logical_resource_id=resource[0],
            resource_type=resource[1],
        )
        stack.status = "ROLLBACK_COMPLETE" if kind == "CREATE" else "UPDATE_ROLLBACK_COMPLETE"
        stack._add_stack_event(stack.status)
        change_set.execution_status = "EXECUTE_FAILED"
        return
    stack._add_stack_event(f"{kind}_COMPLETE")
    change_set.execution_status = "EXECUTE_COMPLETE"
    stack.status = f"{kind}_COMPLETE"
    stack.template = change_set.template
    # "After the execution, CloudFormation removes all change sets associated with the stack" (the executed one too)
    for done in [c for c in self.change_sets.values() if c.stack_id == stack.stack_id]:
        del self.change_sets[done.change_set_id]


def _failing_resource(change_set, error: Exception) -> tuple[str, str]:
    """The resource whose handler raised: the first added or modified one named in the error, else the stack."""
    for change in change_set.changes:
        if change.logical_resource_id in str(error) or change.action in ("Add", "Modify"):
            return change.logical_resource_id, change.resource_type
    return change_set.stack_name, "AWS::CloudFormation::Stack"


def _stack_event(original):
    def add(
        self,
        resource_status,
        resource_status_reason=None,
        resource_properties=None,
        logical_resource_id=None,
        resource_type=None,
    ):
        original(self, resource_status, resource_status_reason, resource_properties)
        if logical_resource_id:
            self.events[-1].logical_resource_id = logical_resource_id
            self.events[-1].resource_type = resource_type
            self.events[-1].physical_resource_id = ""

    return add


def _response(method):
    from moto.cloudformation import responses

    def handler(self):
        change_set = getattr(self.cloudformation_backend, method)(
            change_set_name=self._get_param("ChangeSetName"), stack_name=self._get_param("StackName")
        )
        if method == "describe_change_set":
            return responses.ActionResult(change_set)
        return responses.EmptyResult()

    return handler


def change_set_behaviours() -> None:
    """Patches the three behaviours into moto's CloudFormation (importing it)."""
    global ChangeSetNotFound
    from moto.cloudformation import models, responses
    from moto.cloudformation.exceptions import CloudFormationError

    class NotFound(CloudFormationError):
        code = "ChangeSetNotFoundException"  # the model's shape: moto serializes its query code and HTTP 404 from it

        def __init__(self, name: str) -> None:
            super().__init__(f"ChangeSet [{name}] does not exist")

    ChangeSetNotFound = NotFound
    models.CloudFormationBackend.describe_change_set = describe_change_set
    models.CloudFormationBackend.delete_change_set = delete_change_set
    models.CloudFormationBackend.execute_change_set = execute_change_set
    models.Stack._add_stack_event = _stack_event(models.Stack._add_stack_event)
    for method in ("describe_change_set", "delete_change_set", "execute_change_set"):
        setattr(responses.CloudFormationResponse, method, _response(method))


def when_cloudformation_loads(patch) -> None:
    """Runs `patch` once, before moto's server makes its CloudFormation app (which answers every CloudFormation
    request, so none is answered unpatched). moto.server.main looks create_backend_app up when it starts."""
    import moto.server

    make_app = moto.server.create_backend_app
    lock = threading.Lock()
    patched = []

    def create_backend_app(service):
        if service == "cloudformation":
            with lock:
                if not patched:
                    patch()
                    patched.append(service)
        return make_app(service)

    moto.server.create_backend_app = create_backend_app


if __name__ == "__main__":
    from moto_lean import lean  # tests/support is the script's sys.path[0]

    lean()
    when_cloudformation_loads(change_set_behaviours)
    main(sys.argv[1:])
