#!/usr/bin/env bash
# Controller only: SSH to the controller for administrators only. The controller holds the auth/jwt signing key, the
# controller role (which writes the Studio login secret and the client bundle's sha256) and, with accounting, the
# database secret; cluster users need it for none of their work (they submit from login nodes or Studio).
#
# A delimited block at the end of $PAM_SSHD (/etc/pam.d/sshd), after sshd's own account stack:
#   account required pam_access.so accessfile=$CONTROLLER_ACCESS_FILE
# and that pam_access(8) file:
#   +:root ubuntu <users with sudo: true> (<directory.admin_groups>...):ALL
#   -:ALL:ALL
# Never locked out: root, and `ubuntu`, the HyperPod AMI's administrator, which tools/connect.py's SSH-over-Session-
# Manager entries use. Session Manager shells (ssm-user, or run-as) do not go through sshd and are not affected.
# Re-run by the users sync on the controller, so the list follows `users[].sudo`. Idempotent; `slurm.controller_ssh:
# all` in the parameters removes both the block and the file (the default, also when the key is absent, is admins).
# sshd must use PAM (UsePAM yes, Ubuntu's default); with UsePAM no the block does nothing and the script says so.
#
# Usage: configure_controller_ssh.sh   (reads PARAMS_FILE)
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

PAM_SSHD="${PAM_SSHD:-/etc/pam.d/sshd}"
CONTROLLER_ACCESS_FILE="${CONTROLLER_ACCESS_FILE:-/etc/security/hyperpod-controller-ssh.conf}"
SSHD_CONFIG="${SSHD_CONFIG:-/etc/ssh/sshd_config}"
BEGIN_MARK="# BEGIN hyperpod-platform controller ssh (configure_controller_ssh.sh manages this block; edits are overwritten)"
END_MARK="# END hyperpod-platform controller ssh"
# Accounts that always keep SSH: root and the AMI's administrator.
ALWAYS="root ubuntu"

# The parameters this script reads (the key, the users and admin groups), in one Python start: from memory below.
params slurm.controller_ssh
policy="$(param slurm.controller_ssh)"
policy="${policy:-admins}"
case "$policy" in
  all)
    if set_block "$PAM_SSHD"; then log "SSH to the controller open to every user again: block removed from $PAM_SSHD"; fi
    if [[ -e "$CONTROLLER_ACCESS_FILE" ]]; then
      rm -f "$CONTROLLER_ACCESS_FILE"
      log "removed $CONTROLLER_ACCESS_FILE"
    fi
    exit 0
    ;;
  admins) ;;
  *) die "slurm.controller_ssh must be admins or all, got '$policy'" ;;
esac

if [[ ! -f "$PAM_SSHD" ]]; then
  log "$PAM_SSHD does not exist (no OpenSSH server on this node): no SSH to limit"
  exit 0
fi
mapfile -t admins < <(pam_access_admins)

if set_block "$CONTROLLER_ACCESS_FILE" "+:$ALWAYS${admins[*]:+ ${admins[*]}}:ALL" "-:ALL:ALL"; then
  log "wrote $CONTROLLER_ACCESS_FILE (SSH to the controller: $ALWAYS${admins[*]:+ ${admins[*]}})"
fi
chmod 0644 "$CONTROLLER_ACCESS_FILE"
if set_block "$PAM_SSHD" "account required pam_access.so accessfile=$CONTROLLER_ACCESS_FILE"; then
  log "SSH to the controller limited to administrators ($PAM_SSHD)"
else
  log "$PAM_SSHD already limits SSH to the controller's administrators"
fi
if [[ -r "$SSHD_CONFIG" ]] && grep -qiE '^[[:space:]]*UsePAM[[:space:]]+no' "$SSHD_CONFIG"; then
  log "WARNING: $SSHD_CONFIG has UsePAM no: sshd skips $PAM_SSHD, so every user can still SSH to the controller"
fi
