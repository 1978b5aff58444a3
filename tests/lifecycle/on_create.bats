#!/usr/bin/env bats
# on_create.sh end to end: every step enabled, then a second run.

load test_helper

enable_everything() {
  set_param container_runtime.enabled true
  set_param container_runtime.docker_apt_version '"24.0.7-0ubuntu2~22.04.1"'
  set_param container_runtime.artifacts '[]'
  add_artifact enroot enroot_3.5.0-1_amd64.deb "fake enroot"
  mkdir -p "$(dirname "$PYXIS_CONF")"
  echo "required /usr/local/lib/slurm/spank_pyxis.so" >"$PYXIS_CONF"
}

@test "a full run provisions the node and writes the log" {
  enable_everything
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [ "$(calls mount)" = "mount $T/fsx" ]
  calls useradd | grep -q -- "--uid 2001 --gid 2001 --create-home --home-dir $T/fsx/home/alice "
  calls apt-get | grep -q "install docker.io="
  [ "$(calls scontrol)" = "scontrol reconfigure" ]
  grep -q "node type: controller" "$LOG_DIR/on_create.log"
  grep -q "created user alice (2001:2001)" "$LOG_DIR/on_create.log"
  grep -q "\[on_create\] done" "$LOG_DIR/on_create.log"
}

@test "a second run changes nothing and exits 0" {
  enable_everything
  bash "$SCRIPTS/on_create.sh"
  cp "$FSTAB" "$T/fstab.before"
  cp "$SLURM_CONF_DIR/plugstack.conf" "$T/plugstack.before"
  cp "$FAKE_ROOT/passwd" "$T/passwd.before"
  : >"$STUB_LOG"

  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  cmp "$T/fstab.before" "$FSTAB"
  cmp "$T/plugstack.before" "$SLURM_CONF_DIR/plugstack.conf"
  cmp "$T/passwd.before" "$FAKE_ROOT/passwd"
  [ "$(grep -c '\[on_create\] done' "$LOG_DIR/on_create.log")" -eq 2 ]
}

@test "a failing step fails on_create.sh and the log says so" {
  STUB_MOUNT_FAILURES=99 MOUNT_ATTEMPTS=1 run bash "$SCRIPTS/on_create.sh"
  [ "$status" -ne 0 ]
  grep -q "ERROR: could not mount" "$LOG_DIR/on_create.log"
  grep -q "FAILED with exit code" "$LOG_DIR/on_create.log"
  [ -z "$(calls useradd)" ]
}

@test "the controller publishes the Slurm login secret when the stack gives one; other nodes do not" {
  cp -r "$SCRIPTS" "$T/scripts"
  printf '#!/bin/bash\necho "publish $*" >>"%s"\n' "$T/publish.calls" >"$T/scripts/publish_slurm_login.sh"
  set_param slurm.login_secret_arn '"arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-login-AbCdEf"'
  run bash "$T/scripts/on_create.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$T/publish.calls")" = "publish arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-login-AbCdEf" ]
  rm "$T/publish.calls"
  STUB_IPS="10.1.0.31" run bash "$T/scripts/on_create.sh"
  [ "$status" -eq 0 ]
  [ ! -e "$T/publish.calls" ]
}

@test "on an EKS node it validates, logs the node and configures nothing else" {
  cat >"$PARAMS_FILE" <<'JSON'
{"version": 1, "orchestrator": "eks", "cluster_name": "ml-cluster",
 "worker_groups": [{"instance_group_name": "controller-machine"}]}
JSON
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "orchestrator: eks, nothing else to configure" "$LOG_DIR/on_create.log"
  grep -q "\[on_create\] done" "$LOG_DIR/on_create.log"
}

@test "an unknown orchestrator in the parameters fails before touching the node" {
  set_param orchestrator '"pbs"'
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "orchestrator: expected slurm or eks, got 'pbs'" "$LOG_DIR/on_create.log"
}
