"""Day-2 matrix: each base config before and after the changes operators make, judged by the CloudFormation
resource schemas' create-only properties (cli/template_replacements.py, schemas bundled by cfn-lint).

Routine changes must replace no stateful resource and no custom-named resource (whose replacement CloudFormation
cannot even perform) and delete nothing stateful. Changes that can never be in place must be visible in the
templates (so the analysis is not blind) and refused by the day-2 rules before they reach CloudFormation.

Synthesis is in-process without cdk-nag, the constructs' acknowledgments for it, aws-cdk-lib's template validation or
jsii's run-time argument checks (the `synth` variants, the bases among them, have all four, and cfn-lint) and writes
little but templates (`_TEMPLATES_ONLY`, `_NO_CONSTRUCT_METADATA`, no asset copies); each (base, change) is
synthesized once per session, and the bases that are `synth` variants as they are (per_user, generated) are read
from those (tests/support/day2_matrix.py holds the matrix).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from cli.template_replacements import compare, load_assembly
from platform_config import PlatformConfig
from platform_config.day2 import check_day2, snapshot
import constructs.nag_acknowledgments as nag
from support.day2_matrix import NEVER_IN_PLACE, OUT_ROOT, ROUTINE, synth_base, synth_change

# One worker runs the whole matrix: `synth_change` caches per process, and spread over two workers each base (default,
# per_user, eks) was synthesized by both.
pytestmark = pytest.mark.xdist_group("day2")


ROUTINE_CASES = [(base, change) for change, (bases, _) in ROUTINE.items() for base in bases]


def test_the_matrix_is_big_enough():
    assert len(ROUTINE) + len(NEVER_IN_PLACE) >= 15
    assert {base for base, _ in ROUTINE_CASES} == {"default", "per_user", "eks"}


@pytest.mark.parametrize("base", ["default", "eks"])
def test_a_day2_synthesis_writes_the_synth_variants_templates(synth, base):
    """What the day-2 synthesis leaves out (cdk-nag and the constructs' acknowledgments for it, aws-cdk-lib's template
    validation, jsii's argument checks, asset copies, the construct tree, stack traces, the per-construct metadata:
    usage data, creation stack traces, logical IDs) changes no template: on the bases with every kind of asset the
    platform ships (handler code, the lifecycle scripts, the Studio tools zip; on EKS the kubectl layers and the
    chart) the templates are those of the `synth` variant of the same config. So the bases that are variants as
    they are (SHARED_BASES: the same constructs and assets) are read from the variants, not synthesized again.

    The EKS base is synthesized after the default one, so the assets both ship (the functions, the lifecycle
    scripts) come with the hashes aws-cdk-lib kept from the default synthesis (day2_matrix._ASSEMBLY): the same
    templates prove those are the assets' hashes."""
    synth_change("default", None)
    assert synth_change(base, None)[1] == load_assembly(synth(base).out_dir)
    # The acknowledgments were left out of the day-2 synthesis only (the variant's assembly holds them), and every
    # construct module has its own functions back for the syntheses that run cdk-nag after it in this process.
    assert _acknowledgments(synth(base).out_dir) and not _acknowledgments(_day2_out_dir(base))
    assert all(
        getattr(module, name) is getattr(nag, name)
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith(("constructs.", "stacks."))
        for name in ("acknowledge", "acknowledge_rules", "acknowledge_provider")
        if hasattr(module, name)
    )
    # jsii checks the arguments again after it.
    with pytest.raises(TypeError, match="amount"):
        cdk.Duration.seconds("sixty")  # type: ignore[arg-type]


def _acknowledgments(out_dir: Path) -> list[str]:
    """The cdk-nag rules acknowledged in a cloud assembly's metadata (<stack>.metadata.json)."""
    return [
        rule
        for file in out_dir.glob("*.metadata.json")
        for entries in json.loads(file.read_text()).values()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule in entry["data"]
        if "AwsSolutions" in rule
    ]


def _day2_out_dir(base: str) -> Path:
    (out_dir,) = Path(OUT_ROOT.name).glob(f"{base}-None-*")
    return out_dir


@pytest.mark.parametrize("base, change", ROUTINE_CASES, ids=[f"{b}-{c}" for b, c in ROUTINE_CASES])
def test_routine_change_replaces_nothing_stateful_or_named(synth, base, change):
    before_config, before = synth_base(synth, base)
    after_config, after = synth_change(base, change)
    assert before != after, f"{change} changed no template: the case tests nothing"
    findings = compare(before, after)
    blocked = [str(f) for f in findings if (f.stateful or f.custom_name) and not _asked_for(change, before_config, f)]
    assert blocked == [], "\n".join(blocked)
    errors, _ = check_day2(snapshot(before_config), after_config)
    assert errors == []


def _asked_for(change: str, before_config: PlatformConfig, finding) -> bool:
    """Removing a user deletes exactly that user's profile and, in per-user mode, their Slurm token secret (the
    replacement guard still asks for confirmation); the partition's directory stays (its custom resource's Delete is
    a no-op). Leaving per-user mode deletes its Slurm auth/jwt signing-key secret, that secret's KMS key, the token
    secrets and their KMS key (both keys retained in the account): no user data, and the guard asks for confirmation
    of that security-relevant switch."""
    removed = before_config.users[-1].name if before_config.users else None
    if change == "remove_user" and finding.action == "delete":
        return (finding.resource_type == "AWS::SageMaker::UserProfile" and finding.custom_name == removed) or (
            finding.resource_type == "AWS::SecretsManager::Secret"
            and finding.custom_name == f"{before_config.name}/slurm-token/{removed}"
        )
    if change == "switch_shared_fsx_on" and finding.action == "delete" and not before_config.shared_fsx:
        return finding.logical_id.startswith(("SlurmJwtKeySecret", "SlurmJwtKeyKey", "SlurmTokenIssuerTokenKey")) or (
            finding.custom_name or ""
        ).startswith(f"{before_config.name}/slurm-token/")
    return False


@pytest.mark.parametrize("change", sorted(NEVER_IN_PLACE))
def test_never_in_place_changes_are_seen_and_refused(synth, change):
    base, _, key = NEVER_IN_PLACE[change]
    before_config, before = synth_base(synth, base)
    after_config, after = synth_change(base, change)
    findings = compare(before, after)
    assert any(f.stateful for f in findings), f"{change}: the analysis saw no stateful replacement: {findings}"
    errors, _ = check_day2(snapshot(before_config), after_config)
    assert errors and all(key in " ".join(errors) for key in [key]), errors


def test_studio_lifecycle_configs_carry_a_content_hash():
    """A new bootstrap makes a new, differently named lifecycle config; the same content keeps the name."""

    def names(templates):
        return sorted(
            r["Properties"]["StudioLifecycleConfigName"]
            for t in templates.values()
            for r in t["Resources"].values()
            if r["Type"] == "AWS::SageMaker::StudioLifecycleConfig"
        )

    before, after, again = (synth_change("default", c)[1] for c in (None, "bootstrap_script_content", "add_tag"))
    assert len(names(before)) == 2 and all(len(n) <= 63 for n in names(before))
    assert set(names(before)).isdisjoint(names(after))
    assert names(again) == names(before)


def test_tags_skip_resources_whose_tags_are_create_only():
    from cli.template_replacements import create_only_paths

    _, templates = synth_change("eks", "add_tag")
    for file, template in templates.items():
        for logical_id, resource in template["Resources"].items():
            if "/properties/Tags" in create_only_paths(resource["Type"]):
                tags = resource.get("Properties", {}).get("Tags") or []
                keys = tags.keys() if isinstance(tags, dict) else [t.get("Key") for t in tags]
                assert "cost-center" not in keys, f"{file}: {logical_id} ({resource['Type']}) has create-only tags"


def test_the_analysis_catches_a_custom_named_replacement():
    """Guard against a blind analysis: a fixed-name lifecycle config with new content is reported."""
    _, before = synth_change("default", None)
    after = copy.deepcopy(before)
    studio = after["ml-cluster-studio.template.json"]["Resources"]
    (lid, lcc) = next((k, r) for k, r in studio.items() if r["Type"] == "AWS::SageMaker::StudioLifecycleConfig")
    lcc["Properties"]["StudioLifecycleConfigContent"] = "changed"
    (finding,) = [f for f in compare(before, after) if f.logical_id == lid]
    assert finding.custom_name == lcc["Properties"]["StudioLifecycleConfigName"]
    assert "StudioLifecycleConfigContent" in finding.reason


def test_stateful_stacks_have_termination_protection_and_the_snapshot():
    synth_change("default", None)
    manifest = json.loads((_day2_out_dir("default") / "manifest.json").read_text())
    protection = {
        name: artifact["properties"].get("terminationProtection", False)
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    assert protection == {
        "ml-cluster-network": False,
        "ml-cluster-storage": True,
        "ml-cluster-slurm-login": True,
        "ml-cluster-cluster": True,
        "ml-cluster-studio": True,
        "ml-cluster-observability": False,
    }
    config, templates = synth_change("default", None)
    assert templates["ml-cluster-storage.template.json"]["Metadata"]["HyperPodPlatformCreateOnly"] == snapshot(config)


def test_adding_a_user_changes_one_users_stack_of_a_generated_platform(synth):
    """At 5,000 users (56 users stacks of 90, tests/test_scale.py) as at the 181 generated here (three): a user added
    at the end of `users` lands in the last users stack. Every other users stack's template stays byte for byte, and
    the parent changes only that stack's resource and the profile-events function (its code carries the reserved
    uids); outside Studio only what lists the users changes (the nodes' parameters, the day-2 snapshot)."""
    before_config, before = synth_base(synth, "generated")
    after_config, after = synth_change("generated", "add_user")
    users_stacks = sorted(name for name in before if name.endswith(".nested.template.json"))
    assert len(users_stacks) == 3 and sorted(n for n in after if n.endswith(".nested.template.json")) == users_stacks
    assert [name for name in users_stacks if before[name] != after[name]] == [users_stacks[-1]]

    def changed(name: str) -> set[str]:
        old, new = before[name]["Resources"], after[name]["Resources"]
        return {lid for lid in old.keys() | new.keys() if old.get(lid) != new.get(lid)}

    parent = "ml-cluster-studio.template.json"
    stack_resources = {
        lid for lid, r in after[parent]["Resources"].items() if r["Type"] == "AWS::CloudFormation::Stack"
    }
    (last,) = changed(parent) & stack_resources
    assert last.startswith("Users3NestedStack")
    assert {after[parent]["Resources"][lid]["Type"] for lid in changed(parent) - {last}} == {"AWS::Lambda::Function"}
    assert {lid for lid in changed(users_stacks[-1]) if "zoe" in lid} == {
        "Profilezoe",
        "Partitionzoe",
        "SlurmTokenzoe",
        "SlurmTokenPolicyzoe",
        "ExecutionRolezoe",
    }
    assert [f for f in compare(before, after) if f.stateful or f.custom_name] == []
    assert check_day2(snapshot(before_config), after_config)[0] == []
