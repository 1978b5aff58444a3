#!/usr/bin/env bash
# Controller only. GPUs are Slurm GRES on HyperPod: its cluster agent writes `Gres=gpu:<type>:<count>` on the NodeName
# line of every GPU node and a gres.conf beside slurm.conf (AWS's own operator notes, awslabs/awsome-distributed-ai@
# 95b939cd, 1.architectures/5.sagemaker-hyperpod/tools/devops-agent/docs/hyperpod-mental-model.md: "GRES-attached nodes
# (e.g. `Gres=gpu:h100:8`) — which includes every HyperPod GPU node"). Jobs ask for them with `--gres=gpu:N`.
#
# The platform cannot add GRES itself within its contract: GresTypes "requires a restart of slurmctld and the slurmd
# daemons" (slurm.conf(5), Slurm 22.05), and a node's Gres= is part of its NodeName line, which only slurm.conf
# (HyperPod's) defines: a second NodeName line for the same node in an included file stops slurmctld ("fatal:
# Duplicated NodeHostName ... in config file", checked with slurmctld 22.05.8). So this script checks and reports, it changes nothing: for each compute group whose instance
# type has NVIDIA GPUs (provisioning parameters worker_groups[].gpus, from config/facts/accelerators.json), every node
# of its partition must show that many `gpu` GRES in slurmctld. A mismatch is logged as a WARNING (a QoS gpu limit or
# `--gres=gpu:N` then would not mean what the config says); the script exits 0 so a node is never failed for it.
#
# Usage: check_gres.sh   (reads PARAMS_FILE; SLURM_CONF for the client commands)
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

# gpu_count GRES -> total gpu count in sinfo's %G ("gpu:a10g:4(S:0),shard:8" -> 4; "(null)" -> 0)
gpu_count() {
  local total=0 entry count
  IFS=, read -ra entries <<<"$1"
  for entry in "${entries[@]}"; do
    entry="${entry%%(*}"
    [[ "$entry" == gpu || "$entry" == gpu:* ]] || continue
    count="${entry##*:}"
    [[ "$count" =~ ^[0-9]+$ ]] || count=1 # "gpu" or "gpu:type" alone means one
    total=$((total + count))
  done
  echo "$total"
}

gpu_groups="$(python3 -S -c '
import json, sys
for g in json.load(open(sys.argv[1])).get("worker_groups") or []:
    if int(g.get("gpus") or 0) > 0:
        print(g["instance_group_name"], g.get("partition_name") or g["instance_group_name"], int(g["gpus"]), sep="\t")
' "$PARAMS_FILE")"
if [[ -z "$gpu_groups" ]]; then
  log "no compute group has NVIDIA GPUs: no GRES to check"
  exit 0
fi

warnings=0
wait_for_slurmctld "reading its GresTypes and nodes (scontrol show config, sinfo)"
gres_types="$(scontrol show config | sed -n 's/^GresTypes[[:space:]]*=[[:space:]]*//p')"
while IFS=$'\t' read -r group partition want; do
  if [[ ",$gres_types," != *,gpu,* ]]; then
    log "WARNING: $group has $want GPU(s) per node but slurmctld's GresTypes is '${gres_types:-(none)}': HyperPod" \
      "has not configured GPUs as GRES, so --gres=gpu:N and QoS gpu limits cannot be used"
    warnings=$((warnings + 1))
    continue
  fi
  nodes=0
  while read -r node gres; do
    [[ -n "$node" ]] || continue
    nodes=$((nodes + 1))
    have="$(gpu_count "$gres")"
    if [[ "$have" -ne "$want" ]]; then
      log "WARNING: node $node of $group (partition $partition) has $have GPU GRES ('$gres'); its instance type has $want"
      warnings=$((warnings + 1))
    fi
  done < <(sinfo -h -N -p "$partition" -o '%N %G')
  log "$group (partition $partition): $nodes node(s) checked for gpu:$want"
done <<<"$gpu_groups"

if [[ "$warnings" -eq 0 ]]; then
  log "GPU GRES match the instance types"
else
  log "$warnings GPU GRES warning(s); jobs request GPUs with --gres=gpu:N (see the README, GPUs)"
fi
