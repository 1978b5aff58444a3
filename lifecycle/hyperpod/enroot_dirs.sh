#!/usr/bin/env bash
# Per-user enroot directories, made by root before any job: for every configured user, <root>/user-<uid> in each of the
# per-user roots install_container_runtime.sh chose (runtime and data on the NVMe, the layer cache on FSx or the NVMe),
# owned by the user, mode 0700, under root-owned 0755 roots. enroot itself makes them lazily with `mkdir -p`, as the
# user, at the first job (NVIDIA/enroot@8ea147d enroot.in); under a world-writable parent that lets one user make the
# next user's directory first, or plant a layer in a shared cache that enroot then trusts by its digest. Here no user
# can write to a root, and a user's own directory is theirs alone.
#
# Runs from install_container_runtime.sh (node creation), from the users sync (new users, sync_users.sh) and at every
# boot (hyperpod-enroot-dirs.service: the NVMe may come back empty, and lifecycle scripts do not run after a reboot).
# lib/safe_dirs.py makes every directory through descriptors opened with O_NOFOLLOW: a link is moved aside, never
# followed; a directory someone else made where a user's goes is moved aside, never handed over.
#
# $ENROOT_DIRS_STATE (install_container_runtime.sh writes it) has one line per root: PATH MODE per-user|shared MOUNT
# (MOUNT is the mount point the root lives on, or -): a root whose file system is not mounted is skipped, so nothing is
# made on the root disk under an empty mount point.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

ENROOT_DIRS_STATE="${ENROOT_DIRS_STATE:-$STATE_DIR/enroot_dirs}"

if [[ ! -s "$ENROOT_DIRS_STATE" ]]; then
  log "no enroot directories recorded (container runtime off, or no enroot on this node): nothing to do"
  exit 0
fi

ids=()
while IFS=$'\t' read -r _ uid gid _; do
  [[ -n "$uid" ]] && ids+=("$uid:$gid")
done < <(params_py users "$PARAMS_FILE")

# The roots whose file system is there, made (with their users' directories) by one safe_dirs.py start.
specs=()
while read -r path mode kind mount; do
  [[ -n "$path" ]] || continue
  if [[ "$mount" != - ]] && ! mountpoint -q "$mount"; then
    log "$mount is not mounted: $path skipped"
    continue
  fi
  specs+=("$path" "$mode" "$kind")
done <"$ENROOT_DIRS_STATE"
failed=0
if ((${#specs[@]})); then
  # Every line it prints is one for the log: what it made or moved aside, and "ERROR: ..." for a root it refused.
  out="$(lib_py safe_dirs.py roots "${ids[@]}" -- "${specs[@]}" 2>&1)" || failed=1
  while IFS= read -r line; do
    [[ -z "$line" ]] || log "$line"
  done <<<"$out"
fi
((failed == 0)) || die "some enroot directories could not be made safely (see above); enroot refuses to run for" \
  "the users concerned rather than use a directory someone else controls"
log "enroot directories ready for ${#ids[@]} user(s)"
