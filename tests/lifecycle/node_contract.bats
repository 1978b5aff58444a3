#!/usr/bin/env bats
# The node contract (lifecycle/node_contract.json, lifecycle/CONTRACT.md) on the AMI model: test_helper lays out each
# test's node as the contract says HyperPod leaves it (tests/lifecycle/ami_model.py); `ami_node TYPE --absent FACT`
# takes one fact away. Present, the scripts keep what HyperPod set up; absent, they adapt, say so in a contract
# warning, and the node continues.

bats_require_minimum_version 1.5.0
load test_helper

CONTROLLER_IP="10.1.0.12 172.17.0.1"
LOGIN_IP="10.1.0.20"
COMPUTE_IP="10.1.0.31"

# tree DIR -> every file under DIR with its digest, mode and link target (what "untouched" means here)
tree() {
  find "$1" -printf '%P %m %l\n' | sort
  find "$1" -type f -print0 | sort -z | xargs -0r sha256sum | sed "s|$1||"
}

enable_pam_adopt() {
  mkdir -p "$(dirname "$PAM_SSHD")" "$(dirname "$PAM_SLURM_ADOPT_CANDIDATES")"
  printf 'account include common-account\n' >"$PAM_SSHD"
  touch "$PAM_SLURM_ADOPT_CANDIDATES"
  set_param slurm.pam_slurm_adopt true
}

@test "the AMI model lays out resource_config.json with the controller IPs" {
  run python3 -S -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c["ClusterType"], c["SlurmConfig"])' \
    "$RESOURCE_CONFIG"
  [ "$output" = "Slurm {'PrimaryControllerIp': '10.1.0.12', 'SecondaryControllerIps': []}" ]
  STUB_IPS="$CONTROLLER_IP" run python3 "$SCRIPTS/lib/params.py" node-type "$RESOURCE_CONFIG" "$PARAMS_FILE" 10.1.0.31
  [ "$output" = "$(printf 'compute\tworker-group-1')" ]
}

# node_tree -> every entry of the test's directory but bats' and the scripts' scratch, with its mode, link target and
# content digest, the test's directory written <T> wherever it is named
node_tree() {
  local path
  (cd "$T" && find . -path ./tmp -prune -o -printf '%p %m %l\n' | LC_ALL=C sort)
  while IFS= read -r -d '' path; do
    printf '%s %s\n' "${path#"$T"}" "$(sed "s|$T|<T>|g" "$path" | sha256sum)"
  done < <(find "$T" -path "$T/tmp" -prune -o -type f -print0 | LC_ALL=C sort -z)
}

@test "setup's node, copied from the file's template, is the node ami_model lays out for the test itself" {
  before="$(node_tree)"
  ami_node controller --absent fsx-mounted # laid out again, directly in this test's directory
  set_param fsx.mount_path "\"$T/fsx\""   # as setup's parameters (set_param writes the same file anew)
  [ "$before" = "$(node_tree)" ] || {
    diff <(echo "$before") <(node_tree) >&2
    return 1
  }
  [[ "$before" == *"./slurm/etc/plugstack.conf.d/pyxis.conf 777 $T/pyxis/pyxis.conf"* ]] # the link, into this test
  grep -qxF "$T/nvme" "$FAKE_ROOT/mounts"
}

@test "the AMI model's variants: every fact can be left out, and an unknown fact is refused" {
  ami_node controller --each-absent # one layout per fact, without it (in one Python start)
  run ami_node controller --absent no-such-fact
  [ "$status" -eq 2 ]
  [[ "$output" == *"--absent names no fact of the contract: no-such-fact"* ]]
}

@test "include line present: pam_slurm_adopt writes PrologFlags into the included file" {
  enable_pam_adopt
  grep -qx "include accounting.conf" "$SLURM_CONF_DIR/slurm.conf"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  grep -qx "PrologFlags=Contain" "$SLURM_CONF_DIR/accounting.conf"
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol reconfigure")" ]
  [ ! -e "$STATE_DIR/contract_warnings" ]
}

@test "include line absent: pam_slurm_adopt adapts, warns, and slurm.conf is untouched" {
  ami_node controller --absent fsx-mounted --absent slurm-conf-includes-accounting-conf
  enable_pam_adopt
  run ! grep -qi "^include" "$SLURM_CONF_DIR/slurm.conf"
  before="$(tree "$SLURM_CONF_DIR")"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [ "$before" = "$(tree "$SLURM_CONF_DIR")" ]
  [ -z "$(mutating_calls)" ]
  [[ "$output" == *"WARNING: [contract:slurm-conf-includes-accounting-conf] $SLURM_CONF_DIR/slurm.conf does not include accounting.conf (it includes: nothing)"*"PrologFlags=Contain"*"is not applied"* ]]
  [ "$(cut -f1,2 "$STATE_DIR/contract_warnings")" = "$(printf 'slurm-conf-includes-accounting-conf\tconfigure_pam_adopt')" ]
}

@test "configless compute and login nodes: no script creates slurm.conf or calls scontrol" {
  set_param container_runtime.enabled true \
    slurm.pam_slurm_adopt true
  mkdir -p "$(dirname "$PAM_SSHD")" "$(dirname "$PAM_SLURM_ADOPT_CANDIDATES")"
  printf 'account include common-account\n' >"$PAM_SSHD"
  touch "$PAM_SLURM_ADOPT_CANDIDATES"
  for node in "compute $COMPUTE_IP" "login $LOGIN_IP"; do
    read -r type ip <<<"$node"
    ami_node "$type" --absent fsx-mounted
    [ ! -e "$SLURM_CONF_DIR/slurm.conf" ]
    : >"$STUB_LOG"
    STUB_IPS="$ip" run bash "$SCRIPTS/on_init_complete.sh"
    [ "$status" -eq 0 ]
    grep -q "node type: $type" "$LOG_DIR/on_init_complete.log"
    [ ! -e "$SLURM_CONF_DIR/slurm.conf" ]
    [ ! -e "$SLURM_CONF_DIR/plugstack.conf" ]
    [ -z "$(calls scontrol)" ]
  done
}

@test "pyxis set up by HyperPod: plugstack.conf and pyxis.conf untouched, no reconfigure" {
  set_param container_runtime.enabled true
  [ -L "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf" ]
  before="$(tree "$SLURM_CONF_DIR"; tree "$(dirname "$PYXIS_CONF")")"
  for type in controller compute; do
    [ "$type" = controller ] || ami_node compute --absent fsx-mounted
    run bash "$SCRIPTS/configure_slurm.sh" "$type"
    [ "$status" -eq 0 ]
    [ "$type" = compute ] || [ "$before" = "$(tree "$SLURM_CONF_DIR"; tree "$(dirname "$PYXIS_CONF")")" ]
    [ -L "$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf" ]
    [ -z "$(calls scontrol)" ]
    [[ "$output" == *"$SLURM_CONF_DIR/plugstack.conf.d/pyxis.conf is HyperPod's (a link to $PYXIS_CONF): kept"* ]]
    [ "$type" = compute ] || [[ "$output" == *"$SLURM_CONF_DIR/plugstack.conf already loads pyxis: no line added"* ]]
  done
  [ ! -e "$STATE_DIR/contract_warnings" ]
}

@test "HyperPod rotates Slurm's logs: no second logrotate entry, and logrotate accepts the result" {
  command -v logrotate >/dev/null || PATH="$PATH:/usr/sbin"
  command -v logrotate >/dev/null || skip "logrotate is not installed (Debian package logrotate)"
  theirs="$LOGROTATE_DIR/sagemaker-hyperpod-slurm"
  [ -s "$theirs" ]
  # An earlier platform version wrote its own entry: it goes, HyperPod's stays as it was.
  printf '/var/log/slurm/*.log {\n    size 50M\n}\n' >"$LOGROTATE_CONF"
  cp "$theirs" "$T/theirs.before"
  run bash "$SCRIPTS/configure_slurm.sh" compute
  [ "$status" -eq 0 ]
  [ ! -e "$LOGROTATE_CONF" ]
  cmp "$T/theirs.before" "$theirs"
  [[ "$output" == *"removed $LOGROTATE_CONF: $theirs rotates Slurm's logs already"* ]]
  run bash "$SCRIPTS/configure_slurm.sh" compute
  [[ "$output" == *"Slurm's logs are rotated by $theirs (HyperPod's): no entry of the platform's"* ]]
  # What logrotate makes of the directory, with Slurm's log directory moved into the test: one entry is fine, and two
  # (HyperPod's and one of the platform's) are refused, which is what the platform avoids.
  mkdir -p "$T/varlog/slurm" "$T/lr"
  echo log >"$T/varlog/slurm/slurmd.log"
  lr_check() { sed "s|/var/log/|$T/varlog/|g" "$@" >"$T/lr/all.conf"; logrotate --debug --state "$T/lr/state" "$T/lr/all.conf" 2>&1; }
  run lr_check "$LOGROTATE_DIR"/*
  [ "$status" -eq 0 ]
  [[ "$output" != *"duplicate log entry"* ]]
  printf '/var/log/slurm/*.log {\n    size 50M\n}\n' >"$T/platform-entry"
  run lr_check "$LOGROTATE_DIR"/* "$T/platform-entry"
  [[ "$output" == *"duplicate log entry"* ]]
}

@test "no log rotation from HyperPod: the platform's entry, with a contract warning" {
  ami_node compute --absent fsx-mounted --absent slurm-log-rotation
  run bash "$SCRIPTS/configure_slurm.sh" compute
  [ "$status" -eq 0 ]
  grep -q '^/var/log/slurm/\*.log {' "$LOGROTATE_CONF"
  grep -q "^slurm-log-rotation	configure_slurm	" "$STATE_DIR/contract_warnings"
}
