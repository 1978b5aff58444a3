"""The configuration reference is generated from the model: every key documented on its field, docs/configuration.md
and config/schema.json carrying the same text, neither stale."""

from __future__ import annotations

import json
import typing

from pydantic import BaseModel

from support.paths import ROOT
from platform_config import PlatformConfig
from tools import config_reference


def models(model: type[BaseModel] = PlatformConfig, seen: dict | None = None) -> dict[str, type[BaseModel]]:
    """Every model reachable from `model`, by class name (the JSON Schema's $defs names)."""
    seen = {} if seen is None else seen
    seen[model.__name__] = model
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            annotation = stack.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                if annotation.__name__ not in seen:
                    models(annotation, seen)
            else:
                stack += typing.get_args(annotation)
    return seen


def test_every_key_has_a_description():
    missing = [
        f"{name}.{key}"
        for name, model in models().items()
        for key, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert missing == [], "give these fields a Field(description=...)"


def test_every_key_of_the_model_is_in_the_reference():
    """Each field of each model has a row (by its last path component under the model's table or a parent's)."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    keys = [line.split("`")[1] for line in text.splitlines() if line.startswith("| `")]
    assert len(keys) == len(set(keys))
    leaves = {key.rsplit(".", 1)[-1].removesuffix("[]") for key in keys}
    assert {key for model in models().values() for key in model.model_fields} <= leaves
    assert "cluster.instance_groups[].partitions" in keys and "eks.task_governance.teams[].max_vcpu" in keys


def test_docs_configuration_is_current():
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert config_reference.rendered(text) == text, "run `make docs` and commit docs/configuration.md"


def test_the_check_mode_fails_on_a_stale_reference(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text(
        (ROOT / "docs" / "configuration.md")
        .read_text()
        .replace("Days RDS keeps automated backups.", "Days RDS keeps backups.")
    )
    monkeypatch.setattr(config_reference, "DOC", stale)
    monkeypatch.setattr(config_reference, "ROOT", tmp_path)
    assert config_reference.main(["--check"]) == 1
    assert "configuration.md is stale: run `make docs`" in capsys.readouterr().err
    assert config_reference.main([]) == 0
    assert config_reference.main(["--check"]) == 0


def test_the_json_schema_carries_the_same_descriptions():
    """What editors show (config/schema.json, kept current by test_config_loading.py) is the reference's text."""
    schema = json.loads((ROOT / "config" / "schema.json").read_text())
    for name, model in models().items():
        properties = (schema if model is PlatformConfig else schema["$defs"][name])["properties"]
        for key, field in model.model_fields.items():
            assert properties[key]["description"] == field.description, f"{name}.{key}"


def test_a_row_shows_type_default_allowed_and_description():
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert (
        "| `cluster.instance_groups[].ebs_volume_gib` | integer | `500` | 1–16,384 | The extra EBS volume per node, "
        "GiB. |"
    ) in text
    assert ("| `storage.lustre.throughput_mib_per_tib` | integer | `250` | `125`, `250`, `500`, `1000` |") in text
    assert "| `network.existing.vpc_id` | string | required | an ID such as vpc-0123456789abcdef0 |" in text
