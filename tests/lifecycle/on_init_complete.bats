#!/usr/bin/env bats
# on_init_complete.sh, the Slurm clusters' entry point (LifeCycleConfig.OnInitComplete), per node type.
#
# The contract (lifecycle/CONTRACT.md): HyperPod has written slurm.conf, runs the Slurm daemons and has set up Docker,
# enroot, pyxis and log rotation before this hook; the script never writes slurm.conf, never starts, stops, enables or
# restarts a Slurm daemon, and only the controller runs `scontrol reconfigure` (after changing plugstack.conf). Each
# test's node is laid out from lifecycle/node_contract.json (test_helper, ami_node).

load test_helper

CONTROLLER_IP="10.1.0.12 172.17.0.1"
LOGIN_IP="10.1.0.20"
COMPUTE_IP="10.1.0.31"

enable_everything() {
  set_param_and_artifacts container_runtime artifacts container_runtime.enabled true \
    container_runtime.docker_apt_version '"24.0.7-0ubuntu2~22.04.1"' \
    container_runtime.artifacts '[]' \
    -- enroot enroot_3.5.0-1_amd64.deb "fake enroot"
  mkdir -p "$(dirname "$PYXIS_CONF")"
  echo "required /usr/local/lib/slurm/spank_pyxis.so" >"$PYXIS_CONF"
}

# slurm_daemon_calls -> any call that starts, stops, enables or restarts a Slurm daemon, or scontrol other than
# reconfigure and the read-only `show config` (check_gres.sh) and `ping` (lib/common.sh wait_for_slurmctld)
slurm_daemon_calls() {
  {
    grep -E '^systemctl (start|stop|restart|reload|enable|disable|mask) .*slurm' "$STUB_LOG"
    grep -E '^scontrol ' "$STUB_LOG" | grep -vx -e 'scontrol reconfigure' -e 'scontrol show config' -e 'scontrol ping'
  } || true
}

run_as() {
  STUB_IPS="$1" run bash "$SCRIPTS/on_init_complete.sh"
}

@test "controller on the AMI model: users, keys, HyperPod's runtime and log rotation kept, root jobs off; Slurm left to HyperPod" {
  enable_everything
  cp "$SLURM_CONF_DIR/slurm.conf" "$T/slurm.conf.hyperpod"
  cp "$SLURM_CONF_DIR/plugstack.conf" "$T/plugstack.conf.hyperpod"
  printf '%s\n' '#!/bin/bash' "echo \"\$*\" >>'$T/python3.log'" "exec '$(command -v python3)' \"\$@\"" >"$T/bin/python3"
  chmod +x "$T/bin/python3"
  run_as "$CONTROLLER_IP"
  [ "$status" -eq 0 ]
  # The parameters are read by Python once before they are checked (the record's name, then the entry point's keys,
  # from memory: lib/verify.sh fetch_record), then once with the check (lib/common.sh validate_params): every script
  # the entry point runs reads that snapshot.
  [ "$(grep -cE "params\.py (get|snapshot|users|list|artifacts) $PARAMS_FILE( |\$)" "$T/python3.log")" -eq 1 ]
  grep -qxF -- "-S $SCRIPTS/lib/params.py snapshot $PARAMS_FILE" "$T/python3.log"
  grep -qxF -- "-S $SCRIPTS/lib/params.py validate $PARAMS_FILE --snapshot" "$T/python3.log"
  [ -z "$(grep -rlaF "get slurm.auth" "$TMPDIR")" ] # and the exit trap removed it
  grep -q "node type: controller" "$LOG_DIR/on_init_complete.log"
  grep -qxF "OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT" "$FAKE_ROOT/iptables.rules"
  [ "$(calls mount)" = "mount $T/fsx" ]
  calls useradd | grep -q -- "--uid 2001 --gid 2101 --no-create-home --home-dir $T/fsx/home/alice "
  [ -s "$T/fsx/home/alice/.ssh/id_ed25519_cluster" ]
  grep -qxF "$(cat "$T/fsx/home/alice/.ssh/id_ed25519_cluster.pub")" "$T/fsx/home/alice/.ssh/authorized_keys"
  # HyperPod's pyxis, enroot and log rotation are kept: no package, no second entry, plugstack.conf as it was.
  [ -z "$(calls apt-get)" ]
  cmp "$T/plugstack.conf.hyperpod" "$SLURM_CONF_DIR/plugstack.conf"
  [ -L "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf" ]
  [ ! -e "$LOGROTATE_CONF" ]
  [ -s "$(dirname "$ENROOT_CONF")/enroot.conf.d/50-hyperpod-platform.conf" ]
  # Read-only: apply_accounting.sh (users' associations) and check_gres.sh.
  # accounting.conf gets DisableRootJobs=YES (shared mode too): one reconfigure; the rest reads only.
  grep -qxF "DisableRootJobs=YES" "$SLURM_CONF_DIR/accounting.conf"
  # Each step that talks to slurmctld first waits for it to answer (scontrol ping).
  # slurmctld is still starting when the first of them asks (the AMI model: two checks unanswered).
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol show config" "scontrol ping" "scontrol reconfigure" \
    "scontrol ping" "scontrol show config")" ]
  grep -q "\[apply_accounting\] waiting for slurmctld to answer before reading its configuration" "$LOG_DIR/on_init_complete.log"
  grep -q "\[check_gres\] WARNING: worker-group-1 has 1 GPU(s) per node but slurmctld's GresTypes is '(none)'" \
    "$LOG_DIR/on_init_complete.log"
  cmp "$T/slurm.conf.hyperpod" "$SLURM_CONF_DIR/slurm.conf"
  [ -z "$(slurm_daemon_calls)" ]
  grep -q "\[on_init_complete\] done" "$LOG_DIR/on_init_complete.log"
}

@test "controller where HyperPod left pyxis and log rotation out: the platform's, with one reconfigure" {
  ami_node controller --absent fsx-mounted --absent pyxis --absent slurm-log-rotation
  enable_everything
  run_as "$CONTROLLER_IP"
  [ "$status" -eq 0 ]
  [ "$(grep -cxF "include $SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf" "$SLURM_CONF_DIR/plugstack.conf")" -eq 1 ]
  [ "$(cat "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf")" = "optional /usr/local/lib/slurm/spank_pyxis.so" ]
  grep -q '^/var/log/slurm/\*.log {' "$LOGROTATE_CONF"
  # plugstack.conf (pyxis), then accounting.conf (DisableRootJobs=YES, shared mode too); the rest reads only.
  [ "$(calls scontrol | grep -vx "scontrol ping")" = "$(printf '%s\n' "scontrol reconfigure" "scontrol show config" \
    "scontrol reconfigure" "scontrol show config")" ]
  [ "$(cut -f1 "$STATE_DIR/contract_warnings" | sort | paste -sd' ')" = "enroot-conf pyxis slurm-log-rotation" ]
}

@test "compute: the same node set-up, no plugstack include, no scontrol, no Slurm daemon touched" {
  enable_everything
  ami_node compute --absent fsx-mounted
  run_as "$COMPUTE_IP"
  [ "$status" -eq 0 ]
  grep -q "node type: compute (instance group worker-group-1)" "$LOG_DIR/on_init_complete.log"
  calls useradd | grep -q -- "--uid 2002 "
  [ -L "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf" ]
  [ ! -e "$SLURM_CONF_DIR/plugstack.conf" ]
  [ ! -e "$SLURM_CONF_DIR/slurm.conf" ]
  [ -z "$(calls scontrol)" ]
  [ -z "$(slurm_daemon_calls)" ]
}

@test "login: like compute, and it does not publish the Studio login settings" {
  cp -r "$SCRIPTS" "$T/scripts"
  printf '#!/bin/bash\necho "publish $*" >>"%s"\n' "$T/publish.calls" >"$T/scripts/publish_slurm_login.sh"
  set_param slurm.login_secret_arn '"arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-login-AbCdEf"'
  record_deploy "$T/scripts"
  STUB_IPS="$LOGIN_IP" run bash "$T/scripts/on_init_complete.sh"
  [ "$status" -eq 0 ]
  grep -q "node type: login" "$LOG_DIR/on_init_complete.log"
  [ -z "$(calls scontrol)" ]
  [ -z "$(slurm_daemon_calls)" ]
  [ ! -e "$T/publish.calls" ]
  STUB_IPS="$CONTROLLER_IP" run bash "$T/scripts/on_init_complete.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$T/publish.calls")" = "publish arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-login-AbCdEf" ]
}

@test "a second run changes nothing and exits 0" {
  enable_everything
  run_as "$CONTROLLER_IP"
  [ "$status" -eq 0 ]
  DROP_IN="$(dirname "$ENROOT_CONF")/enroot.conf.d/50-hyperpod-platform.conf"
  for f in "$FSTAB" "$SLURM_CONF_DIR/plugstack.conf" "$FAKE_ROOT/passwd" "$ENROOT_CONF" "$DROP_IN" \
    "$LOGROTATE_DIR/sagemaker-hyperpod-slurm" "$T/fsx/home/bob/.ssh/id_ed25519_cluster" \
    "$T/fsx/home/bob/.ssh/authorized_keys"; do
    cp "$f" "$T/$(basename "$f").before"
  done
  : >"$STUB_LOG"
  run_as "$CONTROLLER_IP"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  [ -z "$(calls ssh-keygen | grep -v '^ssh-keygen -y ')" ] # no key made; the public half read back
  for f in "$FSTAB" "$SLURM_CONF_DIR/plugstack.conf" "$FAKE_ROOT/passwd" "$ENROOT_CONF" "$DROP_IN" \
    "$LOGROTATE_DIR/sagemaker-hyperpod-slurm" "$T/fsx/home/bob/.ssh/id_ed25519_cluster" \
    "$T/fsx/home/bob/.ssh/authorized_keys"; do
    cmp "$T/$(basename "$f").before" "$f"
  done
  [ "$(grep -c '\[on_init_complete\] done' "$LOG_DIR/on_init_complete.log")" -eq 2 ]
}

@test "a second node finds the users' keys on the shared file system and keeps them" {
  run_as "$CONTROLLER_IP"
  cp "$T/fsx/home/alice/.ssh/id_ed25519_cluster" "$T/alice.key"
  : >"$STUB_LOG"
  run_as "$COMPUTE_IP"
  [ "$status" -eq 0 ]
  [ -z "$(calls ssh-keygen | grep -v '^ssh-keygen -y ')" ] # no key made; the public half read back
  cmp "$T/alice.key" "$T/fsx/home/alice/.ssh/id_ed25519_cluster"
  [ "$(stat -c '%a %u:%g' "$T/fsx/home/alice/.ssh/id_ed25519_cluster")" = "600 2001:2101" ]
  [ "$(stat -c '%a %u:%g' "$T/fsx/home/alice/.ssh")" = "700 2001:2101" ]
}

@test "the controller waits for HyperPod's slurm.conf, bounded, and fails with what to check" {
  rm "$SLURM_CONF_DIR/slurm.conf"
  SLURM_WAIT_ATTEMPTS=3 run_as "$CONTROLLER_IP"
  [ "$status" -ne 0 ]
  grep -q "gave up waiting for HyperPod's $SLURM_CONF_DIR/slurm.conf after 3 checks" "$LOG_DIR/on_init_complete.log"
  grep -q "ERROR: HyperPod has not written $SLURM_CONF_DIR/slurm.conf" "$LOG_DIR/on_init_complete.log"
  grep -q "FAILED with exit code" "$LOG_DIR/on_init_complete.log"
  [ -z "$(slurm_daemon_calls)" ]
}

@test "a failing step fails the hook and the log says so" {
  STUB_MOUNT_FAILURES=99 MOUNT_ATTEMPTS=1 run_as "$CONTROLLER_IP"
  [ "$status" -ne 0 ]
  grep -q "ERROR: could not mount" "$LOG_DIR/on_init_complete.log"
  grep -q "FAILED with exit code" "$LOG_DIR/on_init_complete.log"
  [ -z "$(calls useradd)" ]
}

@test "EKS parameters are refused: EKS groups run on_create.sh" {
  set_param orchestrator '"eks"'
  run_as "$COMPUTE_IP"
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "on_init_complete.sh is the Slurm entry point; EKS groups run on_create.sh" "$LOG_DIR/on_init_complete.log"
}

@test "an unknown orchestrator in the parameters fails before touching the node" {
  set_param orchestrator '"pbs"'
  run_as "$CONTROLLER_IP"
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "orchestrator: expected slurm or eks, got 'pbs'" "$LOG_DIR/on_init_complete.log"
}

# HyperPod's boot order (node_contract.json, slurmctld-starts-in-parallel): OnInitComplete may begin before slurmctld
# answers. The stub slurmctld answers from its STUB_SLURMCTLD_LATE+1th call on (stubs/stub, slurmctld_down).
@test "controller whose slurmctld starts after OnInitComplete began: the steps wait for it, the node comes up" {
  enable_everything
  STUB_SLURMCTLD_LATE=4 run_as "$CONTROLLER_IP"
  [ "$status" -eq 0 ]
  # apply_accounting is the first step to talk to slurmctld: it waits (logged), the later steps find it answering.
  grep -q "\[apply_accounting\] waiting for slurmctld to answer before reading its configuration" \
    "$LOG_DIR/on_init_complete.log"
  grep -q "\[apply_accounting\] slurmctld answered after " "$LOG_DIR/on_init_complete.log"
  [ "$(grep -c "waiting for slurmctld" "$LOG_DIR/on_init_complete.log")" -eq 1 ]
  [ "$(calls scontrol | head -n5 | sort -u)" = "scontrol ping" ]
  grep -qxF "DisableRootJobs=YES" "$SLURM_CONF_DIR/accounting.conf"
  grep -q "\[on_init_complete\] done" "$LOG_DIR/on_init_complete.log"
}

@test "controller whose slurmctld never starts: one line says so, the step is named last, the exit waits for the log" {
  enable_everything
  # The entry point in the background: while it waits before exiting, its log is already complete.
  SLURM_WAIT_ATTEMPTS=3 STUB_SLURMCTLD_LATE=never LOG_FLUSH_SECONDS=3 STUB_IPS="$CONTROLLER_IP" \
    bash "$SCRIPTS/on_init_complete.sh" >"$T/out" 2>&1 &
  pid=$!
  started=$SECONDS
  for _ in $(seq 100); do
    [[ "$(tail -n1 "$LOG_DIR/on_init_complete.log" 2>/dev/null)" == *STEP-FAILED* ]] && break
    sleep 0.1
  done
  kill -0 "$pid" # still running: the log reached its end first
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 1 ]
  ((SECONDS - started >= 3))
  log="$LOG_DIR/on_init_complete.log"
  [[ "$(tail -n1 "$log")" =~ \[on_init_complete\]\ STEP-FAILED\ apply_accounting\ rc=1$ ]]
  grep -q "STEP-START apply_accounting" "$log"
  grep -q "STEP-END apply_accounting rc=1 " "$log"
  [ "$(grep -c "ERROR" "$log")" -eq 1 ]
  grep -q "\[apply_accounting\] ERROR: slurmctld did not answer \`scontrol ping\` within .* (3 checks, 0s apart), needed before reading its configuration" "$log"
  # Nothing after slurmctld's absence was attempted.
  [ -z "$(calls scontrol | grep -vx "scontrol ping")" ]
  ! grep -q "STEP-START configure_slurm_auth" "$log"
}
