#!/usr/bin/env bash
# Slurm settings on top of HyperPod's native Slurm configuration. HyperPod writes slurm.conf
# (nodes, partitions) and starts the daemons; this script never touches those lines.
#
# Auto-resume (`srun --auto-resume=1`) needs nothing here. It is implemented by HyperPod's own
# SPANK plugin and agents, which ship in the HyperPod AMI and are wired into plugstack.conf by
# HyperPod; AWS's reference lifecycle scripts (awsome-distributed-training, base-config) have no
# auto-resume step either. What can break it is a lifecycle script that *rewrites* plugstack.conf
# (a common way to enable pyxis), which drops HyperPod's entry. So we only ever append to
# plugstack.conf, and with auto_resume on we check that srun still offers the flag.
#
# Usage: configure_slurm.sh controller|login|compute
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

node_type="${1:?usage: configure_slurm.sh controller|login|compute}"
plugstack="$SLURM_CONF_DIR/plugstack.conf"
changed=false

# Append LINE to FILE unless it is already there.
ensure_line() {
  local file=$1 line=$2
  touch "$file"
  grep -qxF "$line" "$file" && return 0
  echo "$line" >>"$file"
  changed=true
  log "added to $file: $line"
}

find_pyxis_conf() {
  local candidate
  for candidate in ${PYXIS_CONF:-/usr/local/share/pyxis/pyxis.conf /usr/share/pyxis/pyxis.conf}; do
    [[ -f "$candidate" ]] && { echo "$candidate"; return 0; }
  done
  return 0
}

enable_pyxis() {
  local conf link="$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf"
  [[ "$(param container_runtime.enabled)" == "true" ]] || return 0
  conf="$(find_pyxis_conf)"
  if [[ -z "$conf" ]]; then
    log "pyxis is not installed (no pyxis.conf found): plugstack.conf left as is"
    return 0
  fi
  mkdir -p "$(dirname "$link")"
  if [[ "$(readlink "$link" || true)" != "$conf" ]]; then
    ln -sfn "$conf" "$link"
    changed=true
  fi
  # An explicit path, not plugstack.conf.d/*: configless Slurm cannot serve a wildcard include.
  ensure_line "$plugstack" "include $link"
}

check_auto_resume() {
  [[ "$(param slurm.auto_resume)" == "true" ]] || return 0
  if ! command -v srun >/dev/null; then
    log "srun not on PATH yet: cannot check for --auto-resume (HyperPod provides it)"
  elif srun --help 2>&1 | grep -q -- '--auto-resume'; then
    log "srun offers --auto-resume"
  else
    log "WARNING: srun does not list --auto-resume yet; expected if HyperPod starts Slurm after on_create, otherwise check $plugstack"
  fi
}

enable_pyxis
check_auto_resume

if [[ "$changed" == true && "$node_type" == controller ]]; then
  if systemctl is-active --quiet slurmctld; then
    scontrol reconfigure
    log "slurmctld reconfigured"
  else
    log "slurmctld not running yet: it will read the new settings when it starts"
  fi
fi
