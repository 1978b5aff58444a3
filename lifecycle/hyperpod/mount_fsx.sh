#!/usr/bin/env bash
# Mounts FSx for Lustre at fsx.mount_path and records it in fstab, unless HyperPod mounts it natively.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# New ENIs can take a minute to route to the file system, so a first failure is not final.
MOUNT_ATTEMPTS="${MOUNT_ATTEMPTS:-6}"

if [[ "$(param fsx.mount)" != "true" ]]; then
  log "fsx.mount is not true: nothing to mount"
  exit 0
fi

dns="$(param fsx.dns_name)"
mount_name="$(param fsx.mount_name)"
path="$(param fsx.mount_path)"
entry="$dns@tcp:/$mount_name $path lustre defaults,noatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target 0 0"

touch "$FSTAB"
if grep -qxF "$entry" "$FSTAB"; then
  log "fstab already has the entry for $path"
else
  # Drop any older entry for the same mount point (e.g. a replaced file system), then add ours.
  tmp="$(mktemp)"
  awk -v path="$path" '$2 != path' "$FSTAB" >"$tmp"
  echo "$entry" >>"$tmp"
  cat "$tmp" >"$FSTAB"
  rm -f "$tmp"
  systemctl daemon-reload
  log "fstab entry written for $path"
fi

mkdir -p "$path"
if mountpoint -q "$path"; then
  log "$path is already mounted"
  exit 0
fi

retry "$MOUNT_ATTEMPTS" mount "$path" || die "could not mount $dns@tcp:/$mount_name at $path"
mountpoint -q "$path" || die "mount reported success but $path is not a mount point"
log "mounted $dns@tcp:/$mount_name at $path"
