#!/usr/bin/env bats
# apply_accounting.sh's control flow, with sacctmgr and scontrol stubbed. The stub sacctmgr answers `show ...` from
# files in $SACCT/state (`sacctmgr -n -P` format), records every call, and after the first `-i` command switches to
# $SACCT/after when that exists (the database after the changes). What the commands do to a real slurmdbd is
# tested in tests/e2e/test_slurm_accounting.py; the plan itself in tests/lifecycle/test_accounting_plan.py.

load test_helper

setup_accounting() {
  SACCT="$T/sacct"
  export SACCT
  mkdir -p "$SACCT/state"
  cat >"$T/bin/sacctmgr" <<'EOF'
#!/bin/bash
echo "sacctmgr $*" >>"$STUB_LOG"
if [[ "$1" == -i ]]; then
  [[ -n "${SACCT_FAIL:-}" && "$*" == *"$SACCT_FAIL"* ]] && { echo "sacctmgr: error: stub failure" >&2; exit 1; }
  [[ -d "$SACCT/after" && ! -e "$SACCT/switched" ]] && { rm -rf "$SACCT/state"; cp -r "$SACCT/after" "$SACCT/state"; touch "$SACCT/switched"; }
  exit 0
fi
[[ -e "$SACCT/down" ]] && { echo "sacctmgr: error: Sending PersistInit msg: Connection refused" >&2; exit 1; }
for arg in "$@"; do
  case "$arg" in
    cluster | qos | assoc | account | user | tres) what=$arg; break ;;
  esac
done
cat "$SACCT/state/$what.txt" 2>/dev/null || true
EOF
  chmod +x "$T/bin/sacctmgr"
  rm "$T/bin/scontrol"
  cat >"$T/bin/scontrol" <<'EOF'
#!/bin/bash
echo "scontrol $*" >>"$STUB_LOG"
[[ "$1" == ping ]] && { echo "Slurmctld(primary) at ip-10-1-0-12 is UP"; exit 0; }
cat "$SACCT/config.txt"
EOF
  chmod +x "$T/bin/scontrol"
  cat >"$SACCT/config.txt" <<'EOF'
AccountingStorageEnforce = associations,limits,qos,safe
AccountingStorageType   = accounting_storage/slurmdbd
ClusterName             = ml-cluster
PriorityType            = priority/multifactor
PriorityWeightAge       = 1000
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 0
PriorityWeightQOS       = 1000
EOF
  echo "ml-cluster" >"$SACCT/state/cluster.txt"
  printf 'normal|Normal QOS default|0||||\n' >"$SACCT/state/qos.txt"
  printf 'root|||1|normal|\nroot|root|1|normal|\n' >"$SACCT/state/assoc.txt"
  printf 'root|default root account|root|\n' >"$SACCT/state/account.txt"
  printf 'root|root\n' >"$SACCT/state/user.txt"
  printf 'cpu|\nmem|\nnode|\nbilling|\ngres|gpu\n' >"$SACCT/state/tres.txt"
  set_param accounting '{"enabled": true,
    "qos": [{"name": "short", "description": "quick", "priority": 50, "max_tres_per_user": "gres/gpu=4",
             "grp_tres": "", "max_wall_minutes": 240, "max_jobs_per_user": null}],
    "departments": [{"name": "physics", "description": "Physics", "fairshare": 40, "qos": ["normal", "short"],
                     "default_qos": "normal", "users": ["alice"], "coordinators": ["alice"]}],
    "priority_weights": {"PriorityWeightFairshare": 10000, "PriorityWeightQOS": 1000, "PriorityWeightAge": 1000,
                         "PriorityWeightJobSize": 0}}'
}

# The database as it is once the parameters above are applied.
write_applied_state() {
  local dir=$1
  mkdir -p "$dir"
  echo "ml-cluster" >"$dir/cluster.txt"
  printf 'normal|Normal QOS default|0||||\nshort|quick|50|04:00:00|gres/gpu=4||\n' >"$dir/qos.txt"
  printf 'root|||1|normal|\nroot|root|1|normal|\nphysics||40|normal,short|normal\nphysics|alice|1|normal,short|normal\n' >"$dir/assoc.txt"
  printf 'hyperpod-users||1|normal|\nhyperpod-users|bob|1|normal|\n' >>"$dir/assoc.txt"
  printf 'physics|physics|hyperpod-platform|alice\nroot|default root account|root|\n' >"$dir/account.txt"
  printf 'hyperpod-users|cluster users without a department|hyperpod-platform|\n' >>"$dir/account.txt"
  printf 'alice|physics\nbob|hyperpod-users\nroot|root\n' >"$dir/user.txt"
  printf 'cpu|\nmem|\nnode|\nbilling|\ngres|gpu\n' >"$dir/tres.txt"
}

changes() {
  grep '^sacctmgr -i ' "$STUB_LOG" || true
}

@test "accounting disabled: every user is registered in hyperpod-users, idempotently" {
  setup_accounting
  set_param accounting.enabled false
  mkdir -p "$SACCT/after"
  cp "$SACCT/state/"* "$SACCT/after/"
  printf 'hyperpod-users||1|normal|\nhyperpod-users|alice|1|normal|\nhyperpod-users|bob|1|normal|\n' >>"$SACCT/after/assoc.txt"
  printf 'hyperpod-users|cluster users without a department|hyperpod-platform|\n' >>"$SACCT/after/account.txt"
  printf 'alice|hyperpod-users\nbob|hyperpod-users\n' >>"$SACCT/after/user.txt"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  [ "$(changes)" = "sacctmgr -i add account hyperpod-users Cluster=ml-cluster Description=cluster users without a department Organization=hyperpod-platform
sacctmgr -i add user alice,bob Account=hyperpod-users Cluster=ml-cluster DefaultAccount=hyperpod-users" ]
  # No QoS and no department with accounting off.
  [[ "$output" != *"add qos"* && "$output" != *physics* ]]
  : >"$STUB_LOG"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"accounting is up to date: nothing changed"* ]]
  [ -z "$(changes)" ]
}

@test "a user removed from the config loses the platform's association, and only that" {
  setup_accounting
  set_param accounting.enabled false
  printf 'hyperpod-users||1|normal|\nhyperpod-users|alice|1|normal|\nhyperpod-users|bob|1|normal|\n' >>"$SACCT/state/assoc.txt"
  printf 'hyperpod-users|carol|1|normal|\nlab|carol|1|normal|\n' >>"$SACCT/state/assoc.txt"
  printf 'hyperpod-users|cluster users without a department|hyperpod-platform|\n' >>"$SACCT/state/account.txt"
  printf 'alice|hyperpod-users\nbob|hyperpod-users\ncarol|lab\n' >>"$SACCT/state/user.txt"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$(changes)" = "sacctmgr -i remove user where name=carol account=hyperpod-users cluster=ml-cluster" ]
}

@test "accounting disabled, no slurmdbd in slurm.conf: nothing to register, nothing asked of sacctmgr" {
  setup_accounting
  set_param accounting.enabled false
  sed -i 's|accounting_storage/slurmdbd|accounting_storage/none|' "$SACCT/config.txt"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"Slurm keeps no accounting database on this cluster: users need no association"* ]]
  [ -z "$(calls sacctmgr)" ]
  set_param accounting.enabled true
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"cluster.accounting is enabled, but slurm.conf's AccountingStorageType is 'accounting_storage/none'"* ]]
}

@test "associations not enforced and slurmdbd down: reported, the node continues" {
  setup_accounting
  set_param accounting.enabled false
  sed -i 's/= associations,limits,qos,safe/= none/' "$SACCT/config.txt"
  touch "$SACCT/down"
  SLURM_WAIT_ATTEMPTS=2 run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: [contract:slurmdbd-on-controller] slurmdbd did not answer: the users are not registered"* ]]
  [ -z "$(changes)" ]
}

@test "associations enforced and slurmdbd down: the node fails, users could not run jobs" {
  setup_accounting
  set_param accounting.enabled false
  touch "$SACCT/down"
  SLURM_WAIT_ATTEMPTS=2 run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"slurmdbd did not answer, and slurm.conf enforces associations: the users could not run jobs"* ]]
}

@test "an empty database: QoS, the account, the user and the coordinator are added, then checked" {
  setup_accounting
  write_applied_state "$SACCT/after"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  [ "$(changes)" = "sacctmgr -i add qos short
sacctmgr -i modify qos where name=short set Description=quick Priority=50 MaxWall=240 MaxTRESPerUser=gres/gpu=4
sacctmgr -i add account physics Cluster=ml-cluster Description=Physics Organization=hyperpod-platform Fairshare=40 QOS=normal,short DefaultQOS=normal
sacctmgr -i add account hyperpod-users Cluster=ml-cluster Description=cluster users without a department Organization=hyperpod-platform
sacctmgr -i add user alice Account=physics Cluster=ml-cluster DefaultAccount=physics QOS=normal,short DefaultQOS=normal
sacctmgr -i add user bob Account=hyperpod-users Cluster=ml-cluster DefaultAccount=hyperpod-users
sacctmgr -i add coordinator account=physics names=alice" ]
  [[ "$output" == *"accounting applied: 7 sacctmgr command(s)"* ]]
  # The state was read again after the changes (the second round of show calls).
  [ "$(grep -c '^sacctmgr -n -P show assoc where cluster=ml-cluster' "$STUB_LOG")" -eq 2 ]
  [[ "$output" != *WARNING* ]]
}

@test "an up-to-date database: no sacctmgr command changes anything" {
  setup_accounting
  rm -r "$SACCT/state"
  write_applied_state "$SACCT/state"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"accounting is up to date: nothing changed"* ]]
  [ -z "$(changes)" ]
}

@test "a database that does not converge fails and says what is left" {
  setup_accounting
  run bash "$SCRIPTS/apply_accounting.sh" # no "after" state: the stub database never changes
  [ "$status" -ne 0 ]
  [[ "$output" == *"after 7 sacctmgr command(s) the database still differs; left to do: add qos short"* ]]
}

@test "a failing sacctmgr command stops the run and names the command" {
  setup_accounting
  SACCT_FAIL="add account physics" run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"stub failure"* ]]
  [[ "$output" == *"ERROR: sacctmgr add account physics"*"failed"* ]]
  [ "$(changes | wc -l)" -eq 3 ] # the two QoS commands, then the failing one; nothing after it
}

@test "slurmdbd never answers: bounded wait, then a clear failure, nothing changed" {
  setup_accounting
  touch "$SACCT/down"
  SLURM_WAIT_ATTEMPTS=3 run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -ne 0 ]
  [ "$(grep -c '^sacctmgr -n -P show cluster' "$STUB_LOG")" -eq 3 ]
  [[ "$output" == *"slurmdbd did not answer"* ]]
  [ -z "$(changes)" ]
}

@test "gpu limits without gres/gpu tracked: the other limits are applied and the gpu limit is reported" {
  setup_accounting
  printf 'cpu|\nmem|\nnode|\n' >"$SACCT/state/tres.txt"
  set_param accounting.qos '[{"name": "short", "description": "quick", "priority": 50,
    "max_tres_per_user": "cpu=8,gres/gpu=4", "grp_tres": "", "max_wall_minutes": 240, "max_jobs_per_user": null}]'
  write_applied_state "$SACCT/after"
  printf 'cpu|\nmem|\nnode|\n' >"$SACCT/after/tres.txt"
  sed -i 's/|gres\/gpu=4||$/|cpu=8||/' "$SACCT/after/qos.txt"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  changes | grep -qx "sacctmgr -i modify qos where name=short set Description=quick Priority=50 MaxWall=240 MaxTRESPerUser=cpu=8"
  [ -z "$(changes | grep gres/gpu)" ]
  [[ "$output" == *"WARNING: [contract:accounting-tracks-gres-gpu] QoS short: max_tres_per_user gres/gpu=4 not applied, slurmdbd does not track gres/gpu"* ]]
}

@test "limits not enforced and other priority weights are reported (slurm.conf is HyperPod's)" {
  setup_accounting
  rm -r "$SACCT/state"
  write_applied_state "$SACCT/state"
  sed -i -e 's/= associations,limits,qos,safe/= associations/' -e 's/PriorityWeightQOS       = 1000/PriorityWeightQOS       = 0/' \
    "$SACCT/config.txt"
  run bash "$SCRIPTS/apply_accounting.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: AccountingStorageEnforce is 'associations', without limits,qos"* ]]
  [[ "$output" == *"WARNING: PriorityWeightQOS is '0', cluster.accounting.priority_weights asks for 1000"* ]]
  [ -z "$(changes)" ]
}

@test "on_init_complete.sh applies accounting on the controller only, whether or not it is enabled" {
  cp -r "$SCRIPTS" "$T/scripts"
  printf '#!/bin/bash\necho applied >>"%s"\n' "$T/apply.calls" >"$T/scripts/apply_accounting.sh"
  record_deploy "$T/scripts"
  STUB_IPS="10.1.0.31" run bash "$T/scripts/on_init_complete.sh" # compute
  [ "$status" -eq 0 ]
  [ ! -e "$T/apply.calls" ]
  STUB_IPS="10.1.0.12 172.17.0.1" run bash "$T/scripts/on_init_complete.sh" # controller, accounting not enabled
  [ "$status" -eq 0 ]
  [ "$(cat "$T/apply.calls")" = applied ]
}
