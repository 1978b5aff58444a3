"""platform_parameters.json has one definition (constructs/node_parameters.py): synth builds the file through it, and
the node checks the file against the schema generated from it (lifecycle/hyperpod/lib/params.py validate). A bad file
is refused on both sides, naming the key."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest
from pydantic import ValidationError

from support.paths import ROOT
from constructs import node_parameters

PARAMS_PY = ROOT / "lifecycle" / "hyperpod" / "lib" / "params.py"
FIXTURE = json.loads((ROOT / "tests" / "lifecycle" / "fixtures" / "platform_parameters.json").read_text())
EKS = {
    "version": 1,
    "orchestrator": "eks",
    "cluster_name": "ml-eks",
    "worker_groups": [{"instance_group_name": "training-p5"}],
}


def node_check(params: dict, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "platform_parameters.json"
    path.write_text(json.dumps(params))
    return subprocess.run(["python3", "-S", str(PARAMS_PY), "validate", str(path)], capture_output=True, text=True)


def test_the_committed_schema_is_the_generated_one():
    committed = node_parameters.SCHEMA_FILE.read_text()
    assert committed == node_parameters.schema_text(), "run `make schema` and commit the schema"


def test_the_schema_file_is_shipped_beside_the_checker():
    assert node_parameters.SCHEMA_FILE.parent == PARAMS_PY.parent


@pytest.mark.parametrize("params", [FIXTURE, EKS], ids=["slurm-fixture", "eks"])
def test_a_good_file_passes_both_sides(params, tmp_path):
    model = node_parameters.EksNodeParameters if "orchestrator" in params else node_parameters.SlurmNodeParameters
    assert model.model_validate(params).model_dump() == params  # the model writes back exactly what it read
    check = node_check(params, tmp_path)
    assert (check.returncode, check.stderr) == (0, "")


def _set(params: dict, dotted: str, value) -> dict:
    changed = copy.deepcopy(params)
    *parents, last = dotted.split(".")
    node = changed
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return changed


# (change, what the node says): each also refused by the model at synth, naming the same key.
BAD = [
    (("version", 2), "version: expected 1, got 2"),
    (("controller_group", KeyError), "controller_group: missing"),
    (("users.0.uid", 5), "users[0].uid: must be an integer >= 1000, got 5"),
    (("users.1.sudo", "yes"), "users[1].sudo: must be of type boolean, got 'yes'"),
    (("users.0.name", "bob ALL=(ALL)"), "users[0].name: is not a valid user name, got 'bob ALL=(ALL)'"),
    (("users_sync.parameters_s3_uri", ""), "users_sync.parameters_s3_uri: must be an s3:// URI, got ''"),
    (("slurm.auth", "kerberos"), 'slurm.auth: expected one of "munge", "jwt", got \'kerberos\''),
    (
        ("container_runtime.artifacts.0.sha256", "0" * 63),
        "container_runtime.artifacts[0].sha256: must be 64 lowercase hex digits",
    ),
    (
        ("accounting.priority_weights.PriorityWeightQOS", "high"),
        "accounting.priority_weights.PriorityWeightQOS: must be of type integer, got 'high'",
    ),
    (("worker_groups.0.instance_group_name", ""), "worker_groups[0].instance_group_name: missing"),
]


@pytest.mark.parametrize(("change", "said"), BAD, ids=[c[0][0] for c in BAD])
def test_a_bad_file_is_refused_on_the_node_and_at_synth_naming_the_key(change, said, tmp_path):
    params = _set(FIXTURE, *change)
    check = node_check(params, tmp_path)
    assert check.returncode == 2 and said in check.stderr, check.stderr
    with pytest.raises(ValidationError) as refused:
        node_parameters.SlurmNodeParameters.model_validate(params)
    key = change[0].split(".")
    assert any([str(p) for p in e["loc"]][: len(key)] == key for e in refused.value.errors()), refused.value


def test_rules_on_deploy_time_values_are_the_nodes_alone(tmp_path):
    """A workspace URL is a token at synth: the model passes it, the node refuses a resolved http:// one."""
    metrics = {
        "remote_write_url": "http://aps-workspaces.example/api/v1/remote_write",
        "region": "us-east-1",
        "scrape_interval_seconds": 30,
        "artifacts": [],
    }
    params = _set(FIXTURE, "node_metrics", metrics)
    node_parameters.SlurmNodeParameters.model_validate(params)
    check = node_check(params, tmp_path)
    assert "node_metrics.remote_write_url: must be an https:// URL, got 'http://aps" in check.stderr


def test_fsx_names_are_required_only_when_the_scripts_mount(tmp_path):
    assert (
        "fsx.dns_name: missing while fsx.mount is true"
        in node_check(_set(FIXTURE, "fsx.dns_name", ""), tmp_path).stderr
    )
    unmounted = _set(_set(FIXTURE, "fsx.mount", False), "fsx.dns_name", "")
    assert node_check(unmounted, tmp_path).returncode == 0


def test_an_eks_file_is_checked_as_one(tmp_path):
    check = node_check({k: v for k, v in EKS.items() if k != "worker_groups"}, tmp_path)
    assert "worker_groups: missing" in check.stderr
    assert "controller_group" not in check.stderr  # a Slurm key is not asked of an EKS file


def test_a_key_added_later_is_refused_at_synth_and_ignored_on_the_node(tmp_path):
    """Synth holds the file to its definition; a node created by an older deployment reads a newer one's file (its
    users sync) with the schema it was created with, so it ignores keys it does not know."""
    params = _set(FIXTURE, "slurm.added_later", "x")
    with pytest.raises(ValidationError, match="slurm.added_later"):
        node_parameters.SlurmNodeParameters.model_validate(params)
    assert node_check(params, tmp_path).returncode == 0


CONFIGS = sorted((ROOT / "config").glob("*.yaml")) + sorted((ROOT / "config" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_makes_a_file_the_model_and_the_node_accept(path, tmp_path):
    """Without a synth: the deploy-time values as a deployment resolves them."""
    from types import SimpleNamespace

    from manifests.node_parameters import eks_node_parameters, slurm_node_parameters
    from platform_config import load_config

    config = load_config(path)
    if config.orchestrator == "eks":
        params = node_parameters.EksNodeParameters.model_validate(eks_node_parameters(config)).model_dump()
    else:
        arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:x"
        params = node_parameters.SlurmNodeParameters.model_validate(
            slurm_node_parameters(
                config,
                lustre=SimpleNamespace(dns_name="fs-1.fsx.us-east-1.amazonaws.com", mount_name="abc"),
                region="us-east-1",
                slurm_login_secret_arn=arn,
                jwt_key_secret_arn=arn,
                parameters_s3_uri="s3://b/hyperpod/x/platform_parameters.json",
                client_bundle_s3_prefix="s3://b/slurm-client/",
                node_metrics_remote_write_url="https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/api/v1/"
                "remote_write",
                job_role_arn="arn:aws:iam::111122223333:role/x",
            )
        ).model_dump()
    check = node_check(params, tmp_path)
    assert (check.returncode, check.stderr) == (0, "")
