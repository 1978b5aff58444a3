"""Reading a config file: YAML's booleans and duplicate keys, both parsers alike, a missing file, context overrides,
the committed JSON Schema, and the app's error output for bad input (no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from platform_config import ConfigError, PlatformConfig, json_schema, load_config
from support.app_main import run_app
from support.paths import APP_PATH, ROOT
from support.variants import VARIANT_FILES


def test_default_yaml_spells_out_the_model_defaults():
    assert load_config(VARIANT_FILES["default"]) == PlatformConfig()


def test_yaml_booleans_are_true_false_only(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("shared_fsx: yes\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.errors == ["shared_fsx: 'yes' — must be true or false"]
    path.write_text("shared_fsx: false\n")
    assert load_config(path).shared_fsx is False


def test_yaml_duplicate_keys_are_rejected(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: a\nname: b\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    # The message names the file and quotes the line under it (libyaml's parser, used for speed, does neither: the
    # file is read again).
    assert info.value.errors == [
        f"YAML: duplicate key 'name'\n      in \"{path}\", line 2, column 1:\n        name: b\n        ^"
    ]


def test_both_yaml_parsers_read_configs_alike():
    from platform_config.loading import FastStrictYamlLoader, StrictYamlLoader
    import yaml

    text = "shared_fsx: yes\nname: x\nusers:\n  - {name: a, uid: 10000, sudo: true}\nflag: on\n"
    assert (
        yaml.load(text, Loader=FastStrictYamlLoader)
        == yaml.load(text, Loader=StrictYamlLoader)
        == {  # noqa: S506
            "shared_fsx": "yes",
            "name": "x",
            "users": [{"name": "a", "uid": 10000, "sudo": True}],
            "flag": "on",
        }
    )


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert info.value.errors == [f"config: '{tmp_path / 'nope.yaml'}' — file not found"]


def test_context_overrides_win_over_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("shared_fsx: true\n")
    assert load_config(path, {"shared_fsx": "false"}).shared_fsx is False
    assert load_config(path, {"shared_fsx": None}).shared_fsx is True
    with pytest.raises(ConfigError) as info:
        load_config(path, {"shared_fsx": "no"})
    assert info.value.errors == ["shared_fsx: 'no' — must be true or false (from -c shared_fsx=no)"]
    assert load_config(path, {"orchestrator": "eks"}).orchestrator == "eks"
    with pytest.raises(ConfigError) as info:
        load_config(path, {"orchestrator": "pbs"})
    assert info.value.errors == ["orchestrator: 'pbs' — Input should be 'slurm' or 'eks' (from -c orchestrator=pbs)"]
    assert info.value.source == f"{path} with -c orchestrator=pbs"


def test_committed_json_schema_is_current():
    committed = json.loads((ROOT / "config" / "schema.json").read_text())
    assert committed == json.loads(json.dumps(json_schema())), "run `make schema` and commit config/schema.json"


def test_schema_rejects_unknown_keys_for_editors():
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["InstanceGroup"]["additionalProperties"] is False


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["-c", "orchestrator=pbs"],
            "orchestrator: 'pbs' — Input should be 'slurm' or 'eks' (from -c orchestrator=pbs)",
        ),
        (["-c", "shared_fsx=maybe"], "shared_fsx: 'maybe' — must be true or false (from -c shared_fsx=maybe)"),
        (
            ["-c", "cluster.instance_groups[2].instance_count=-1"],
            "cluster.instance_groups[2].instance_count: -1 — Input should be greater than or equal to 0 "
            "(from -c cluster.instance_groups[2].instance_count=-1)",
        ),
        (["-c", "nmae=dev"], "nmae: unknown key; did you mean 'name'?"),
        (["-c", "config=config/missing.yaml"], "config: 'config/missing.yaml' — file not found"),
    ],
)
def test_app_reports_bad_input_without_traceback(args, expected, monkeypatch, capsys):
    """One case runs app.py as the CDK CLI does (a process of its own, the context in CDK_CONTEXT_JSON): its exit
    status and stderr. The others run the same app.py in this process with the context given to its App (each fresh
    process pays Node.js and aws-cdk-lib's start, ~2.5 s of CPU); an exception other than its exit fails the test as a
    traceback would. So do tests/test_hyperpod_chart.py's and tests/test_eks_cluster.py's refusals of a chart."""
    context = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args[1::2]}
    if args != ["-c", "orchestrator=pbs"]:  # that one runs as a process, below
        in_process = run_app(context, monkeypatch, capsys)
        assert in_process.returncode == 1
        assert expected in in_process.stderr
        return
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": APP_PATH,
            "CDK_CONTEXT_JSON": json.dumps(context),
            "CDK_OUTDIR": "/tmp/should-not-be-written",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        },
    )
    assert result.returncode == 1
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
