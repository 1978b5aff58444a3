"""A lint for the node rule (lifecycle/README.md): a root-run step never creates, opens, changes the owner or mode of,
or writes through a path a user can change.

The lifecycle scripts under lifecycle/hyperpod run as root. Any variable holding a path under the users' homes or on
FSx is tainted: it is assigned from `HOME_ROOT`, `home_root`, `CHECKPOINTS`, `fsx.mount_path` or `fsx.checkpoint_dir`,
or from another tainted variable. A line that runs a file-changing command (chown, chmod, install, mkdir, touch, ln,
cp, mv, rm, tee, truncate, flock, ssh-keygen, lib/common.sh's write_text) or a redirection on a tainted variable is a
violation, unless
- the line hands the work to the user (it starts with `as_user`), or sits in a function documented as running as the
  user (the comment above it says "runs as the user"), or
- it is in lib/user_paths.sh, whose helpers act only after checking, without following links, directories only root
  can change (each has its own tests in tests/lifecycle/attacks.bats), or
- the line says why it is safe: `# root-path-ok: <reason>`.
The Studio scripts run as the space's user and reach root through `as_root`: what follows `as_root` on a line may
not name the user's paths ($HOME, $STATE_DIR, $TOKEN_FILE, $work, $tmp, $wrapper).

Heuristic by design (no shell parser): it catches the patterns issue 21 found (root's `install -d -o`, `9>` lock, chown,
chmod and `>>` in ~/.ssh) and fails on a new one; test_the_lint_finds_the_patterns_it_exists_for shows that.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HYPERPOD = REPO / "lifecycle" / "hyperpod"
STUDIO = REPO / "lifecycle" / "studio"
EXEMPT_FILES = {"lib/user_paths.sh"}

SOURCES = re.compile(r"HOME_ROOT|\bhome_root\b|\bCHECKPOINTS\b|fsx\.mount_path|fsx\.checkpoint_dir")
SINKS = r"chown|chmod|chgrp|install|mkdir|touch|ln|cp|mv|rm|tee|truncate|flock|ssh-keygen|write_text"
COMMAND = re.compile(rf"(?:^|[;&|(]|\bthen\b|\bdo\b|\belse\b|\$\()\s*(?:{SINKS})\b(?![.\w-])")
ASSIGNMENT = re.compile(r"(?:^|\s|;)([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S*)")
STUDIO_USER_PATHS = re.compile(r"\$\{?(HOME|STATE_DIR|TOKEN_FILE|work|tmp|wrapper)\b")


def refs(text: str, names: set[str]) -> bool:
    return any(re.search(rf"\$\{{?{re.escape(n)}\b", text) for n in names)


def tainted_names(lines: list[str]) -> set[str]:
    names: set[str] = set()
    while True:
        before = len(names)
        for line in lines:
            for name, value in ASSIGNMENT.findall(line.split(" #", 1)[0]):
                if SOURCES.search(value) or refs(value, names):
                    names.add(name)
        if len(names) == before:
            return names


def exempt_lines(lines: list[str]) -> set[int]:
    """Line numbers inside functions whose comment says they run as the user."""
    out, inside, comment = set(), False, ""
    for i, line in enumerate(lines):
        if inside:
            out.add(i)
            inside = line != "}"
        elif re.match(r"[A-Za-z_][A-Za-z0-9_]*\(\) \{", line):
            inside = "runs as the user" in comment
            if inside:
                out.add(i)
            comment = ""
        elif line.startswith("#"):
            comment += line
        else:
            comment = ""
    return out


def violations(text: str) -> list[str]:
    lines = text.splitlines()
    names = tainted_names(lines)
    skip = exempt_lines(lines)
    found = []
    for i, line in enumerate(lines):
        code = line.split(" # ", 1)[0] if not line.lstrip().startswith("#") else ""
        code = re.split(r"\b(?:die|log)\b", code)[0]  # what a message names is not acted on
        if i in skip or not code.strip() or "# root-path-ok:" in line or code.lstrip().startswith("as_user "):
            continue
        if not (refs(code, names) or SOURCES.search(code)):
            continue
        command = COMMAND.search(code)
        redirect = re.search(r"(?<![<>&])\d*(?:>>?|<)\s*\"?\$\{?(\w+)", code)
        if (command and (refs(code[command.start() :], names) or SOURCES.search(code[command.start() :]))) or (
            redirect and redirect.group(1) in names
        ):
            found.append(f"{i + 1}: {line.strip()}")
    return found


def studio_violations(text: str) -> list[str]:
    found = []
    for i, line in enumerate(text.splitlines()):
        if line.lstrip().startswith("#") or "as_root " not in line:
            continue
        after = re.split(r"[|<]", line.split("as_root ", 1)[1], maxsplit=1)[0]
        if STUDIO_USER_PATHS.search(after):
            found.append(f"{i + 1}: {line.strip()}")
    return found


ROOT_SCRIPTS = sorted(
    p
    for p in [*HYPERPOD.glob("*.sh"), *HYPERPOD.glob("lib/*.sh"), *HYPERPOD.glob("collectors/*.sh")]
    if str(p.relative_to(HYPERPOD)) not in EXEMPT_FILES
)


@pytest.mark.parametrize("script", ROOT_SCRIPTS, ids=[str(p.relative_to(HYPERPOD)) for p in ROOT_SCRIPTS])
def test_root_run_scripts_act_on_no_user_path(script: Path):
    assert violations(script.read_text()) == []


@pytest.mark.parametrize("script", sorted(STUDIO.glob("*.sh")), ids=lambda p: p.name)
def test_studio_scripts_give_root_no_user_path(script: Path):
    assert studio_violations(script.read_text()) == []


# setup_ssh_keys.sh and mount_fsx.sh as they were before issue 21 (this project's own code, abridged).
OLD_SSH_KEYS = """
HOME_ROOT="$(home_root)"
ensure_keys() {
  local name=$1 uid=$2 gid=$3 dir key
  dir="$HOME_ROOT/$name/.ssh"
  key="$dir/id_ed25519_cluster"
  install -d -m 0700 -o "$uid" -g "$gid" "$dir"
  (
    flock -w 120 9 || die "timed out waiting for the lock on $dir"
    touch "$dir/authorized_keys"
    grep -qxF "$(cat "$key.pub")" "$dir/authorized_keys" || cat "$key.pub" >>"$dir/authorized_keys"
    chown "$uid:$gid" "$key" "$key.pub" "$dir/authorized_keys"
    chmod 0600 "$key" "$dir/authorized_keys"
  ) 9>"$dir/.hyperpod-keys.lock"
  chown "$uid:$gid" "$dir/.hyperpod-keys.lock"
}
"""
OLD_CHECKPOINTS = """
checkpoint_dir() {
  local dir
  dir="$(param fsx.checkpoint_dir)"
  mkdir -p "$1$dir"
  chmod 1777 "$1$dir"
}
"""


def test_the_lint_finds_the_patterns_it_exists_for():
    found = violations(OLD_SSH_KEYS)
    assert [v.split(":")[0] for v in found] == ["7", "10", "11", "12", "13", "14", "15"], found
    assert [v.split(":")[0] for v in violations(OLD_CHECKPOINTS)] == ["5", "6"]
    # The same work handed to the user, or acknowledged with a reason, passes.
    assert violations(
        OLD_SSH_KEYS.replace(
            '  install -d -m 0700 -o "$uid" -g "$gid" "$dir"', '  as_user "$uid" "$gid" install -d -m 0700 "$dir"'
        )
    )[0].startswith("10:")
    assert violations('p="$(param fsx.mount_path)"\nmkdir -p "$p"  # root-path-ok: the mount point\n') == []
    assert violations('p="$HOME_ROOT/x"\nwrite_text "$p" <<EOF\n') != []
    assert studio_violations('as_root install -m 0755 "$work/wrapper" "$dest"\n') != []
    assert studio_violations('root_put "$dest" 0755 <"$work/wrapper"\nas_root cat "$dest" | cmp -s "$src" -\n') == []
