#!/usr/bin/env bash
# Slurm settings on top of HyperPod's API-driven Slurm configuration. HyperPod writes slurm.conf (nodes,
# partitions) and runs the daemons; this script never touches those lines and never starts or restarts a daemon.
# In OnInitComplete mode HyperPod also sets up pyxis and Slurm's log rotation (lifecycle/node_contract.json: pyxis,
# slurm-log-rotation); what it set up is kept, and the platform fills in only what is missing, with a contract warning.
#
# - pyxis: a plugstack.conf.d/pyxis.conf already on the node (HyperPod's, often a link to pyxis's own pyxis.conf) is
#   never replaced, and a plugstack.conf that already loads pyxis gets no second line. Where pyxis is installed but not
#   loaded, the platform writes its own pyxis.conf, whose SPANK entry is `optional` (a build that does not match the
#   running Slurm then only loses the container flags instead of failing every srun), and the controller's
#   plugstack.conf includes it by its full path (configless Slurm cannot serve a plugstack.conf.d/* wildcard).
# - Auto-resume (`srun --auto-resume=1`) is HyperPod's own SPANK plugin, wired into plugstack.conf by HyperPod. We
#   only ever append to plugstack.conf, so its entry stays; with slurm.auto_resume we check srun still offers it.
# - Slurm's logs under /var/log/slurm: when a logrotate file of HyperPod's names them, the platform writes none (a
#   second entry for the same log is an error to logrotate) and removes its own from an earlier run; otherwise they
#   rotate at 50 MB (the daemons reopen them on SIGUSR2), so a busy controller does not fill its root volume.
# - The controller waits (bounded) for HyperPod's slurm.conf, and runs `scontrol reconfigure` only if plugstack.conf
#   changed: that pushes it to the configless slurmd daemons.
# - A login node takes no jobs. HyperPod's API places an instance group by SlurmConfig.NodeType and PartitionNames
#   (AWS::SageMaker::Cluster ClusterSlurmConfig); the platform gives the login group NodeType Login and no partition,
#   but HyperPod still registers login nodes as slurmd nodes, members of its catch-all `Nodes=ALL` default partition
#   (awsome-distributed-ai@95b939cd, hyperpod-mental-model.md, "Login node scheduling caveat"), and the API has no
#   default-partition setting. So the login node drains itself in Slurm (that caveat's own remedy): running jobs
#   finish, no new job is placed there, whatever partition names it; `srun`/`sbatch` from it work as before. HyperPod's
#   recovery acts only on a Reason of exactly Action:Reboot or Action:Replace, and a node drained with another reason
#   "sits drained ... but no action is taken" (same notes, "Slurm Reason="Action:..." matching is exact"); the
#   platform's reason contains no "Action:". A node another party drained is left as it is; slurm.conf is never touched.
#
# Usage: configure_slurm.sh controller|login|compute
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

node_type="${1:?usage: configure_slurm.sh controller|login|compute}"
params container_runtime.enabled slurm.auto_resume
plugstack="$SLURM_CONF_DIR/plugstack.conf"
LOGROTATE_CONF="${LOGROTATE_CONF:-/etc/logrotate.d/hyperpod-slurm}"
parent_dir "$LOGROTATE_CONF"
LOGROTATE_DIR="${LOGROTATE_DIR:-$PARENT}"
SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"
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

# install_if_different SOURCE TARGET MODE : replaces TARGET only when its content differs; returns 1 when unchanged.
install_if_different() {
  local PARENT
  same_file "$1" "$2" && return 1
  parent_dir "$2"
  mkdir -p "$PARENT"
  install -m "$3" "$1" "$2"
}

# The shared object the pyxis package installed, from the pyxis.conf it ships ("required /path/spank_pyxis.so").
find_pyxis_plugin() {
  local candidate
  for candidate in ${PYXIS_CONF:-/usr/local/share/pyxis/pyxis.conf /usr/share/pyxis/pyxis.conf}; do
    [[ -f "$candidate" ]] || continue
    awk '$1 == "required" || $1 == "optional" { print $2; exit }' "$candidate"
    return 0
  done
  return 0
}

# plugstack_loads_pyxis : the controller's plugstack.conf already loads pyxis (an include of a pyxis.conf or of
# plugstack.conf.d, or a spank_pyxis.so entry of its own).
plugstack_loads_pyxis() {
  [[ -f "$plugstack" ]] && grep -qE '^[[:space:]]*(include[[:space:]]+\S*(pyxis|plugstack\.conf\.d)|(required|optional)[[:space:]]+\S*spank_pyxis\.so)' "$plugstack"
}

enable_pyxis() {
  local plugin conf ours="$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf"
  [[ "$(param container_runtime.enabled)" == "true" ]] || return 0
  plugin="$(find_pyxis_plugin)"
  if [[ -z "$plugin" ]]; then
    log "pyxis is not installed (no pyxis.conf found): plugstack.conf left as is"
    return 0
  fi
  conf="$(mktemp)"
  echo "optional $plugin" >"$conf"
  if [[ -L "$ours" ]] || { [[ -e "$ours" ]] && ! cmp -s "$conf" "$ours"; }; then
    log "$ours is HyperPod's ($( [[ -L "$ours" ]] && echo "a link to $(readlink "$ours")" || echo "its own file")): kept"
  elif install_if_different "$conf" "$ours" 0644; then
    changed=true
    contract_warn pyxis "pyxis is installed but $ours was missing: wrote it (optional $plugin)"
  fi
  rm -f "$conf"
  # The controller serves plugstack.conf to the configless daemons, which read the included file locally: every node
  # gets the file, only the controller the include line.
  if [[ "$node_type" == controller ]]; then
    if plugstack_loads_pyxis; then
      log "$plugstack already loads pyxis: no line added"
    else
      ensure_line "$plugstack" "include $ours"
    fi
  fi
  return 0
}

# Logrotate files other than the platform's that name Slurm's log directory (HyperPod's).
slurm_rotation_elsewhere() {
  [[ -d "$LOGROTATE_DIR" ]] || return 0
  grep -lsE '/var/log/slurm(/|[[:space:]"]|$)' "$LOGROTATE_DIR"/* | grep -vxF "$LOGROTATE_CONF" || true
}

ensure_log_rotation() {
  local conf theirs
  theirs="$(slurm_rotation_elsewhere | paste -sd' ' -)"
  if [[ -n "$theirs" ]]; then
    if [[ -e "$LOGROTATE_CONF" ]]; then
      rm -f "$LOGROTATE_CONF"
      log "removed $LOGROTATE_CONF: $theirs rotates Slurm's logs already (logrotate refuses a second entry)"
    else
      log "Slurm's logs are rotated by $theirs (HyperPod's): no entry of the platform's"
    fi
    return 0
  fi
  conf="$(mktemp)"
  write_text "$conf" <<'CONF'
# Written by the HyperPod platform's configure_slurm.sh.
/var/log/slurm/*.log {
    size 50M
    rotate 4
    compress
    delaycompress
    missingok
    notifempty
    sharedscripts
    postrotate
        pkill -x --signal SIGUSR2 slurmctld || true
        pkill -x --signal SIGUSR2 slurmd || true
        pkill -x --signal SIGUSR2 slurmdbd || true
    endscript
}
CONF
  if install_if_different "$conf" "$LOGROTATE_CONF" 0644; then
    contract_warn slurm-log-rotation "no logrotate file in $LOGROTATE_DIR names /var/log/slurm: wrote $LOGROTATE_CONF"
  fi
  rm -f "$conf"
}

check_auto_resume() {
  [[ "$(param slurm.auto_resume)" == "true" ]] || return 0
  if ! command -v srun >/dev/null; then
    log "WARNING: srun is not on PATH: cannot check for --auto-resume"
  elif srun --help 2>&1 | grep -q -- '--auto-resume'; then
    log "srun offers --auto-resume"
  else
    contract_warn plugstack-hyperpod "srun does not list --auto-resume: HyperPod's SPANK entry in $plugstack is" \
      "missing or does not load (jobs cannot ask for auto-resume)"
  fi
}

if [[ "$node_type" == controller ]]; then
  wait_until "$SLURM_WAIT_ATTEMPTS" "HyperPod's $SLURM_CONF_DIR/slurm.conf" grep -qiE '^\s*SlurmctldHost\s*=' \
    "$SLURM_CONF_DIR/slurm.conf" || die "HyperPod has not written $SLURM_CONF_DIR/slurm.conf; is the instance group's" \
    "SlurmConfig set and the AMI from January 2026 or later?"
fi
enable_pyxis
ensure_log_rotation
check_auto_resume

LOGIN_DRAIN_REASON="login node: jobs run on the compute partitions (hyperpod platform)"

# keep_jobs_off_login_node : drains this login node in Slurm with LOGIN_DRAIN_REASON, once.
keep_jobs_off_login_node() {
  local node="${SLURM_NODE_NAME:-$(hostname -s)}" info reason
  if [[ -z "$node" ]]; then
    log "WARNING: this node has no host name to look up in Slurm: login node left as HyperPod registered it"
    return 0
  fi
  wait_for_slurmctld "the drain of login node $node"
  if ! info="$(scontrol show node "$node" 2>/dev/null)" || [[ -z "$info" ]]; then
    log "WARNING: Slurm does not know node $node: login node left as HyperPod registered it (jobs may land on it)"
    return 0
  fi
  reason="$(sed -n 's/^[[:space:]]*Reason=\(.*\) \[.*$/\1/p; s/^[[:space:]]*Reason=\([^[]*\)$/\1/p' <<<"$info" | head -n1)"
  if [[ "$reason" == "$LOGIN_DRAIN_REASON" ]]; then
    log "login node $node is drained for jobs already"
  elif grep -qE 'State=[A-Z+]*DRAIN' <<<"$info"; then
    log "login node $node is drained by someone else (Reason=$reason): left as it is"
  else
    scontrol update NodeName="$node" State=DRAIN Reason="$LOGIN_DRAIN_REASON"
    log "login node $node drained: no job lands on it, in any partition"
  fi
}

if [[ "$node_type" == login ]]; then
  keep_jobs_off_login_node
fi

# HyperPod may start slurmctld only after this script (node_contract.json, slurmctld-starts-in-parallel): whether its
# unit is active says nothing about whether it answers yet, so wait for an answer, then reconfigure.
if [[ "$changed" == true && "$node_type" == controller ]]; then
  wait_for_slurmctld "scontrol reconfigure (plugstack.conf changed)"
  scontrol reconfigure
  log "slurmctld reconfigured"
fi
