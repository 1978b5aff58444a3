"""Writes config/facts/accelerators.json: the accelerators (Kubernetes extended resource, count per instance) of
every SageMaker ml.* instance type that has any, as aws/sagemaker-hyperpod-cli records them at a pinned commit,
read from a local git dir without running upstream code (the Python sources are parsed with `ast`).

    python tools/accelerator_counts.py /work/.mirror/aws+sagemaker-hyperpod-cli/repo [--check]

Upstream, at COMMIT:
- TABLE_PATH assigns INSTANCE_RESOURCES = {"ml.<type>": {"cpu", "gpu", "trainium", "memory", "efa"}, ...}.
- KEYS_PATH assigns NVIDIA_GPU_RESOURCE_LIMIT_KEY ("nvidia.com/gpu") and NEURON_RESOURCE_LIMIT_KEY
  ("aws.amazon.com/neurondevice").
- RULE_PATH (`_get_accelerator_type_and_count`) reads a row as: trainium > 0 -> NEURON key with the trainium count,
  else gpu > 0 -> NVIDIA key with the gpu count, else no accelerator. `accelerators()` below applies the same rule.
  The trainium column counts Trainium chips, i.e. Neuron devices (trn1.32xlarge: 16 devices of 2 NeuronCores each,
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trainium.html), which is
  what `aws.amazon.com/neurondevice` counts, so no conversion is made.

platform_config/facts.py builds ACCELERATORS from this file; tests/test_accelerator_facts.py checks both."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "accelerators.json"
REPO = "aws/sagemaker-hyperpod-cli"
# The commit config/hyperpod-chart-pin.json and tools/generate_job_crd.py pin too (2026-06-19); the three files below
# are identical at the snapshot's HEAD 011ca92 (fetched 2026-11-22).
COMMIT = "a00b22d17ea928a6e39a43bd2efdafe01b1005ea"
TABLE_PATH = "src/sagemaker/hyperpod/training/constants.py"
KEYS_PATH = "src/sagemaker/hyperpod/cli/constants/command_constants.py"
RULE_PATH = "src/sagemaker/hyperpod/training/quota_allocation_util.py"


def assigned(source: str, name: str, path: str):
    """The literal a module-level `name = <literal>` assigns in `source` (parsed, never executed)."""
    value: ast.expr | None
    for node in ast.parse(source, filename=path).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and value is not None:
            return ast.literal_eval(value)
    raise SystemExit(f"{path}: no module-level assignment to {name}; the upstream layout changed, read it again")


def accelerators(table: dict, gpu_key: str, neuron_key: str) -> dict[str, dict]:
    """Upstream's rule (RULE_PATH, _get_accelerator_type_and_count): Trainium first, then GPUs; rows with neither
    are CPU-only and left out."""
    found = {}
    for instance_type, row in sorted(table.items()):
        if row.get("trainium", 0) > 0:
            found[instance_type] = {"resource": neuron_key, "count": row["trainium"]}
        elif row.get("gpu", 0) > 0:
            found[instance_type] = {"resource": gpu_key, "count": row["gpu"]}
    return found


def check_rule(source: str) -> None:
    """Stops if RULE_PATH no longer reads rows as accelerators() does: in _get_accelerator_type_and_count, the
    first accelerator_key assigned is the Neuron key under a test of the "trainium" column, then the NVIDIA key under
    a test of the "gpu" column."""
    function = next(
        (
            n
            for n in ast.walk(ast.parse(source, filename=RULE_PATH))
            if isinstance(n, ast.FunctionDef) and n.name == "_get_accelerator_type_and_count"
        ),
        None,
    )
    if function is None:
        raise SystemExit(f"{RULE_PATH}: _get_accelerator_type_and_count is gone; read the upstream rule again")
    columns = {
        n.targets[0].id: n.value.args[0].value
        for n in ast.walk(function)
        if isinstance(n, ast.Assign)
        and isinstance(n.targets[0], ast.Name)
        and isinstance(n.value, ast.Call)
        and getattr(n.value.func, "attr", "") == "get"
        and n.value.args
        and isinstance(n.value.args[0], ast.Constant)
    }
    branches = [
        (
            columns.get(left) if (left := getattr(getattr(n.test, "left", None), "id", None)) else None,
            [
                a.value.id
                for a in n.body
                if isinstance(a, ast.Assign)
                and isinstance(a.value, ast.Name)
                and getattr(a.targets[0], "id", "") == "accelerator_key"
            ],
        )
        for n in ast.walk(function)
        if isinstance(n, ast.If)
    ]
    order = [(column, keys[0]) for column, keys in branches if keys]
    if order != [("trainium", "NEURON_RESOURCE_LIMIT_KEY"), ("gpu", "NVIDIA_GPU_RESOURCE_LIMIT_KEY")]:
        raise SystemExit(
            f"{RULE_PATH}: _get_accelerator_type_and_count now reads {order}; accelerators() expects "
            "trainium -> NEURON_RESOURCE_LIMIT_KEY, then gpu -> NVIDIA_GPU_RESOURCE_LIMIT_KEY"
        )


def show(git_dir: Path, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def render(git_dir: Path, commit: str = COMMIT) -> str:
    resolved = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", f"{commit}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    table = assigned(show(git_dir, resolved, TABLE_PATH), "INSTANCE_RESOURCES", TABLE_PATH)
    keys = show(git_dir, resolved, KEYS_PATH)
    check_rule(show(git_dir, resolved, RULE_PATH))
    facts = {
        "repository": REPO,
        "commit": resolved,
        "path": TABLE_PATH,
        "variable": "INSTANCE_RESOURCES",
        "resource_names_path": KEYS_PATH,
        "rule_path": RULE_PATH,
        "generated_by": "tools/accelerator_counts.py",
        "accelerators": accelerators(
            table,
            assigned(keys, "NVIDIA_GPU_RESOURCE_LIMIT_KEY", KEYS_PATH),
            assigned(keys, "NEURON_RESOURCE_LIMIT_KEY", KEYS_PATH),
        ),
    }
    return json.dumps(facts, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path, help="a clone (bare or not) of aws/sagemaker-hyperpod-cli")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args(argv)
    text = render(args.git_dir, args.commit)
    if args.check:
        if not FACTS.is_file() or FACTS.read_text() != text:
            print(
                f"{FACTS.relative_to(ROOT)} differs from what {REPO}@{args.commit} gives; run without --check",
                file=sys.stderr,
            )
            return 1
        return 0
    FACTS.parent.mkdir(parents=True, exist_ok=True)
    FACTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
