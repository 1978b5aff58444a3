#!/usr/bin/env bats
# lib/user_paths.sh's checks on their own: parent_dir (dirname without a process) and root_dir_problem, which every
# root-run step that makes something for a user relies on (attacks.bats plays the attacks against the scripts).

load test_helper

setup() {
  T="$BATS_TEST_TMPDIR"
  # shellcheck source=/dev/null
  source "$SCRIPTS/lib/common.sh"
  # shellcheck source=/dev/null
  source "$SCRIPTS/lib/user_paths.sh"
}

@test "parent_dir gives what dirname gives" {
  local path
  for path in / // /// /a /a/ /a// /a/b /a//b /a/b/ /a/b//c/// //a //a/b a a/ a/b a//b/ ./a ../a/b /a/./b /a/b/..; do
    parent_dir "$path"
    [ "$PARENT" = "$(dirname "$path")" ] || {
      echo "parent_dir '$path': '$PARENT', dirname: '$(dirname "$path")'" >&2
      return 1
    }
  done
}

@test "root_dir_problem: nothing for a directory only root can change, whatever its spelling" {
  install -d -m 0755 "$T/a/b"
  root_dir_problem "$T/a/b"; [ -z "$PROBLEM" ]
  root_dir_problem "$T/a/b/"; [ -z "$PROBLEM" ]
  root_dir_problem "$T//a///b"; [ -z "$PROBLEM" ]
  root_dir_problem /; [ -z "$PROBLEM" ]
}

@test "root_dir_problem names the nearest directory that is not root's alone" {
  install -d -m 0755 "$T/a/b/c"
  chmod 0775 "$T/a/b"
  root_dir_problem "$T/a/b/c"; [ "$PROBLEM" = "$T/a/b is writable by group or others (mode 775)" ]
  chown 2001 "$T/a"
  root_dir_problem "$T/a/b/c"; [ "$PROBLEM" = "$T/a/b is writable by group or others (mode 775)" ]
  chmod 0755 "$T/a/b"
  root_dir_problem "$T/a/b/c"; [ "$PROBLEM" = "$T/a is owned by uid 2001, not root" ]
  root_dir_problem "$T/a/b/c/"; [ "$PROBLEM" = "$T/a is owned by uid 2001, not root" ]
}

@test "root_dir_problem: a sticky directory may be passed through, never be the directory itself" {
  install -d -m 0755 "$T/s/d"
  chmod 1777 "$T/s"
  root_dir_problem "$T/s/d"; [ -z "$PROBLEM" ]
  root_dir_problem "$T/s"; [ "$PROBLEM" = "$T/s is writable by group or others (mode 1777)" ]
  root_dir_problem "$T/s" sticky; [ -z "$PROBLEM" ]
  chmod 0777 "$T/s"
  root_dir_problem "$T/s/d"; [ "$PROBLEM" = "$T/s is writable by group or others (mode 777)" ]
}

@test "root_dir_problem: a link or a missing directory on the way, unless a nearer one has a problem first" {
  install -d -m 0755 "$T/real/d"
  ln -s "$T/real" "$T/link"
  root_dir_problem "$T/link/d"; [ "$PROBLEM" = "$T/link is not a directory (or is a symbolic link)" ]
  root_dir_problem "$T/link"; [ "$PROBLEM" = "$T/link is not a directory (or is a symbolic link)" ]
  root_dir_problem "$T/missing/d"; [ "$PROBLEM" = "$T/missing/d is not a directory (or is a symbolic link)" ]
  chmod 0757 "$T/real/d"
  root_dir_problem "$T/link/d"; [ "$PROBLEM" = "$T/link/d is writable by group or others (mode 757)" ]
  root_dir_problem relative/path; [ "$PROBLEM" = "relative/path is not an absolute path" ]
}

@test "as_user: the user's process inherits none of root's descriptors, and its output is marked as the user's" {
  # setpriv's stub: the test's uids are in no passwd of this machine (--init-groups becomes --clear-groups)
  mkdir -p "$T/bin" && ln -s "$BATS_TEST_DIRNAME/stubs/stub" "$T/bin/setpriv"
  export PATH="$T/bin:$PATH" STUB_LOG="$T/calls.log" LOCK_DIR="$T/locks" TMPDIR="$T/tmp"
  install -d -m 0700 "$T/locks" && install -d -m 0711 "$T/tmp"
  chmod 0711 "$BATS_RUN_TMPDIR" "$T"
  install -d -m 0777 "$T/out"
  exec 8>"$T/locks/root.lock"
  flock 8
  # fd 1 and 2 are root's log, fd 8 root's lock; the user lists where its own descriptors lead.
  as_user 2001 2101 sh -c "ls -l /proc/\$\$/fd >'$T/out/fds'; echo '2026-01-01T00:00:00Z [sync_users] applied parameters'" \
    >"$T/root.log" 2>&1
  exec 8>&-
  cat "$T/out/fds" "$T/root.log"
  ! grep -q -e "$T/locks/root.lock" -e "$T/root.log" "$T/out/fds"
  # What it has: /dev/null, root's capture file (sh keeps a copy of its stdout while redirected) and its own file.
  [ -z "$(grep -- ' -> ' "$T/out/fds" | grep -v -e ' -> /dev/null$' -e " -> $T/tmp/tmp\.[A-Za-z0-9]*$" \
    -e " -> $T/out/fds$")" ]
  # A line the user writes cannot pass for root's own.
  [ "$(cat "$T/root.log")" = "  [as uid 2001] 2026-01-01T00:00:00Z [sync_users] applied parameters" ]
}
