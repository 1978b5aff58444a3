#!/bin/bash
# One path everywhere: a file a Studio user sees at path P is at P on every Slurm node and in every pod of their team.
# Sourced by slurm_login_node.sh and eks_login_node.sh; `link_fsx_paths` is what they call.
#
# The cluster mounts the whole file system at FSX_CLUSTER_MOUNT_PATH (storage.lustre.mount_path, e.g. /fsx), so the
# partition <dra path>/studio/alice is /fsx/data/studio/alice on the nodes, and EKS pods mount it at that same path.
# Studio mounts only the partition, at STUDIO_FSX_ROOT/<file system id> (/mnt/custom-file-systems/fsx_lustre/fs-...,
# source <address>@tcp:/<mount name><partition>). The cluster cannot offer Studio's path (it is one path for every
# user, with a different partition behind it per user) and a Studio space cannot mount (no CAP_SYS_ADMIN), so the
# space gets the cluster's path as a link to its mount: /fsx/data/studio/alice -> /mnt/custom-file-systems/.../fs-...
# A link resolves in the space only; sbatch takes its working directory from getcwd(), which resolves links, so the
# sbatch wrapper (studio_workdir.sh) names the cluster's path itself. The pairs (Studio mount, cluster path) are kept
# in FSX_PATHS_FILE for it.
#
# Environment (from the lifecycle-config bootstrap; tests override the paths):
#   FSX_FILE_SYSTEM_ID      the platform's file system (fs-...); unset: nothing to link
#   FSX_CLUSTER_MOUNT_PATH  where the cluster mounts it (storage.lustre.mount_path)
#   FSX_PARTITION_PARENT    <dra path>/<studio.partition_root>, e.g. /data/studio
#   FSX_SHARED_MODE         True (one shared partition) or False (one per profile)
#   STUDIO_FSX_ROOT         default /mnt/custom-file-systems/fsx_lustre
#   STUDIO_MOUNTINFO        default /proc/self/mountinfo
#   STUDIO_RESOURCE_METADATA default /opt/ml/metadata/resource-metadata.json (UserProfileName)
#   STUDIO_PROFILE          the profile name, instead of the resource metadata's

STUDIO_FSX_ROOT="${STUDIO_FSX_ROOT:-/mnt/custom-file-systems/fsx_lustre}"
STUDIO_MOUNTINFO="${STUDIO_MOUNTINFO:-/proc/self/mountinfo}"
STUDIO_RESOURCE_METADATA="${STUDIO_RESOURCE_METADATA:-/opt/ml/metadata/resource-metadata.json}"
FSX_PATHS_FILE="${FSX_PATHS_FILE:-${SLURM_LOGIN_ROOT:-}/etc/hyperpod-fsx-paths}"
SAFE_PATH='^(/[A-Za-z0-9._-]+)+$'

# fsx_as_root CMD... : root already, else passwordless sudo (SageMaker Distribution images grant it).
fsx_as_root() {
  if ((EUID == 0)); then "$@"; else sudo -n -- "$@"; fi
}

# fsx_put DEST < CONTENT : CONTENT into the root-owned file DEST (0644) through a temporary file beside it.
fsx_put() {
  # shellcheck disable=SC2016 # the inner sh expands them
  fsx_as_root sh -c 'set -e; t="$(mktemp "$1.XXXXXX")"; cat >"$t"; chmod 0644 "$t"; mv -f "$t" "$1"' _ "$1"
}

# mount_source MOUNT_POINT -> "FSTYPE SOURCE" of the mount at exactly MOUNT_POINT (the last one), or nothing.
mount_source() {
  awk -v m="$1" '{ for (i = 7; i <= NF; i++) if ($i == "-") break; if ($5 == m) found = $(i + 1) " " $(i + 2) }
    END { if (found != "") print found }' "$STUDIO_MOUNTINFO" 2>/dev/null
}

# profile_name -> this space's user profile (STUDIO_PROFILE, else the resource metadata's UserProfileName).
profile_name() {
  local profile="${STUDIO_PROFILE:-}"
  if [[ -z "$profile" ]]; then
    profile="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("UserProfileName", ""))' \
      "$STUDIO_RESOURCE_METADATA" 2>/dev/null)" || true
  fi
  [[ "$profile" =~ ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$ ]] && echo "$profile"
}

# partition_path MOUNT_POINT -> the partition's path on the file system, e.g. /data/studio/alice. Lustre's mount source
# says it (<address>@tcp:/<mount name>/<path>); otherwise the platform's layout does (shared or the profile's name).
partition_path() {
  local fstype source path profile
  read -r fstype source <<<"$(mount_source "$1")"
  if [[ "$fstype" == lustre && "$source" == *@tcp:/* ]]; then
    path="${source#*@tcp:/}" # <mount name>/<path>
    path="/${path#*/}"
    [[ "$source" == *@tcp:/*/* ]] || path=/
    echo "$path"
    return 0
  fi
  if [[ "${FSX_SHARED_MODE:-}" == True ]]; then
    echo "$FSX_PARTITION_PARENT/shared"
  elif profile="$(profile_name)"; then
    echo "$FSX_PARTITION_PARENT/$profile"
  else
    log "cannot tell this space's user profile (UserProfileName in $STUDIO_RESOURCE_METADATA)" >&2
    return 1
  fi
}

# ensure_link LINK TARGET : LINK (a root-owned path) is a symbolic link to TARGET. Every directory above it is made
# (root, 0755) or must be a real directory; an existing LINK that is not a link is left alone (refused).
# 0: linked now; 1: it already was; 2: refused.
ensure_link() {
  local link=$1 target=$2 dir="" part
  local -a parts
  IFS=/ read -ra parts <<<"${link#/}"
  for part in "${parts[@]:0:${#parts[@]}-1}"; do
    dir="$dir/$part"
    if [[ -L "$dir" || (-e "$dir" && ! -d "$dir") ]]; then
      log "ERROR: $dir is not a directory (a link or a file): not linking $link" >&2
      return 2
    fi
    [[ -d "$dir" ]] || fsx_as_root install -d -m 0755 "$dir" || return 2
  done
  if [[ -L "$link" && "$(readlink "$link")" == "$target" ]]; then
    return 1 # unchanged
  fi
  if [[ -e "$link" && ! -L "$link" ]]; then
    log "ERROR: $link exists and is not a link to this space's FSx mount; leaving it alone" >&2
    return 2
  fi
  fsx_as_root ln -sfn "$target" "$link" || return 2
}

# link_fsx_paths : the cluster's path of this space's FSx partition, linked to Studio's mount, and recorded in
# FSX_PATHS_FILE. Returns non-zero only when a path the platform computed is unusable.
link_fsx_paths() {
  local mount partition cluster rc=0 record path
  if [[ -z "${FSX_FILE_SYSTEM_ID:-}" ]]; then
    log "no FSX_FILE_SYSTEM_ID: no FSx paths to link"
    return 0
  fi
  mount="$STUDIO_FSX_ROOT/$FSX_FILE_SYSTEM_ID"
  if [[ -z "$(mount_source "$mount")" ]]; then
    log "this space mounts no FSx at $mount (a shared space in per-user mode, or no custom file system): no links"
    [[ ! -s "$FSX_PATHS_FILE" ]] || : | fsx_put "$FSX_PATHS_FILE"
    return 0
  fi
  partition="$(partition_path "$mount")" || return 1
  cluster="${FSX_CLUSTER_MOUNT_PATH%/}${partition%/}"
  for path in "$mount" "$cluster"; do
    if [[ ! "$path" =~ $SAFE_PATH || "/$path/" == */../* || "/$path/" == */./* ]]; then
      log "ERROR: '$path' is not a plain absolute path: no FSx links" >&2
      return 1
    fi
  done
  ensure_link "$cluster" "$mount" || rc=$?
  case "$rc" in
    0) CHANGED+=("FSx path $cluster") ;;
    1) ;;
    *) return 1 ;;
  esac
  record="$mount $cluster"
  if [[ "$(cat "$FSX_PATHS_FILE" 2>/dev/null)" != "$record" ]]; then
    fsx_as_root install -d -m 0755 "$(dirname "$FSX_PATHS_FILE")"
    echo "$record" | fsx_put "$FSX_PATHS_FILE"
  fi
  log "FSx: $cluster here is $mount, and the same path on the cluster"
}
