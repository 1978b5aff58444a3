#!/usr/bin/env python3
"""Directories root makes for users without ever following a path a user can change (enroot_dirs.sh).

Every path is walked from / one component at a time with O_NOFOLLOW | O_DIRECTORY, relative to the directory already
opened, and every change (mkdir, chown, chmod, rename) is made through those descriptors: a symlink anywhere is refused
rather than followed, and nothing can be swapped between a check and its use.

    safe_dirs.py root-dir PATH MODE [PATH MODE]...   each PATH made (or kept) as root's directory with MODE, in order;
                                                      the first refused stops it
    safe_dirs.py user-dirs PARENT UID:GID...          PARENT/user-<uid> for each, owner uid:gid, mode 0700
    safe_dirs.py roots UID:GID... -- PATH MODE per-user|shared [PATH MODE per-user|shared]...
        each PATH as root-dir makes it, then, when per-user, its user-dirs; a PATH refused is reported on a line
        "ERROR: refused: ..." and the next one is made all the same (exit 3 at the end). What it made or moved aside is
        printed, what it kept is not: every line is one for the log (enroot_dirs.sh, one start for every root).

A directory every component of whose path is owned by root and writable by nobody else, except a sticky directory such
as /tmp, is trusted. What is not trusted is never used: an entry someone else made where root's directory or a user's
directory goes (a link, a file, a directory of another owner) is renamed aside to <name>.untrusted-<time> within its
parent, never followed or emptied, and a new directory is made. An untrusted component higher up stops with an error
(exit 3), so the caller can pick another place. Standard library only.
"""

import os
import stat
import sys
import time

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Root on a node; the tests' own uid when they run unprivileged.
ROOT = os.geteuid()


class Untrusted(Exception):
    pass


def trusted(st, *, final=False):
    """Root's, and no one else can add or replace entries (sticky directories only in the middle of a path)."""
    if st.st_uid not in (0, ROOT):
        return False
    writable_by_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return not writable_by_others or (not final and st.st_mode & stat.S_ISVTX)


def open_trusted(path):
    """A descriptor of PATH's directory, every component checked; Untrusted names the first that fails."""
    if not os.path.isabs(path):
        raise Untrusted(f"{path}: not an absolute path")
    fd = os.open("/", DIR_FLAGS)
    walked = ""
    try:
        for name in [p for p in path.split("/") if p]:
            walked += "/" + name
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                raise Untrusted(f"{walked}: {e.strerror} (a link, not a directory, or missing)") from e
            os.close(fd)
            fd = child
            if not trusted(os.fstat(fd)):
                raise Untrusted(f"{walked}: owned by uid {os.fstat(fd).st_uid} or writable by others")
        return fd
    except BaseException:
        os.close(fd)
        raise


def move_aside(parent_fd, name, parent_path, why):
    aside = f"{name}.untrusted-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    os.rename(name, aside, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    print(f"moved {parent_path}/{name} aside to {aside}: {why}; it was not used or followed")


def open_or_make(parent_fd, name, parent_path, mode, owner, group, accept):
    """PARENT/NAME as a directory of owner:group with MODE; an entry `accept` refuses is moved aside first."""
    for _ in range(2):
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
            made = True
        except FileExistsError:
            made = False
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
        except OSError as e:  # a link (ELOOP) or a file (ENOTDIR)
            move_aside(parent_fd, name, parent_path, f"not a directory ({e.strerror})")
            continue
        st = os.fstat(fd)
        if made or st.st_uid == owner or (st.st_uid == ROOT and accept(st)):
            if (st.st_uid, st.st_gid) != (owner, group):
                os.fchown(fd, owner, group)
            if stat.S_IMODE(st.st_mode) != mode:
                os.fchmod(fd, mode)
            return fd, made
        os.close(fd)
        move_aside(parent_fd, name, parent_path, f"owned by uid {st.st_uid}, not {owner}")
    raise Untrusted(f"{parent_path}/{name}: could not make a directory there")


def root_dir(path, mode, *, quiet_kept=False):
    """PATH made as root's directory with MODE; the path above it must already be trusted."""
    parent, name = os.path.split(os.path.normpath(path))
    if not name:
        raise Untrusted(f"{path}: not a directory below /")
    missing = []
    while True:
        try:
            parent_fd = open_trusted(parent)
            break
        except Untrusted:
            if os.path.lexists(parent) or parent == "/":
                raise
            missing.append(os.path.basename(parent))  # made below, from the nearest existing ancestor
            parent = os.path.dirname(parent)
    try:
        for part in reversed(missing):
            fd, _ = open_or_make(parent_fd, part, parent, 0o755, ROOT, os.getegid(), lambda st: True)
            os.close(parent_fd)
            parent_fd, parent = fd, os.path.join(parent, part)
        fd, made = open_or_make(parent_fd, name, parent, mode, ROOT, os.getegid(), lambda st: True)
        os.close(fd)
        if made or not quiet_kept:
            print(f"{'made' if made else 'kept'} {path} (root, {mode:o})")
    finally:
        os.close(parent_fd)


def user_dirs(parent, ids):
    parent_fd = open_trusted(parent)
    try:
        if not trusted(os.fstat(parent_fd), final=True):
            raise Untrusted(f"{parent}: others may write to it")
        for uid, gid in ids:
            fd, made = open_or_make(
                parent_fd, f"user-{uid}", parent, 0o700, uid, gid, lambda st: False
            )  # a root-owned leftover is replaced, not handed over
            os.close(fd)
            if made:
                print(f"made {parent}/user-{uid} ({uid}:{gid}, 700)")
    finally:
        os.close(parent_fd)


def user_ids(items):
    ids = []
    for item in items:
        uid, _, gid = item.partition(":")
        if not (uid.isdigit() and gid.isdigit()) or int(uid) == 0:
            raise Untrusted(f"{item}: expected UID:GID of a user other than root")
        ids.append((int(uid), int(gid)))
    return ids


def roots(ids, specs):
    """Every root of specs (PATH MODE KIND triples) as root_dir and user_dirs make them; True when none was refused."""
    ok = True
    for path, mode, kind in zip(specs[::3], specs[1::3], specs[2::3]):
        try:
            root_dir(path, int(mode, 8), quiet_kept=True)
            if kind == "per-user" and ids:
                user_dirs(path, ids)
        except Untrusted as e:
            print(f"ERROR: refused: {e}")
            ok = False
        except OSError as e:  # what a run of its own for this root would have died of: the next root all the same
            print(f"ERROR: {path}: {e}")
            ok = False
    return ok


USAGE = (
    "usage: safe_dirs.py root-dir PATH MODE... | user-dirs PARENT UID:GID... | roots UID:GID... -- PATH MODE KIND..."
)


def main(argv):
    if len(argv) >= 4 and argv[1] == "root-dir" and len(argv) % 2 == 0:
        for path, mode in zip(argv[2::2], argv[3::2]):
            root_dir(path, int(mode, 8))
    elif len(argv) >= 3 and argv[1] == "user-dirs":
        user_dirs(argv[2], user_ids(argv[3:]))
    elif len(argv) >= 3 and argv[1] == "roots" and "--" in argv:
        sep = argv.index("--")
        specs = argv[sep + 1 :]
        if len(specs) % 3 or any(kind not in ("per-user", "shared") for kind in specs[2::3]):
            raise Untrusted(USAGE)
        if not roots(user_ids(argv[2:sep]), specs):
            sys.exit(3)
    else:
        raise Untrusted(USAGE)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Untrusted as e:
        print(f"refused: {e}", file=sys.stderr)
        sys.exit(3)
