"""The day-2 change matrix (tests/test_day2.py) and its synthesis: each base config, the routine changes operators
make and the ones that can never be in place, and `synth_change(base, change)`, cached per process, which
tests/test_replacement_guard_reading.py reuses on the same worker (the `day2` xdist group).

Synthesis is in-process without cdk-nag, the constructs' acknowledgments for it, aws-cdk-lib's template validation or
jsii's run-time argument checks (the `synth` variants, the bases among them, have all four, and cfn-lint) and writes
little but templates (`_TEMPLATES_ONLY`, no asset copies). None of that changes a template (test_day2.py proves it
on the default and EKS bases), so the bases that are `synth` variants of their own (SHARED_BASES) are not
synthesized again: `synth_base` reads the variant's templates.
"""

from __future__ import annotations

import copy
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import aws_cdk as cdk
import yaml

from cli.template_replacements import load_assembly
from platform_config import PlatformConfig, parse_config
from stacks.platform import build_platform
from support.variants import STAND_IN_CHART, VARIANT_FILES, cdk_json_context, per_user_data

if TYPE_CHECKING:
    from support.synthesis import Synthesized

Change = Callable[[dict], None]
# Removed when the test process exits (cloud assemblies hold asset copies).
OUT_ROOT = tempfile.TemporaryDirectory(prefix="day2-")
# Every day-2 synthesis writes its assembly here, then the assembly is renamed to a directory of its own. aws-cdk-lib
# keeps each asset's hash per process, keyed by the app's output directory and the asset's source and options
# (core AssetStaging's cache): one directory for all, and the lambda/ and lifecycle/ folders, the kubectl layers and
# the chart are fingerprinted (walked, every file's digest looked up in $HOME/.cdk/cache or read again) by the first
# synthesis only, not by each of ~45 (~1.5 s of the jsii kernel's CPU). With asset staging off no asset is written
# into it, so nothing of one synthesis is left there for the next. test_day2.py's EKS base, synthesized after the
# default one with that base's assets already hashed, is compared with the `synth` variant's templates.
_ASSEMBLY = Path(OUT_ROOT.name) / "assembly"
# The matrix reads templates only, and aws-cdk-lib writes the same templates without the rest of a synthesis:
# - its built-in CloudFormation validation (~0.4 s of CPU a synthesis here, 46 syntheses, and ~7 s for the engine
#   in a process that has not validated yet) judges whether CloudFormation would accept a template. The bases are
#   `synth` variants (default, containers, eks; per_user_181 of test_scale.py), which synthesize with it, and
#   test_templates.py cfn-lints them; the matrix asks what a change replaces, and a change's templates differ
#   from its base's only in the values it changes;
# - the construct tree (tree.json) and the stack trace of every construct in the metadata, which nothing reads;
# - what aws-cdk-lib records per construct in each stack's <stack>.metadata.json, which the matrix does not read
#   either (it reads the templates, and the manifest's stack properties): the usage data of every construct's props
#   and method calls (cdk.json's @aws-cdk/core:enableAdditionalMetadataCollection, ~400 entries for the EKS cluster
#   stack alone, each redacted against aws-cdk-lib's table of props), the stack trace captured at the creation of
#   every CloudFormation element (`stack_traces: False` does not stop that one; its own context key does) and each
#   element's logical ID (a token resolved at synth). Together ~0.2-0.3 s of the kernel's CPU per synthesis.
_TEMPLATES_ONLY = {"builtin_cloud_formation_validation": False, "tree_metadata": False, "stack_traces": False}
_NO_CONSTRUCT_METADATA = {
    "@aws-cdk/core:enableAdditionalMetadataCollection": False,
    "aws:cdk:disable-creation-stack-traces": True,
    "aws:cdk:disable-logicalId-metadata": True,
}


@contextmanager
def _without_nag_acknowledgments() -> Iterator[None]:
    """The constructs' cdk-nag acknowledgments (constructs/nag_acknowledgments.py) left out while a day-2 synthesis
    builds its app. Their only reader is cdk-nag, which the matrix does not run (the `synth` variants run it, with
    them): aws-cdk-lib records each acknowledged rule as metadata on its construct, with a stack trace, and walks the
    construct's subtree for warnings of the same id, ~80 calls and ~380 jsii round trips per EKS synthesis, about a
    fifth of its CPU. None of it reaches a template (test_day2.py proves it on the default and EKS bases).

    Each of the three functions becomes a no-op in every project module that holds it (imported by name, or the
    acknowledgments module itself, whose names a module first imported during the build binds), and is put back
    wherever the no-op is afterwards."""
    import constructs.nag_acknowledgments as nag

    originals = [nag.acknowledge, nag.acknowledge_rules, nag.acknowledge_provider]
    no_ops = [_acknowledge_nothing() for _ in originals]
    _swap(dict(zip(originals, no_ops)))
    try:
        yield
    finally:
        _swap(dict(zip(no_ops, originals)))


@contextmanager
def _without_jsii_type_checks() -> Iterator[None]:
    """jsii's run-time check of every argument the constructs pass to aws-cdk-lib against its Python annotation
    (typeguard, `if __debug__` in each generated method) left out while a day-2 synthesis builds its app: ~7,000
    checks per EKS synthesis, about a quarter of its Python CPU. They check the calls, not the templates, as
    aws-cdk-lib's template validation checks the templates: mypy checks every call of constructs/ and stacks/
    against the same annotations, and the `synth` variants and the construct tests build with the checks on. The
    generated code reads jsii's resolved check at each call; it is a no-op here until the app is built."""
    import jsii._type_checking as type_checking

    checking = type_checking._resolve_check()
    type_checking._resolved_check = _check_nothing
    try:
        yield
    finally:
        type_checking._resolved_check = checking


def _check_nothing(**_arguments: object) -> None:
    return None


def _acknowledge_nothing() -> Callable[..., None]:
    def acknowledge_nothing(*_args: object, **_kwargs: object) -> None:
        return None

    return acknowledge_nothing


def _swap(replacements: dict[Callable[..., None], Callable[..., None]]) -> None:
    """In every loaded module of constructs/ and stacks/, each name bound to a key (that very function) is bound to
    its value."""
    by_identity = {id(old): new for old, new in replacements.items()}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith(("constructs.", "stacks.")):
            for name, value in list(vars(module).items()):
                if id(value) in by_identity:
                    setattr(module, name, by_identity[id(value)])


# Bases whose config a `synth` variant synthesizes as it is (the variant's name): synth_base reads that variant's
# templates instead of synthesizing the base again. default and eks stay in-process: test_day2.py compares their
# templates with their variants' to prove the day-2 synthesis writes the same templates.
SHARED_BASES = {"per_user": "containers", "generated": "per_user_181"}


@cache
def _base(name: str) -> dict:
    """Read once per process (synth_change changes a deep copy), not once per synthesis (~10 ms each)."""
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


def synth_base(synth: Callable[[str], Synthesized], base: str) -> tuple[PlatformConfig, dict[str, dict]]:
    """The base config and its templates before any change: the `synth` variant's (SHARED_BASES), else
    synth_change(base, None)."""
    if base not in SHARED_BASES:
        return synth_change(base, None)
    if base not in _shared:
        variant = synth(SHARED_BASES[base])
        _shared[base] = (variant.config, load_assembly(variant.out_dir))
    return _shared[base]


_shared: dict[str, tuple[PlatformConfig, dict[str, dict]]] = {}


@cache
def synth_change(base: str, change: str | None) -> tuple[PlatformConfig, dict[str, dict]]:
    data = copy.deepcopy(_base(base))
    if change in ROUTINE and ROUTINE[change][1] is not None:
        ROUTINE[change][1](data)
    elif change in NEVER_IN_PLACE:
        NEVER_IN_PLACE[change][1](data)
    config = parse_config(data, f"{base}+{change}")
    shutil.rmtree(_ASSEMBLY, ignore_errors=True)  # what a synthesis that raised left
    context = {**cdk_json_context(stage_assets=False), **_NO_CONSTRUCT_METADATA}
    app = cdk.App(outdir=str(_ASSEMBLY), context=context, **_TEMPLATES_ONLY)
    with _without_nag_acknowledgments(), _without_jsii_type_checks():
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
    out_dir = Path(tempfile.mkdtemp(prefix=f"{base}-{change}-", dir=OUT_ROOT.name))
    _ASSEMBLY.replace(out_dir)  # onto the empty directory: the next synthesis starts from none
    return config, load_assembly(out_dir)
