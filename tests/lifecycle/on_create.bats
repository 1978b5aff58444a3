#!/usr/bin/env bats
# on_create.sh, the EKS clusters' entry point (LifeCycleConfig.OnCreate): it checks and reports, nothing else.

load test_helper

eks_params() {
  cat >"$PARAMS_FILE" <<'JSON'
{"version": 1, "orchestrator": "eks", "cluster_name": "ml-cluster",
 "worker_groups": [{"instance_group_name": "controller-machine"}]}
JSON
}

@test "on an EKS node it validates, logs the node and configures nothing else" {
  eks_params
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "node type: compute (instance group controller-machine)" "$LOG_DIR/on_create.log"
  grep -q "orchestrator: eks, nothing else to configure" "$LOG_DIR/on_create.log"
  grep -q "\[on_create\] done" "$LOG_DIR/on_create.log"
}

@test "Slurm parameters are refused: Slurm groups run on_init_complete.sh" {
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "a Slurm cluster's groups must run on_init_complete.sh (OnInitComplete)" "$LOG_DIR/on_create.log"
}

@test "invalid parameters fail before touching the node" {
  eks_params
  set_param version 2
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "version: expected 1, got 2" "$LOG_DIR/on_create.log"
}
