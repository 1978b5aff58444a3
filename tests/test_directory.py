"""cluster.directory (SSSD against LDAP/AD): what the config refuses, what the nodes are told, and that every node
may read exactly the bind password secret and nothing else. The node side runs for real against slapd in
tests/e2e/test_directory_sssd.py."""

from __future__ import annotations

import copy
import hashlib
import json
import re

import pytest
import yaml

from support.paths import ROOT
from support.variants import DIRECTORY, DIRECTORY_KEY_ARN, DIRECTORY_SECRET_ARN, VARIANT_FILES
from platform_config import ConfigError, parse_config
from support.iam import actions, statements_of
from support.template import resources


def _errors(directory: dict, **top) -> list[str]:
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    data["cluster"]["directory"] = directory
    data.update(top)
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    return e.value.errors


def _with(**changes) -> dict:
    return {**copy.deepcopy(DIRECTORY), **changes}


# ---------------------------------------------------------------------------------------------- config
def test_a_valid_directory_parses_and_off_is_the_default():
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    assert parse_config(data).cluster.directory.enabled is False
    data["cluster"]["directory"] = DIRECTORY
    directory = parse_config(data).cluster.directory
    assert directory.ldap_schema == "rfc2307bis" and directory.admin_groups == ["hpc admins"]


@pytest.mark.parametrize(
    "changes, expected",
    [
        (
            {"uris": ["ldap://ldap1.example.org"]},
            "cluster.directory.uris[0]: 'ldap://ldap1.example.org' is plaintext LDAP, which would send the bind password",
        ),
        (
            {"uris": ["ldaps://ldap1.example.org"], "start_tls": True},
            "cluster.directory.uris[0]: 'ldaps://ldap1.example.org' with start_tls: true",
        ),
        (
            {"uris": ["ldaps://ldap1.example.org/dc=x??sub"]},
            "cluster.directory.uris[0]: 'ldaps://ldap1.example.org/dc=x??sub' — must be an ldaps://host",
        ),
        ({"uris": []}, "cluster.directory.uris: [] with the directory enabled"),
        ({"access_groups": []}, "cluster.directory.access_groups: [] with the directory enabled"),
        (
            {"bind_dn": "cn=bind,,dc=example"},
            "cluster.directory.bind_dn: 'cn=bind,,dc=example' — must be a distinguished name",
        ),
        ({"search_base": "example.org"}, "cluster.directory.search_base: 'example.org' — must be a distinguished name"),
        ({"search_base": None}, "cluster.directory.search_base: missing; required with the directory enabled"),
        (
            {"bind_password_secret_arn": "arn:aws:secretsmanager:us-west-2:111122223333:secret:hpc/directory-bind"},
            "must be a complete Secrets Manager secret ARN, including the six-character suffix",
        ),
        (
            {"bind_password_kms_key_arn": DIRECTORY_KEY_ARN.replace("us-west-2", "eu-west-1")},
            "cluster.directory.bind_password_kms_key_arn: 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-"
            "1234567890ab' is in region eu-west-1, the secret in us-west-2",
        ),
        (
            {"ca_certificate": "config/missing-ca.pem"},
            "cluster.directory.ca_certificate: 'config/missing-ca.pem' — no such file",
        ),
        (
            {"ca_certificate": "config/../../outside.pem"},
            "cluster.directory.ca_certificate: 'config/../../outside.pem' — must stay inside the repository",
        ),
        (
            {"ca_certificate": "README.md"},
            "cluster.directory.ca_certificate: 'README.md' — must be a .pem or .crt path",
        ),
        (
            {"admin_groups": ["hpc,admins"]},
            "cluster.directory.admin_groups[0]: 'hpc,admins' — must be a directory group name",
        ),
        (
            {"ldap_schema": "nis"},
            "cluster.directory.ldap_schema: 'nis' — Input should be 'rfc2307', 'rfc2307bis' or 'ad'",
        ),
    ],
)
def test_bad_directory_settings_are_refused_with_the_key_path(changes, expected):
    errors = _errors(_with(**changes))
    assert any(expected in e for e in errors), errors


def test_a_ca_file_that_is_not_only_certificates_is_refused(tmp_path):
    key = ROOT / "tests" / "fixtures" / ".directory-ca-with-key.pem"
    key.write_text(
        (ROOT / "tests/fixtures/directory-ca.pem").read_text()
        + "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    )
    try:
        errors = _errors(_with(ca_certificate=str(key.relative_to(ROOT))))
    finally:
        key.unlink()
    assert any("holds a PRIVATE KEY block; only CA certificates belong here" in e for e in errors), errors


def test_the_directory_is_refused_on_eks_clearly():
    data = yaml.safe_load((ROOT / "config/examples/eks.yaml").read_text())
    data["cluster"]["directory"] = DIRECTORY
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    assert (
        "cluster.directory.enabled: true with orchestrator 'eks'; SSSD on the nodes is for Slurm clusters only"
        in str(e.value)
    )


def test_a_directory_group_named_like_a_config_user_is_refused():
    errors = _errors(_with(admin_groups=["ada"]), users=[{"name": "ada", "uid": 10001}])
    assert any("cluster.directory: group 'ada' is also users[0].name" in e for e in errors), errors


def test_an_admin_group_with_a_space_is_refused_only_with_pam_slurm_adopt():
    # pam_access(8), which lets admin groups past pam_slurm_adopt, separates its list entries by spaces.
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    data["cluster"]["directory"] = _with(admin_groups=["hpc admins", "ops"])
    parse_config(copy.deepcopy(data))  # without pam_slurm_adopt a space is fine (sudoers escapes it)
    data["cluster"]["pam_slurm_adopt"] = True
    data["cluster"]["pam_slurm_adopt_artifacts"] = [  # the module's package, which pam_slurm_adopt needs
        {"name": "slurm-pam-adopt", "s3_uri": "s3://mirror/pam/slurm-pam-adopt_24.11.5-1_amd64.deb", "sha256": "a" * 64}
    ]
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    assert e.value.errors == [
        "cluster.directory.admin_groups[0]: 'hpc admins' with cluster.pam_slurm_adopt: true; compute nodes let admin "
        "groups past pam_slurm_adopt through pam_access, whose lists cannot hold a space. Allowed: a group name "
        "without spaces"
    ]


# ---------------------------------------------------------------------------------------------- synth
def _parameters(s) -> dict:
    (raw,) = [p.read_text() for p in s.out_dir.glob("asset.*/platform_parameters.json")]
    # Deploy-time values (the FSx names) are markers outside JSON strings until deployment; none is in `directory`.
    return json.loads(re.sub(r"<<marker:[^>]*>>", "null", raw))


def test_nodes_get_the_directory_settings_and_the_ca_digest_but_never_the_password(synth):
    s = synth("directory")
    directory = _parameters(s)["directory"]
    ca = (ROOT / "tests/fixtures/directory-ca.pem").read_bytes()
    assert directory == {
        "uris": DIRECTORY["uris"],
        "start_tls": False,
        "search_base": "dc=example,dc=org",
        "bind_dn": "cn=sssd-bind,ou=services,dc=example,dc=org",
        "bind_password_secret_arn": DIRECTORY_SECRET_ARN,
        "region": "us-west-2",
        "ldap_schema": "rfc2307bis",
        "access_groups": ["hpc-users"],
        "admin_groups": ["hpc admins"],
        "artifacts": [],
        "ca_certificate": {"file": "directory/ca.pem", "sha256": hashlib.sha256(ca).hexdigest()},
    }
    # The CA travels with the scripts, byte for byte what the digest was computed from.
    shipped = [p.read_bytes() for p in s.out_dir.glob("asset.*/directory/ca.pem")]
    assert shipped == [ca]
    assert _parameters(synth("default")).get("directory") is None  # json_data drops nulls: the node reads "off"


def test_every_node_role_reads_exactly_the_bind_secret_and_decrypts_only_through_secrets_manager(synth):
    t = synth("directory").templates["cluster"]
    roles = resources(t, "AWS::IAM::Role")
    (controller_id,) = [k for k in roles if k.startswith("HyperPodExecutionRole")]
    (worker_id,) = [k for k in roles if k.startswith("HyperPodWorkerRole")]
    for role_id in (controller_id, worker_id):
        statements = statements_of(t, role_id)
        (read,) = [st for st in statements if st.get("Sid") == "ReadDirectoryBindPassword"]
        assert read["Action"] == "secretsmanager:GetSecretValue" and read["Resource"] == DIRECTORY_SECRET_ARN
        (decrypt,) = [st for st in statements if st.get("Sid") == "DecryptDirectoryBindPassword"]
        assert decrypt["Action"] == "kms:Decrypt" and decrypt["Resource"] == DIRECTORY_KEY_ARN
        assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "secretsmanager.us-west-2.amazonaws.com"}}
    # The worker role reaches no other secret and no other key: those two statements are its only ones with a
    # Secrets Manager or KMS action, and no managed policy was added for them.
    worker = statements_of(t, worker_id)
    touching = [st for st in worker if any(a.startswith(("secretsmanager:", "kms:")) for a in actions(st))]
    assert sorted(st["Sid"] for st in touching) == [
        "DecryptDirectoryBindPassword",
        "ReadDirectoryBindPassword",
        "ReadLifecycleRecord",
    ]  # tests/test_lifecycle_record.py
    default = synth("default").templates["cluster"]
    (default_worker,) = [
        r for k, r in resources(default, "AWS::IAM::Role").items() if k.startswith("HyperPodWorkerRole")
    ]
    assert roles[worker_id]["Properties"].get("ManagedPolicyArns") == default_worker["Properties"].get(
        "ManagedPolicyArns"
    )
