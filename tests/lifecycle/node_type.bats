#!/usr/bin/env bats
# Node-type detection in on_init_complete.sh, from resource_config.json + platform_parameters.json.

load test_helper

@test "controller group is detected as controller" {
  STUB_IPS="10.1.0.12 172.17.0.1" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node type: controller (instance group controller-machine)"* ]]
}

@test "login group is detected as login" {
  STUB_IPS="172.17.0.1 10.1.0.20" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node type: login (instance group login-group)"* ]]
}

@test "worker group is detected as compute" {
  STUB_IPS="10.1.0.31" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node type: compute (instance group worker-group-1)"* ]]
}

@test "an address missing from resource_config.json fails with a clear error and does nothing" {
  STUB_IPS="10.9.9.9 172.17.0.1" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"none of this node's addresses (10.9.9.9 172.17.0.1) is a CustomerIpAddress in resource_config.json"* ]]
  [ -z "$(mutating_calls)" ]
}

@test "a group missing from the parameters file fails and names the group" {
  set_param worker_groups '[{"instance_group_name": "other-group", "partition_name": "gpu", "gpus": 1}]'
  STUB_IPS="10.1.0.30" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"instance group 'worker-group-1' is neither the controller"* ]]
}

@test "null login_group is accepted" {
  set_param login_group null
  STUB_IPS="10.1.0.30" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node type: compute"* ]]
}

@test "an unsupported parameters version fails before anything changes" {
  set_param version 2
  run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"version: expected 1, got 2"* ]]
  [ -z "$(mutating_calls)" ]
}

@test "run as \`bash on_init_complete.sh\` from its own directory, every step finds its libraries" {
  cd "$SCRIPTS"
  STUB_IPS="10.1.0.31" run bash on_init_complete.sh
  [ "$status" -eq 0 ]
  [[ "$output" == *"node type: compute (instance group worker-group-1)"* ]]
  [[ "$output" == *"[configure_pam_adopt] "* ]] # the last step ran
}
