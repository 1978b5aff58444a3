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
  [ -z "$(root_dir_problem "$T/a/b")" ]
  [ -z "$(root_dir_problem "$T/a/b/")" ]
  [ -z "$(root_dir_problem "$T//a///b")" ]
  [ -z "$(root_dir_problem /)" ]
}

@test "root_dir_problem names the nearest directory that is not root's alone" {
  install -d -m 0755 "$T/a/b/c"
  chmod 0775 "$T/a/b"
  [ "$(root_dir_problem "$T/a/b/c")" = "$T/a/b is writable by group or others (mode 775)" ]
  chown 2001 "$T/a"
  [ "$(root_dir_problem "$T/a/b/c")" = "$T/a/b is writable by group or others (mode 775)" ]
  chmod 0755 "$T/a/b"
  [ "$(root_dir_problem "$T/a/b/c")" = "$T/a is owned by uid 2001, not root" ]
  [ "$(root_dir_problem "$T/a/b/c/")" = "$T/a is owned by uid 2001, not root" ]
}

@test "root_dir_problem: a sticky directory may be passed through, never be the directory itself" {
  install -d -m 0755 "$T/s/d"
  chmod 1777 "$T/s"
  [ -z "$(root_dir_problem "$T/s/d")" ]
  [ "$(root_dir_problem "$T/s")" = "$T/s is writable by group or others (mode 1777)" ]
  [ -z "$(root_dir_problem "$T/s" sticky)" ]
  chmod 0777 "$T/s"
  [ "$(root_dir_problem "$T/s/d")" = "$T/s is writable by group or others (mode 777)" ]
}

@test "root_dir_problem: a link or a missing directory on the way, unless a nearer one has a problem first" {
  install -d -m 0755 "$T/real/d"
  ln -s "$T/real" "$T/link"
  [ "$(root_dir_problem "$T/link/d")" = "$T/link is not a directory (or is a symbolic link)" ]
  [ "$(root_dir_problem "$T/link")" = "$T/link is not a directory (or is a symbolic link)" ]
  [ "$(root_dir_problem "$T/missing/d")" = "$T/missing/d is not a directory (or is a symbolic link)" ]
  chmod 0757 "$T/real/d"
  [ "$(root_dir_problem "$T/link/d")" = "$T/link/d is writable by group or others (mode 757)" ]
  [ "$(root_dir_problem relative/path)" = "relative/path is not an absolute path" ]
}
