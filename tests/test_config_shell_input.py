"""Config values that reach a shell on the nodes: paths, the partition root, the Docker version and artifact URIs
are refused when they hold shell characters (issue 21)."""

from __future__ import annotations


import pytest

from platform_config import parse_config
from support.configs import errors_of, with_


# ---------------------------------------------------------------------------------------------- issue 21: what a user
# controls must not reach a shell, a system account or another user's data
PATH_MESSAGE = (
    "must be an absolute path such as /fsx: '/' and components of letters, digits, '.', '_' and '-' (no "
    "spaces, quotes, '$', ';', '`', '*' or other shell characters; no '.' or '..' component)"
)
# Every config path that reaches a shell on a node (mount_fsx.sh, create_users.sh: homes live under the mount path)
# or names a directory of FSx (checkpoints, Studio's partitions under the linked path).
SHELL_PATH_KEYS = (
    "storage.lustre.mount_path",
    "storage.checkpoint_dir",
    "storage.lustre.data_repository.file_system_path",
)
HOSTILE_PATHS = (
    "/fsx;id",
    "/fsx$(x)",
    "/fsx`id`",
    "/fsx dir",
    "/fsx'x",
    '/fsx"x',
    "/fsx\nid",
    "/fsx&&id",
    "/fsx|id",
    "/fsx/*",
    "/fsx/../etc",
    "/fsx/./x",
    "//fsx",
    "fsx",
    "/fsx>x",
    "/fsx\\x",
    "/fsx~root",
)


@pytest.mark.parametrize("key", SHELL_PATH_KEYS)
@pytest.mark.parametrize("value", HOSTILE_PATHS)
def test_paths_with_shell_characters_are_refused(key, value):
    assert errors_of(with_(key, value)) == [f"{key}: {value!r} — {PATH_MESSAGE}"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("storage.lustre.mount_path", "/fsx-2/lustre_a.b"),
        ("storage.lustre.data_repository.file_system_path", "/"),
        ("storage.lustre.data_repository.file_system_path", "/datasets/"),
    ],
)
def test_ordinary_paths_still_pass(key, value):
    parse_config(with_(key, value))


@pytest.mark.parametrize("value", ["..", ".", "a/b", "st udio", "x;y"])
def test_partition_root_is_one_plain_directory_name(value):
    assert errors_of(with_("studio.partition_root", value)) == [
        f"studio.partition_root: {value!r} — must be a single directory name such as studio (letters, digits, '.', "
        "'_', '-'; not '.' or '..')"
    ]


@pytest.mark.parametrize("version", ["24.0.7; curl x|sh", "$(id)", "24.0.7 other-package", "`id`", "latest"])
def test_docker_version_reaching_apt_get_is_a_debian_version(version):
    data = with_("cluster.container_runtime", {"enabled": True, "docker_apt_version": version})
    assert errors_of(data)[0] == (
        f"cluster.container_runtime.docker_apt_version: {version!r} — must be empty or a "
        "Debian package version such as 24.0.7-0ubuntu2~22.04.1"
    )


@pytest.mark.parametrize(
    "uri",
    [
        "s3://bkt/$(id)/enroot_3.5.0-1_amd64.deb",
        "s3://bkt/x;y/enroot_3.5.0-1_amd64.deb",
        "s3://bkt/enroot_3.5.0`id`_amd64.deb",
        "s3://bkt/a b/enroot_3.5.0-1_amd64.deb",
        "s3://bkt/'/enroot_3.5.0-1_amd64.deb",
    ],
)
def test_artifact_uris_reaching_the_nodes_hold_no_shell_characters(uri):
    data = with_(
        "cluster.container_runtime",
        {
            "enabled": True,
            "docker_apt_version": "24.0.7",
            "artifacts": [{"name": "enroot", "s3_uri": uri, "sha256": "a" * 64}],
        },
    )
    assert errors_of(data) == [
        f"cluster.container_runtime.artifacts[0].s3_uri: {uri!r} — must be an s3:// URI of a "
        "Debian package named package_version_arch.deb (key of letters, digits and . _ + ~ - /)"
    ]
