#!/usr/bin/env bash
# Controller only, when cluster.accounting.enabled: makes Slurm's accounting database hold the configured departments
# (accounts), their users' associations and coordinators, QoS and fair share, with `sacctmgr -i`.
#
# HyperPod runs slurmdbd and MariaDB on the controller itself ("By default, SageMaker HyperPod deploys MariaDB on your
# cluster's controller instance", https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html),
# and owns slurm.conf and slurmdbd.conf; this script only talks to slurmdbd through sacctmgr, and writes no Slurm
# configuration file. It reads the current state (`sacctmgr -n -P show ...`), lets lib/accounting.py work out the
# commands that are needed, runs them, then reads the state again and fails unless nothing is left to do. A second
# run with the same parameters issues no command. Removing a user from a department removes that association only;
# the user's jobs stay in the database (sacct shows them).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"

if [[ "$(param accounting.enabled)" != true ]]; then
  log "cluster.accounting.enabled is false: nothing to apply"
  exit 0
fi

accounting_py() {
  python3 "$LIB_DIR/accounting.py" "$@"
}

# slurmdbd starts with the controller; sacctmgr answers once it is up and slurmctld has registered the cluster.
wait_until "$SLURM_WAIT_ATTEMPTS" "slurmdbd to answer sacctmgr" sacctmgr -n -P show cluster format=cluster ||
  die "slurmdbd did not answer: is accounting enabled in HyperPod's slurm.conf (accounting.conf)?"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
scontrol show config >"$work/config.txt" || die "scontrol show config failed: is slurmctld running?"
cluster="$(awk -F' *= *' '$1 == "ClusterName" {print $2}' "$work/config.txt")"
[[ -n "$cluster" ]] || die "no ClusterName in scontrol show config"
log "Slurm cluster: $cluster"

while IFS= read -r warning; do
  log "WARNING: $warning"
done < <(accounting_py check-config "$PARAMS_FILE" "$work/config.txt")

if [[ "$(accounting_py uses-gpu "$PARAMS_FILE")" == true ]] &&
  ! sacctmgr -n -P show tres format=type,name | grep -qx 'gres|gpu'; then
  die "a QoS limits gpu, but slurmdbd does not track gres/gpu (sacctmgr show tres); add AccountingStorageTRES=gres/gpu to slurm.conf or remove the gpu limits"
fi

dump_state() {
  local dir=$1
  mkdir -p "$dir"
  sacctmgr -n -P show cluster format=cluster >"$dir/clusters.txt"
  sacctmgr -n -P show qos format=name,description,priority,maxwall,maxtrespu,grptres,maxjobspu >"$dir/qos.txt"
  sacctmgr -n -P show assoc where "cluster=$cluster" format=account,user,fairshare,qos,defaultqos >"$dir/assoc.txt"
  sacctmgr -n -P show account withcoord format=account,description,organization,coordinators >"$dir/accounts.txt"
  sacctmgr -n -P show user format=user,defaultaccount >"$dir/users.txt"
}

dump_state "$work/before"
accounting_py plan "$PARAMS_FILE" "$cluster" "$work/before" >"$work/plan.txt"
if [[ ! -s "$work/plan.txt" ]]; then
  log "accounting is up to date: nothing changed"
  exit 0
fi

count=0
while IFS=$'\t' read -ra args; do
  log "sacctmgr -i ${args[*]}"
  sacctmgr -i "${args[@]}" >"$work/out.txt" 2>&1 || {
    cat "$work/out.txt"
    die "sacctmgr ${args[*]} failed"
  }
  count=$((count + 1))
done <"$work/plan.txt"

dump_state "$work/after"
accounting_py plan "$PARAMS_FILE" "$cluster" "$work/after" >"$work/left.txt"
if [[ -s "$work/left.txt" ]]; then
  die "after $count sacctmgr command(s) the database still differs; left to do: $(tr '\t\n' ' ;' <"$work/left.txt")"
fi
log "accounting applied: $count sacctmgr command(s)"
