"""tools/synth_all.py, the proof that a refactor leaves every template as it was: its comparison, without a synth (the
synth itself runs app.py exactly as `make synth` does; docs/development.md says how it was used)."""

from __future__ import annotations

from pathlib import Path

from tools import synth_all


def snapshot(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_identical_snapshots_compare_equal_and_any_byte_differs(tmp_path):
    files = {
        "default/ml-cluster-network.template.json": '{"Resources": {}}',
        "examples-eks+shared_fsx=true/error.txt": "1 configuration error(s)",
    }
    before = snapshot(tmp_path / "before", files)
    assert synth_all.compare(snapshot(tmp_path / "same", files), before) == []
    changed = snapshot(tmp_path / "after", {**files, "default/ml-cluster-network.template.json": '{"Resources": {} }'})
    assert synth_all.compare(changed, before) == ["differs: default/ml-cluster-network.template.json"]


def test_a_missing_or_new_template_is_a_difference(tmp_path):
    before = snapshot(tmp_path / "before", {"default/a.template.json": "{}", "default/b.template.json": "{}"})
    after = snapshot(tmp_path / "after", {"default/a.template.json": "{}", "default/c.template.json": "{}"})
    assert synth_all.compare(after, before) == ["missing: default/b.template.json", "new: default/c.template.json"]
    assert synth_all.compare(after, before, only=["other"]) == []


def test_every_config_is_synthesized_as_written_and_with_shared_fsx_flipped():
    variants = synth_all.variants()
    assert len(variants) == 2 * len(synth_all.config_files()) >= 12
    assert ("default+shared_fsx=false", synth_all.ROOT / "config" / "default.yaml", {"shared_fsx": "false"}) in variants
