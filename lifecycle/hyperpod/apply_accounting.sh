#!/usr/bin/env bash
# Controller only, on every run of the hook and of the users sync: makes Slurm's accounting database hold an association
# for every configured user and, when cluster.accounting.enabled, the departments (accounts), their users' associations
# and coordinators, QoS and fair share, with `sacctmgr -i`.
#
# HyperPod runs slurmdbd and MariaDB on the controller itself ("By default, SageMaker HyperPod deploys MariaDB on your
# cluster's controller instance", https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html),
# and owns slurm.conf and slurmdbd.conf; this script only talks to slurmdbd through sacctmgr, and writes no Slurm
# configuration file. Whether HyperPod's slurm.conf enforces associations is not published
# (lifecycle/node_contract.json, accounting-enforces-associations): if it does, a user without one cannot submit jobs,
# so every configured user is registered whenever slurmdbd answers (a user no department lists, or every user with
# accounting off, in the platform's account hyperpod-users), and a user removed from the config loses the platform's
# associations. What is enforced decides only what an unreachable slurmdbd means:
#   - slurm.conf sends accounting elsewhere (AccountingStorageType is not slurmdbd): no association is needed; nothing
#     to do, unless accounting is enabled (then the node fails: departments and QoS were asked for);
#   - slurmdbd does not answer (bounded wait): the node fails when accounting is enabled or associations are enforced
#     (users could not run jobs); otherwise a contract warning, and the node continues.
# It reads the current state (`sacctmgr -n -P show ...`), lets lib/accounting.py work out the commands that are needed,
# runs them, then reads the state again and fails unless nothing is left to do. A second run with the same parameters
# issues no command. Removing a user from a department removes that association only; the user's jobs stay in the
# database (sacct shows them). A QoS limit on a TRES slurmdbd does not track (gres/gpu without AccountingStorageTRES,
# node_contract.json accounting-tracks-gres-gpu) is left out with a contract warning; the QoS's other limits apply.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"
enabled="$(param accounting.enabled)"
[[ "$enabled" == true ]] || enabled=false

accounting_py() {
  lib_py accounting.py "$@"
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wait_for_slurmctld "reading its configuration (scontrol show config)"
scontrol show config >"$work/config.txt" || die "scontrol show config failed, though slurmctld answered a moment ago"
config_value() {
  awk -F' *= *' -v key="$1" '$1 == key {print $2}' "$work/config.txt"
}
cluster="$(config_value ClusterName)"
[[ -n "$cluster" ]] || die "no ClusterName in scontrol show config"
storage="$(config_value AccountingStorageType)"
enforce="$(config_value AccountingStorageEnforce)"
log "Slurm cluster: $cluster; AccountingStorageType ${storage:-unset}; AccountingStorageEnforce ${enforce:-none}"

if [[ "$storage" != accounting_storage/slurmdbd ]]; then
  [[ "$enabled" == false ]] || die "cluster.accounting is enabled, but slurm.conf's AccountingStorageType is" \
    "'${storage:-unset}', not accounting_storage/slurmdbd: Slurm keeps no accounts, QoS or fair share to apply"
  log "Slurm keeps no accounting database on this cluster: users need no association, nothing to register"
  exit 0
fi

# slurmdbd starts with the controller; sacctmgr answers once it is up and slurmctld has registered the cluster.
if ! wait_until "$SLURM_WAIT_ATTEMPTS" "slurmdbd to answer sacctmgr" sacctmgr -n -P show cluster format=cluster; then
  if [[ "$enabled" == true ]]; then
    die "slurmdbd did not answer: cluster.accounting is enabled, so the departments and QoS cannot wait"
  elif [[ ",$enforce," == *,associations,* ]]; then
    die "slurmdbd did not answer, and slurm.conf enforces associations: the users could not run jobs"
  fi
  contract_warn slurmdbd-on-controller "slurmdbd did not answer: the users are not registered in accounting; slurm.conf" \
    "does not enforce associations (AccountingStorageEnforce=${enforce:-none}), so they can still run jobs; the next" \
    "users sync tries again"
  exit 0
fi

if [[ "$enabled" == true ]]; then
  while IFS= read -r warning; do
    log "WARNING: $warning"
  done < <(accounting_py check-config "$PARAMS_FILE" "$work/config.txt")
fi

dump_state() {
  local dir=$1
  mkdir -p "$dir"
  sacctmgr -n -P show cluster format=cluster >"$dir/clusters.txt"
  sacctmgr -n -P show qos format=name,description,priority,maxwall,maxtrespu,grptres,maxjobspu >"$dir/qos.txt"
  sacctmgr -n -P show assoc where "cluster=$cluster" format=account,user,fairshare,qos,defaultqos >"$dir/assoc.txt"
  sacctmgr -n -P show account withcoord format=account,description,organization,coordinators >"$dir/accounts.txt"
  sacctmgr -n -P show user format=user,defaultaccount >"$dir/users.txt"
  sacctmgr -n -P show tres format=type,name >"$dir/tres.txt"
}

dump_state "$work/before"
while IFS= read -r line; do
  contract_warn accounting-tracks-gres-gpu "$line"
done < <(accounting_py untracked "$PARAMS_FILE" "$work/before")
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
