#!/usr/bin/env bats
# configure_slurm.sh: only appends to plugstack.conf, never node/partition lines, never (re)starts a daemon. What it does
# where HyperPod set pyxis and log rotation up is in node_contract.bats; here the node lacks them (the AMI model's
# variants without `pyxis` and `slurm-log-rotation`), which is where the platform fills in.

load test_helper

# pyxis installed from a package that did not load it: HyperPod did not set it up (node_contract.json, pyxis)
enable_pyxis() {
  ami_node controller --absent fsx-mounted --absent pyxis --absent slurm-log-rotation
  set_param container_runtime.enabled true
  mkdir -p "$(dirname "$PYXIS_CONF")"
  echo "required /usr/local/lib/slurm/spank_pyxis.so" >"$PYXIS_CONF"
}

@test "without pyxis nothing changes and slurmctld is not reconfigured" {
  cp "$SLURM_CONF_DIR/plugstack.conf" "$T/before"
  run bash "$SCRIPTS/configure_slurm.sh" controller
  [ "$status" -eq 0 ]
  cmp "$T/before" "$SLURM_CONF_DIR/plugstack.conf"
  [ -z "$(calls scontrol)" ]
  [[ "$output" == *"srun offers --auto-resume"* ]]
}

@test "pyxis is appended by explicit path, HyperPod's lines kept, controller reconfigured once" {
  enable_pyxis
  run bash "$SCRIPTS/configure_slurm.sh" controller
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_CONF_DIR/plugstack.conf")" = "$(printf 'required /opt/hyperpod/lib/spank_hyperpod.so\ninclude %s' "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf")" ]
  # optional: a pyxis built for another Slurm release must not fail every srun
  [ "$(cat "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf")" = "optional /usr/local/lib/slurm/spank_pyxis.so" ]
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol reconfigure")" ]

  : >"$STUB_LOG"
  run bash "$SCRIPTS/configure_slurm.sh" controller
  [ "$status" -eq 0 ]
  [ "$(grep -c pyxis "$SLURM_CONF_DIR/plugstack.conf")" -eq 1 ]
  [ -z "$(calls scontrol)" ]
}

@test "compute nodes get pyxis.conf but neither the include line nor a reconfigure" {
  enable_pyxis
  ami_node compute --absent fsx-mounted --absent pyxis
  mkdir -p "$(dirname "$PYXIS_CONF")"
  echo "required /usr/local/lib/slurm/spank_pyxis.so" >"$PYXIS_CONF"
  run bash "$SCRIPTS/configure_slurm.sh" compute
  [ "$status" -eq 0 ]
  [ -s "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf" ]
  [ ! -e "$SLURM_CONF_DIR/plugstack.conf" ]
  [ -z "$(calls scontrol)" ]
}

@test "controller whose slurmctld starts after the script: waits for it to answer, then reconfigures" {
  enable_pyxis
  # Its unit already active but not answering, as while it starts: the state of the unit is not what is asked.
  STUB_SLURMCTLD_LATE=3 run bash "$SCRIPTS/configure_slurm.sh" controller
  [ "$status" -eq 0 ]
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol ping" \
    "scontrol reconfigure")" ]
  [ "$(grep -c "waiting for slurmctld to answer before scontrol reconfigure" <<<"$output")" -eq 1 ]
  [[ "$output" == *"slurmctld answered after "* ]]
}

@test "controller whose slurmctld never answers: bounded wait, then one line saying so, nothing reconfigured" {
  enable_pyxis
  SLURM_WAIT_ATTEMPTS=4 STUB_SLURMCTLD_LATE=never run bash "$SCRIPTS/configure_slurm.sh" controller
  [ "$status" -eq 1 ]
  [ "$(calls scontrol)" = "$(printf 'scontrol ping\n%.0s' 1 2 3 4)" ]
  [ "$(grep -c ERROR <<<"$output")" -eq 1 ]
  [[ "$output" == *"ERROR: slurmctld did not answer \`scontrol ping\` within "*"s (4 checks, 0s apart), needed before scontrol reconfigure"* ]]
}

@test "a missing --auto-resume flag is reported but does not fail the node" {
  STUB_SRUN_AUTO_RESUME=0 run bash "$SCRIPTS/configure_slurm.sh" login
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: [contract:plugstack-hyperpod] srun does not list --auto-resume"* ]]
}

@test "slurm.conf is never touched" {
  enable_pyxis
  printf 'SlurmctldHost=ip-10-1-0-12(10.1.0.12)\nNodeName=worker-group-1-1 CPUs=4\n' >"$SLURM_CONF_DIR/slurm.conf"
  cp "$SLURM_CONF_DIR/slurm.conf" "$T/slurm.conf.before"
  run bash "$SCRIPTS/configure_slurm.sh" controller
  [ "$status" -eq 0 ]
  cmp "$T/slurm.conf.before" "$SLURM_CONF_DIR/slurm.conf"
}

@test "Slurm logs rotate, and a second run leaves the logrotate file alone" {
  ami_node compute --absent fsx-mounted --absent slurm-log-rotation
  run bash "$SCRIPTS/configure_slurm.sh" compute
  [[ "$output" == *"WARNING: [contract:slurm-log-rotation] no logrotate file in $LOGROTATE_DIR names /var/log/slurm: wrote $LOGROTATE_CONF"* ]]
  [ "$status" -eq 0 ]
  grep -q '^/var/log/slurm/\*.log {' "$LOGROTATE_CONF"
  grep -q 'pkill -x --signal SIGUSR2 slurmd' "$LOGROTATE_CONF"
  cp "$LOGROTATE_CONF" "$T/before"
  touch -d '2020-01-01' "$LOGROTATE_CONF"
  run bash "$SCRIPTS/configure_slurm.sh" compute
  [ "$(stat -c %Y "$LOGROTATE_CONF")" = "$(date -d 2020-01-01 +%s)" ]
  [[ "$output" != *"wrote $LOGROTATE_CONF"* ]]
}

@test "a login node Slurm does not know yet is reported and not failed; compute and controller never drain" {
  # The drain itself runs against a real slurmctld: tests/e2e/test_slurm_login_partition.py.
  SLURM_NODE_NAME=ip-10-1-0-5 run bash "$SCRIPTS/configure_slurm.sh" login
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: Slurm does not know node ip-10-1-0-5: login node left as HyperPod registered it"* ]]
  # It waits for slurmctld to answer first (lib/common.sh wait_for_slurmctld), then looks the node up.
  [ "$(calls scontrol | head -n1)" = "scontrol ping" ]
  [ "$(calls scontrol | grep -vx 'scontrol ping')" = "scontrol show node ip-10-1-0-5" ]
  run bash "$SCRIPTS/configure_slurm.sh" compute
  [ "$status" -eq 0 ]
  [[ "$output" != *"login node"* ]]
}
