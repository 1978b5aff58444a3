#!/usr/bin/env bash
# At every boot, before anyone can log in or a job can start: FSx mounted nosuid,nodev again (lib/user_paths.sh
# ensure_nosuid_nodev). A reboot runs no lifecycle script, and HyperPod mounts its own FSx again its own way, without
# them; until the users sync's next run (up to two and a half minutes) a setuid file a user planted there would run as
# its owner. hyperpod-fsx-nosuid.service (install_users_sync.sh) runs this node's copy ordered before
# systemd-user-sessions.service (logins stay refused until it is done), slurmd.service and sshd.service, and again
# whenever the FSx mount unit becomes active. It waits a bounded time for the mount; a mount it cannot fix fails the
# unit with an ERROR, and logins then proceed (this unit never keeps a node from booting).
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/user_paths.sh
source "$HERE/lib/user_paths.sh"

FSX_BOOT_WAIT_ATTEMPTS="${FSX_BOOT_WAIT_ATTEMPTS:-30}"

fsx="$(param fsx.mount_path)"
[[ -n "$fsx" ]] || { log "no FSx in the parameters: nothing to check"; exit 0; }
if ! RETRY_DELAY="${RETRY_DELAY:-2}" wait_until "$FSX_BOOT_WAIT_ATTEMPTS" "FSx at $fsx" mountpoint -q "$fsx"; then
  log "WARNING: $fsx is not mounted yet; the users sync checks it at its next run, and this unit when it mounts"
  exit 0
fi
problem="$(ensure_nosuid_nodev "$fsx")" ||
  die "$problem; a setuid file a user planted on FSx runs as its owner on this node until it is fixed"
log "$fsx is mounted nosuid,nodev"
