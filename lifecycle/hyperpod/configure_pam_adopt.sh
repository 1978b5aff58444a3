#!/usr/bin/env bash
# pam_slurm_adopt (platform_parameters.json `slurm.pam_slurm_adopt`, from cluster.pam_slurm_adopt): on compute nodes an
# SSH login is allowed only to a user with a job on that node, and the session joins that job, so Slurm ends it with
# the job (https://slurm.schedmd.com/pam_slurm_adopt.html). Root always passes (the module's own rule); `users` with
# `sudo: true` and members of cluster.directory.admin_groups pass through pam_access before it. Login nodes and the
# controller keep ordinary SSH.
#
# compute:    a delimited block at the end of $PAM_SSHD (/etc/pam.d/sshd), so after the account stack's common-account:
#               account sufficient pam_access.so accessfile=$ACCESS_FILE   (the admins, then -:ALL:ALL)
#               account required   <path>/pam_slurm_adopt.so service=sshd
#             (the module acts only for the PAM service named by `service=`, the name of the file it is in.)
#             The module must be built for the Slurm HyperPod runs (a distribution's package is built against its own
#             libslurm; AWS's reference script compiles it from the matching Slurm release at boot, fetching it from
#             GitHub: awslabs/awsome-distributed-ai@95b939cd base-config/utils/pam_adopt_cgroup_wheel.sh). HyperPod's
#             AMI has none, so a node without it installs the operator's package(s) from cluster.pam_slurm_adopt_
#             artifacts (platform_parameters.json `pam_slurm_adopt.artifacts`: S3 mirror, SHA-256 checked before
#             anything is installed, lib/artifacts.sh). The config refuses pam_slurm_adopt without them. Still no
#             module: stop, naming the paths looked in.
# controller: PrologFlags=Contain (every allocation gets the "extern" step sessions are adopted into) in a delimited
#             block of accounting.conf, the file HyperPod's slurm.conf includes, then `scontrol reconfigure`. AWS's
#             HyperPod notes add PrologFlags and apply it with `scontrol reconfigure` (awsome-distributed-ai@95b939cd,
#             5.sagemaker-hyperpod/health_check/README.md), so HyperPod does not set it. slurm.conf(5) wants
#             ProctrackType=proctrack/cgroup for pam_slurm_adopt, and it is Slurm 24.11's default where Slurm is built
#             with cgroup support (src/common/read_config.h DEFAULT_PROCTRACK_TYPE at slurm-24-11-5-1); HyperPod's
#             slurmd fetches a cgroup.conf with slurm.conf (hyperpod-mental-model.md at awsome-distributed-ai@95b939cd),
#             so its Slurm has it. slurm.conf is HyperPod's and ProctrackType is the slurmd's process tracking for
#             every running step, so the platform does not change it (AWS's reference rewrites slurm.conf and restarts
#             the daemons: base-config/utils/pam_adopt_cgroup_wheel.sh): a contract warning when slurm.conf sets
#             another value (node_contract.json, slurm-proctrack-cgroup). tests/e2e/test_slurm_gres_adopt.py shows
#             a session ending with its job on proctrack/cgroup. A slurm.conf that includes no accounting.conf
#             (lifecycle/node_contract.json, slurm-conf-includes-accounting-conf, unverified for the API-driven
#             configuration) gets nothing: a contract warning, and the node continues.
# Disabled: removes the blocks an earlier run wrote. Idempotent: a second run changes nothing.
#
# Usage: configure_pam_adopt.sh controller|login|compute
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/artifacts.sh
source "$HERE/lib/artifacts.sh"

node_type="${1:?usage: configure_pam_adopt.sh controller|login|compute}"
PAM_SSHD="${PAM_SSHD:-/etc/pam.d/sshd}"
ACCESS_FILE="${ACCESS_FILE:-/etc/security/hyperpod-slurm-admins.conf}"
PAM_SLURM_ADOPT_CANDIDATES="${PAM_SLURM_ADOPT_CANDIDATES:-/opt/slurm/lib/security/pam_slurm_adopt.so \
/lib/security/pam_slurm_adopt.so /lib/x86_64-linux-gnu/security/pam_slurm_adopt.so \
/usr/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so /usr/lib64/security/pam_slurm_adopt.so}"
SLURM_CONF="${SLURM_CONF:-$SLURM_CONF_DIR/slurm.conf}"
INCLUDED_CONF="${INCLUDED_CONF:-$SLURM_CONF_DIR/accounting.conf}"
SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"
BEGIN_MARK="# BEGIN hyperpod-platform pam_slurm_adopt (configure_pam_adopt.sh manages this block; edits are overwritten)"
END_MARK="# END hyperpod-platform pam_slurm_adopt"

# The parameters this script reads (the key, the users and admin groups), in one Python start: from memory below.
params slurm.pam_slurm_adopt
enabled="$(param slurm.pam_slurm_adopt)"
[[ "$enabled" == true ]] || enabled=false

configure_controller() {
  local prolog_flags proctrack lines=()
  if [[ "$enabled" == false ]] && ! grep -qxF "$BEGIN_MARK" "$INCLUDED_CONF" 2>/dev/null; then
    log "pam_slurm_adopt is off: nothing to change"
    return 0
  fi
  wait_until "$SLURM_WAIT_ATTEMPTS" "a complete $SLURM_CONF" grep -qiE '^\s*SlurmctldHost\s*=' "$SLURM_CONF" ||
    die "cannot read a slurm.conf with SlurmctldHost at $SLURM_CONF"
  if [[ "$enabled" == true ]]; then
    prolog_flags="$(slurm_setting PrologFlags)"
    if [[ -n "$prolog_flags" && ",${prolog_flags,,}," != *,contain,* ]]; then
      die "$SLURM_CONF sets PrologFlags=$prolog_flags without Contain; pam_slurm_adopt needs Contain and the" \
        "platform does not edit slurm.conf: add Contain there or set cluster.pam_slurm_adopt: false"
    fi
    [[ -n "$prolog_flags" ]] || lines=("PrologFlags=Contain")
    # Unset is Slurm's default, proctrack/cgroup (see the header).
    proctrack="$(slurm_setting ProctrackType)"
    if [[ -n "$proctrack" && "${proctrack,,}" != proctrack/cgroup ]]; then
      contract_warn slurm-proctrack-cgroup "ProctrackType is '$proctrack', not proctrack/cgroup: users without" \
        "a job are still refused, but adopted SSH sessions are not contained and may outlive the job (changing" \
        "ProctrackType needs a restart of every Slurm daemon, which the platform never does)"
    fi
  fi
  # Only a setting to write needs the included file; removing our own block from it does not.
  if ((${#lines[@]})) && ! included_conf "pam_slurm_adopt's PrologFlags=Contain (SSH to compute nodes stays limited to" \
    "users with a job there, but sessions are not adopted into the job)"; then
    return 0
  fi
  if set_block "$INCLUDED_CONF" "${lines[@]}"; then
    log "wrote the pam_slurm_adopt settings (${lines[*]:-none}) to $INCLUDED_CONF"
    wait_for_slurmctld "scontrol reconfigure (pam_slurm_adopt settings)"
    SLURM_CONF="$SLURM_CONF" scontrol reconfigure
    log "slurmctld reconfigured"
  else
    log "$INCLUDED_CONF already has the pam_slurm_adopt settings"
  fi
}

find_module() {
  local candidate
  for candidate in $PAM_SLURM_ADOPT_CANDIDATES; do
    [[ -f "$candidate" ]] && { echo "$candidate"; return 0; }
  done
  return 1
}

configure_compute() {
  local module admins=()
  if [[ "$enabled" == false ]]; then
    if set_block "$PAM_SSHD"; then
      log "removed pam_slurm_adopt from $PAM_SSHD"
    else
      log "pam_slurm_adopt is off: nothing to change"
    fi
    set_block "$ACCESS_FILE" || true
    return 0
  fi
  module="$(find_module)" || { install_artifacts pam_slurm_adopt && module="$(find_module)"; } ||
    die "pam_slurm_adopt.so is not on this node (looked in: $PAM_SLURM_ADOPT_CANDIDATES)." \
    "It must be built for the Slurm release HyperPod runs ($(sinfo --version 2>/dev/null || echo 'sinfo --version'))," \
    "not taken from the distribution: list its package in cluster.pam_slurm_adopt_artifacts, or set" \
    "cluster.pam_slurm_adopt: false"
  [[ -f "$PAM_SSHD" ]] || die "$PAM_SSHD does not exist: is openssh-server installed?"
  mapfile -t admins < <(pam_access_admins)
  # pam_access(8) file: root, the config's sudo users and the directory's admin groups may log in without a job;
  # everyone else goes on to pam_slurm_adopt (a failing `sufficient` module is ignored).
  if set_block "$ACCESS_FILE" "+:root${admins[*]:+ ${admins[*]}}:ALL" "-:ALL:ALL"; then
    log "wrote $ACCESS_FILE (admins: ${admins[*]:-none})"
  fi
  chmod 0644 "$ACCESS_FILE"
  if set_block "$PAM_SSHD" "account sufficient pam_access.so accessfile=$ACCESS_FILE" \
    "account required $module service=$(basename "$PAM_SSHD")"; then
    log "added pam_slurm_adopt ($module) to $PAM_SSHD"
  else
    log "$PAM_SSHD already has pam_slurm_adopt"
  fi
  if [[ -r "${SSHD_CONFIG:-/etc/ssh/sshd_config}" ]] &&
    grep -qiE '^[[:space:]]*UsePAM[[:space:]]+no' "${SSHD_CONFIG:-/etc/ssh/sshd_config}"; then
    log "WARNING: ${SSHD_CONFIG:-/etc/ssh/sshd_config} has UsePAM no: sshd skips $PAM_SSHD and pam_slurm_adopt"
  fi
}

case "$node_type" in
  controller) configure_controller ;;
  compute) configure_compute ;;
  login) log "login node: SSH stays open to every cluster user (pam_slurm_adopt is for compute nodes)" ;;
  *) die "usage: configure_pam_adopt.sh controller|login|compute (got '$node_type')" ;;
esac
