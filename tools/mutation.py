"""Mutation testing of the modules that guard data and identity: does the suite notice when their behaviour breaks?

    make mutation                                  # every target below, kill rate per module and in total
    .venv/bin/python tools/mutation.py --module platform_config/day2.py --module lambda/fsx_partitions/profile_events.py
    .venv/bin/python tools/mutation.py --list      # the mutants, without running anything

Each mutant is one plausible bug, made by rewriting one node of the module's syntax tree: a comparison turned
(== and !=, < and <=, > and >=, in and not in, is and is not), and/or swapped, a `not` dropped, a condition negated,
a number moved by one, True and False swapped, a key-like string misspelt (strings without spaces: dict keys, tag
names, states, actions), `return x` made `return None`, a call statement or a raise deleted, + and - swapped, min
and max or any and all swapped. Docstrings, annotations, log calls and message text are left alone (a message is read
by people; the tests check the ones that matter through the refusals they belong to).

The run works in a copy of the work tree (tracked and untracked files, .venv and node_modules linked), so the tree
you work in is never touched. For each module it first runs the module's tests unmutated, tracing which lines they
execute; a mutant on a line they never run survives without a run ("not covered"). Every other mutant is written
into the copy and the module's tests run (`pytest -x`, no bytecode cache) in a fork of this process, which has
imported pytest, boto3 and pydantic but nothing of the project, cheapest test files first; the mutant is killed when they fail (or exceed their time limit: 3 times the unmutated run plus 10
s), survives when they pass. Results go to build/mutation/results.json; the report lists every survivor not judged
equivalent in tools/mutation_equivalents.json (key -> reason), and the kill rate is
killed / (mutants - equivalent). --rerun RESULTS runs only the survivors of an earlier run.

Why not mutmut (3.x, PyPI): it names a mutant by the dotted module path of its file and activates it only when the
running function's `__module__` matches (boxed/mutmut@523a19c, src/mutmut/__main__.py
`_check_test_to_mutant_associations`: "every mutant is silently marked 'No Tests'" otherwise). The handlers under
lambda/ (a keyword: not importable as a package) are imported by their tests as top-level modules from their own
folder, so none of their mutants would ever run. It also collects its stats by running the whole suite, which here
starts Slurm daemons and synthesizes every variant, and mutates only function bodies (module constants such as the
force tag's name would never change).
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "tools" / "mutation_equivalents.json"
RESULTS = ROOT / "build" / "mutation" / "results.json"
LINKED = (".venv", ".venv-train", "node_modules", "build")  # large or shared: linked into the copy, not copied
PYTEST = ["-p", "no:cacheprovider", "-n", "0", "-q", "-x", "--no-header"]

# module -> the test runs that exercise it, cheapest first (each is a list of pytest arguments). Tests that
# synthesize CDK apps (tests/test_day2.py, most of tests/test_replacement_guard.py) cost 10-20 s a variant, and
# tests/lambda/test_partition_scale.py (thousands of simulated profiles) about 17 s of CPU: they are left out. A mutant
# only they would kill counts as a survivor here, so the figure errs low.
USER_TESTS = "user or uid or gid or squash or reserved or studio_profile or unique"
TARGETS: dict[str, list[list[str]]] = {
    "cli/replacement_guard.py": [
        ["tests/test_replacement_guard_reading.py"],
        ["tests/test_replacement_guard_templates.py"],
        ["tests/test_replacement_guard.py"],
    ],
    "platform_config/day2.py": [["tests/test_day2_rules.py"]],
    "platform_config/users.py": [
        ["tests/test_config_users.py"],
        ["tests/test_config_identities.py", "-k", USER_TESTS],
        ["tests/test_config.py", "-k", USER_TESTS],
        ["tests/test_config_cluster.py", "-k", USER_TESTS],
    ],
    "manifests/team_identities.py": [["tests/test_team_identities.py"], ["tests/test_job_admission.py"]],
    "lambda/cluster_log_retention/log_retention.py": [["tests/lambda/test_log_retention.py"]],
    "lambda/default_security_group/restrict.py": [["tests/lambda/test_default_security_group.py"]],
    "lambda/fsx_access_group/access_group.py": [["tests/lambda/test_fsx_access_group.py"]],
    "lambda/fsx_partitions/custom_resource.py": [["tests/lambda/test_custom_resource.py"]],
    "lambda/fsx_partitions/partitions.py": [
        ["tests/lambda/test_partitions.py"],
        ["tests/lambda/test_custom_resource.py"],
        ["tests/lambda/test_profile_events_budget.py"],
        ["tests/lambda/test_profile_events.py"],
        ["tests/lambda/test_profile_events_ignored.py"],
        ["tests/lambda/test_profile_events_settings.py"],
    ],
    "lambda/fsx_partitions/profile_events.py": [
        ["tests/lambda/test_profile_events_budget.py"],
        ["tests/lambda/test_profile_events.py"],
        ["tests/lambda/test_profile_events_ignored.py"],
        ["tests/lambda/test_profile_events_settings.py"],
    ],
    "lambda/fsx_root_squash/root_squash.py": [["tests/lambda/test_fsx_root_squash.py"]],
    "lambda/grafana_provisioning/grafana_provision.py": [["tests/lambda/test_grafana_provisioning.py"]],
    "lambda/login_targets/login_targets.py": [["tests/lambda/test_login_targets.py"]],
    "lambda/node_readiness/readiness.py": [["tests/lambda/test_node_readiness.py"]],
    "lambda/slurm_tokens/issuer.py": [["tests/lambda/test_slurm_tokens.py"]],
    "lambda/task_governance/governance.py": [
        ["tests/lambda/test_task_governance.py"],
        ["tests/lambda/test_task_governance_lifecycle.py"],
    ],
}

COMPARE_SWAP = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
CALL_SWAP = {"min": "max", "max": "min", "any": "all", "all": "any"}
KEY_LIKE = re.compile(r"[\w.:/@*+=-]{0,80}")
LOG_CALLERS = {"LOG", "log", "logger", "LOGGER", "logging"}


@dataclass
class Mutant:
    path: str
    line: int
    end_line: int
    statement: tuple[int, int]  # the lines of the enclosing statement's head: it runs when they do
    function: str
    operator: str
    original: str
    replacement: str
    start: tuple[int, int]
    end: tuple[int, int]
    occurrence: int = 1  # the same change of the same text in the same function: told apart by order
    status: str = "pending"  # killed | timeout | survived | not covered | equivalent
    seconds: float = 0.0

    @property
    def key(self) -> str:
        """Stable across edits elsewhere in the file (no line number)."""
        return f"{self.path}::{self.function}::{self.operator}::{self.original} -> {self.replacement}" + (
            f" #{self.occurrence}" if self.occurrence > 1 else ""
        )


def _segment(lines: list[str], node: ast.AST) -> str:
    return ast.get_source_segment("".join(lines), node) or ""


class _Finder(ast.NodeVisitor):
    """Collects mutants of one module; skips docstrings, annotations, f-strings and log calls."""

    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        self.path, self.source = path, source
        self.mutants: list[Mutant] = []
        self.scope: list[str] = []
        self.parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}

    def statement_lines(self, node: ast.AST) -> tuple[int, int]:
        """A node inside a statement that spans lines may have no line event of its own (Python reports the lines
        where instructions start): the statement's head (up to its body, if it has one) stands for it."""
        statement = node
        while not isinstance(statement, ast.stmt):
            statement = self.parents[statement]
        body = getattr(statement, "body", None)
        end = body[0].lineno - 1 if isinstance(body, list) and body else statement.end_lineno
        assert end is not None  # parsed statements carry their end line
        return statement.lineno, max(statement.lineno, end)

    def add(self, node: ast.expr | ast.stmt, operator: str, replacement: str) -> None:
        # Parsed nodes always carry their end position (the types allow None for nodes built by hand).
        assert node.end_lineno is not None and node.end_col_offset is not None
        original = ast.get_source_segment(self.source, node) or ast.unparse(node)
        self.mutants.append(
            Mutant(
                self.path,
                node.lineno,
                node.end_lineno,
                self.statement_lines(node),
                ".".join(self.scope) or "<module>",
                operator,
                " ".join(original.split()),
                replacement,
                (node.lineno, node.col_offset),
                (node.end_lineno, node.end_col_offset),
            )
        )

    def add_expr(self, node: ast.expr, operator: str, new: ast.expr) -> None:
        self.add(node, operator, f"({ast.unparse(new)})")

    # scopes and what is never mutated
    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        for default in (*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]):
            self.visit(default)
        self._body(node.body)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self._body(node.body)
        self.scope.pop()

    def visit_Module(self, node):
        self._body(node.body)

    def _body(self, body: list[ast.stmt]) -> None:
        for index, statement in enumerate(body):
            if (
                index == 0
                and isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                continue  # docstring
            self.visit(statement)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)

    def visit_arg(self, node):
        pass  # annotations

    def visit_JoinedStr(self, node):
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                self.visit(value.value)

    def visit_If(self, node):
        test = node.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        ):
            return
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            return
        if not isinstance(test, (ast.Compare, ast.UnaryOp)):
            self.add_expr(test, "negate condition", ast.UnaryOp(ast.Not(), test))
        self.generic_visit(node)

    def visit_While(self, node):
        if not isinstance(node.test, (ast.Constant, ast.Compare, ast.UnaryOp)):
            self.add_expr(node.test, "negate condition", ast.UnaryOp(ast.Not(), node.test))
        self.generic_visit(node)

    def visit_IfExp(self, node):
        if not isinstance(node.test, (ast.Compare, ast.UnaryOp)):
            self.add_expr(node.test, "negate condition", ast.UnaryOp(ast.Not(), node.test))
        self.generic_visit(node)

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Call) and not _is_log_call(node.value):
            self.add(node, "delete call", "pass")
        if isinstance(node.value, ast.Call) and _is_log_call(node.value):
            return
        self.generic_visit(node)

    def visit_Raise(self, node):
        self.add(node, "delete raise", "pass")
        self.generic_visit(node)

    def visit_Return(self, node):
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            self.add(node, "return None", "return None")
        self.generic_visit(node)

    def visit_Call(self, node):
        if _is_log_call(node):
            return
        if isinstance(node.func, ast.Name) and node.func.id in CALL_SWAP:
            self.add(node.func, "swap call", CALL_SWAP[node.func.id])
        self.generic_visit(node)

    def visit_Compare(self, node):
        if len(node.ops) == 1 and type(node.ops[0]) in COMPARE_SWAP:
            new = ast.Compare(node.left, [COMPARE_SWAP[type(node.ops[0])]()], node.comparators)
            self.add_expr(node, "compare", new)
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        new = ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
        self.add_expr(node, "and/or", new)
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            self.add_expr(node, "drop not", node.operand)
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if type(node.op) in BINOP_SWAP:
            self.add_expr(node, "arithmetic", ast.BinOp(node.left, BINOP_SWAP[type(node.op)](), node.right))
        self.generic_visit(node)

    def visit_Constant(self, node):
        value = node.value
        if isinstance(value, bool):
            self.add(node, "boolean", repr(not value))
        elif isinstance(value, int):
            self.add(node, "number", repr(value + 1))
        elif isinstance(value, float):
            self.add(node, "number", repr(value + 1.0))
        elif isinstance(value, str) and KEY_LIKE.fullmatch(value):
            self.add(node, "string", repr(value + "x" if value else "x"))


def _is_log_call(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in LOG_CALLERS) or (
        isinstance(func, ast.Name) and func.id == "print"
    )


def find_mutants(path: str, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    finder = _Finder(path, source, tree)
    finder.visit(tree)
    seen: dict[str, int] = {}
    valid = []
    for mutant in finder.mutants:
        try:
            compile(apply(source, mutant), path, "exec")
        except SyntaxError:
            continue
        seen[mutant.key] = mutant.occurrence = seen.get(mutant.key, 0) + 1
        valid.append(mutant)
    return valid


def apply(source: str, mutant: Mutant) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()))
    data = source.encode()

    def at(position: tuple[int, int]) -> int:
        return offsets[position[0] - 1] + position[1]  # col_offset is in UTF-8 bytes

    return (data[: at(mutant.start)] + mutant.replacement.encode() + data[at(mutant.end) :]).decode()


class LineTrace:
    """Records the lines of one file that run, in every thread, from its creation (before the conftests import
    anything) until `save`."""

    def __init__(self, filename: str) -> None:
        import threading

        self.filename = filename
        self.lines: set[int] = set()
        sys.settrace(self._call)
        threading.settrace(self._call)

    def _call(self, frame, _event, _arg):
        if frame.f_code.co_filename == self.filename:
            self.lines.add(frame.f_lineno)
            return self._line
        return None

    def _line(self, frame, event, _arg):
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._line

    def save(self, path: Path) -> None:
        """Adds to what the runs before this one recorded."""
        sys.settrace(None)
        before = set(json.loads(path.read_text())) if path.exists() else set()
        path.write_text(json.dumps(sorted(self.lines | before)))


def copy_tree(destination: Path) -> None:
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink() and not name.startswith(LINKED):
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif source.is_symlink():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(os.readlink(source))
    for name in LINKED:
        if (ROOT / name).exists() and not (destination / name).exists():
            (destination / name).symlink_to(ROOT / name)


RUNNING: list[int] = []  # the test run in progress, ended with the runner


def stop(*_) -> None:
    for pid in RUNNING:
        os.killpg(pid, signal.SIGKILL)
    sys.exit(143)


def warm_up() -> None:
    """Import what every test run imports and nothing of the project: each run is a fork of this process, so it
    starts with them loaded, and imports the project's modules (the mutated one among them) from the files."""
    import boto3  # noqa: F401
    import botocore.session
    import botocore.stub  # noqa: F401
    import pydantic  # noqa: F401
    import pytest  # noqa: F401
    import xdist  # noqa: F401
    import yaml  # noqa: F401


def run_tests(runs: list[list[str]], timeout: float, trace: tuple[str, Path] | None = None) -> str:
    """killed | survived | timeout: `runs` in order, each `pytest -x` in a fork of this process (cwd: the copy),
    until one fails. A fork runs in a session of its own: on a timeout the whole group goes, pytest and the moto
    server it started."""
    import pytest

    for args in runs:
        pid = os.fork()
        RUNNING[:] = [pid]
        if pid == 0:  # the test run
            code = 70
            try:
                gc.freeze()  # what this process held before the fork is never collected here: no walk over it
                os.setsid()
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                tracer = LineTrace(trace[0]) if trace else None
                code = int(pytest.main([*PYTEST, *args]))
                if tracer and trace:
                    tracer.save(trace[1])
            finally:
                os._exit(code)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "timeout"
            time.sleep(0.05)
        RUNNING.clear()
        if os.waitstatus_to_exitcode(status) != 0:
            return "killed"
    return "survived"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--module", action="append", choices=sorted(TARGETS), help="only these (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the mutants and stop")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--rerun",
        type=Path,
        metavar="RESULTS",
        help="only the mutants that survived in this earlier results file (after adding tests: tests "
        "only added cannot revive a killed mutant)",
    )
    args = parser.parse_args(argv)
    modules = args.module or list(TARGETS)
    equivalents: dict[str, str] = json.loads(EQUIVALENTS.read_text()) if EQUIVALENTS.exists() else {}

    mutants_by_module = {m: find_mutants(m, (ROOT / m).read_text()) for m in modules}
    if args.rerun:
        earlier = json.loads(args.rerun.read_text())["mutants"]
        alive = {m["key"] for m in earlier if m["status"] in ("survived", "not covered")}
        mutants_by_module = {
            module: [m for m in mutants if m.key in alive]
            for module, mutants in mutants_by_module.items()
            if any(m["path"] == module for m in earlier)
        }
    if args.list:
        for module, mutants in mutants_by_module.items():
            for mutant in mutants:
                print(f"{module}:{mutant.line}: [{mutant.operator}] {mutant.original} -> {mutant.replacement}")
        print(f"{sum(map(len, mutants_by_module.values()))} mutants in {len(modules)} modules")
        return 0

    results: list[dict] = []
    summary: dict[str, dict[str, int]] = {}
    signal.signal(signal.SIGTERM, stop)  # unwind: end the test run, restore the module, remove the copy
    with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
        tree = Path(scratch) / "tree"
        copy_tree(tree)
        os.chdir(tree)
        sys.path.insert(0, str(tree))
        sys.dont_write_bytecode = True  # every run compiles the files as they are now
        os.environ.update(JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", AWS_EC2_METADATA_DISABLED="true")
        warm_up()
        for module, mutants in mutants_by_module.items():
            target = tree / module
            original = target.read_text()
            trace = Path(scratch) / f"trace-{len(summary)}.json"
            started = time.monotonic()
            baseline = run_tests(TARGETS[module], timeout=1800, trace=(str(target.resolve()), trace))
            base_seconds = time.monotonic() - started
            counts = summary.setdefault(module, {})
            if baseline != "survived":
                print(f"{module}: its tests fail unmutated ({baseline}); skipped", flush=True)
                counts["baseline failed"] = len(mutants)
                continue
            covered = set(json.loads(trace.read_text()))
            timeout = 3 * base_seconds + 10
            print(f"{module}: {len(mutants)} mutants, tests take {base_seconds:.1f} s unmutated (traced)", flush=True)
            try:
                for mutant in mutants:
                    if mutant.key in equivalents:
                        mutant.status = "equivalent"
                    elif not covered.intersection(
                        range(mutant.line, mutant.end_line + 1), range(mutant.statement[0], mutant.statement[1] + 1)
                    ):
                        mutant.status = "not covered"
                    else:
                        target.write_text(apply(original, mutant))
                        begun = time.monotonic()
                        mutant.status = run_tests(TARGETS[module], timeout)
                        mutant.seconds = round(time.monotonic() - begun, 1)
                    counts[mutant.status] = counts.get(mutant.status, 0) + 1
                    print(
                        f"  {mutant.status:11} {mutant.seconds:5.1f}s {module}:{mutant.line} [{mutant.operator}] "
                        f"{mutant.original} -> {mutant.replacement}",
                        flush=True,
                    )
                    results.append({**asdict(mutant), "key": mutant.key})
            finally:
                target.write_text(original)
                write_results(args.results, summary, results)
        os.chdir(ROOT)

    write_results(args.results, summary, results)
    print()
    print(format_summary(summary))
    print(f"\nresults: {args.results}")
    return 0


def write_results(path: Path, summary: dict, results: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"summary": summary, "mutants": results}, indent=1))


def format_summary(summary: dict[str, dict[str, int]]) -> str:
    rows = [
        "| module | mutants | killed | survived | not covered | equivalent | kill rate |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    total = {"mutants": 0, "killed": 0, "survived": 0, "not covered": 0, "equivalent": 0}

    def row(name: str, c: dict[str, int]) -> str:
        killed = c.get("killed", 0) + c.get("timeout", 0)
        mutants = sum(v for k, v in c.items() if k != "baseline failed") if "mutants" not in c else c["mutants"]
        judged = mutants - c.get("equivalent", 0)
        rate = f"{100 * killed / judged:.1f} %" if judged else "-"
        return (
            f"| {name} | {mutants} | {killed} | {c.get('survived', 0)} | {c.get('not covered', 0)} | "
            f"{c.get('equivalent', 0)} | {rate} |"
        )

    for module, counts in summary.items():
        if "baseline failed" in counts:
            rows.append(f"| {module} | {counts['baseline failed']} | tests fail unmutated: not run | | | | |")
            continue
        rows.append(row(module, counts))
        total["mutants"] += sum(counts.values())
        total["killed"] += counts.get("killed", 0) + counts.get("timeout", 0)
        for key in ("survived", "not covered", "equivalent"):
            total[key] += counts.get(key, 0)
    rows.append(row("**total**", total))
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
