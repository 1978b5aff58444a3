#!/usr/bin/env bats
# lifecycle/studio/fsx_paths.sh (the cluster's path of a space's FSx partition, linked to Studio's mount) and
# lifecycle/studio/studio_workdir.sh (sbatch's working directory as the cluster sees it). Mounts are described by a
# mountinfo file; the real Slurm run of both is tests/e2e/test_studio_slurm_login.py.

bats_require_minimum_version 1.5.0

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
FS=fs-0123456789abcdef0

setup() {
  T="$BATS_TEST_TMPDIR"
  export FSX_FILE_SYSTEM_ID=$FS FSX_CLUSTER_MOUNT_PATH="$T/fsx" FSX_PARTITION_PARENT=/data/studio FSX_SHARED_MODE=False
  export STUDIO_FSX_ROOT="$T/mnt/custom-file-systems/fsx_lustre" STUDIO_MOUNTINFO="$T/mountinfo"
  export STUDIO_RESOURCE_METADATA="$T/resource-metadata.json" FSX_PATHS_FILE="$T/etc/hyperpod-fsx-paths"
  MOUNT="$STUDIO_FSX_ROOT/$FS"
  mkdir -p "$MOUNT" "$T/etc"
  : >"$STUDIO_MOUNTINFO"
  echo '{"DomainId": "d-abc", "UserProfileName": "alice", "SpaceName": "alice-space"}' >"$STUDIO_RESOURCE_METADATA"
}

# mounted SOURCE [FSTYPE] : Studio's mount of the file system, as /proc/self/mountinfo shows it.
mounted() {
  echo "1234 1000 0:77 / $MOUNT rw,relatime shared:500 - ${2:-lustre} $1 rw,flock,lazystatfs" >>"$STUDIO_MOUNTINFO"
}

link() {
  bash -c 'log() { echo "$*"; }; CHANGED=(); source "$1"; link_fsx_paths; rc=$?; echo "changed: ${CHANGED[*]}"
    exit $rc' _ "$REPO_ROOT/lifecycle/studio/fsx_paths.sh"
}

@test "per-user mode: the cluster's path of the partition named by Lustre's mount source links to Studio's mount" {
  mounted 10.1.53.46@tcp:/ylacfb4v/data/studio/alice
  run link
  [ "$status" -eq 0 ]
  [ "$(readlink "$T/fsx/data/studio/alice")" = "$MOUNT" ]
  [ "$(cat "$FSX_PATHS_FILE")" = "$MOUNT $T/fsx/data/studio/alice" ]
  [[ "$output" == *"changed: FSx path $T/fsx/data/studio/alice"* ]]
  # A file written through Studio's mount is at the cluster's path.
  echo data >"$MOUNT/train.py"
  [ "$(cat "$T/fsx/data/studio/alice/train.py")" = data ]
  [ "$(stat -c %a "$T/fsx/data/studio")" = 755 ]
}

@test "the mount source wins over the layout: another profile's name in the metadata changes nothing" {
  mounted 10.1.53.46@tcp:/ylacfb4v/data/studio/shared
  echo '{"UserProfileName": "bob"}' >"$STUDIO_RESOURCE_METADATA"
  run link
  [ "$status" -eq 0 ]
  [ "$(readlink "$T/fsx/data/studio/shared")" = "$MOUNT" ]
  [ ! -e "$T/fsx/data/studio/bob" ]
}

@test "without a Lustre source the platform's layout names the partition: the profile's, or shared" {
  mounted /dev/nvme1n1 ext4
  run link
  [ "$status" -eq 0 ]
  [ "$(readlink "$T/fsx/data/studio/alice")" = "$MOUNT" ]
  rm -rf "$T/fsx" "$FSX_PATHS_FILE"
  FSX_SHARED_MODE=True run link
  [ "$status" -eq 0 ]
  [ "$(readlink "$T/fsx/data/studio/shared")" = "$MOUNT" ]
}

@test "a second run changes nothing" {
  mounted 10.1.53.46@tcp:/ylacfb4v/data/studio/alice
  run link
  before="$(stat -c %i:%Y "$T/fsx/data/studio/alice" "$FSX_PATHS_FILE")"
  run link
  [ "$status" -eq 0 ]
  [[ "$output" == *"changed: "$'\n'* || "$output" == *"changed: " ]]
  [ "$(stat -c %i:%Y "$T/fsx/data/studio/alice" "$FSX_PATHS_FILE")" = "$before" ]
}

@test "a space without the file system mounted links nothing and forgets an old record" {
  echo "$MOUNT $T/fsx/data/studio/alice" >"$FSX_PATHS_FILE"
  run link
  [ "$status" -eq 0 ]
  [[ "$output" == *"mounts no FSx at $MOUNT"* ]]
  [ ! -e "$T/fsx" ]
  [ ! -s "$FSX_PATHS_FILE" ]
}

@test "a stale link is repointed; a real directory at the path is left alone" {
  mounted 10.1.53.46@tcp:/ylacfb4v/data/studio/alice
  mkdir -p "$T/fsx/data/studio" "$T/elsewhere"
  ln -s "$T/elsewhere" "$T/fsx/data/studio/alice"
  run link
  [ "$status" -eq 0 ]
  [ "$(readlink "$T/fsx/data/studio/alice")" = "$MOUNT" ]
  rm "$T/fsx/data/studio/alice"
  mkdir "$T/fsx/data/studio/alice"
  echo mine >"$T/fsx/data/studio/alice/keep"
  rm -f "$FSX_PATHS_FILE"
  run link
  [ "$status" -ne 0 ]
  [[ "$output" == *"$T/fsx/data/studio/alice exists and is not a link"* ]]
  [ "$(cat "$T/fsx/data/studio/alice/keep")" = mine ]
  [ ! -L "$T/fsx/data/studio/alice" ]
  [ ! -e "$FSX_PATHS_FILE" ]
}

@test "a link planted above the path is not followed" {
  mounted 10.1.53.46@tcp:/ylacfb4v/data/studio/alice
  mkdir -p "$T/fsx" "$T/victim"
  ln -s "$T/victim" "$T/fsx/data"
  run link
  [ "$status" -ne 0 ]
  [[ "$output" == *"$T/fsx/data is not a directory"* ]]
  [ -z "$(ls -A "$T/victim")" ]
}

@test "a partition path with '..' or odd characters is refused" {
  mounted '10.1.53.46@tcp:/ylacfb4v/data/../etc'
  run link
  [ "$status" -ne 0 ]
  [[ "$output" == *"is not a plain absolute path"* ]]
  [ ! -e "$T/etc/hyperpod-fsx-paths" ]
  [ ! -e "$T/fsx" ]
}

# ---------------------------------------------------------------------------------------------- studio_workdir.sh
fake_sbatch() {
  mkdir -p "$T/bin"
  printf '%s\n' '#!/bin/bash' 'echo "cwd=$(pwd -P) args=$*"' >"$T/bin/sbatch"
  chmod +x "$T/bin/sbatch"
  echo "$MOUNT $T/fsx/data/studio/alice" >"$FSX_PATHS_FILE"
}

workdir() { bash "$REPO_ROOT/lifecycle/studio/studio_workdir.sh" "$FSX_PATHS_FILE" "$T/bin/sbatch" "$@"; }

@test "sbatch from a directory under Studio's mount runs at the cluster's path of that directory" {
  fake_sbatch
  mkdir -p "$MOUNT/project/run1"
  cd "$MOUNT/project/run1"
  run workdir --wrap hostname
  [ "$status" -eq 0 ]
  dir="$T/fsx/data/studio/alice/project/run1"
  [ "$output" = "cwd=$MOUNT/project/run1 args=--chdir=$dir --wrap hostname" ]
  cd "$MOUNT"
  run workdir job.sbatch
  dir="$T/fsx/data/studio/alice"
  [ "$output" = "cwd=$MOUNT args=--chdir=$dir job.sbatch" ]
}

@test "sbatch keeps a working directory the user chose, on the command line or in the script" {
  fake_sbatch
  mkdir -p "$MOUNT/project"
  cd "$MOUNT/project"
  run workdir -D /fsx/elsewhere --wrap true
  [[ "$output" == *"args=-D /fsx/elsewhere --wrap true" ]]
  run workdir --chdir=/fsx/elsewhere --wrap true
  [[ "$output" == *"args=--chdir=/fsx/elsewhere --wrap true" ]]
  printf '%s\n' '#!/bin/bash' '#SBATCH --chdir=/fsx/data/studio/alice/other' 'hostname' >job.sbatch
  run workdir job.sbatch
  [[ "$output" == *"args=job.sbatch" ]]
}

@test "sbatch from outside the FSx mount is unchanged, with a note; a longer mount name is not a prefix match" {
  fake_sbatch
  mkdir -p "$T/home" "$MOUNT"0/data
  cd "$T/home"
  run --separate-stderr workdir --wrap true
  [ "$output" = "cwd=$T/home args=--wrap true" ]
  [[ "$stderr" == *"$T/home is not on the cluster's FSx"*"submit from under $T/fsx/data/studio/alice"* ]]
  cd "$MOUNT"0/data
  run --separate-stderr workdir --wrap true
  [ "$output" = "cwd=$MOUNT""0/data args=--wrap true" ]
}

@test "without a paths file sbatch runs as it is, silently" {
  fake_sbatch
  rm "$FSX_PATHS_FILE"
  cd "$MOUNT"
  run --separate-stderr workdir --wrap true
  [ "$output" = "cwd=$MOUNT args=--wrap true" ]
  [ -z "$stderr" ]
}
