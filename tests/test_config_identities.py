"""Users' POSIX identities in the config: reserved system names, system and squash ids, per-user mode for
MLflow, the shared space's user and the shared group."""

from __future__ import annotations

import json

import pytest
import yaml

from platform_config import load_config, parse_config
from support.configs import base, errors_of, with_
from support.variants import VARIANT_FILES


def users(*entries: dict, **top) -> dict:
    data = base()
    data["users"] = list(entries)
    data.update(top)
    return data


@pytest.mark.parametrize(
    "name",
    [
        "root",
        "slurm",
        "ubuntu",
        "munge",
        "daemon",
        "nobody",
        "sys",
        "bin",
        "syslog",
        "_apt",
        "systemd-network",
        "systemd-anything",
        "docker",
        "ssm-user",
        "mysql",
        "sudo",
        "adm",
        "sagemaker-user",
    ],
)
def test_reserved_system_names_are_refused_with_their_source(name):
    from platform_config.facts import reserved_user

    data = users({"name": name, "uid": 20001}, studio={"enabled": False})
    assert errors_of(data) == [
        f"users[0].name: {name!r} is a reserved system account or group name "
        f"({reserved_user(name)}); allowed: any other POSIX name (the full list: "
        "config/facts/reserved-users.json)"
    ]


def test_ubuntu_is_refused_because_it_has_sudo_on_the_ami():
    (message,) = errors_of(users({"name": "ubuntu", "uid": 20001}))
    assert "the HyperPod AMI's default user, with passwordless sudo" in message


def test_ordinary_names_that_merely_look_alike_pass():
    parse_config(
        users({"name": "rooty", "uid": 20001}, {"name": "ubuntu-fan", "uid": 20002}, {"name": "slurmer", "uid": 20003})
    )


@pytest.mark.parametrize(
    "entry, top, message",
    [
        (
            {"name": "ada", "uid": 65534},
            {},
            "users[0].uid: 65534 is nobody/nogroup; allowed: a uid from 10000 to 4000000 that is no system or squash "
            "identity",
        ),
        (
            {"name": "ada", "uid": 20001, "gid": 65534},
            {},
            "users[0].gid: 65534 is nobody/nogroup; allowed: a gid from 1001 to 4000000 that is no system or squash "
            "identity",
        ),
        (
            {"name": "ada", "uid": 30000},
            {"storage": {"lustre": {"root_squash": {"squash_to": "30000:30000"}}}},
            "users[0].uid: 30000 is storage.lustre.root_squash.squash_to (what root in Studio is on FSx); allowed: a uid "
            "from 10000 to 4000000 that is no system or squash identity",
        ),
        (
            {"name": "ada", "uid": 20001, "gid": 30001},
            {"storage": {"lustre": {"root_squash": {"squash_to": "30000:30001"}}}},
            "users[0].gid: 30001 is storage.lustre.root_squash.squash_to's group; allowed: a gid from 1001 to 4000000 that "
            "is no system or squash identity",
        ),
        ({"name": "ada", "uid": 999}, {}, "users[0].uid: 999 — Input should be greater than or equal to 10000"),
    ],
)
def test_system_and_squash_ids_are_refused(entry, top, message):
    assert errors_of(users(entry, **top)) == [message]


def test_the_squash_uid_is_free_again_when_squash_is_off():
    parse_config(
        users(
            {"name": "ada", "uid": 30000},
            storage={"lustre": {"root_squash": {"enabled": False, "squash_to": "30000:30000"}}},
        )
    )


def test_reserved_names_cover_the_local_base_passwd():
    """Every static system user and group of this machine's base-passwd (Debian/Ubuntu, Essential) is reserved: the
    committed facts are at least what tools/reserved_users.py derives here."""
    from tools import reserved_users

    if not (reserved_users.BASE_PASSWD / "passwd.master").is_file():
        pytest.skip("no base-passwd on this machine (not Debian/Ubuntu)")
    committed = json.loads(reserved_users.FACTS.read_text())
    assert set(reserved_users.base_passwd_names()) <= set(committed["names"])
    assert set(reserved_users.EXTRAS) <= set(committed["names"])
    assert committed["prefixes"] == reserved_users.PREFIXES


def test_research_example_runs_in_per_user_mode():
    cfg = load_config(VARIANT_FILES["research"])
    assert cfg.shared_fsx is False and cfg.cluster.accounting.departments


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
def test_mlflow_is_allowed_in_per_user_mode(orchestrator):
    """As the Studio + HyperPod article runs it: per-user partitions and the managed MLflow server. The trust this
    costs (every profile reads every run on the one server) is written in docs/security.md, "MLflow"."""
    data = with_("studio.mlflow", {"enabled": True})
    data["shared_fsx"] = False
    if orchestrator == "eks":
        data = yaml.safe_load(VARIANT_FILES["eks"].read_text())
        data["studio"] = {"mlflow": {"enabled": True}}
        assert data["shared_fsx"] is False
    assert parse_config(data).studio.mlflow.enabled


def test_the_university_example_has_mlflow_in_per_user_mode():
    cfg = load_config(VARIANT_FILES["research"])
    assert cfg.shared_fsx is False and cfg.studio.mlflow.enabled


def test_shared_space_user_names_a_user_in_shared_mode():
    data = base()
    data["users"] = [{"name": "alice", "uid": 10001}]
    data["studio"] = {"shared_space_user": "carol"}
    assert errors_of(data) == ["studio.shared_space_user: 'carol' is not a user; allowed: alice"]
    data["studio"] = {"shared_space_user": "alice"}
    data["shared_fsx"] = False
    assert errors_of(data) == [
        "studio.shared_space_user: 'alice' with shared_fsx: false; per-user mode has no partition every member of a "
        "shared space may use. Allowed: unset in per-user mode, or shared_fsx: true"
    ]
    data["shared_fsx"] = True
    assert parse_config(data).studio.shared_space_user == "alice"


@pytest.mark.parametrize(
    "entry, studio, message",
    [
        (
            {"name": "studio-shared", "uid": 20001},
            {},
            "users[0].name: 'studio-shared' is the group every node makes for studio.shared_gid; a user's own group of that "
            "name would take its place on the nodes; allowed: any other name",
        ),
        (
            {"name": "ada", "uid": 20001, "gid": 2000},
            {},
            "users[0].gid: 2000 makes studio.shared_gid (2000) the primary group of 'ada', which every user is in on the nodes: "
            "their home and files would be every user's to read; allowed: a gid other than 2000 (set users[0].gid)",
        ),
        # No gid: the effective gid is the uid.
        (
            {"name": "ada", "uid": 20001},
            {"shared_gid": 20001},
            "users[0].uid: 20001 makes studio.shared_gid (20001) the primary group of 'ada', which every user is in on the "
            "nodes: their home and files would be every user's to read; allowed: a gid other than 20001 (set "
            "users[0].gid)",
        ),
    ],
)
def test_a_user_entry_that_conflicts_with_the_shared_group_is_refused_with_key_value_and_reason(entry, studio, message):
    assert errors_of(users(entry, studio=studio)) == [message]


def test_the_shared_group_is_free_without_studio():
    parse_config(users({"name": "studio-shared", "uid": 20001, "gid": 2000}, studio={"enabled": False}))
