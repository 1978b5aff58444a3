#!/usr/bin/env bash
# Brings user changes to a running node. HyperPod runs the lifecycle scripts once, when a node is created; a cluster
# stack update only replaces platform_parameters.json in the lifecycle prefix. A systemd timer (install_users_sync.sh)
# runs this every two minutes: it fetches that file, and when its digest differs from the one applied last, runs
# configure_sssd.sh (the directory's access groups and admin groups), create_users.sh (adds, locks removed users,
# grants and revokes sudo), configure_pam_adopt.sh (the admins pam_access lets past pam_slurm_adopt),
# setup_ssh_keys.sh and enroot_dirs.sh (new users' enroot directories) against it, and on the controller
# configure_controller_ssh.sh (SSH for the admins) and, on the primary controller, apply_accounting.sh (every user's
# association; with cluster.accounting, departments and QoS).
#
# Only the parameters travel: the scripts are the node's copy from its creation. A failed download, parameters that
# are not the ones the deploy recorded (lib/verify.sh), a copy of the scripts that changed since its creation, or
# invalid parameters keep the node as it is; a failed step keeps the last applied digest, so the next run tries again.
#
# Every run, whatever the digest, it also checks that FSx is still mounted nosuid,nodev (mount_fsx.sh): a reboot does
# not run the lifecycle scripts, and HyperPod mounts FSx again its own way. It remounts it so, or logs an ERROR and
# fails the run (the node keeps running: nothing here can stop it any more).
#
# Revocation must arrive: the steps that take rights away (create_users.sh locks removed users and sweeps sudo;
# configure_sssd.sh rewrites the directory's access groups and admin sudoers; configure_pam_adopt.sh the admins who
# may SSH to a compute node without a job) each run even when another step failed, and the run then fails. Root's
# lock is in root's own 0700 directory (lib/user_paths.sh LOCK_DIR), 0600: no user can open it, so no user can hold it
# and make the timer skip. Every run's outcome is a metric the node exporter serves (USERS_SYNC_METRICS, see
# write_metrics): when it last ran, when it last succeeded, whether the last run failed or was skipped; a skip is a
# WARNING too, never a quiet exit.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/user_paths.sh
source "$HERE/lib/user_paths.sh"
# shellcheck source-path=SCRIPTDIR source=lib/verify.sh
source "$HERE/lib/verify.sh"

[[ -d "$LOG_DIR" && -d "$STATE_DIR" ]] || mkdir -p "$LOG_DIR" "$STATE_DIR"
# Quiet when nothing changed: only downloads that fail and changes that are applied are logged.
exec >>"$LOG_DIR/users_sync.log" 2>&1

# The node exporter's textfile directory (install_node_metrics.sh): the run's outcome, whether or not node metrics are on.
USERS_SYNC_METRICS="${USERS_SYNC_METRICS:-${TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}/hyperpod_users_sync.prom}"
LAST_SUCCESS="$STATE_DIR/users_sync_last_success"
OUTCOME=failed # until the run says otherwise
work=""

# shellcheck disable=SC2317 # write_metrics and finish run from the EXIT trap
# write_metrics : the outcome of this run as node-exporter textfile metrics, written atomically (a rename never
# follows a link). The last success time survives runs in STATE_DIR.
write_metrics() {
  local now last=0 run_failed=0 run_skipped=0 tmp PARENT
  printf -v now '%(%s)T' -1
  [[ "$OUTCOME" != failed ]] || run_failed=1
  [[ "$OUTCOME" != skipped ]] || run_skipped=1
  [[ "$OUTCOME" != ok ]] || echo "$now" >"$LAST_SUCCESS"
  [[ ! -f "$LAST_SUCCESS" ]] || last="$(<"$LAST_SUCCESS")"
  parent_dir "$USERS_SYNC_METRICS"
  [[ -d "$PARENT" ]] || mkdir -p "$PARENT"
  tmp="$(mktemp "$PARENT/.hyperpod_users_sync.XXXXXX")" || return 0
  write_text "$tmp" <<METRICS
# HELP hyperpod_users_sync_last_run_timestamp_seconds When the users sync last ran on this node, whatever its outcome.
# TYPE hyperpod_users_sync_last_run_timestamp_seconds gauge
hyperpod_users_sync_last_run_timestamp_seconds $now
# HELP hyperpod_users_sync_last_success_timestamp_seconds When the users sync last left this node as the parameters in S3 say (0: never).
# TYPE hyperpod_users_sync_last_success_timestamp_seconds gauge
hyperpod_users_sync_last_success_timestamp_seconds $last
# HELP hyperpod_users_sync_failed 1 when the last users sync failed: a user change (a revocation too) may not be applied.
# TYPE hyperpod_users_sync_failed gauge
hyperpod_users_sync_failed $run_failed
# HELP hyperpod_users_sync_skipped 1 when the last users sync found another run holding root's lock and did nothing.
# TYPE hyperpod_users_sync_skipped gauge
hyperpod_users_sync_skipped $run_skipped
# HELP hyperpod_users_sync_duration_seconds How long the last users sync took (steps run as users are bounded each).
# TYPE hyperpod_users_sync_duration_seconds gauge
hyperpod_users_sync_duration_seconds $SECONDS
METRICS
  chmod 0644 "$tmp"
  mv -f "$tmp" "$USERS_SYNC_METRICS"
}

# shellcheck disable=SC2317
finish() {
  local rc=$?
  ((rc == 0)) || [[ "$OUTCOME" == skipped ]] || OUTCOME=failed
  [[ -z "$work" ]] || rm -rf "$work"
  drop_params_snapshot
  write_metrics || log "WARNING: could not write $USERS_SYNC_METRICS"
  exit "$rc"
}
trap finish EXIT

# Root's lock, where no user can open it: a user holding it would stop every later sync (lifecycle/README.md, 3).
ensure_root_dir "$LOCK_DIR" 0700 || die "cannot keep root's lock: $PROBLEM"
umask 077
exec 8>"$LOCK_DIR/users_sync.lock"
umask 022
if ! flock -w "${USERS_SYNC_LOCK_WAIT:-60}" 8; then
  OUTCOME=skipped
  log "WARNING: another users sync has held $LOCK_DIR/users_sync.lock for over ${USERS_SYNC_LOCK_WAIT:-60} s;" \
    "skipping this run" \
    "(hyperpod_users_sync_skipped 1)"
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
  ((fsx_safe)) || OUTCOME=ok
  exit "$fsx_safe"
fi

log "$uri changed (sha256 $digest); applying the users list"
# Root runs the node's copy of the scripts with the new parameters only when both are the deploy's (lib/verify.sh).
if ! verify_local_copy "$STATE_DIR/platform_scripts.sha256" "$HERE"; then
  die "refusing to run the node's copy of the scripts; users stay as they are"
fi
if ! verify_parameters "$new"; then
  die "refusing parameters the deploy did not record; users stay as they are"
fi
if ! validate_params "$new"; then
  die "the new parameters are invalid; users stay as they are"
fi
read -ra addresses <<<"$(hostname -I)"
node="$(params_py node-type "$RESOURCE_CONFIG" "$new" "${addresses[@]}")" || node=""
node_type="${node%%$'\t'*}"

# Every step runs, whatever an earlier one did: one failure must not hold back the revocations after it.
failed=()
apply() {
  local name=$1
  shift
  PARAMS_FILE="$new" "$@" || { failed+=("$name"); log "ERROR: $name failed; the next run tries again"; }
}
# The directory's access groups and admin sudoers (before create_users.sh, which asks SSSD who the directory has).
apply configure_sssd.sh bash "$HERE/configure_sssd.sh"
apply create_users.sh bash "$HERE/create_users.sh"
if [[ -n "$node_type" ]]; then
  # Who may SSH to a compute node without a job (the sudo users, the directory's admin groups).
  apply configure_pam_adopt.sh bash "$HERE/configure_pam_adopt.sh" "$node_type"
else
  failed+=("node type")
  log "ERROR: cannot tell this node's type; the next run tries again"
fi
apply setup_ssh_keys.sh bash "$HERE/setup_ssh_keys.sh"
apply enroot_dirs.sh bash "$HERE/enroot_dirs.sh"
if [[ "$node_type" == controller ]]; then
  # Who may SSH here follows users[].sudo.
  apply configure_controller_ssh.sh bash "$HERE/configure_controller_ssh.sh"
  # Every user's Slurm association (slurm.conf may enforce them), and with accounting on, departments and QoS; written
  # from the primary controller only (the one accounting database).
  if [[ "$(params_py controller-role "$RESOURCE_CONFIG" "$new" "${addresses[@]}")" == primary$'\t'* ]]; then
    apply apply_accounting.sh bash "$HERE/apply_accounting.sh"
  fi
fi
((${#failed[@]} == 0)) || die "${failed[*]} failed (above); the applied digest stays, so the next run tries again"

install -m 0644 "$new" "$PARAMS_FILE"
echo "$digest" >"$APPLIED.new"
mv "$APPLIED.new" "$APPLIED"
log "applied parameters sha256 $digest"
((fsx_safe)) || OUTCOME=ok
exit "$fsx_safe"
