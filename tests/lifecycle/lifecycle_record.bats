#!/usr/bin/env bats
# The lifecycle record (lib/verify.sh, lib/verify.py): a node runs its scripts and parameters as root only when they
# are what the deploy recorded. Each attack plants a change where an account principal (the lifecycle bucket: HyperPod's
# download, the parameters the users sync fetches) or a user (the node's own copy) could, with the record the deploy
# wrote left as it was (stubs/stub serves $STUB_LIFECYCLE_RECORD), and checks that root ran nothing of it.

load test_helper

CONTROLLER_IP=10.1.0.12

# deployed : the deploy recorded the repository's scripts and the parameters as they are now.
deployed() {
  record_deploy "$SCRIPTS"
}

# planted_download : HyperPod's download of the lifecycle prefix, as the test then changes it ($T/scripts).
planted_download() {
  cp -r "$SCRIPTS" "$T/scripts"
}

refused_before_anything_ran() {
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  [ ! -e "$T/pwned" ]
  grep -q "STEP-FAILED verify_lifecycle_record" "$LOG_DIR/on_init_complete.log"
  ! grep -q "STEP-START validate_parameters" "$LOG_DIR/on_init_complete.log"
}

@test "the deploy's own scripts and parameters run" {
  deployed
  STUB_IPS="$CONTROLLER_IP" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -eq 0 ]
  grep -q "STEP-END verify_lifecycle_record rc=0" "$LOG_DIR/on_init_complete.log"
  grep -q "scripts and parameters match the deploy's lifecycle record" "$LOG_DIR/on_init_complete.log"
  # read from the secret the parameters name, in their region
  calls aws | grep -qxF "aws secretsmanager get-secret-value --secret-id hyperpod-platform/ml-cluster/lifecycle-record --region us-east-1 --query SecretString --output text"
}

@test "a script planted in the lifecycle prefix is refused before any step runs, and named" {
  deployed
  planted_download
  printf 'touch %q\n' "$T/pwned" >>"$T/scripts/create_users.sh"
  STUB_IPS="$CONTROLLER_IP" run bash "$T/scripts/on_init_complete.sh"
  refused_before_anything_ran
  grep -q "create_users.sh: sha256 [0-9a-f]\{64\}, recorded [0-9a-f]\{64\}" "$LOG_DIR/on_init_complete.log"
  grep -q "not what the deploy recorded" "$LOG_DIR/on_init_complete.log"
}

@test "a library a step sources, replaced by a link or removed, is refused" {
  deployed
  planted_download
  printf '#!/bin/bash\ntouch %q\n' "$T/pwned" >"$T/planted.sh"
  ln -sf "$T/planted.sh" "$T/scripts/lib/user_paths.sh"
  rm "$T/scripts/lib/safe_dirs.py"
  STUB_IPS="$CONTROLLER_IP" run bash "$T/scripts/on_init_complete.sh"
  refused_before_anything_ran
  grep -q "lib/user_paths.sh: missing or not a regular file" "$LOG_DIR/on_init_complete.log"
  grep -q "lib/safe_dirs.py: missing or not a regular file" "$LOG_DIR/on_init_complete.log"
}

@test "parameters planted in the lifecycle prefix (sudo for a user) are refused, naming the key" {
  deployed
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": true}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}]'
  STUB_IPS="$CONTROLLER_IP" run bash "$SCRIPTS/on_init_complete.sh"
  refused_before_anything_ran
  grep -q 'users\[0\].sudo: true here, false in the record' "$LOG_DIR/on_init_complete.log"
  [ ! -e "$SUDOERS_DIR/90-hyperpod-alice" ]
}

@test "parameters that name no record, or a record the node cannot read, run nothing" {
  deployed
  STUB_LIFECYCLE_RECORD=none STUB_IPS="$CONTROLLER_IP" RETRY_DELAY=0 run bash "$SCRIPTS/on_init_complete.sh"
  refused_before_anything_ran
  grep -q "could not read the lifecycle record hyperpod-platform/ml-cluster/lifecycle-record in us-east-1" \
    "$LOG_DIR/on_init_complete.log"
  python3 -S - "$PARAMS_FILE" <<'EOF'
import json, sys
params = json.load(open(sys.argv[1]))
del params["lifecycle_record"]
json.dump(params, open(sys.argv[1], "w"))
EOF
  STUB_IPS="$CONTROLLER_IP" run bash "$SCRIPTS/on_init_complete.sh"
  refused_before_anything_ran
  grep -q "names no lifecycle_record" "$LOG_DIR/on_init_complete.log"
}

@test "EKS entry point: a planted script is refused before the data volume step" {
  export EKS_DATA_VOLUME="$T/opt-sagemaker" KUBELET_DIR="$T/var/lib/kubelet" CONTAINERD_DIR="$T/var/lib/containerd"
  cat >"$PARAMS_FILE" <<'JSON'
{"version": 1, "orchestrator": "eks", "cluster_name": "ml-cluster",
 "worker_groups": [{"instance_group_name": "controller-machine"}],
 "lifecycle_record": {"secret_name": "hyperpod-platform/ml-cluster/lifecycle-record", "region": "us-east-1"}}
JSON
  deployed
  planted_download
  printf 'touch %q\n' "$T/pwned" >>"$T/scripts/eks_data_volume.sh"
  run bash "$T/scripts/on_create.sh"
  [ "$status" -ne 0 ]
  [ ! -e "$T/pwned" ]
  grep -q "eks_data_volume.sh: sha256 " "$LOG_DIR/on_create.log"
  ! grep -q "STEP-START eks_data_volume" "$LOG_DIR/on_create.log"
}

# ------------------------------------------------------------------------------------------------- the users sync

# node_created : a node as on_init_complete.sh leaves it (users, the sync installed), S3 and the record as deployed.
node_created() {
  deployed
  bash "$SCRIPTS/create_users.sh"
  bash "$SCRIPTS/install_users_sync.sh"
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  : >"$STUB_LOG"
}

sync() {
  run env -u PARAMS_FILE bash "$PLATFORM_DIR/sync_users.sh"
}

@test "users sync: parameters an account principal puts in S3 grant nothing; the deploy's next record applies them" {
  node_created
  # The attacker's upload: alice gets sudo. The record stays the deploy's.
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": true}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}]'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  sync
  [ "$status" -ne 0 ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-alice" ]
  grep -q 'users\[0\].sudo: true here, false in the record' "$LOG_DIR/users_sync.log"
  grep -q "refusing parameters the deploy did not record" "$LOG_DIR/users_sync.log"
  grep -qx "hyperpod_users_sync_failed 1" "$TEXTFILE_DIR/hyperpod_users_sync.prom"
  [ -z "$(calls usermod)" ]
  # A deploy that grants it records it too: the next run applies it.
  record_deploy "$SCRIPTS"
  sync
  [ "$status" -eq 0 ]
  [ -e "$SUDOERS_DIR/90-hyperpod-alice" ]
  grep -qx "hyperpod_users_sync_failed 0" "$TEXTFILE_DIR/hyperpod_users_sync.prom"
}

@test "users sync: a user who can write the node's copy of the scripts gets nothing run" {
  node_created
  # A mistake leaves one script of the copy writable by others; a user (uid 2001) appends to it.
  chmod 0777 "$PLATFORM_DIR/create_users.sh"
  setpriv --reuid=2001 --regid=2101 --clear-groups -- sh -c "printf 'touch %s\n' '$T/pwned' >>'$PLATFORM_DIR/create_users.sh'"
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}]'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  record_deploy "$SCRIPTS"
  sync
  [ "$status" -ne 0 ]
  [ ! -e "$T/pwned" ]
  grep -q "$PLATFORM_DIR/create_users.sh: writable by group or others" "$LOG_DIR/users_sync.log"
  grep -q "create_users.sh: sha256 [0-9a-f]\{64\}, recorded [0-9a-f]\{64\}" "$LOG_DIR/users_sync.log"
  grep -q "refusing to run the node's copy of the scripts" "$LOG_DIR/users_sync.log"
  grep -qx "hyperpod_users_sync_failed 1" "$TEXTFILE_DIR/hyperpod_users_sync.prom"
}

@test "users sync: a copy of the scripts changed since the node was created is refused, a directory a user owns too" {
  node_created
  echo "# changed" >>"$PLATFORM_DIR/lib/common.sh"
  chown 2001 "$PLATFORM_DIR/lib"
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}]'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  record_deploy "$SCRIPTS"
  sync
  [ "$status" -ne 0 ]
  grep -q "lib/common.sh: sha256 " "$LOG_DIR/users_sync.log"
  grep -q "$PLATFORM_DIR/lib: owned by uid 2001, not root" "$LOG_DIR/users_sync.log"
  [ -z "$(calls usermod)" ]
}

@test "the fake Secrets Manager's record is lifecycle_record.py's, the scripts' digests kept once per run" {
  export STUB_RECORD_SCRIPTS="$T/record_scripts.json" # this test's own, made by its first call (the run's: test_helper)
  get_record() {
    aws secretsmanager get-secret-value --secret-id hyperpod-platform/ml-cluster/lifecycle-record --region us-east-1 \
      --query SecretString --output text >"$1"
  }
  get_record "$T/first.json"            # the digests made and kept ($STUB_RECORD_SCRIPTS)
  [ -s "$STUB_RECORD_SCRIPTS" ]
  set_param cluster_name '"changed"'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json" # the parameters in the fake S3, when there, are recorded
  get_record "$T/second.json"           # the kept digests
  python3 -S "$BATS_TEST_DIRNAME/lifecycle_record.py" "$SCRIPTS" "$PARAMS_FILE" >"$T/expected.json"
  python3 -S - "$T/second.json" "$T/expected.json" "$T/first.json" <<'PY'
import json, sys
second, expected, first = (json.load(open(p)) for p in sys.argv[1:])
assert second == expected, "the stub's record differs from lifecycle_record.py's"
assert second["parameters"]["cluster_name"] == "changed"
assert first["scripts"] == expected["scripts"] and first["parameters"]["cluster_name"] != "changed"
PY
}

@test "the record's name and region come from the entry point's parameters in memory, or from params.py when the shell cannot hold them" {
  for memory in yes ""; do
    [ -n "$memory" ] || set_param 'a b' 1 # a key the shell cannot hold: no snapshot (lib/params.py)
    : >"$STUB_LOG"
    run bash -c 'source "$1/lib/common.sh"; source "$1/lib/verify.sh"; fetch_record "$PARAMS_FILE" "$2"
      echo "in memory: ${PARAMS_SNAPSHOT_OF:+yes}"' _ "$SCRIPTS" "$T/record.json"
    [ "$status" -eq 0 ]
    [ "$output" = "in memory: $memory" ]
    [ "$(calls aws)" = "aws secretsmanager get-secret-value --secret-id hyperpod-platform/ml-cluster/lifecycle-record --region us-east-1 --query SecretString --output text" ]
    [ -s "$T/record.json" ]
  done
}
