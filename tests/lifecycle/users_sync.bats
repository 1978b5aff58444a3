#!/usr/bin/env bats
# The users sync: install_users_sync.sh (node copy, digest, systemd timer) and sync_users.sh (what the timer runs).
# The fake S3 (stubs/stub `aws`) serves $STUB_S3_DIR/platform_parameters.json for the parameters' S3 URI.

load test_helper

SERVICE=hyperpod-users-sync.service
TIMER=hyperpod-users-sync.timer
NOSUID=hyperpod-fsx-nosuid.service

# A node as on_init_complete.sh leaves it: users created, the sync installed; S3 holds the same parameters.
node_created() {
  bash "$SCRIPTS/create_users.sh"
  bash "$SCRIPTS/install_users_sync.sh"
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  : >"$STUB_LOG"
}

# publish KEY JSON : a stack update: the parameters in S3 change (the node's copy does not)
publish() {
  set_param "$1" "$2"
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
}

# sync : runs the node's copy as the systemd unit does, with no PARAMS_FILE in its environment
sync() {
  run env -u PARAMS_FILE bash "$PLATFORM_DIR/sync_users.sh"
}

sync_log() {
  cat "$LOG_DIR/users_sync.log" 2>/dev/null || true
}

@test "install: the node keeps a copy of the user scripts and parameters and the applied digest" {
  bash "$SCRIPTS/install_users_sync.sh"
  for f in sync_users.sh create_users.sh setup_ssh_keys.sh configure_controller_ssh.sh apply_accounting.sh \
    lib/common.sh lib/user_paths.sh lib/params.py lib/marked_block.py lib/accounting.py; do
    cmp "$SCRIPTS/$f" "$PLATFORM_DIR/$f"
  done
  cmp "$PARAMS_FILE" "$PLATFORM_DIR/platform_parameters.json"
  [ "$(cat "$STATE_DIR/applied_parameters.sha256")" = "$(sha256sum "$PARAMS_FILE" | cut -d' ' -f1)" ]
  [ "$(stat -c %a "$PLATFORM_DIR/sync_users.sh" "$PLATFORM_DIR/lib/verify.py" | sort -u)" = 755 ]
  # A script of the copy that differs is written again, alone.
  echo "# changed" >>"$PLATFORM_DIR/lib/sssd.py"
  run bash "$SCRIPTS/install_users_sync.sh"
  [ "$status" -eq 0 ]
  [ "$(grep "wrote " <<<"$output" | sed 's/.*\] //')" = "wrote $PLATFORM_DIR/lib/sssd.py" ]
  cmp "$SCRIPTS/lib/sssd.py" "$PLATFORM_DIR/lib/sssd.py"
}

@test "install: service and timer are written, enabled and started once; a second install changes nothing" {
  run bash "$SCRIPTS/install_users_sync.sh"
  [ "$status" -eq 0 ]
  grep -qxF "ExecStart=/bin/bash $PLATFORM_DIR/sync_users.sh" "$SYSTEMD_DIR/$SERVICE"
  grep -qxF "Type=oneshot" "$SYSTEMD_DIR/$SERVICE"
  grep -qxF "OnUnitActiveSec=2min" "$SYSTEMD_DIR/$TIMER"
  grep -qxF "RandomizedDelaySec=30s" "$SYSTEMD_DIR/$TIMER"
  grep -qxF "WantedBy=timers.target" "$SYSTEMD_DIR/$TIMER"
  [ "$(calls systemctl | grep -v is-enabled)" = "$(printf 'systemctl daemon-reload\nsystemctl enable %s\nsystemctl enable %s\nsystemctl restart %s' "$TIMER" "$NOSUID" "$TIMER")" ]
  cp -p "$SYSTEMD_DIR/$TIMER" "$T/timer.before"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/install_users_sync.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  [ "$(stat -c %Y "$SYSTEMD_DIR/$TIMER")" = "$(stat -c %Y "$T/timer.before")" ]
}

@test "install: a unit that differs on disk is rewritten and the timer restarted" {
  bash "$SCRIPTS/install_users_sync.sh"
  sed -i 's/OnUnitActiveSec=2min/OnUnitActiveSec=1h/' "$SYSTEMD_DIR/$TIMER"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/install_users_sync.sh"
  [ "$status" -eq 0 ]
  grep -qxF "OnUnitActiveSec=2min" "$SYSTEMD_DIR/$TIMER"
  calls systemctl | grep -qxF "systemctl daemon-reload"
  calls systemctl | grep -qxF "systemctl restart $TIMER"
}

@test "install: the units pass systemd-analyze verify" {
  command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed"
  bash "$SCRIPTS/install_users_sync.sh"
  # verify resolves ExecStart: point it at real files
  run env SYSTEMD_LOG_LEVEL=err systemd-analyze verify --man=no "$SYSTEMD_DIR/$SERVICE" "$SYSTEMD_DIR/$TIMER" \
    "$SYSTEMD_DIR/$NOSUID"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}

@test "parameters without the sync's S3 URI are refused before the node is touched" {
  set_param users_sync null
  STUB_IPS="10.1.0.31" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"users_sync: must be of type object, got None"* ]]
  [ -z "$(mutating_calls)" ]
  [ ! -e "$SYSTEMD_DIR/$TIMER" ]
}

@test "after a reboot, FSx is nosuid,nodev again before logins and jobs, not only at the sync's first run" {
  mkdir -p "$T/fsx" && echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  node_created
  unit="$SYSTEMD_DIR/$NOSUID"
  # Ordered before what lets users in (logins, SSH, Slurm jobs), after the FSx mount, and started with it too.
  mount_unit="$(systemd-escape --path --suffix=mount "$T/fsx")"
  grep -qxF "Before=systemd-user-sessions.service sshd.service ssh.service slurmd.service" "$unit"
  grep -qxF "WantedBy=multi-user.target $mount_unit" "$unit"
  [ "$(sed -n 's/^After=.* //p' "$unit")" = "$mount_unit" ]
  grep -qxF "$NOSUID" "$FAKE_ROOT/enabled_units"
  # The reboot: HyperPod mounts FSx again with its own options; systemd runs the unit's command, the node's copy.
  rm -rf "$FAKE_ROOT/mount_opts"
  : >"$STUB_LOG"
  cmd="$(sed -n 's/^ExecStart=//p' "$unit")"
  run env -u PARAMS_FILE $cmd
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(calls mount)" = "mount -i -o remount,bind,rw,relatime,nosuid,nodev $T/fsx" ]
  # and a remount that fails fails the unit, with the reason
  rm -rf "$FAKE_ROOT/mount_opts"
  STUB_REMOUNT_FAIL=1 run env -u PARAMS_FILE $cmd
  [ "$status" -ne 0 ]
  [[ "$output" == *"ERROR: $T/fsx is mounted with 'rw,relatime', without nosuid and nodev"* ]]
}

# changes -> the recorded calls but the read-only look at the FSx mount every run makes
changes() {
  grep -vE '^(mountpoint|findmnt) ' "$STUB_LOG" || true
}

@test "unchanged digest: one download, nothing else runs, nothing is logged" {
  node_created
  sync
  [ "$status" -eq 0 ]
  [[ "$(changes)" == "aws s3 cp --only-show-errors s3://sagemaker-lc-ml-cluster-111122223333-us-east-1/hyperpod/ml-cluster/platform_parameters.json "* ]]
  [ "$(changes | wc -l)" -eq 1 ]
  [ -z "$(sync_log)" ]
}

@test "every run puts nosuid,nodev back on FSx after HyperPod mounted it again (a reboot), digest or not" {
  mkdir -p "$T/fsx" && echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  node_created
  rm -rf "$FAKE_ROOT/mount_opts" # the reboot: HyperPod's mount, its own options
  sync
  [ "$status" -eq 0 ]
  [ "$(calls mount)" = "mount -i -o remount,bind,rw,relatime,nosuid,nodev $T/fsx" ]
  grep -q "$T/fsx remounted nosuid,nodev" "$LOG_DIR/users_sync.log"
  : >"$STUB_LOG"
  sync
  [ "$status" -eq 0 ]
  [ -z "$(calls mount)" ]
  rm -rf "$FAKE_ROOT/mount_opts"
  STUB_REMOUNT_FAIL=1 sync
  [ "$status" -ne 0 ]
  grep -q "ERROR: $T/fsx is mounted with 'rw,relatime', without nosuid and nodev" "$LOG_DIR/users_sync.log"
}

@test "changed digest: create_users runs; a removed user is locked on the next sync, home kept" {
  node_created
  mkdir -p "$T/home/alice" && echo "data" >"$T/home/alice/notes"
  publish users '[{"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}]'
  printf '%s\n' '#!/bin/bash' "echo \"\$*\" >>'$T/python3.log'" "exec '$(command -v python3)' \"\$@\"" >"$T/bin/python3"
  chmod +x "$T/bin/python3"
  sync
  [ "$status" -eq 0 ]
  # The new parameters are checked once, and the steps read that snapshot (lib/common.sh validate_params), not the file:
  # Python reads the file before the check only for the lifecycle record's name (lib/verify.sh).
  [ "$(grep -cE "params\.py validate $TMPDIR/tmp\.[^ ]*/platform_parameters\.json --snapshot$" "$T/python3.log")" -eq 1 ]
  [ "$(grep -E "params\.py (get|snapshot|users|list|artifacts) $TMPDIR/" "$T/python3.log" |
    grep -cv " get [^ ]* lifecycle_record.secret_name lifecycle_record.region$")" -eq 0 ]
  [ "$(calls usermod | grep -v -- ' -aG ')" = "usermod --lock --expiredate 1 alice" ]
  [ "$(cat "$T/home/alice/notes")" = "data" ]
  [ -z "$(calls userdel)" ]
  grep -q "platform_parameters.json changed (sha256 " "$LOG_DIR/users_sync.log"
  grep -q "locked user alice (2001)" "$LOG_DIR/users_sync.log"
  [ "$(cat "$STATE_DIR/applied_parameters.sha256")" = "$(sha256sum "$PARAMS_FILE" | cut -d' ' -f1)" ]
  cmp "$PARAMS_FILE" "$PLATFORM_DIR/platform_parameters.json"
  [ -z "$(grep -rlaF "get slurm.auth" "$TMPDIR")" ] # the steps' parameters snapshot (lib/common.sh), removed at exit
  : >"$STUB_LOG"
  sync
  [ "$status" -eq 0 ]
  [ "$(changes | wc -l)" -eq 1 ] # the download; create_users did not run again
}

@test "sudo revoked in the parameters is gone after the next sync" {
  node_created
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  publish users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]'
  sync
  [ "$status" -eq 0 ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  grep -q "removed sudo for bob" "$LOG_DIR/users_sync.log"
  [ -z "$(calls usermod | grep -v -- ' -aG ')" ]
}

@test "a new user appears on the next sync with the fixed ids, a home and an SSH key on FSx, made as them" {
  mkdir -p "$T/fsx" && echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  node_created
  publish users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}, {"name": "carol", "uid": 2003, "gid": 2103, "sudo": false}]'
  sync
  [ "$status" -eq 0 ]
  [ "$(calls useradd)" = "useradd --uid 2003 --gid 2103 --no-create-home --home-dir $T/fsx/home/carol --shell /bin/bash carol" ]
  [ "$(stat -c '%u:%g %a' "$T/fsx/home/carol")" = "2003:2103 750" ]
  [ "$(stat -c '%u:%g %a' "$T/fsx/home/carol/.ssh/id_ed25519_cluster")" = "2003:2103 600" ]
  calls setpriv | grep -q -- "--reuid=2003 --regid=2103 --init-groups --no-new-privs -- env HOME=$T/fsx/home/carol bash -c "
}

@test "a failed download keeps the users and the applied digest, and says so in the log" {
  node_created
  cp "$STATE_DIR/applied_parameters.sha256" "$T/digest.before"
  rm "$STUB_S3_DIR/platform_parameters.json"
  sync
  [ "$status" -ne 0 ]
  grep -q "ERROR: could not download s3://.*/platform_parameters.json; users stay as they are" "$LOG_DIR/users_sync.log"
  cmp "$T/digest.before" "$STATE_DIR/applied_parameters.sha256"
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  [ -z "$(mutating_calls | grep -v '^aws ')" ]
}

@test "invalid new parameters are not applied" {
  node_created
  publish users '[{"name": "bob", "uid": 5, "gid": 2002, "sudo": false}]'
  sync
  [ "$status" -ne 0 ]
  grep -q "users\[0\].uid: must be an integer >= 1000, got 5" "$LOG_DIR/users_sync.log"
  grep -q "ERROR: the new parameters are invalid; users stay as they are" "$LOG_DIR/users_sync.log"
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  [ -z "$(mutating_calls | grep -v '^aws ')" ]
}

@test "a failing create_users keeps the old digest, so the next run tries again" {
  node_created
  echo "dave:x:2004:2004::/home/dave:/bin/bash" >>"$FAKE_ROOT/passwd"
  publish users '[{"name": "carol", "uid": 2004, "gid": 2004, "sudo": false}]'
  cp "$STATE_DIR/applied_parameters.sha256" "$T/digest.before"
  sync
  [ "$status" -ne 0 ]
  grep -q "uid 2004 for user carol is already used by user dave" "$LOG_DIR/users_sync.log"
  grep -q "ERROR: create_users.sh failed; the next run tries again" "$LOG_DIR/users_sync.log"
  cmp "$T/digest.before" "$STATE_DIR/applied_parameters.sha256"
  publish users '[{"name": "carol", "uid": 2005, "gid": 2004, "sudo": false}]' # group carol (2004) was made
  sync
  [ "$status" -eq 0 ]
  calls useradd | grep -q -- "--uid 2005 "
}

# metric NAME -> the value of NAME in the sync's node-exporter textfile
metric() {
  awk -v n="$1" '$1 == n { print $2 }' "$TEXTFILE_DIR/hyperpod_users_sync.prom"
}

@test "runs never overlap: a sync that finds root's lock taken skips, with a warning and a metric" {
  node_created
  publish users '[]'
  sync # the first run makes root's lock directory
  [ "$status" -eq 0 ]
  [ "$(metric hyperpod_users_sync_skipped)" = 0 ]
  [ "$(stat -c '%u %a' "$STATE_DIR/locks")" = "0 700" ]
  [ "$(stat -c '%u %a' "$STATE_DIR/locks/users_sync.lock")" = "0 600" ]
  publish users '[{"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]'
  exec 7>"$STATE_DIR/locks/users_sync.lock"
  flock 7
  : >"$STUB_LOG"
  USERS_SYNC_LOCK_WAIT=0 sync
  exec 7>&-
  [ "$status" -eq 0 ]
  grep -q "WARNING: another users sync has held $STATE_DIR/locks/users_sync.lock for over 0 s; skipping this run" \
    "$LOG_DIR/users_sync.log"
  [ -z "$(cat "$STUB_LOG")" ]
  [ "$(metric hyperpod_users_sync_skipped)" = 1 ]
  [ "$(metric hyperpod_users_sync_failed)" = 0 ]
}

@test "every run's outcome is a metric: last run, last success, failed" {
  node_created
  before="$(date +%s)"
  sync
  [ "$status" -eq 0 ]
  [ "$(metric hyperpod_users_sync_failed)" = 0 ]
  ok="$(metric hyperpod_users_sync_last_success_timestamp_seconds)"
  ((ok >= before))
  grep -qxF '# TYPE hyperpod_users_sync_last_success_timestamp_seconds gauge' "$TEXTFILE_DIR/hyperpod_users_sync.prom"
  [[ "$(metric hyperpod_users_sync_duration_seconds)" =~ ^[0-9]+$ ]]
  rm "$STUB_S3_DIR/platform_parameters.json" # S3 unreachable
  sleep 1
  sync
  [ "$status" -ne 0 ]
  [ "$(metric hyperpod_users_sync_failed)" = 1 ]
  [ "$(metric hyperpod_users_sync_last_success_timestamp_seconds)" = "$ok" ]
  (($(metric hyperpod_users_sync_last_run_timestamp_seconds) > ok))
}

@test "on_init_complete.sh installs the sync on every node type" {
  STUB_IPS="10.1.0.31" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -eq 0 ]
  [ -f "$SYSTEMD_DIR/$TIMER" ]
  [ -f "$PLATFORM_DIR/sync_users.sh" ]
  calls systemctl | grep -qxF "systemctl enable $TIMER"
}

# A department as platform_parameters.json carries it (constructs/node_parameters.py Department): the sync validates
# what it downloads.
PHYSICS='{"name": "physics", "description": "Physics", "fairshare": 10, "qos": ["normal"], "default_qos": "normal",
  "users": [], "coordinators": []}'

@test "accounting changes reach slurmdbd through the controller's sync only, whether or not accounting is on" {
  set_param accounting.enabled false
  node_created
  printf '#!/bin/bash\necho "apply $(python3 -c "import json,sys; print([d[\\"name\\"] for d in json.load(open(sys.argv[1]))[\\"accounting\\"][\\"departments\\"]])" "$PARAMS_FILE")" >>"%s"\n' \
    "$T/apply.calls" >"$PLATFORM_DIR/apply_accounting.sh"
  copy_installed
  publish accounting.departments "[$PHYSICS]"
  STUB_IPS="10.1.0.31" sync # a compute node
  [ "$status" -eq 0 ]
  [ ! -e "$T/apply.calls" ]
  rm "$STATE_DIR/applied_parameters.sha256"
  STUB_IPS="10.1.0.12 172.17.0.1" sync # the controller
  [ "$status" -eq 0 ]
  [ "$(cat "$T/apply.calls")" = "apply ['physics']" ]
}

@test "a failing accounting apply on the controller keeps the old digest, so the next run tries again" {
  set_param accounting.enabled true
  node_created
  printf '#!/bin/bash\nexit 1\n' >"$PLATFORM_DIR/apply_accounting.sh"
  copy_installed
  before="$(cat "$STATE_DIR/applied_parameters.sha256")"
  publish accounting.departments "[$PHYSICS]"
  STUB_IPS="10.1.0.12 172.17.0.1" sync
  [ "$status" -ne 0 ]
  grep -q "apply_accounting.sh failed; the next run tries again" "$LOG_DIR/users_sync.log"
  [ "$(cat "$STATE_DIR/applied_parameters.sha256")" = "$before" ]
}

@test "the controller's sync gives SSH to whoever has sudo now; other nodes' syncs leave sshd alone" {
  mkdir -p "$(dirname "$PAM_SSHD")" && echo "@include common-account" >"$PAM_SSHD"
  export CONTROLLER_ACCESS_FILE="$T/security/hyperpod-controller-ssh.conf"
  node_created
  publish users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": true}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]'
  STUB_IPS="10.1.0.31" sync # a compute node
  [ "$status" -eq 0 ]
  [ "$(cat "$PAM_SSHD")" = "@include common-account" ]
  rm "$STATE_DIR/applied_parameters.sha256"
  STUB_IPS="10.1.0.12 172.17.0.1" sync # the controller
  [ "$status" -eq 0 ]
  grep -qxF "+:root ubuntu alice:ALL" "$CONTROLLER_ACCESS_FILE"
  grep -qxF "account required pam_access.so accessfile=$CONTROLLER_ACCESS_FILE" "$PAM_SSHD"
}
