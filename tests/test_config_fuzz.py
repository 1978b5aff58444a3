"""Property-based: any edit of an example config ends in a valid config or a clear error, never a traceback.

Mutations are what people do to YAML by hand: delete a key, repeat a list entry, put another value (of any type,
or one taken from elsewhere in the same file) in a place. `load_config` must either accept the result or raise
ConfigError whose every line names a config path (the file goes through `load_config`, strict YAML included). A sample of the accepted mutations is then synthesized with
cdk-nag: it must give templates or a ConfigError (a construct-name clash, a jsii error or a nag finding would be
a bug: validation let through something synth cannot build).
"""

from __future__ import annotations

import pickle
import re
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from support.variants import cdk_json_context, STAND_IN_CHART, VARIANT_FILES
from platform_config import ConfigError, PlatformConfig, load_config
from stacks.platform import add_security_checks, build_platform

EXAMPLES = {name: yaml.safe_load(path.read_text()) for name, path in VARIANT_FILES.items()}
for data in EXAMPLES.values():
    if data.get("orchestrator") == "eks" and "hyperpod_dependencies" in data.get("eks", {}):  # attach: no chart
        data["eks"]["hyperpod_dependencies"]["chart_dir"] = str(STAND_IN_CHART)

# "path: ..." where path is a config path (name, a.b[2].c, a.b key) or <root>/YAML/config.
ERROR_LINE = re.compile(r"^(<root>|YAML|config|[a-z_]+(\[\d+\]|\.[A-Za-z0-9_./:-]+)*( key)?): \S")
ODD_VALUES = [
    "",
    "x_y",
    "-1",
    "ml.p5.48xlarge",
    "usw2-az1",
    "10.0.0.0/8",
    0,
    -1,
    1,
    3,
    10**9,
    1.5,
    True,
    False,
    None,
    [],
    {},
    ["x"],
    {"x": 1},
]


def paths(node: Any, prefix: tuple = (), found: list[tuple] | None = None) -> list[tuple]:
    """Every path into a parsed YAML document (dict keys and list indexes), each before the paths under it."""
    if found is None:
        found = []
    elif prefix:
        found.append(prefix)
    if isinstance(node, dict):
        for key, value in node.items():
            paths(value, prefix + (key,), found)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            paths(value, prefix + (i,), found)
    return found


def copied(node: Any) -> Any:
    """A deep copy of parsed YAML (dicts, lists, scalars; shared nodes stay shared, as with copy.deepcopy), through
    pickle's C code: copy.deepcopy's Python recursion was ~10 % of the fuzz's CPU."""
    return pickle.loads(pickle.dumps(node, pickle.HIGHEST_PROTOCOL))


def get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


# The strategies that do not depend on the document, made once (each new one computes its label again).
EXAMPLE_NAMES = st.sampled_from(sorted(EXAMPLES))
EDITS = st.integers(1, 3)
ACTIONS = st.sampled_from(["delete", "repeat", "odd", "swap"])
ODD = st.sampled_from(ODD_VALUES)


@st.composite
def mutated_configs(draw) -> dict:
    name = draw(EXAMPLE_NAMES)
    data = copied(EXAMPLES[name])
    for _ in range(draw(EDITS)):
        all_paths = paths(data)
        path = draw(st.sampled_from(all_paths))
        parent, last = get(data, path[:-1]), path[-1]
        action = draw(ACTIONS)
        if action == "delete":
            del parent[last]
        elif action == "repeat" and isinstance(parent, list):
            parent.insert(last, copied(parent[last]))
        elif action == "swap":
            parent[last] = copied(get(data, draw(st.sampled_from(all_paths))))
        else:
            parent[last] = copied(draw(ODD))  # ODD_VALUES holds mutable [] and {}
    return data


def as_yaml(data: Any) -> str:
    """yaml.safe_dump's text, from libyaml's emitter (PyYAML's own spent ~70 % of the fuzz's CPU; the same text:
    test_the_yaml_written_is_what_safe_dump_writes)."""
    return yaml.dump(data, Dumper=yaml.CSafeDumper)


def outcome(data: dict) -> PlatformConfig | ConfigError:
    """load_config on the mutated document written back as YAML, as a person's edited file would be read."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as edited:
        edited.write(as_yaml(data))
        edited.flush()
        try:
            return load_config(edited.name)
        except ConfigError as error:
            return error


def test_the_yaml_written_is_what_safe_dump_writes():
    """Every example config and every odd value, in lists and under keys: the edits are made of these."""
    odd = {
        "values": ODD_VALUES,
        "keyed": {f"k{i}": value for i, value in enumerate(ODD_VALUES)},
        "nested": [ODD_VALUES],
    }
    for document in [*EXAMPLES.values(), odd]:
        assert as_yaml(document) == yaml.safe_dump(document)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_every_edit_is_accepted_or_clearly_refused(data):
    result = outcome(data)
    if isinstance(result, ConfigError):
        assert result.errors, "a ConfigError must say what is wrong"
        for line in result.errors:
            assert ERROR_LINE.match(line), f"not a 'path: problem' line: {line!r}"
    else:
        assert isinstance(result, PlatformConfig)


def synthesize(config: PlatformConfig, out_dir: Path) -> list[str]:
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context(stage_assets=False))
    build_platform(app, config, allow_chart_stand_in=True)  # EKS mutations use the stand-in chart
    add_security_checks(app)
    app.synth()
    return sorted(p.name for p in out_dir.glob("*.template.json"))


@pytest.mark.parametrize("seed", range(3))
def test_accepted_edits_synthesize(seed, tmp_path):
    """Accepted mutations (a deterministic sample, one per seed) build templates that pass cdk-nag."""
    accepted: list[PlatformConfig] = []

    @settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(mutated_configs(), st.integers(0, 10**6))
    def collect(data, salt):
        assume(salt % 3 == seed and not accepted)  # once one is found, the rest are not loaded
        result = outcome(data)
        assume(isinstance(result, PlatformConfig))
        accepted.append(result)

    collect()
    assert accepted, "no accepted mutation found"
    try:
        templates = synthesize(accepted[0], tmp_path)
    except ConfigError as error:  # e.g. a chart directory that does not exist: a clear error is fine
        assert all(ERROR_LINE.match(line) for line in error.errors), error
        return
    built = "-studio" if accepted[0].cluster.existing else "-cluster"  # attach mode builds no cluster stack
    assert any(name.endswith(f"{built}.template.json") for name in templates), templates
