"""What a synthesis writes: every template within CloudFormation's limits (resources and size), the large variant as
large as it claims, no context lookups, the same templates without staged assets; and the project's constructs/ folder
beside the constructs library. cfn-lint on the templates: test_templates.py; cdk-nag: test_templates_nag.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.paths import APP_PATH, ROOT
from support.variants import ALL_VARIANTS


MAX_RESOURCES = 500


MAX_TEMPLATE_BYTES = 1_000_000


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_templates_stay_within_cloudformation_limits(synth, variant):
    s = synth(variant)
    for path in s.all_template_paths():
        resources = len(json.loads(path.read_text())["Resources"])
        assert resources < MAX_RESOURCES, f"{variant}/{path.name}: {resources} resources"
        assert path.stat().st_size < MAX_TEMPLATE_BYTES, f"{variant}/{path.name}: {path.stat().st_size} bytes"


def test_large_variant_really_is_large(synth):
    s = synth("large")
    (cluster,) = [r for r in s.templates["cluster"]["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert len(cluster["Properties"]["InstanceGroups"]) == 20
    assert len(s.config.users) == 1000 and s.config.shared_fsx is False


def test_library_and_local_constructs_folder_coexist():
    code = (
        "import aws_cdk, constructs; from constructs.efa_security_group import EfaSecurityGroup; "
        "from constructs import Construct; print(Construct.__module__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "PATH": APP_PATH},
    )
    assert result.returncode == 0, result.stderr
    assert not (ROOT / "constructs" / "__init__.py").exists()


def test_a_synthesis_without_staged_assets_writes_the_same_templates(synth, tmp_path):
    """Tests that read only templates synthesize with cdk_json_context(stage_assets=False) (tests/support/variants.py): the
    assets are hashed into the templates as before, just not copied into the assembly."""
    from support.synthesis import synthesize

    synthesize("eks", tmp_path, stage_assets=False)
    staged = synth("eks").out_dir
    names = sorted(p.name for p in staged.glob("*.template.json"))
    assert names == sorted(p.name for p in tmp_path.glob("*.template.json")) and len(names) >= 6
    for name in names:
        assert (tmp_path / name).read_bytes() == (staged / name).read_bytes(), name
    assert not list(tmp_path.glob("asset.*")) and list(staged.glob("asset.*"))


def test_synth_makes_no_aws_lookups(synth):
    for variant in ALL_VARIANTS:
        manifest = json.loads((synth(variant).out_dir / "manifest.json").read_text())
        assert "missing" not in manifest, f"{variant} asked for context lookups: {manifest.get('missing')}"
