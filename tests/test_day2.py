"""Day-2 matrix: each base config before and after the changes operators make, judged by the CloudFormation
resource schemas' create-only properties (cli/template_replacements.py, schemas bundled by cfn-lint).

Routine changes must replace no stateful resource and no custom-named resource (whose replacement CloudFormation
cannot even perform) and delete nothing stateful. Changes that can never be in place must be visible in the
templates (so the analysis is not blind) and refused by the day-2 rules before they reach CloudFormation.

Synthesis is in-process without cdk-nag or aws-cdk-lib's template validation (the `synth` variants, the bases among
them, have both, and cfn-lint) and writes little but templates (`_TEMPLATES_ONLY`, no asset copies); each base is
synthesized once and each (base, change) once per session.
"""

from __future__ import annotations

import copy
import tempfile
from functools import cache
from pathlib import Path
from typing import Callable

import aws_cdk as cdk
import pytest
import yaml

from support.variants import cdk_json_context, per_user_data, STAND_IN_CHART, VARIANT_FILES
from platform_config import PlatformConfig, parse_config
from platform_config.day2 import check_day2, snapshot
from stacks.platform import build_platform
from cli.template_replacements import compare, load_assembly

Change = Callable[[dict], None]
# One worker runs the whole matrix: `_synth` caches per process, and spread over two workers each base (default,
# per_user, eks) was synthesized by both.
pytestmark = pytest.mark.xdist_group("day2")
# Removed when the test process exits (cloud assemblies hold asset copies).
_OUT_ROOT = tempfile.TemporaryDirectory(prefix="day2-")
# The matrix reads templates only, and aws-cdk-lib writes the same templates without the rest of a synthesis:
# - its built-in CloudFormation validation (~0.4 s of CPU a synthesis here, 46 syntheses, and ~7 s for the engine
#   in a process that has not validated yet) judges whether CloudFormation would accept a template. The bases are
#   `synth` variants (default, containers, eks; per_user_181 of test_scale.py), which synthesize with it, and
#   test_templates.py cfn-lints them; the matrix asks what a change replaces, and a change's templates differ
#   from its base's only in the values it changes;
# - the construct tree (tree.json) and the stack trace of every construct in the metadata, which nothing reads.
_TEMPLATES_ONLY = {"builtin_cloud_formation_validation": False, "tree_metadata": False, "stack_traces": False}


def _base(name: str) -> dict:
    if name == "default":
        return yaml.safe_load(VARIANT_FILES["default"].read_text())
    if name == "per_user":  # shared_fsx false, users (one with sudo), container runtime, native mount
        return yaml.safe_load(VARIANT_FILES["containers"].read_text())
    if name == "eks":
        data = yaml.safe_load(VARIANT_FILES["eks"].read_text())
        data["eks"]["hyperpod_dependencies"]["chart_dir"] = str(STAND_IN_CHART)
        return data
    if name == "generated":  # 181 generated users in per-user mode: three users stacks (tests/test_scale.py)
        return per_user_data(181)
    raise KeyError(name)


def _compute(data: dict) -> dict:
    return [g for g in data["cluster"]["instance_groups"] if g["role"] == "compute"][-1]


def _lustre(data: dict) -> dict:
    return data.setdefault("storage", {}).setdefault("lustre", {})


def _network(data: dict) -> dict:
    return data.setdefault("network", {})


def _studio(data: dict) -> dict:
    return data.setdefault("studio", {})


def _remove_last_user(data: dict) -> None:
    """As an operator does it: the user leaves the users list and every EKS team they were a member of."""
    removed = data["users"].pop()["name"]
    for team in data.get("eks", {}).get("task_governance", {}).get("teams", []):
        team["members"] = [m for m in team.get("members", []) if m != removed]


def _revoke_sudo(data: dict) -> None:
    for user in data["users"]:
        user.pop("sudo", None)


def _add_interface_endpoint(data: dict) -> None:
    _network(data)["interface_endpoints"] = [*_network(data).get("interface_endpoints", []), "ssm"]


def _add_group(data: dict) -> None:
    data["cluster"]["instance_groups"].append(
        {
            "name": "extra-workers",
            "role": "compute",
            "instance_type": "ml.g5.8xlarge",
            "instance_count": 2,
            **({"partitions": ["extra"]} if data.get("orchestrator", "slurm") == "slurm" else {}),
        }
    )


def _change_artifact(data: dict) -> None:
    artifact = data["cluster"]["container_runtime"]["artifacts"][-1]
    artifact["s3_uri"] = artifact["s3_uri"].replace("0.20.0", "0.21.0")
    artifact["sha256"] = "3" * 64


def _add_team(data: dict) -> None:
    _compute(data)["instance_count"] += 1  # capacity for the new team's guaranteed quota
    data["eks"]["task_governance"]["teams"].append(
        {"name": "interns", "instance_type": "ml.g5.8xlarge", "accelerators": 1, "sharing": "DontLend"}
    )


def _set(path: str, value) -> Change:
    def change(data: dict) -> None:
        node = data
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return change


def _deep_health(data: dict) -> None:
    group = _compute(data)
    group["deep_health_checks"] = [] if group.get("deep_health_checks") else ["InstanceStress"]


# name -> (bases it applies to, change). Every one of these must deploy in place.
ROUTINE: dict[str, tuple[tuple[str, ...], Change]] = {
    "scale_group_count": (
        ("default", "per_user", "eks"),
        lambda d: _compute(d).update(instance_count=_compute(d)["instance_count"] + 2),
    ),
    "scale_group_to_zero": (("default",), lambda d: _compute(d).update(instance_count=0)),
    "add_user": (
        ("default", "per_user", "eks"),
        lambda d: d.setdefault("users", []).append({"name": "zoe", "uid": 10999}),
    ),
    "remove_user": (("per_user", "eks"), _remove_last_user),
    "revoke_sudo": (("per_user",), _revoke_sudo),
    "add_tag": (
        ("default", "per_user", "eks"),
        lambda d: d.setdefault("tags", {}).update({"cost-center": "ml-research"}),
    ),
    "storage_capacity_up": (("default", "eks"), lambda d: _lustre(d).update(storage_capacity_gib=2400)),
    "switch_shared_fsx_off": (("default",), _set("shared_fsx", False)),
    "switch_shared_fsx_on": (("per_user", "eks"), _set("shared_fsx", True)),
    "add_team": (("eks",), _add_team),
    "idle_timeout": (("default", "per_user", "eks"), lambda d: _studio(d).update(idle_timeout_minutes=240)),
    "bootstrap_script_content": (("default", "eks"), None),  # edits BOOTSTRAP (see _synth_change)
    "add_interface_endpoint": (("default", "eks"), _add_interface_endpoint),
    "add_instance_group": (("default", "eks"), _add_group),
    "deep_health_checks": (("default", "eks"), _deep_health),
    "container_artifact": (("per_user",), _change_artifact),
    "flow_log_retention": (("default",), lambda d: _network(d).setdefault("flow_logs", {}).update(retention_days=30)),
    "node_recovery_off": (("default",), _set("cluster.node_recovery", "None")),
    "enable_mlflow": (("default",), lambda d: _studio(d).update(mlflow={"enabled": True})),
    "data_compression_off": (("default",), lambda d: _lustre(d).update(data_compression="NONE")),
    "eks_admin_role": (("eks",), lambda d: d["eks"]["admin_role_arns"].append("arn:aws:iam::111122223333:role/OnCall")),
}

# Edits that can never be in place once deployed: the templates must show the replacement, and the day-2 rules
# must refuse them, naming the config key.
NEVER_IN_PLACE: dict[str, tuple[str, Change, str]] = {
    "private_subnet_cidr": (
        "default",
        lambda d: _network(d).update(private_subnet_cidrs=["10.0.128.0/18"]),
        "network.private_subnet_cidrs[0]",
    ),
    "primary_az": ("default", lambda d: _network(d).update(az_ids=["usw2-az1"]), "network.az_ids[0]"),
    "vpc_cidr": (
        "default",
        lambda d: _network(d).update(
            vpc_cidr="10.1.0.0/16",
            public_subnet_cidr="10.1.0.0/24",
            private_subnet_cidrs=["10.1.64.0/18"],
            studio_subnet_cidr="10.1.4.0/22",
        ),
        "network.vpc_cidr",
    ),
    "raise_fsx_throughput": (
        "default",
        lambda d: _lustre(d).update(throughput_mib_per_tib=500),
        "storage.lustre.throughput_mib_per_tib",
    ),
    "data_repository_path": (
        "default",
        lambda d: _lustre(d).update(data_repository={"file_system_path": "/datasets"}),
        "storage.lustre.data_repository.file_system_path",
    ),
}


@cache
def _synth(base: str, change: str | None) -> tuple[PlatformConfig, dict[str, dict]]:
    data = copy.deepcopy(_base(base))
    if change in ROUTINE and ROUTINE[change][1] is not None:
        ROUTINE[change][1](data)
    elif change in NEVER_IN_PLACE:
        NEVER_IN_PLACE[change][1](data)
    config = parse_config(data, f"{base}+{change}")
    out_dir = Path(tempfile.mkdtemp(prefix=f"{base}-{change}-", dir=_OUT_ROOT.name))
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context(stage_assets=False), **_TEMPLATES_ONLY)
    if change == "bootstrap_script_content":
        import constructs.studio_lifecycle_configs as lcc

        original = lcc.BOOTSTRAP
        lcc.BOOTSTRAP = original.replace("set -euo pipefail", "set -euo pipefail\numask 022")
        try:
            build_platform(app, config, allow_chart_stand_in=True)
        finally:
            lcc.BOOTSTRAP = original
    else:
        build_platform(app, config, allow_chart_stand_in=True)  # the EKS base uses the test stand-in chart
    app.synth()
    return config, load_assembly(out_dir)


ROUTINE_CASES = [(base, change) for change, (bases, _) in ROUTINE.items() for base in bases]


def test_the_matrix_is_big_enough():
    assert len(ROUTINE) + len(NEVER_IN_PLACE) >= 15
    assert {base for base, _ in ROUTINE_CASES} == {"default", "per_user", "eks"}


@pytest.mark.parametrize("base, change", ROUTINE_CASES, ids=[f"{b}-{c}" for b, c in ROUTINE_CASES])
def test_routine_change_replaces_nothing_stateful_or_named(base, change):
    before_config, before = _synth(base, None)
    after_config, after = _synth(base, change)
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
def test_never_in_place_changes_are_seen_and_refused(change):
    base, _, key = NEVER_IN_PLACE[change]
    before_config, before = _synth(base, None)
    after_config, after = _synth(base, change)
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

    before, after, again = (_synth("default", c)[1] for c in (None, "bootstrap_script_content", "add_tag"))
    assert len(names(before)) == 2 and all(len(n) <= 63 for n in names(before))
    assert set(names(before)).isdisjoint(names(after))
    assert names(again) == names(before)


def test_tags_skip_resources_whose_tags_are_create_only():
    from cli.template_replacements import create_only_paths

    _, templates = _synth("eks", "add_tag")
    for file, template in templates.items():
        for logical_id, resource in template["Resources"].items():
            if "/properties/Tags" in create_only_paths(resource["Type"]):
                tags = resource.get("Properties", {}).get("Tags") or []
                keys = tags.keys() if isinstance(tags, dict) else [t.get("Key") for t in tags]
                assert "cost-center" not in keys, f"{file}: {logical_id} ({resource['Type']}) has create-only tags"


def test_the_analysis_catches_a_custom_named_replacement():
    """Guard against a blind analysis: a fixed-name lifecycle config with new content is reported."""
    _, before = _synth("default", None)
    after = copy.deepcopy(before)
    studio = after["ml-cluster-studio.template.json"]["Resources"]
    (lid, lcc) = next((k, r) for k, r in studio.items() if r["Type"] == "AWS::SageMaker::StudioLifecycleConfig")
    lcc["Properties"]["StudioLifecycleConfigContent"] = "changed"
    (finding,) = [f for f in compare(before, after) if f.logical_id == lid]
    assert finding.custom_name == lcc["Properties"]["StudioLifecycleConfigName"]
    assert "StudioLifecycleConfigContent" in finding.reason


def test_stateful_stacks_have_termination_protection_and_the_snapshot():
    import json

    _synth("default", None)
    (out_dir,) = Path(_OUT_ROOT.name).glob("default-None-*")
    manifest = json.loads((out_dir / "manifest.json").read_text())
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
    config, templates = _synth("default", None)
    assert templates["ml-cluster-storage.template.json"]["Metadata"]["HyperPodPlatformCreateOnly"] == snapshot(config)


def test_adding_a_user_changes_one_users_stack_of_a_generated_platform():
    """At 5,000 users (56 users stacks of 90, tests/test_scale.py) as at the 181 generated here (three): a user added
    at the end of `users` lands in the last users stack. Every other users stack's template stays byte for byte, and
    the parent changes only that stack's resource and the profile-events function (its code carries the reserved
    uids); outside Studio only what lists the users changes (the nodes' parameters, the day-2 snapshot)."""
    before_config, before = _synth("generated", None)
    after_config, after = _synth("generated", "add_user")
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
