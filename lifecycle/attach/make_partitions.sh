#!/bin/bash
# Creates Studio partitions on an FSx for Lustre file system without an S3 link, as root on a node that mounts it
# (attach mode: the existing Slurm controller, reached by `make attach` through Session Manager; on EKS, the Job
# `make attach` runs). Self-contained: the existing controller ran none of this project's scripts.
#
#   make_partitions.sh MOUNT PARENT NAME:UID:GID:MODE...
#
# MOUNT   the file system's mount point on this node (e.g. /fsx); it must be a Lustre mount.
# PARENT  the partitions' parent below MOUNT (e.g. data/studio): created root-owned 0755 where missing; refused when
#         any component is a symlink, not a directory, or writable by anyone but root (a user who may write there
#         could swap a partition for a symlink between our check and our chown).
# NAME:UID:GID:MODE  one partition: MOUNT/PARENT/NAME, created with owner UID:GID and MODE (e.g. 0700, 2775).
#         uid 0 is the shared partition's owner (root, with the shared group and 2775).
#         An existing one is kept when it is a directory owned by UID (its mode is set again); a symlink, a file, or a
#         directory of another owner is refused and left as it is.
# Prints one line per partition (created | kept | refused); exit status 1 when anything was refused.
# Test seams: PROC_MOUNTS (default /proc/mounts).
set -euo pipefail
PROC_MOUNTS="${PROC_MOUNTS:-/proc/mounts}"

die() { echo "refused: $*" >&2; exit 1; }

[[ $# -ge 3 ]] || die "usage: $0 MOUNT PARENT NAME:UID:GID:MODE..."
mount_point="${1%/}"; parent="${2#/}"; parent="${parent%/}"; shift 2
[[ "$mount_point" == /* && "$mount_point" != *//* ]] || die "MOUNT $mount_point is not an absolute path"
for part in ${parent//\// }; do
  [[ "$part" =~ ^[A-Za-z0-9._-]+$ && "$part" != . && "$part" != .. ]] || die "PARENT component '$part' is not a plain name"
done
fstype="$(awk -v m="$mount_point" '$2 == m { t = $3 } END { print t }' "$PROC_MOUNTS")"
[[ "$fstype" == lustre ]] || die "$mount_point is not a Lustre mount here (type '${fstype:-none}' in $PROC_MOUNTS)"

# Root-owned, not group- or other-writable, not a symlink: nobody else can change what the path points at.
root_only_dir() {
  local path="$1" owner mode
  [[ ! -L "$path" ]] || die "$path is a symlink"
  [[ -d "$path" ]] || die "$path is not a directory"
  read -r owner mode < <(stat -c '%u %a' -- "$path")
  [[ "$owner" == 0 ]] || die "$path is owned by uid $owner, not root"
  (( (8#$mode & 8#022) == 0 )) || die "$path is writable by group or others (mode $mode)"
}

umask 022
current="$mount_point"
root_only_dir "$current"
for part in ${parent//\// }; do
  current="$current/$part"
  if [[ ! -e "$current" && ! -L "$current" ]]; then
    mkdir -m 0755 -- "$current"
  fi
  root_only_dir "$current"
done

refused=0
for entry in "$@"; do
  IFS=: read -r name uid gid mode extra <<<"$entry"
  if [[ -n "${extra:-}" || ! "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ || ! "$uid" =~ ^[0-9]+$ || ! "$gid" =~ ^[0-9]+$ \
        || ! "$mode" =~ ^[0-7]{3,4}$ ]]; then
    echo "refused $entry: not NAME:UID:GID:MODE with a plain name, numeric ids and an octal mode"
    refused=1; continue
  fi
  path="$current/$name"
  if [[ -L "$path" ]]; then
    echo "refused $name: $path is a symlink; left as it is"
    refused=1; continue
  fi
  if [[ -e "$path" ]]; then
    if [[ ! -d "$path" ]]; then
      echo "refused $name: $path exists and is not a directory; left as it is"
      refused=1; continue
    fi
    owner="$(stat -c %u -- "$path")"
    if [[ "$owner" != "$uid" ]]; then
      echo "refused $name: $path belongs to uid $owner, not $uid; left as it is (chown it yourself if the user's uid changed)"
      refused=1; continue
    fi
    chmod -- "$mode" "$path"  # a directory (checked above) in a root-only parent: nothing to follow
    echo "kept $name: $path uid $uid mode $mode"
    continue
  fi
  mkdir -m 0700 -- "$path"
  chown -- "$uid:$gid" "$path"
  chmod -- "$mode" "$path"
  echo "created $name: $path uid $uid gid $gid mode $mode"
done
exit "$refused"
