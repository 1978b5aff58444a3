#!/usr/bin/env bash
# EKS nodes: containerd's and kubelet's data on the instance group's EBS volume (/opt/sagemaker, InstanceStorageConfigs
# ebs_volume_gib) instead of the root volume, where images and pod volumes would fill it while the data volume sits
# unused. Both of AWS's EKS references do the same (awslabs/awsome-distributed-ai@95b939cd
# 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create_main.sh, DISK_FOR_CONTAINERD_KUBELET=
# /opt/sagemaker, which the CloudFormation lifecycle-script-stack.yaml and the Terraform lifecycle_script module ship):
# kubelet's directory becomes a link into the volume, and containerd's root moves there. AWS sets containerd's `root`
# in its configuration (a sed on Amazon Linux 2, a whole config.toml of its own on AL2023, because nodeadm rewrites
# /etc/containerd/config.toml); here /var/lib/containerd becomes a link into the volume as well, which keeps the node's
# own containerd configuration and works the same on either OS. Links persist across reboots, where lifecycle scripts
# do not run again (lifecycle/node_contract.json, nvme-scratch).
#
# Safety: root works only on paths root owns. The volume must be a mount point, a directory owned by root and writable
# by no one else; the directories inside it are created or accepted only as real directories (never links) owned by
# root, mode 0700. Anything else: a warning, and the node keeps the root volume (it still works, only smaller). If
# containerd or kubelet already run, they are stopped for the move and started again; data already there is copied
# with owners, modes and links kept. Idempotent: a second run finds the links and changes nothing.
#
# Usage: eks_data_volume.sh
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

EKS_DATA_VOLUME="${EKS_DATA_VOLUME:-/opt/sagemaker}"
KUBELET_DIR="${KUBELET_DIR:-/var/lib/kubelet}"
CONTAINERD_DIR="${CONTAINERD_DIR:-/var/lib/containerd}"
DATA_VOLUME_WAIT_ATTEMPTS="${DATA_VOLUME_WAIT_ATTEMPTS:-12}"
# The services, in the order they stop (kubelet uses containerd); they start in the reverse order.
SERVICES=(kubelet containerd)

# owner_mode PATH : "uid mode" of PATH itself (not what a link points to).
owner_mode() {
  stat -c '%u %a' -- "$1"
}

# root_only_dir PATH : PATH is a real directory (no link), owned by this script's user, writable by no one else.
root_only_dir() {
  local owner mode
  [[ -d "$1" && ! -L "$1" ]] || return 1
  read -r owner mode <<<"$(owner_mode "$1")"
  [[ "$owner" == "$EUID" ]] && (((8#$mode & 8#022) == 0))
}

# volume_dir NAME : prints the volume's directory for NAME, created root-only if missing; fails on anything planted
# (its warnings go to stderr, which the node's log keeps too).
volume_dir() {
  local dir="$EKS_DATA_VOLUME/$1"
  if [[ -L "$dir" || (-e "$dir" && ! -d "$dir") ]]; then
    log "WARNING: $dir is not a plain directory ($(stat -c %F -- "$dir")): not used" >&2
    return 1
  fi
  if [[ ! -e "$dir" ]]; then
    mkdir -m 0700 -- "$dir"
  fi
  if ! root_only_dir "$dir"; then
    log "WARNING: $dir is owned by uid $(stat -c %u -- "$dir") or writable by others: not used" >&2
    return 1
  fi
  printf '%s\n' "$dir"
}

# move_onto_volume SYSTEM_DIR NAME : SYSTEM_DIR becomes a link to the volume's NAME directory, its content copied
# there first. Returns 2 when it was already done.
move_onto_volume() {
  local system_dir=$1 name=$2 target PARENT
  target="$(volume_dir "$name")" || return 1
  if [[ -L "$system_dir" ]]; then
    if [[ "$(readlink -- "$system_dir")" == "$target" ]]; then
      return 2
    fi
    log "WARNING: $system_dir is a link to $(readlink -- "$system_dir"), not set up here: left as it is"
    return 1
  fi
  if [[ -d "$system_dir" ]]; then
    # -a keeps owners, modes, links and times; the copy goes into the root-only target, never through a link.
    cp -a --no-dereference -- "$system_dir/." "$target/"
    rm -rf --one-file-system -- "$system_dir"
  fi
  parent_dir "$system_dir"
  mkdir -p -- "$PARENT"
  ln -s -- "$target" "$system_dir"
  log "$system_dir -> $target"
}

main() {
  local volume_ok owner mode stopped=() service result pair i
  if ! wait_until "$DATA_VOLUME_WAIT_ATTEMPTS" "the data volume at $EKS_DATA_VOLUME" mountpoint -q "$EKS_DATA_VOLUME"; then
    log "WARNING: $EKS_DATA_VOLUME is not mounted: containerd and kubelet keep their data on the root volume"
    return 0
  fi
  read -r owner mode <<<"$(owner_mode "$EKS_DATA_VOLUME")"
  volume_ok=true
  [[ -d "$EKS_DATA_VOLUME" && ! -L "$EKS_DATA_VOLUME" && "$owner" == "$EUID" ]] && (((8#$mode & 8#022) == 0)) ||
    volume_ok=false
  if [[ "$volume_ok" == false ]]; then
    log "WARNING: $EKS_DATA_VOLUME is owned by uid $owner with mode $mode (a link, or writable by others): containerd" \
      "and kubelet keep their data on the root volume"
    return 0
  fi
  if [[ "$(readlink -- "$KUBELET_DIR" || true)" == "$EKS_DATA_VOLUME/kubelet" &&
    "$(readlink -- "$CONTAINERD_DIR" || true)" == "$EKS_DATA_VOLUME/containerd" ]]; then
    log "kubelet and containerd keep their data on $EKS_DATA_VOLUME already"
    return 0
  fi
  for service in "${SERVICES[@]}"; do
    if systemctl is-active --quiet "$service"; then
      systemctl stop "$service"
      stopped+=("$service")
    fi
  done
  for pair in "$KUBELET_DIR kubelet" "$CONTAINERD_DIR containerd"; do
    result=0
    # shellcheck disable=SC2086 # two words: the system directory and the volume's name for it
    move_onto_volume $pair || result=$?
    case "$result" in
      0) ;;
      2) log "${pair%% *} is on $EKS_DATA_VOLUME already" ;;
      *) log "WARNING: ${pair%% *} stays on the root volume" ;;
    esac
  done
  for ((i = ${#stopped[@]} - 1; i >= 0; i--)); do
    systemctl start "${stopped[i]}"
  done
  ((${#stopped[@]} == 0)) || log "restarted: ${stopped[*]}"
}

main
