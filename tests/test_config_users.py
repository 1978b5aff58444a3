"""`users:` identities against the FSx root squash identity (platform_config/users.py), through parse_config as a
config file reaches it: a user's gid is their `gid`, or their uid when `gid` is unset, and either way it must not be
the group root in Studio is squashed to on FSx (Studio root would then write as that user's group, and the user
would own what Studio root writes)."""

from __future__ import annotations

import pytest

from platform_config import parse_config
from support.configs import errors_of

CONTROLLER = {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1}
WORKERS = {
    "name": "workers",
    "role": "compute",
    "instance_type": "ml.g5.8xlarge",
    "instance_count": 2,
    "partitions": ["gpu"],
}


def config(*users: dict, squash_to: str = "30000:30001", squash: bool = True) -> dict:
    return {
        "name": "test",
        "cluster": {"instance_groups": [dict(CONTROLLER), dict(WORKERS)]},
        "storage": {"lustre": {"root_squash": {"enabled": squash, "squash_to": squash_to}}},
        "users": list(users),
    }


def test_a_user_whose_uid_is_the_squash_group_and_has_no_gid_is_refused():
    """{uid: 30001} has gid 30001 (unset: the uid), the squash group of 30000:30001."""
    assert errors_of(config({"name": "ada", "uid": 30001})) == [
        "users[0].uid: 30001 is also the user's gid (users[0].gid is unset), and that gid is "
        "storage.lustre.root_squash.squash_to's group; allowed: set users[0].gid to a gid from 1001 to 4000000 that "
        "is no system or squash identity, or choose another uid"
    ]


def test_the_same_refusal_with_the_gid_written_out():
    assert errors_of(config({"name": "ada", "uid": 30001, "gid": 30001})) == [
        "users[0].gid: 30001 is storage.lustre.root_squash.squash_to's group; allowed: a gid from 1001 to 4000000 "
        "that is no system or squash identity"
    ]


def test_the_refusal_names_the_user_it_is_about():
    errors = errors_of(config({"name": "ada", "uid": 20001}, {"name": "bob", "uid": 30001}))
    assert len(errors) == 1 and errors[0].startswith("users[1].uid: 30001 is also the user's gid")


@pytest.mark.parametrize(
    "user",
    [
        {"name": "ada", "uid": 30001, "gid": 2100},  # a gid of its own: the uid alone is no squash identity
        {"name": "ada", "uid": 30002},  # the gid is 30002
        {"name": "ada", "uid": 20001, "gid": 30000},  # the squash uid as a group is no squash group
    ],
)
def test_users_clear_of_the_squash_group_pass(user):
    assert parse_config(config(user), "test.yaml").users[0].group_id == user.get("gid", user["uid"])


def test_with_root_squash_off_the_squash_group_is_an_ordinary_gid():
    parse_config(config({"name": "ada", "uid": 30001}, squash=False), "test.yaml")


def test_nobody_as_the_unset_gid_is_refused_once():
    """uid 65534 is nobody (refused as a uid); its gid, 65534 = nogroup, adds no second error."""
    assert errors_of(config({"name": "ada", "uid": 65534})) == [
        "users[0].uid: 65534 is nobody/nogroup; allowed: a uid from 10000 to 4000000 that is no system or squash "
        "identity"
    ]


def test_a_uid_that_is_squash_uid_and_group_is_refused_once():
    assert errors_of(config({"name": "ada", "uid": 30000}, squash_to="30000:30000")) == [
        "users[0].uid: 30000 is storage.lustre.root_squash.squash_to (what root in Studio is on FSx); allowed: a uid "
        "from 10000 to 4000000 that is no system or squash identity"
    ]


def test_names_and_uids_are_unique_and_each_repeat_names_the_first_holder():
    errors = errors_of(
        config(
            {"name": "ada", "uid": 20001},
            {"name": "ada", "uid": 20002},
            {"name": "ada", "uid": 20001},
            {"name": "bob", "uid": 20001},
        )
    )
    assert errors == [
        "users[1].name: 'ada' is already used by users[0]; user names must be unique",
        "users[2].name: 'ada' is already used by users[0]; user names must be unique",
        "users[2].uid: 20001 is already used by users[0]; uids must be unique",
        "users[3].uid: 20001 is already used by users[0]; uids must be unique",
    ]


@pytest.mark.parametrize(
    "user, message",
    [
        ({"name": "ada", "uid": 9999}, "users[0].uid: 9999 — Input should be greater than or equal to 10000"),
        ({"name": "ada", "uid": 4000001}, "users[0].uid: 4000001 — Input should be less than or equal to 4000000"),
        (
            {"name": "ada", "uid": 20001, "gid": 1000},
            "users[0].gid: 1000 — Input should be greater than or equal to 1001",
        ),
        (
            {"name": "ada", "uid": 20001, "gid": 4000001},
            "users[0].gid: 4000001 — Input should be less than or equal to 4000000",
        ),
        ({"name": "ada", "uid": 20001, "sudo": "yes"}, "users[0].sudo: 'yes' — must be true or false"),
    ],
)
def test_ids_outside_studios_range_and_loose_booleans_are_refused(user, message):
    assert errors_of(config(user)) == [message]


def test_the_edges_of_the_ranges_pass_and_sudo_is_off_unless_asked_for():
    parsed = parse_config(
        config(
            {"name": "ada", "uid": 10000, "gid": 1001}, {"name": "bob", "uid": 4000000, "gid": 4000000, "sudo": True}
        ),
        "test.yaml",
    ).users
    assert [(u.uid, u.group_id, u.sudo) for u in parsed] == [(10000, 1001, False), (4000000, 4000000, True)]


def test_studio_profile_names_are_required_only_with_studio():
    data = config({"name": "data_sci", "uid": 20001})
    assert errors_of(data) == [
        "users[0].name: 'data_sci' cannot be a Studio user profile name; with studio.enabled "
        "use letters, digits and hyphens only"
    ]
    data["studio"] = {"enabled": False}
    assert parse_config(data, "test.yaml").users[0].name == "data_sci"
