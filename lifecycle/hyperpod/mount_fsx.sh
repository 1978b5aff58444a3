#!/usr/bin/env bash
# FSx for Lustre at fsx.mount_path: mounted here and recorded in fstab (fsx.mount true), or, when HyperPod mounts it
# from InstanceStorageConfigs (fsx.mount false), waited for, so that homes are never placed on the local disk of a
# node whose shared file system is merely late. Once it is mounted, in both modes: nosuid and nodev on the mount, the
# Lustre client tuning AWS recommends for large instances, and the checkpoint directory inside the S3-linked path.
#
# nosuid,nodev: FSx is shared with Studio, where every user has sudo and root squash maps only uid 0, so a Studio
# user can write a file as any other non-root uid, setuid bit included; on a node such a file would run as that uid.
# The platform's fstab line carries both options; HyperPod's own mount (options not documented) is remounted with
# them (lib/user_paths.sh ensure_nosuid_nodev), and the users-sync timer checks again every run, since a reboot
# brings HyperPod's mount back as HyperPod makes it. A security control: if the mount cannot get them, the node fails.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/user_paths.sh
source "$HERE/lib/user_paths.sh"

# New ENIs can take a minute to route to the file system, so a first failure is not final.
MOUNT_ATTEMPTS="${MOUNT_ATTEMPTS:-6}"
# HyperPod's own mount: 30 checks, RETRY_DELAY (10 s) apart, as AWS's fsx_ubuntu.sh waits 6 x 10 s for its own.
FSX_WAIT_ATTEMPTS="${FSX_WAIT_ATTEMPTS:-30}"
MEMINFO="${MEMINFO:-/proc/meminfo}"

# Client tuning from "Performance tips", https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance-tips.html:
# - more than 64 GiB of memory: ldlm.namespaces.*.lru_max_age=600000 and lru_size=<100 * number_of_CPUs>;
# - more than 64 vCPUs, after the client is mounted: osc.*OST*.max_rpcs_in_flight=32, mdc.*.max_rpcs_in_flight=64,
#   mdc.*.max_mod_rpcs_in_flight=50.
# The same page's module options for >64 vCPUs (ptlrpc ptlrpcd_per_cpt_max, ksocklnd credits) take effect only after
# the Lustre modules reload (a reboot), so they are not applied here. lctl settings do not survive a reboot; a
# replaced or rebooted node runs this script again.
tune_lustre() {
  local cpus mem_kib="" key value
  cpus="$(nproc)"
  while read -r key value _; do # MemTotal's kB, read by bash (no awk to start)
    if [[ "$key" == MemTotal: ]]; then
      mem_kib=$value
      break
    fi
  done <"$MEMINFO"
  local settings=()
  if ((mem_kib > 64 * 1024 * 1024)); then
    settings+=("ldlm.namespaces.*.lru_max_age=600000" "ldlm.namespaces.*.lru_size=$((100 * cpus))")
  fi
  if ((cpus > 64)); then
    settings+=("osc.*OST*.max_rpcs_in_flight=32" "mdc.*.max_rpcs_in_flight=64" "mdc.*.max_mod_rpcs_in_flight=50")
  fi
  if ((${#settings[@]} == 0)); then
    log "Lustre client defaults kept: $cpus vCPUs and $((mem_kib / 1024 / 1024)) GiB are within AWS's thresholds"
    return 0
  fi
  local setting
  for setting in "${settings[@]}"; do
    # A missed tuning costs speed, not correctness: the node carries on.
    lctl set_param "$setting" >/dev/null || log "WARNING: lctl set_param $setting failed; the client keeps its default"
  done
  log "Lustre client tuned for $cpus vCPUs, $((mem_kib / 1024 / 1024)) GiB: ${settings[*]}"
}

# The checkpoint directory lies inside the data repository association's path (platform_config/storage.py checks), so FSx
# exports what jobs write there to S3. It is root's, 0755, and holds one directory per user, theirs, 0700, which
# create_users.sh makes (here and on every users sync): no user can create, or plant a link under, another user's
# name. Earlier versions made it 1777; an existing one gets 0755 (entries users made in it stay theirs). Every
# directory on the way is checked, never followed; a problem costs the directory, not the node: a warning.
checkpoint_dir() {
  local dir sub="" part parts
  dir="$(param fsx.checkpoint_dir)"
  [[ -n "$dir" ]] || return 0
  IFS=/ read -ra parts <<<"${dir#/}"
  for part in "${parts[@]}"; do
    [[ -n "$part" ]] || continue
    sub="$sub/$part"
    if [[ "$sub" != "/${dir#/}" && -e "$1$sub" ]]; then
      # A directory on the way (the S3-linked path) is checked, never changed; it may be sticky, as /tmp is.
      root_dir_problem "$1$sub" sticky
      [[ -z "$PROBLEM" ]] && continue
    elif ensure_root_dir "$1$sub" 0755; then
      continue
    fi
    log "WARNING: no checkpoint directory: $PROBLEM; jobs must write checkpoints elsewhere until it is fixed"
    return 0
  done
  log "checkpoint directory $1$dir (exported to S3; one directory per user)"
}

# nosuid_nodev PATH : fails the node unless the mount at PATH has nosuid and nodev.
nosuid_nodev() {
  local problem
  problem="$(ensure_nosuid_nodev "$1")" ||
    die "$problem. Refusing to go on: a setuid file a Studio user planted on FSx would run as its owner here"
}

params fsx.mount_path fsx.mount fsx.dns_name fsx.mount_name fsx.checkpoint_dir
path="$(param fsx.mount_path)"
if [[ "$(param fsx.mount)" != "true" ]]; then
  if [[ -z "$path" ]]; then
    log "no FSx file system for this cluster: nothing to mount or wait for"
    exit 0
  fi
  wait_until "$FSX_WAIT_ATTEMPTS" "HyperPod to mount FSx at $path" mountpoint -q "$path" \
    || die "$path is not mounted; HyperPod mounts it from the instance group's InstanceStorageConfigs, check the" \
      "group's FsxLustreConfig and that the security group allows Lustre (988, 1018-1023)"
  log "$path is mounted by HyperPod"
  nosuid_nodev "$path"
  tune_lustre
  checkpoint_dir "$path"
  exit 0
fi

dns="$(param fsx.dns_name)"
mount_name="$(param fsx.mount_name)"
entry="$dns@tcp:/$mount_name $path lustre defaults,noatime,flock,nosuid,nodev,_netdev,x-systemd.automount,x-systemd.requires=network-online.target 0 0"

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

mkdir -p "$path" # root-path-ok: the mount point on the node's own disk, before FSx is mounted on it
if mountpoint -q "$path"; then
  log "$path is already mounted"
else
  retry "$MOUNT_ATTEMPTS" mount "$path" || die "could not mount $dns@tcp:/$mount_name at $path"
  mountpoint -q "$path" || die "mount reported success but $path is not a mount point"
  log "mounted $dns@tcp:/$mount_name at $path"
fi
nosuid_nodev "$path"
tune_lustre
checkpoint_dir "$path"
