#!/usr/bin/env bash
# Installs the users sync on this node (see sync_users.sh): a copy of the user scripts and of the parameters just
# applied in PLATFORM_DIR, the digest of those parameters, and a systemd timer that runs the sync every two minutes.
# Every file is written only when its content differs; systemd is reloaded and the timer restarted only then.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SERVICE=hyperpod-users-sync.service
TIMER=hyperpod-users-sync.timer
NOSUID=hyperpod-fsx-nosuid.service

# put SOURCE DEST MODE : installs SOURCE as DEST when they differ, and then sets WROTE=1.
WROTE=0
put() {
  local PARENT
  same_file "$1" "$2" && return 0
  parent_dir "$2"
  [[ -d "$PARENT" ]] || mkdir -p "$PARENT"
  install -m "$3" "$1" "$2"
  WROTE=1
  log "wrote $2"
}

params users_sync.parameters_s3_uri directory.ca_certificate.file fsx.mount_path
uri="$(param users_sync.parameters_s3_uri)"
[[ -n "$uri" ]] || die "$PARAMS_FILE names no users_sync.parameters_s3_uri: the users sync needs it"

# put_scripts NAME... : put for each $HERE/NAME as $PLATFORM_DIR/NAME (0755), with one `install` per directory for
# the files that differ instead of one per file.
put_scripts() {
  local name dir names
  local -A differ=() # directory -> the names in it that differ, one a line
  for name; do
    same_file "$HERE/$name" "$PLATFORM_DIR/$name" && continue
    dir=.
    [[ "$name" != */* ]] || dir="${name%/*}"
    differ[$dir]+="$name"$'\n'
  done
  for dir in "${!differ[@]}"; do
    mapfile -t names <<<"${differ[$dir]%$'\n'}"
    [[ -d "$PLATFORM_DIR/$dir" ]] || mkdir -p "$PLATFORM_DIR/$dir"
    install -m 0755 -t "$PLATFORM_DIR/$dir" "${names[@]/#/$HERE/}"
    WROTE=1
    for name in "${names[@]}"; do log "wrote $PLATFORM_DIR/$name"; done
  done
}

# With configure_sssd.sh and configure_pam_adopt.sh: a revoked access group, directory admin group or sudo user is
# taken off running nodes by the sync too, not only off new ones.
copied=(sync_users.sh fsx_nosuid.sh create_users.sh setup_ssh_keys.sh configure_controller_ssh.sh apply_accounting.sh
  enroot_dirs.sh configure_sssd.sh configure_pam_adopt.sh lib/common.sh lib/user_paths.sh lib/params.py
  lib/marked_block.py lib/accounting.py lib/safe_dirs.py lib/artifacts.sh lib/sssd.py lib/verify.sh lib/verify.py)
put_scripts "${copied[@]}"
put "$HERE/lib/platform_parameters.schema.json" "$PLATFORM_DIR/lib/platform_parameters.schema.json" 0644  # params.py validate
# The directory's CA certificate, which configure_sssd.sh checks against the parameters' digest.
ca="$(param directory.ca_certificate.file)"
if [[ -n "$ca" && -f "$HERE/$ca" ]]; then
  put "$HERE/$ca" "$PLATFORM_DIR/$ca" 0644
fi
put "$PARAMS_FILE" "$PLATFORM_DIR/platform_parameters.json" 0644
[[ -d "$STATE_DIR" ]] || mkdir -p "$STATE_DIR"
# What the copy holds now, checked against the deploy's record by on_init_complete.sh: the users sync runs these as
# root only while they still hold these bytes and only root can change them (lib/verify.sh verify_local_copy).
lib_py verify.py manifest "$PLATFORM_DIR" "${copied[@]}" >"$STATE_DIR/platform_scripts.sha256.new"
mv -f "$STATE_DIR/platform_scripts.sha256.new" "$STATE_DIR/platform_scripts.sha256"
digest="$(sha256sum "$PARAMS_FILE")"
digest="${digest%% *}"
applied=""
[[ ! -f "$STATE_DIR/applied_parameters.sha256" ]] || applied="$(<"$STATE_DIR/applied_parameters.sha256")"
if [[ "$digest" != "$applied" ]]; then
  echo "$digest" >"$STATE_DIR/applied_parameters.sha256"
fi

units="$(mktemp -d)"
trap 'rm -rf "$units"' EXIT
write_text "$units/$SERVICE" <<UNIT
# Written by the HyperPod platform's install_users_sync.sh.
[Unit]
Description=Apply user changes from $uri
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=/bin/bash $PLATFORM_DIR/sync_users.sh
UNIT
# OnActiveSec counts from the timer's start, so the first run comes two minutes after installation (or boot);
# the random delay spreads the S3 reads of a large cluster.
write_text "$units/$TIMER" <<UNIT
# Written by the HyperPod platform's install_users_sync.sh.
[Unit]
Description=Apply user changes from the cluster's parameters every two minutes

[Timer]
OnActiveSec=2min
OnUnitActiveSec=2min
RandomizedDelaySec=30s

[Install]
WantedBy=timers.target
UNIT

# nosuid,nodev on FSx at every boot before logins and jobs (fsx_nosuid.sh), and whenever its mount unit comes up.
fsx="$(param fsx.mount_path)"
mount_unit=""
[[ -z "$fsx" ]] || mount_unit="$(systemd-escape --path --suffix=mount "$fsx" 2>/dev/null)" || mount_unit=""
write_text "$units/$NOSUID" <<UNIT
# Written by the HyperPod platform's install_users_sync.sh.
[Unit]
Description=FSx for Lustre mounted nosuid,nodev before logins and jobs
DefaultDependencies=no
After=local-fs.target network-online.target remote-fs.target${mount_unit:+ $mount_unit}
Wants=network-online.target
Before=systemd-user-sessions.service sshd.service ssh.service slurmd.service

[Service]
Type=oneshot
ExecStart=/bin/bash $PLATFORM_DIR/fsx_nosuid.sh
TimeoutStartSec=180

[Install]
WantedBy=multi-user.target${mount_unit:+ $mount_unit}
UNIT

WROTE=0
put "$units/$SERVICE" "$SYSTEMD_DIR/$SERVICE" 0644
put "$units/$TIMER" "$SYSTEMD_DIR/$TIMER" 0644
put "$units/$NOSUID" "$SYSTEMD_DIR/$NOSUID" 0644
if ((WROTE)) || ! systemctl is-enabled --quiet "$TIMER" || ! systemctl is-enabled --quiet "$NOSUID"; then
  systemctl daemon-reload
  systemctl enable "$TIMER"
  systemctl enable "$NOSUID"
  systemctl restart "$TIMER"
  log "users sync timer active: $uri, every 2 minutes; $NOSUID enabled"
fi
