#!/usr/bin/env bats
# lifecycle/attach/make_partitions.sh: the partition step of `make attach` on a file system without an S3 link, run
# as root on a node that mounts it (the existing Slurm controller, or the EKS partition Job). A temporary directory
# stands in for the Lustre mount (PROC_MOUNTS lists it as lustre); the attacks are planted as a real unprivileged uid
# (setpriv) and root must not follow them.

SCRIPT="$BATS_TEST_DIRNAME/../../lifecycle/attach/make_partitions.sh"

setup() {
  FSX="$(mktemp -d /tmp/fsx-XXXXXX)"
  chmod 0755 "$FSX"
  MOUNTS="$(mktemp /tmp/mounts-XXXXXX)"
  echo "10.0.0.5@tcp:/abcdefgh $FSX lustre rw,relatime 0 0" >"$MOUNTS"
  export PROC_MOUNTS="$MOUNTS"
  VICTIM="$(mktemp -d /tmp/victim-XXXXXX)"
  printf 'root:x:0:0\n' >"$VICTIM/passwd"
  chmod 0644 "$VICTIM/passwd"
}

teardown() {
  rm -rf "$FSX" "$MOUNTS" "$VICTIM"
}

as_nobody() { /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
owner_mode() { stat -c '%u:%g %a' "$1"; }

@test "creates each partition with its owner and mode under a root-only parent, and keeps it on a second run" {
  run "$SCRIPT" "$FSX" data/studio alice:10001:10001:0700 shared:0:2000:2775
  [ "$status" -eq 0 ]
  [[ "$output" == *"created alice: $FSX/data/studio/alice uid 10001 gid 10001 mode 0700"* ]]
  [ "$(owner_mode "$FSX/data/studio/alice")" = "10001:10001 700" ]
  [ "$(owner_mode "$FSX/data/studio/shared")" = "0:2000 2775" ]
  [ "$(owner_mode "$FSX/data/studio")" = "0:0 755" ]
  [ "$(owner_mode "$FSX/data")" = "0:0 755" ]
  run "$SCRIPT" "$FSX" data/studio alice:10001:10001:0700 bob:10002:10002:0700
  [ "$status" -eq 0 ]
  [[ "$output" == *"kept alice"* && "$output" == *"created bob"* ]]
}

@test "a symlink planted at a partition's path is refused and its target left alone" {
  mkdir -p "$FSX/data/studio"
  ln -s "$VICTIM" "$FSX/data/studio/alice"
  run "$SCRIPT" "$FSX" data/studio alice:10001:10001:0700
  [ "$status" -eq 1 ]
  [[ "$output" == *"refused alice: $FSX/data/studio/alice is a symlink"* ]]
  [ "$(owner_mode "$VICTIM")" = "0:0 700" ]
  [ "$(owner_mode "$VICTIM/passwd")" = "0:0 644" ]
}

@test "a parent a user can write is refused before anything is created: the user could swap in a symlink" {
  mkdir -p "$FSX/data/studio"
  chmod 1777 "$FSX/data/studio"
  as_nobody ln -s "$VICTIM" "$FSX/data/studio/bob"
  run "$SCRIPT" "$FSX" data/studio alice:10001:10001:0700 bob:10002:10002:0700
  [ "$status" -eq 1 ]
  [[ "$output" == *"$FSX/data/studio is writable by group or others (mode 1777)"* ]]
  [ ! -e "$FSX/data/studio/alice" ]
  [ "$(owner_mode "$VICTIM")" = "0:0 700" ]
}

@test "a parent component that is a user's symlink is refused" {
  mkdir -p "$FSX/data"
  chmod 1777 "$FSX/data"
  as_nobody ln -s "$VICTIM" "$FSX/data/studio"
  chmod 0755 "$FSX/data"
  run "$SCRIPT" "$FSX" data/studio alice:10001:10001:0700
  [ "$status" -eq 1 ]
  [[ "$output" == *"$FSX/data/studio is a symlink"* ]]
  [ ! -e "$VICTIM/alice" ]
}

@test "a directory of another uid is left as it is (a profile re-created with a new uid)" {
  mkdir -p "$FSX/data/studio/alice"
  chown 10009:10009 "$FSX/data/studio/alice"
  run "$SCRIPT" "$FSX" data/studio alice:10001:10001:0700
  [ "$status" -eq 1 ]
  [[ "$output" == *"refused alice: $FSX/data/studio/alice belongs to uid 10009, not 10001"* ]]
  [ "$(owner_mode "$FSX/data/studio/alice")" = "10009:10009 755" ]
}

@test "a mount point that is not Lustre here is refused, nothing created" {
  echo "tmpfs $FSX tmpfs rw 0 0" >"$MOUNTS"
  run "$SCRIPT" "$FSX" data/studio alice:10001:10001:0700
  [ "$status" -eq 1 ]
  [[ "$output" == *"is not a Lustre mount here (type 'tmpfs'"* ]]
  [ ! -e "$FSX/data" ]
}

@test "names and parents with path tricks are refused" {
  run "$SCRIPT" "$FSX" data/../etc alice:10001:10001:0700
  [ "$status" -eq 1 ]
  [[ "$output" == *"PARENT component '..' is not a plain name"* ]]
  run "$SCRIPT" "$FSX" data/studio ../alice:10001:10001:0700
  [ "$status" -eq 1 ]
  [[ "$output" == *"refused ../alice:10001:10001:0700"* ]]
}
