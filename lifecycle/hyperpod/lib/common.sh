# shellcheck shell=bash
# Helpers and path defaults shared by the lifecycle scripts. Sourced, never run.
# Every system path is an environment variable so tests can point it at a temp dir.

LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HYPERPOD_DIR="$(dirname "$LIB_DIR")"

export PARAMS_FILE="${PARAMS_FILE:-$HYPERPOD_DIR/provisioning_parameters.json}"
export RESOURCE_CONFIG="${RESOURCE_CONFIG:-/opt/ml/config/resource_config.json}"
export LOG_DIR="${LOG_DIR:-/var/log/provision}"
export FSTAB="${FSTAB:-/etc/fstab}"
export SUDOERS_DIR="${SUDOERS_DIR:-/etc/sudoers.d}"
export SLURM_CONF_DIR="${SLURM_CONF_DIR:-/opt/slurm/etc}"
export DEFAULT_HOME_ROOT="${DEFAULT_HOME_ROOT:-/home}"
export RETRY_DELAY="${RETRY_DELAY:-10}"

log() {
  printf '%s [%s] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(basename "$0" .sh)" "$*"
}

die() {
  log "ERROR: $*" >&2
  exit 1
}

# param KEY.PATH -> scalar from the parameters file ("" for null/missing, true/false for booleans)
param() {
  python3 "$LIB_DIR/params.py" get "$PARAMS_FILE" "$1"
}

params_py() {
  python3 "$LIB_DIR/params.py" "$@"
}

# retry ATTEMPTS CMD... : runs CMD until it succeeds, sleeping RETRY_DELAY seconds between tries.
retry() {
  local attempts=$1 n=1
  shift
  until "$@"; do
    if ((n >= attempts)); then
      log "giving up after $attempts attempts: $*"
      return 1
    fi
    log "attempt $n/$attempts failed, retrying in ${RETRY_DELAY}s: $*"
    sleep "$RETRY_DELAY"
    n=$((n + 1))
  done
}

# Where home directories go: on FSx when it is mounted, so they are the same on every node.
home_root() {
  local path
  path="$(param fsx.mount_path)"
  if [[ -n "$path" ]] && mountpoint -q "$path"; then
    echo "$path/home"
  else
    echo "$DEFAULT_HOME_ROOT"
  fi
}
