"""`users:` identities against the FSx root squash identity (platform_config/users.py), through parse_config as a
config file reaches it: a user's gid is their `gid`, or their uid when `gid` is unset, and either way it must not be
the group root in Studio is squashed to on FSx (Studio root would then write as that user's group, and the user
would own what Studio root writes)."""
from __future__ import annotations

import pytest

from platform_config import ConfigError, parse_config

CONTROLLER = {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1}
WORKERS = {"name": "workers", "role": "compute", "instance_type": "ml.g5.8xlarge", "instance_count": 2,
           "partitions": ["gpu"]}


def config(*users: dict, squash_to: str = "30000:30001", squash: bool = True) -> dict:
    return {"name": "test", "cluster": {"instance_groups": [dict(CONTROLLER), dict(WORKERS)]},
            "storage": {"lustre": {"root_squash": {"enabled": squash, "squash_to": squash_to}}},
            "users": list(users)}


def errors_of(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "test.yaml")
    return info.value.errors


def test_a_user_whose_uid_is_the_squash_group_and_has_no_gid_is_refused():
    """{uid: 30001} has gid 30001 (unset: the uid), the squash group of 30000:30001."""
    assert errors_of(config({"name": "ada", "uid": 30001})) == [
        "users[0].uid: 30001 is also the user's gid (users[0].gid is unset), and that gid is "
        "storage.lustre.root_squash.squash_to's group; allowed: set users[0].gid to a gid from 1001 to 4000000 that "
        "is no system or squash identity, or choose another uid"]


def test_the_same_refusal_with_the_gid_written_out():
    assert errors_of(config({"name": "ada", "uid": 30001, "gid": 30001})) == [
        "users[0].gid: 30001 is storage.lustre.root_squash.squash_to's group; allowed: a gid from 1001 to 4000000 "
        "that is no system or squash identity"]


def test_the_refusal_names_the_user_it_is_about():
    errors = errors_of(config({"name": "ada", "uid": 20001}, {"name": "bob", "uid": 30001}))
    assert len(errors) == 1 and errors[0].startswith("users[1].uid: 30001 is also the user's gid")


@pytest.mark.parametrize("user", [
    {"name": "ada", "uid": 30001, "gid": 2000},  # a gid of its own: the uid alone is no squash identity
    {"name": "ada", "uid": 30002},  # the gid is 30002
    {"name": "ada", "uid": 20001, "gid": 30000},  # the squash uid as a group is no squash group
])
def test_users_clear_of_the_squash_group_pass(user):
    assert parse_config(config(user), "test.yaml").users[0].group_id == user.get("gid", user["uid"])


def test_with_root_squash_off_the_squash_group_is_an_ordinary_gid():
    parse_config(config({"name": "ada", "uid": 30001}, squash=False), "test.yaml")


def test_nobody_as_the_unset_gid_is_refused_once():
    """uid 65534 is nobody (refused as a uid); its gid, 65534 = nogroup, adds no second error."""
    assert errors_of(config({"name": "ada", "uid": 65534})) == [
        "users[0].uid: 65534 is nobody/nogroup; allowed: a uid from 10000 to 4000000 that is no system or squash "
        "identity"]


def test_a_uid_that_is_squash_uid_and_group_is_refused_once():
    assert errors_of(config({"name": "ada", "uid": 30000}, squash_to="30000:30000")) == [
        "users[0].uid: 30000 is storage.lustre.root_squash.squash_to (what root in Studio is on FSx); allowed: a uid "
        "from 10000 to 4000000 that is no system or squash identity"]
