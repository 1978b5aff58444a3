"""The lifecycle record (constructs/lifecycle_scripts.py): what a deploy ships to the nodes, in a secret only
CloudFormation's execution role may change, which every node checks its scripts and parameters against before running
them as root (lifecycle/hyperpod/lib/verify.sh; the node side is tested in tests/lifecycle/lifecycle_record.bats)."""

import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.iam_facts import as_list, statements
from support.modules import load_module
from support.paths import ROOT

VERIFY = ROOT / "lifecycle" / "hyperpod" / "lib" / "verify.py"
SCRIPTS = ROOT / "lifecycle" / "hyperpod"
CFN_EXEC_ROLE = "arn:AWS::Partition:iam::AWS::AccountId:role/cdk-hnb659fds-cfn-exec-role-AWS::AccountId-AWS::Region"
CLUSTER_STACK = {"default": "cluster", "eks": "cluster"}


def _render(value) -> str:
    """A CloudFormation string expression as text, pseudo parameters by name (Ref AWS::Region -> 'AWS::Region')."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return value["Ref"]
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_render(p) for p in parts)
    return "<other>"  # e.g. the FSx DNS name, read from the storage stack's outputs


def _secrets_manager_actions() -> dict[str, dict]:
    """Every Secrets Manager action of the Service Authorization Reference, as cfn-lint bundles it."""
    import cfnlint

    spec = json.loads((Path(cfnlint.__file__).parent / "data" / "AdditionalSpecs" / "Policies.json").read_text())
    return spec["secretsmanager"]["Actions"]


def _record_name(s) -> str:
    return f"hyperpod-platform/{s.config.name}/lifecycle-record"


def _record(s, variant):
    resources = s.templates[CLUSTER_STACK[variant]]["Resources"]
    (logical_id,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::SecretsManager::Secret" and r["Properties"].get("Name") == _record_name(s)
    ]
    return logical_id, resources


def _uploaded_parameters(s, variant) -> dict:
    """platform_parameters.json as the BucketDeployment writes it: the asset with its markers' values."""
    resources = s.templates[CLUSTER_STACK[variant]]["Resources"]
    deployment = next(r for r in resources.values() if r["Type"] == "Custom::CDKBucketDeployment")["Properties"]
    markers = {k: v for source in deployment.get("SourceMarkers", []) for k, v in source.items()}
    (raw,) = {
        p.read_text() for p in s.out_dir.glob("asset.*/platform_parameters.json") if "lifecycle_record" in p.read_text()
    }
    return json.loads(re.sub(r"<<marker:[^>]*>>", lambda m: _render(markers[m.group(0)]), raw))


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_the_record_is_what_the_deploy_ships_and_a_node_accepts_exactly_that(synth, variant, tmp_path):
    """The record lists every file of lifecycle/hyperpod with its sha256 (what the asset ships) and the very parameters
    uploaded beside them; verify.py, the node's check, accepts the repository's scripts with those parameters and
    refuses them with one script changed, naming it."""
    s = synth(variant)
    logical_id, resources = _record(s, variant)
    record = json.loads(_render(resources[logical_id]["Properties"]["SecretString"]))
    # the lifecycle tests' fake Secrets Manager serves this
    stub_record = load_module(ROOT / "tests" / "lifecycle" / "lifecycle_record.py").record
    params = _uploaded_parameters(s, variant)
    assert record["parameters"] == params
    assert params["lifecycle_record"] == {"secret_name": _record_name(s), "region": "AWS::Region"}
    (tmp_path / "params.json").write_text(json.dumps(params))
    assert record == stub_record(SCRIPTS, tmp_path / "params.json")
    assert {"on_init_complete.sh", "on_create.sh", "sync_users.sh", "lib/common.sh", "lib/verify.py"} <= set(
        record["scripts"]
    )
    (tmp_path / "record.json").write_text(json.dumps(record))
    check = [sys.executable, str(VERIFY), "download", str(tmp_path / "record.json")]
    ok = subprocess.run([*check, str(SCRIPTS), str(tmp_path / "params.json")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    copy = tmp_path / "scripts"
    subprocess.run(["cp", "-r", str(SCRIPTS), str(copy)], check=True)
    with open(copy / "create_users.sh", "a") as f:
        f.write("echo planted\n")
    refused = subprocess.run([*check, str(copy), str(tmp_path / "params.json")], capture_output=True, text=True)
    assert refused.returncode == 1 and "create_users.sh: sha256 " in refused.stderr, refused.stderr


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_only_cloudformation_may_change_the_record(synth, variant):
    """The record's resource policy denies every Secrets Manager action but the four reads (any action added later
    too: NotAction) to every principal but the CDK bootstrap's CloudFormation execution role, exactly that ARN."""
    from constructs.lifecycle_scripts import RECORD_READ_ACTIONS

    s = synth(variant)
    logical_id, resources = _record(s, variant)
    (policy,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::SecretsManager::ResourcePolicy" and r["Properties"]["SecretId"] == {"Ref": logical_id}
    ]
    assert policy["BlockPublicPolicy"] is True
    (deny,) = policy["ResourcePolicy"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"} and deny["Resource"] == "*"
    assert "Action" not in deny and sorted(as_list(deny["NotAction"])) == sorted(RECORD_READ_ACTIONS)
    assert deny["Condition"] == {
        "ArnNotEquals": {"aws:PrincipalArn": deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]}
    }
    assert _render(deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]) == CFN_EXEC_ROLE
    allowed = {a.lower() for a in RECORD_READ_ACTIONS}
    writes = sorted(a for a in _secrets_manager_actions() if f"secretsmanager:{a}" not in allowed)
    assert {
        "putsecretvalue",
        "updatesecret",
        "updatesecretversionstage",
        "putresourcepolicy",
        "deletesecret",
        "deleteresourcepolicy",
        "restoresecret",
        "replicatesecrettoregions",
        "rotatesecret",
    } <= set(writes)


def _could_touch(resource, logical_id, name) -> bool:
    """Whether a statement's resource could name the record: a reference to it, or a pattern its ARN matches."""
    if isinstance(resource, dict) and "Fn::Join" not in resource:  # Ref, GetAtt or another stack's output
        return resource.get("Ref") == logical_id
    text = _render(resource)
    arn = f"arn:AWS::Partition:secretsmanager:AWS::Region:AWS::AccountId:secret:{name}-AbCdEf"
    return fnmatch.fnmatchcase(arn, text.replace("<other>", "*"))


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_no_role_the_platform_creates_can_change_the_record_and_node_roles_only_read_it(synth, variant):
    """Every IAM statement of every template of the platform: none allows a Secrets Manager action other than the
    reads on anything that could be the record; the statements that name the record grant GetSecretValue alone, to
    every node role of the cluster and to no other role."""
    from constructs.lifecycle_scripts import RECORD_READ_ACTIONS

    s = synth(variant)
    logical_id, resources = _record(s, variant)
    reads = {a.lower() for a in RECORD_READ_ACTIONS}
    writes = [f"secretsmanager:{a}" for a in _secrets_manager_actions() if f"secretsmanager:{a}" not in reads]
    templates = [json.loads(p.read_text()) for p in s.all_template_paths()]
    violations = []
    for template in templates:
        for policy_id, statement in statements(template):
            if statement.get("Effect") != "Allow":
                continue
            patterns = [p.lower() for p in as_list(statement.get("Action", []))]
            granted = [w for w in writes if any(fnmatch.fnmatchcase(w, p) for p in patterns)]
            if statement.get("NotAction"):
                granted = [
                    w
                    for w in writes
                    if not any(fnmatch.fnmatchcase(w, p.lower()) for p in as_list(statement["NotAction"]))
                ]
            resources = as_list(statement.get("Resource", []))
            if granted and any(_could_touch(r, logical_id, _record_name(s)) for r in resources):
                violations.append(f"{policy_id} {statement.get('Sid')}: {granted}")
    assert violations == []
    naming = [
        (policy_id, st)
        for policy_id, st in statements(s.templates[CLUSTER_STACK[variant]])
        if {"Ref": logical_id} in as_list(st.get("Resource", []))
    ]
    assert naming and all(
        st["Action"] == "secretsmanager:GetSecretValue"
        and st["Effect"] == "Allow"
        and as_list(st["Resource"]) == [{"Ref": logical_id}]
        for _, st in naming
    )
    template = s.templates[CLUSTER_STACK[variant]]
    readers = set()
    for policy_id, _ in naming:
        readers |= {r["Ref"] for r in template["Resources"][policy_id]["Properties"]["Roles"]}
    node_roles = {
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role"
        and "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    }
    assert readers == node_roles and node_roles


def test_a_users_list_too_long_for_the_secret_is_recorded_by_its_digest_and_still_checked(tmp_path):
    """1,000 users with 32-character names (the large variant's shape) do not fit Secrets Manager's 64 KiB as values:
    the record keeps `users` as the sha256 of its canonical JSON, the rest verbatim, and fits; the node accepts the
    same parameters and refuses them with one user's sudo changed, naming `users`."""
    from constructs.lifecycle_scripts import SECRET_VALUE_LIMIT, record_value, shipped_digests

    users = [{"name": f"u{i:031d}", "uid": 100000 + i, "gid": 100000 + i, "sudo": False} for i in range(1000)]
    params = {
        "version": 1,
        "cluster_name": "large",
        "users": users,
        "lifecycle_record": {
            "secret_name": "hyperpod-platform/large/lifecycle-record",
            "region": "${Token[AWS.Region.1]}",
        },
    }
    record = record_value(shipped_digests([SCRIPTS]), params)
    assert set(record["parameter_digests"]) == {"users"} and "users" not in record["parameters"]
    assert record["parameters"]["cluster_name"] == "large"
    assert len(json.dumps(record)) < SECRET_VALUE_LIMIT
    small = record_value({}, {**params, "users": users[:3]})
    assert small["parameter_digests"] == {} and small["parameters"]["users"] == users[:3]
    record["parameters"]["lifecycle_record"]["region"] = "us-east-1"  # as CloudFormation resolves it
    (tmp_path / "record.json").write_text(json.dumps(record))
    deployed = {**params, "lifecycle_record": record["parameters"]["lifecycle_record"]}
    (tmp_path / "params.json").write_text(json.dumps(deployed))
    check = [sys.executable, str(VERIFY), "download", str(tmp_path / "record.json"), str(SCRIPTS)]
    ok = subprocess.run([*check, str(tmp_path / "params.json")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    deployed["users"][7]["sudo"] = True
    (tmp_path / "params.json").write_text(json.dumps(deployed))
    refused = subprocess.run([*check, str(tmp_path / "params.json")], capture_output=True, text=True)
    assert refused.returncode == 1 and "parameters.users: sha256 " in refused.stderr, refused.stderr


def test_the_shipped_digests_follow_every_change_to_a_file_within_one_process(tmp_path):
    """shipped_digests hashes a file once per process (a test process synthesizes dozens of apps; the EKS Studio
    prefix ships ~118 MB of kubectl and helm), yet a file rewritten in place, even to the same size within the same
    clock tick, replaced by another file or added gets its new digest in the same process."""
    import hashlib
    import os

    from constructs.lifecycle_scripts import shipped_digests

    script = tmp_path / "scripts" / "setup.sh"
    script.parent.mkdir()
    script.write_text("echo one\n")
    mtime = script.stat().st_mtime_ns
    assert shipped_digests([script.parent]) == {"setup.sh": hashlib.sha256(b"echo one\n").hexdigest()}
    script.write_text("echo two\n")  # same size
    os.utime(script, ns=(mtime, mtime))  # and the mtime put back: only the ctime says it changed
    assert shipped_digests([script.parent]) == {"setup.sh": hashlib.sha256(b"echo two\n").hexdigest()}
    replacement = tmp_path / "setup.sh.new"
    replacement.write_text("echo three\n")
    replacement.rename(script)
    (script.parent / "lib.sh").write_text("true\n")
    assert shipped_digests([script.parent]) == {
        "lib.sh": hashlib.sha256(b"true\n").hexdigest(),
        "setup.sh": hashlib.sha256(b"echo three\n").hexdigest(),
    }
