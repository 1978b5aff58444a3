"""Generates schemas/hyperpodpytorchjob-crd.yaml from the HyperPod job model at a pinned upstream revision.

The HyperPod training operator's CRD is installed by its EKS add-on and not published as a file. The closest
public statement of its schema is the pydantic model the HyperPod CLI generates from it:
aws/sagemaker-hyperpod-cli, src/sagemaker/hyperpod/training/config/hyperpod_pytorch_job_unified_config.py
(class _HyperPodPytorchJob = the CRD's spec). This script reads that file from a git directory at the pinned
commit, checks its blob id, and turns the model's JSON schema into a CRD's openAPIV3Schema.

    python tools/generate_job_crd.py --git-dir DIR            # writes schemas/hyperpodpytorchjob-crd.yaml
    python tools/generate_job_crd.py --git-dir DIR --check    # exit 1 if the committed file differs

DIR is a clone (bare is fine) of https://github.com/aws/sagemaker-hyperpod-cli holding COMMIT.
The model file is executed in an empty namespace after checking that it imports only pydantic and typing.
"""

from __future__ import annotations

import argparse
import ast
import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "schemas" / "hyperpodpytorchjob-crd.yaml"
REPO = "aws/sagemaker-hyperpod-cli"
COMMIT = "a00b22d17ea928a6e39a43bd2efdafe01b1005ea"
MODEL_PATH = "src/sagemaker/hyperpod/training/config/hyperpod_pytorch_job_unified_config.py"
MODEL_BLOB = "88b8d84b8e06950e6c3a85907e35af1e27c791af"  # `git rev-parse COMMIT:MODEL_PATH`
SPEC_CLASS = "_HyperPodPytorchJob"
ALLOWED_IMPORTS = {"pydantic", "typing"}
# From src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py at COMMIT (TRAINING_GROUP, API_VERSION, PLURAL, KIND).
GROUP, VERSION, PLURAL, KIND = "sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", "HyperPodPyTorchJob"


def read_model(git_dir: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, text=True).stdout

    blob = git("rev-parse", f"{COMMIT}:{MODEL_PATH}").strip()
    if blob != MODEL_BLOB:
        raise SystemExit(f"{MODEL_PATH} at {COMMIT} has blob {blob}, expected {MODEL_BLOB}")
    return git("show", f"{COMMIT}:{MODEL_PATH}")


def load_spec_model(source: str):
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] not in ALLOWED_IMPORTS for m in modules):
                raise SystemExit(f"{MODEL_PATH}: imports {modules}; only {sorted(ALLOWED_IMPORTS)} are expected")
    namespace: dict[str, Any] = {"__name__": "hyperpod_job_model"}
    exec(compile(tree, MODEL_PATH, "exec"), namespace)  # noqa: S102 - checked above: a pydantic model file
    model = namespace[SPEC_CLASS]
    model.model_rebuild(_types_namespace=namespace)
    return model


def structural(schema: dict, defs: dict) -> dict:
    """A pydantic JSON schema node as a Kubernetes structural schema node: refs inlined, Optional unwrapped,
    titles and null defaults dropped, int-or-string unions marked the Kubernetes way."""
    if "$ref" in schema:
        return structural(
            {**defs[schema["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in schema.items() if k != "$ref"}}, defs
        )
    schema = dict(schema)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema.pop(key) if o.get("type") != "null"]
            types = sorted({o.get("type") for o in options})
            if len(options) == 1:
                schema = {**structural(options[0], defs), **schema}
            elif types == ["integer", "string"]:
                schema["x-kubernetes-int-or-string"] = True
            else:
                raise SystemExit(f"unsupported union {options}")
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "$defs"):
            continue
        if key == "default" and (value is None or value == [] or value == {}):
            continue
        if key == "additionalProperties" and value is False:
            continue  # structural schemas forbid it beside `properties`; the API server prunes unknown fields
        if key == "properties":
            out[key] = {name: structural(node, defs) for name, node in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = structural(value, defs)
        else:
            out[key] = value
    if "properties" in out:
        out.setdefault("type", "object")
    return out


def crd(spec_schema: dict) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": PLURAL[:-1]},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["apiVersion", "kind", "metadata", "spec"],
                            "properties": {
                                "apiVersion": {"type": "string", "enum": [f"{GROUP}/{VERSION}"]},
                                "kind": {"type": "string", "enum": [KIND]},
                                "metadata": {
                                    "type": "object",
                                    "properties": {
                                        "name": {
                                            "type": "string",
                                            "maxLength": 63,
                                            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                        }
                                    },
                                },
                                "spec": spec_schema,
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }


HEADER = f"""\
# GENERATED by tools/generate_job_crd.py — do not edit.
# The HyperPodPyTorchJob CRD as the HyperPod CLI's job model states it: {REPO}@{COMMIT},
# {MODEL_PATH} (blob {MODEL_BLOB}), class {SPEC_CLASS} = spec.
# Group, version, kind and plural: src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py at the same commit.
# replicaSpecs[].template is left open: the model's pod spec is a lossy copy (pod securityContext typed as the
# container one); tests validate templates as core/v1 PodTemplate with kubernetes-validate instead.
# Not for `kubectl apply`: the training operator EKS add-on installs the real CRD. Tests validate the example
# manifests against it offline; re-pin COMMIT/MODEL_BLOB and rerun to follow upstream.
"""


class _NoAliases(yaml.SafeDumper):
    """Every shared sub-schema written out in full: anchors would make the file hard to read and diff."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(git_dir: Path) -> str:
    model = load_spec_model(read_model(git_dir))
    raw = model.model_json_schema(by_alias=False)
    spec = structural(copy.deepcopy(raw), raw.get("$defs", {}))
    spec.pop("description", None)
    # The model's pod template is a lossy copy of core/v1 PodTemplateSpec: its pod-level securityContext is the
    # container SecurityContext class (a name collision in the generated file: no fsGroup, runAsGroup at pod level
    # is fine but supplementalGroups/fsGroup are missing). The operator takes a real PodTemplateSpec, so the
    # template stays open here and tests validate it with kubernetes-validate against Kubernetes' own schema.
    replica = spec["properties"]["replicaSpecs"]["items"]["properties"]
    replica["template"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "core/v1 PodTemplateSpec (validated as such, not from the CLI model)",
    }
    return HEADER + yaml.dump(crd(spec), Dumper=_NoAliases, sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--git-dir", type=Path, required=True, help=f"a git directory holding {REPO}@{COMMIT}")
    parser.add_argument("--check", action="store_true", help="compare with the committed file, write nothing")
    args = parser.parse_args(argv)
    text = render(args.git_dir)
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} differs from a fresh generation; run tools/generate_job_crd.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
