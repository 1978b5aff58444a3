#!/usr/bin/env bash
# Brings user changes to a running node. HyperPod runs the lifecycle scripts once, when a node is created; a cluster
# stack update only replaces platform_parameters.json in the lifecycle prefix. A systemd timer (install_users_sync.sh)
# runs this every two minutes: it fetches that file, and when its digest differs from the one applied last, runs
# create_users.sh (adds, locks removed users, grants and revokes sudo), setup_ssh_keys.sh and enroot_dirs.sh (new users'
# enroot directories) against it, and on the controller configure_controller_ssh.sh (SSH for the admins) and, on the
# primary controller, apply_accounting.sh (every user's association; with cluster.accounting, departments and QoS).
#
# Only the parameters travel: the scripts are the node's copy from its creation. A failed download, invalid
# parameters or a failed step keep the node as it is and the last applied digest, so the next run tries again.
#
# Every run, whatever the digest, it also checks that FSx is still mounted nosuid,nodev (mount_fsx.sh): a reboot does
# not run the lifecycle scripts, and HyperPod mounts FSx again its own way. It remounts it so, or logs an ERROR and
# fails the run (the node keeps running: nothing here can stop it any more).
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/user_paths.sh
source "$HERE/lib/user_paths.sh"

mkdir -p "$LOG_DIR" "$STATE_DIR"
# Quiet when nothing changed: only downloads that fail and changes that are applied are logged.
exec >>"$LOG_DIR/users_sync.log" 2>&1

exec 8>"$STATE_DIR/users_sync.lock"
if ! flock -n 8; then
  log "another sync is still running; skipping this one"
  exit 0
fi

params fsx.mount_path users_sync.parameters_s3_uri
fsx_safe=0
fsx="$(param fsx.mount_path)"
if [[ -n "$fsx" ]] && mountpoint -q "$fsx" && ! problem="$(ensure_nosuid_nodev "$fsx")"; then
  log "ERROR: $problem; a setuid file a user planted on FSx runs as its owner on this node until it is fixed"
  fsx_safe=1
fi

APPLIED="$STATE_DIR/applied_parameters.sha256"
uri="$(param users_sync.parameters_s3_uri)"
[[ -n "$uri" ]] || die "$PARAMS_FILE names no users_sync.parameters_s3_uri"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
new="$work/platform_parameters.json"

if ! aws s3 cp --only-show-errors "$uri" "$new"; then
  die "could not download $uri; users stay as they are, next try at the next timer run"
fi
# Every timer tick gets here: the digest's first field and the applied one are read by bash, not cut and cat.
digest="$(sha256sum "$new")"
digest="${digest%% *}"
applied=""
[[ ! -f "$APPLIED" ]] || applied="$(<"$APPLIED")"
if [[ "$digest" == "$applied" ]]; then
  exit "$fsx_safe"
fi

log "$uri changed (sha256 $digest); applying the users list"
if ! params_py validate "$new"; then
  die "the new parameters are invalid; users stay as they are"
fi
PARAMS_FILE="$new" bash "$HERE/create_users.sh" || die "create_users.sh failed; the next run tries again"
PARAMS_FILE="$new" bash "$HERE/setup_ssh_keys.sh" || die "setup_ssh_keys.sh failed; the next run tries again"
PARAMS_FILE="$new" bash "$HERE/enroot_dirs.sh" || die "enroot_dirs.sh failed; the next run tries again"
read -ra addresses <<<"$(hostname -I)"
node="$(params_py node-type "$RESOURCE_CONFIG" "$new" "${addresses[@]}")" || die "cannot tell this node's type"
if [[ "${node%%$'\t'*}" == controller ]]; then
  # Who may SSH here follows users[].sudo.
  PARAMS_FILE="$new" bash "$HERE/configure_controller_ssh.sh" ||
    die "configure_controller_ssh.sh failed; the next run tries again"
  # Every user's Slurm association (slurm.conf may enforce them), and with accounting on, departments and QoS; written
  # from the primary controller only (the one accounting database).
  if [[ "$(params_py controller-role "$RESOURCE_CONFIG" "$new" "${addresses[@]}")" == primary$'\t'* ]]; then
    PARAMS_FILE="$new" bash "$HERE/apply_accounting.sh" || die "apply_accounting.sh failed; the next run tries again"
  fi
fi

install -m 0644 "$new" "$PARAMS_FILE"
echo "$digest" >"$APPLIED.new"
mv "$APPLIED.new" "$APPLIED"
log "applied parameters sha256 $digest"
exit "$fsx_safe"
