#!/usr/bin/env bash
# FSx for Lustre at fsx.mount_path: mounted here and recorded in fstab (fsx.mount true), or, when HyperPod mounts it
# from InstanceStorageConfigs (fsx.mount false), waited for, so that homes are never placed on the local disk of a
# node whose shared file system is merely late.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# New ENIs can take a minute to route to the file system, so a first failure is not final.
MOUNT_ATTEMPTS="${MOUNT_ATTEMPTS:-6}"
# HyperPod's own mount: 30 checks, RETRY_DELAY (10 s) apart, as AWS's fsx_ubuntu.sh waits 6 x 10 s for its own.
FSX_WAIT_ATTEMPTS="${FSX_WAIT_ATTEMPTS:-30}"

if [[ "$(param fsx.mount)" != "true" ]]; then
  path="$(param fsx.mount_path)"
  if [[ -z "$path" ]]; then
    log "no FSx file system for this cluster: nothing to mount or wait for"
    exit 0
  fi
  wait_until "$FSX_WAIT_ATTEMPTS" "HyperPod to mount FSx at $path" mountpoint -q "$path" \
    || die "$path is not mounted; HyperPod mounts it from the instance group's InstanceStorageConfigs, check the" \
      "group's FsxLustreConfig and that the security group allows Lustre (988, 1018-1023)"
  log "$path is mounted by HyperPod"
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
