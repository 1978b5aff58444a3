"""slurm_root.missing reads the root as a process chrooted there sees it: Debian's alternatives are absolute links,
which the machine running the tests must not answer for (a clean machine has no Slurm of its own)."""

from __future__ import annotations

import secrets

import pytest
import slurm_root
from slurm_root import exists_in


@pytest.fixture
def root(tmp_path):
    """A root whose /usr/sbin/<name> is an alternatives link, as Debian's slurmctld is; <name> is new to this machine."""
    name = f"daemon-{secrets.token_hex(4)}"
    (tmp_path / "usr" / "sbin").mkdir(parents=True)
    (tmp_path / "etc" / "alternatives").mkdir(parents=True)
    (tmp_path / "sbin").symlink_to("usr/sbin")
    (tmp_path / "usr" / "sbin" / f"{name}-wlm").write_text("")
    (tmp_path / "etc" / "alternatives" / name).symlink_to(f"/usr/sbin/{name}-wlm")
    (tmp_path / "usr" / "sbin" / name).symlink_to(f"/etc/alternatives/{name}")
    return tmp_path, name


def test_an_absolute_link_is_followed_inside_the_root(root):
    path, name = root
    assert exists_in(path, f"usr/sbin/{name}") and exists_in(path, f"sbin/{name}")
    assert not (path / "usr" / "sbin" / name).exists()  # followed on this machine, the link dangles


def test_a_link_whose_target_the_root_lacks_is_missing(root):
    path, name = root
    (path / "usr" / "sbin" / f"{name}-wlm").unlink()
    (path / "usr" / "sbin" / "outside").symlink_to("/etc/hostname")  # this machine has it; the root does not
    assert not exists_in(path, f"usr/sbin/{name}") and not exists_in(path, "usr/sbin/outside")
    assert not exists_in(path, "/".join([".."] * 32) + "/etc/hostname")  # `..` stops at the root


def test_a_loop_is_missing(tmp_path):
    (tmp_path / "a").symlink_to("/b")
    (tmp_path / "b").symlink_to("a")
    assert not exists_in(tmp_path, "a")


def test_missing_names_only_what_the_root_lacks(root, monkeypatch):
    path, name = root
    monkeypatch.setattr(slurm_root, "SLURM_ROOT", path)
    monkeypatch.setattr(slurm_root, "DATABASE_ROOT", path / "opt" / "db")
    monkeypatch.setattr(slurm_root, "BUILT", path / ".slurm-root-built")
    slurm_root.BUILT.write_text("24.11.5\n")
    assert slurm_root.missing([name, "absent"]) == ["absent"]
