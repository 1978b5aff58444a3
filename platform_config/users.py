"""`users:` the people on the cluster and in Studio, with the same POSIX identity everywhere; the rules: unique names
and ids, names Studio accepts, no system account's name and no id root is squashed to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, StrictBool

from platform_config.facts import NOBODY_ID, reserved_user
from platform_config.fields import PosixName, Strict
from platform_config.studio import SHARED_GROUP_NAME, STUDIO_PROFILE_NAME

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig


class User(Strict):
    """A person on the cluster and in Studio; Studio's POSIX identities need uid >= 10000 and gid >= 1001."""

    name: PosixName = Field(
        description="POSIX user name, unique; with Studio letters, digits and hyphens only (it is also the Studio "
        "profile's name). Never a system account or group name (root, slurm, ubuntu, munge, docker, "
        "systemd-*, ...: config/facts/reserved-users.json, written by tools/reserved_users.py with each "
        "name's source)."
    )
    uid: int = Field(
        ge=10000,
        le=4000000,
        description="The user's uid on every node and in Studio, unique; never 65534 or the root squash identity.",
    )
    gid: int | None = Field(
        default=None,
        ge=1001,
        le=4000000,
        description="The user's primary gid; unset: the uid. Never 65534 or the root squash group.",
    )
    sudo: StrictBool = Field(False, description="Passwordless sudo on every node.")

    @property
    def group_id(self) -> int:
        return self.gid if self.gid is not None else self.uid


def user_errors(cfg: PlatformConfig) -> list[str]:
    errors: list[str] = []
    add = errors.append
    names: dict[str, int] = {}
    uids: dict[int, int] = {}
    for i, u in enumerate(cfg.users):
        if u.name in names:
            add(f"users[{i}].name: {u.name!r} is already used by users[{names[u.name]}]; user names must be unique")
        if u.uid in uids:
            add(f"users[{i}].uid: {u.uid} is already used by users[{uids[u.uid]}]; uids must be unique")
        names.setdefault(u.name, i)
        uids.setdefault(u.uid, i)
        if cfg.studio.enabled and not STUDIO_PROFILE_NAME.fullmatch(u.name):
            add(
                f"users[{i}].name: {u.name!r} cannot be a Studio user profile name; with studio.enabled use "
                "letters, digits and hyphens only"
            )
        if cfg.studio.enabled:
            add_shared_group_conflicts(add, i, u, cfg.studio.shared_gid)
    return errors


def add_shared_group_conflicts(add, i: int, u: User, shared_gid: int) -> None:
    """Every node makes the group SHARED_GROUP_NAME with studio.shared_gid and adds every user to it: a user of that
    name, or whose primary group is it, would make create_users.sh refuse the entry on every node, or hand the user's
    home (0750, group-readable) to every other user."""
    if u.name == SHARED_GROUP_NAME:
        add(
            f"users[{i}].name: {u.name!r} is the group every node makes for studio.shared_gid; a user's own group "
            f"of that name would take its place on the nodes; allowed: any other name"
        )
    if u.group_id == shared_gid:
        key, value = ("gid", u.gid) if u.gid is not None else ("uid", u.uid)
        add(
            f"users[{i}].{key}: {value} makes studio.shared_gid ({shared_gid}) the primary group of {u.name!r}, which "
            "every user is in on the nodes: their home and files would be every user's to read; allowed: a gid "
            f"other than {shared_gid} (set users[{i}].gid)"
        )


def identity_errors(cfg: PlatformConfig) -> list[str]:
    """A config user is an ordinary person: not a system account's name, and not the uid or gid root is squashed to
    on FSx (root in a Studio space acts as that id there, so a user with it would own what Studio root writes, and
    Studio root could write as them)."""
    errors: list[str] = []
    squash = cfg.storage.lustre.root_squash
    squash_uid, squash_gid = (int(v) for v in squash.squash_to.split(":"))
    for i, u in enumerate(cfg.users):
        why = reserved_user(u.name)
        if why:
            errors.append(
                f"users[{i}].name: {u.name!r} is a reserved system account or group name ({why}); "
                "allowed: any other POSIX name (the full list: config/facts/reserved-users.json)"
            )
        taken = {NOBODY_ID: "nobody/nogroup"}
        if squash.enabled:
            taken.setdefault(squash_uid, "storage.lustre.root_squash.squash_to (what root in Studio is on FSx)")
        if u.uid in taken:
            errors.append(
                f"users[{i}].uid: {u.uid} is {taken[u.uid]}; allowed: a uid from 10000 to 4000000 that "
                "is no system or squash identity"
            )
        gids = {NOBODY_ID: "nobody/nogroup"}
        if squash.enabled:
            gids.setdefault(squash_gid, "storage.lustre.root_squash.squash_to's group")
        if u.gid is not None and u.gid in gids:
            errors.append(
                f"users[{i}].gid: {u.gid} is {gids[u.gid]}; allowed: a gid from 1001 to 4000000 that is "
                "no system or squash identity"
            )
        elif u.gid is None and u.uid in gids and u.uid not in taken:  # the uid error above already names it
            errors.append(
                f"users[{i}].uid: {u.uid} is also the user's gid (users[{i}].gid is unset), and that gid "
                f"is {gids[u.uid]}; allowed: set users[{i}].gid to a gid from 1001 to 4000000 that is no "
                "system or squash identity, or choose another uid"
            )
    return errors
