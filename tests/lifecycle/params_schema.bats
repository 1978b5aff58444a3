#!/usr/bin/env bats
# lib/params.py validate: platform_parameters.json checked against the schema generated from its one definition
# (constructs/node_parameters.py -> lib/platform_parameters.schema.json), with the node's python3 and nothing else.

load test_helper

validate() {
  run python3 -S "$SCRIPTS/lib/params.py" validate "$PARAMS_FILE"
}

# edit 'PYTHON STATEMENT' : runs the statement on the parameters as `p` and writes them back
edit() {
  python3 -S -c 'import json,sys; p=json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(p, open(sys.argv[1], "w"))' \
    "$PARAMS_FILE" "$1"
}

@test "the fixture the other tests run on is a valid Slurm file" {
  validate
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}

@test "a wrong type is refused naming the key, the value and what is allowed" {
  set_param slurm.auto_resume '"yes"'
  validate
  [ "$status" -eq 2 ]
  [[ "$output" == "error: invalid provisioning parameters: slurm.auto_resume: must be of type boolean, got 'yes'" ]]
}

@test "a missing key is refused naming it" {
  edit 'del p["accounting"]["qos"]'
  validate
  [ "$status" -eq 2 ]
  [[ "$output" == *"accounting.qos: missing"* ]]
}

@test "a key the definition does not have is ignored: a newer deployment's file still passes an older node" {
  set_param slurm.added_later '"x"' added_later '{"a": 1}'
  validate
  [ "$status" -eq 0 ]
}

@test "every problem is reported at once, each naming its key" {
  edit 'p["users"][0]["uid"] = 12; p["container_runtime"]["artifacts"][1]["sha256"] = "abc"; p["slurm"]["auth"] = "kerberos"'
  validate
  [ "$status" -eq 2 ]
  [[ "$output" == *"users[0].uid: must be an integer >= 1000, got 12"* ]]
  [[ "$output" == *"container_runtime.artifacts[1].sha256: must be 64 lowercase hex digits, got 'abc'"* ]]
  [[ "$output" == *"slurm.auth: expected one of \"munge\", \"jwt\", got 'kerberos'"* ]]
}

@test "a node without the schema beside params.py refuses to guess" {
  mkdir -p "$T/lib"
  cp "$SCRIPTS/lib/params.py" "$T/lib/params.py"
  run python3 -S "$T/lib/params.py" validate "$PARAMS_FILE"
  [ "$status" -eq 2 ]
  [[ "$output" == *"platform_parameters.schema.json not found"* ]]
}
