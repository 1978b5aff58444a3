"""What a person types into a config and how it is read back: instance-type typos, misspelt keys, YAML syntax errors,
`-c key.path=value` overrides, an empty file, and the JSON Schema editors check the file against."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from support.paths import ROOT
from support.variants import VARIANT_FILES
from platform_config import ConfigError, context_overrides, json_schema, load_config

DEFAULT = ROOT / "config" / "default.yaml"


def write(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_a_login_group_type_typo_names_the_group_key_and_the_closest_types(tmp_path):
    data = yaml.safe_load(DEFAULT.read_text())
    login = next(i for i, g in enumerate(data["cluster"]["instance_groups"]) if g["role"] == "login")
    data["cluster"]["instance_groups"][login]["instance_type"] = "ml.m5.xlarg"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, yaml.safe_dump(data)))
    [line] = info.value.errors
    assert line.startswith(
        f"cluster.instance_groups[{login}].instance_type: 'ml.m5.xlarg' — not an instance type "
        "HyperPod clusters accept; did you mean one of 'ml.m5.xlarge',"
    )


def test_a_type_nothing_resembles_gets_no_suggestion(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(DEFAULT, {"cluster.instance_groups[0].instance_type": "ml.qqq.zzz"})
    [line] = info.value.errors
    assert "did you mean" not in line
    assert "not an instance type HyperPod clusters accept; allowed:" in line


def test_the_instance_type_facts_are_botocores_current_enum():
    """The committed list is botocore's ClusterInstanceType enum of the pinned botocore (tools/cluster_instance_types.py
    --check); a type AWS adds shows up here when botocore is upgraded."""
    result = subprocess.run(
        [sys.executable, "tools/cluster_instance_types.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_a_misspelt_key_suggests_the_key_it_resembles(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "storag:\n  lustre: {}\nshared_fsxx: true\n"))
    assert sorted(line.split("allowed here")[0] for line in info.value.errors) == [
        "shared_fsxx: unknown key; did you mean 'shared_fsx'? ",
        "storag: unknown key; did you mean 'storage'? ",
    ]


def test_a_yaml_syntax_error_names_the_file_and_shows_the_line(tmp_path):
    path = write(tmp_path, "name: dev\ncluster:\n  instance_groups: [\n  - a\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    [line] = info.value.errors
    assert f'in "{path}", line' in line
    assert "<unicode string>" not in line
    assert "\n" in line and "^" in line.splitlines()[-1]  # the snippet and the caret, on lines of their own
    assert str(path) in str(info.value)


def test_an_empty_file_says_every_default_is_used(tmp_path):
    notices: list[str] = []
    cfg = load_config(write(tmp_path, "# nothing yet\n"), notices=notices)
    assert cfg == load_config(DEFAULT)
    assert notices == [
        f"{tmp_path / 'c.yaml'} holds no settings: every default is used (config/default.yaml spells them out)"
    ]
    notices.clear()
    load_config(DEFAULT, notices=notices)
    assert notices == []


@pytest.mark.parametrize(
    "key, raw, read",
    [
        ("name", "dev", lambda c: c.name),
        ("cluster.instance_groups[2].instance_count", "4", lambda c: c.cluster.instance_groups[2].instance_count),
        ("cluster.instance_groups.2.instance_count", "3", lambda c: c.cluster.instance_groups[2].instance_count),
        ("storage.lustre.storage_capacity_gib", "4800", lambda c: c.storage.lustre.storage_capacity_gib),
        ("users", "[{name: ada, uid: 30001}]", lambda c: [(u.name, u.uid) for u in c.users]),
    ],
)
def test_any_key_path_can_be_overridden(key, raw, read):
    expected = yaml.safe_load(raw)
    if key == "users":
        expected = [("ada", 30001)]
    assert read(load_config(DEFAULT)) != expected
    assert read(load_config(DEFAULT, {key: raw})) == expected


@pytest.mark.parametrize(
    "key, raw, message",
    [
        (
            "cluster.instance_groups[7].instance_count",
            "1",
            "cluster.instance_groups[7].instance_count: '1' (from -c cluster.instance_groups[7].instance_count=...) — the "
            "config has 3 entries at cluster.instance_groups; an override can change an entry, not add one",
        ),
        ("name.first", "x", "name.first: 'x' (from -c name.first=...) — name is not a mapping"),
        (
            "cluster..x",
            "1",
            "cluster..x: not a config key path (from -c cluster..x=...) — allowed: keys joined by '.', "
            "list entries as [N], e.g. -c cluster.instance_groups[2].instance_count=4",
        ),
        (
            "storage.lustre.storage_capacity_gib",
            "1000",
            "storage.lustre.storage_capacity_gib: 1000; allowed: 1200 or a multiple of 2400 "
            "(from -c storage.lustre.storage_capacity_gib=1000)",
        ),
    ],
)
def test_a_bad_override_is_blamed_on_c_not_on_the_file(key, raw, message):
    with pytest.raises(ConfigError) as info:
        load_config(DEFAULT, {key: raw})
    assert info.value.errors == [message]


def test_only_the_apps_and_the_cdks_own_context_keys_are_not_overrides():
    """The context the pinned CDK CLI hands an app for `cdk synth -c config=... -c name=dev` (keys read from a real run):
    its own aws:cdk:* keys and cdk.json's feature flags are not config."""
    context = {
        "aws:cdk:bundling-stacks": ["**"],
        "aws:cdk:enable-asset-metadata": True,
        "aws:cdk:enable-path-metadata": True,
        "aws:cdk:version-reporting": False,
        **json.loads((ROOT / "cdk.json").read_text())["context"],
        "config": "config/x.yaml",
        "allow_chart_stand_in": "true",
        "name": "dev",
        "cluster.x": "2",
    }
    assert context_overrides(context) == {"name": "dev", "cluster.x": "2"}


def test_the_schema_flags_what_the_model_refuses():
    validator = jsonschema.Draft202012Validator(json_schema())
    for variant, path in VARIANT_FILES.items():
        assert not list(validator.iter_errors(yaml.safe_load(path.read_text()) or {})), variant
    data = yaml.safe_load(DEFAULT.read_text())
    data["network"]["az_ids"] = ["us-west-2a"]
    data["deployment"]["region"] = "Oregon"
    data["storage"]["lustre"]["storage_capacity_gib"] = 3600
    data["cluster"]["instance_groups"][0]["instance_type"] = "ml.m5.xlarg"
    data.setdefault("network", {})["vpc_cidr"] = "10.0.0.0/33"
    flagged = {"/".join(map(str, e.absolute_path)) for e in validator.iter_errors(data)}
    assert flagged == {
        "network/az_ids/0",
        "deployment/region",
        "storage/lustre/storage_capacity_gib",
        "cluster/instance_groups/0/instance_type",
        "network/vpc_cidr",
    }


def test_on_eks_what_only_slurm_reads_is_a_notice():
    notices: list[str] = []
    load_config(DEFAULT, {"orchestrator": "eks", "cluster.slurm_auto_resume": "false"}, notices)
    assert notices == [
        "cluster.instance_groups[0] (controller-machine, role controller): not used on EKS, which builds only the "
        "compute groups",
        "cluster.instance_groups[1] (login-group, role login): not used on EKS, which builds only the compute groups",
        "cluster.instance_groups[2].partitions: ['gpu'] not used on EKS (Slurm partitions)",
        "cluster.slurm_auto_resume: set, but Slurm only; not used on EKS",
    ]


@pytest.mark.parametrize("variant", sorted(VARIANT_FILES))
def test_shipped_configs_set_nothing_their_orchestrator_ignores(variant):
    notices: list[str] = []
    load_config(VARIANT_FILES[variant], notices=notices)
    assert notices == []
