"""The HyperPodPyTorchJob CRD (schemas/, from the training operator's chart) as the API server applies it to a job
manifest, for the rendered and committed job examples."""

from __future__ import annotations

import jsonschema
import yaml

from support.paths import ROOT

CRD_TEXT = (ROOT / "schemas" / "hyperpodpytorchjob-crd.yaml").read_text()
CRD = yaml.safe_load(CRD_TEXT)


def _closed(schema: dict, root: bool = True) -> dict:
    """The schema with every listed object closed to unknown keys (the API server would prune them silently).
    Root metadata stays open: the API server validates it, and CRDs may only constrain its name."""
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {
            k: v if root and k == "metadata" else _closed(v, False) for k, v in out["properties"].items()
        }
        out.setdefault("additionalProperties", False)
    if "items" in out:
        out["items"] = _closed(out["items"], False)
    return out


CR_VALIDATOR = jsonschema.Draft4Validator(_closed(CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))


def crd_errors(manifest: dict) -> list[str]:
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in CR_VALIDATOR.iter_errors(manifest))
