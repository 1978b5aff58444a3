#!/usr/bin/env bats
# lifecycle/hyperpod/configure_pam_adopt.sh with stubs: what it writes on each node type, that a second run changes
# nothing, and what it refuses. The PAM stack itself (a user without a job denied, with one allowed, an admin always)
# runs against real slurmd and pam_slurm_adopt in tests/e2e/test_slurm_gres_adopt.py.

load test_helper

BEGIN="# BEGIN hyperpod-platform pam_slurm_adopt (configure_pam_adopt.sh manages this block; edits are overwritten)"
END="# END hyperpod-platform pam_slurm_adopt"
SSHD_PAM_LINES=("@include common-auth" "account    required     pam_nologin.so" "@include common-account"
  "session    required     pam_limits.so")

setup_pam() {
  mkdir -p "$(dirname "$PAM_SSHD")" "$(dirname "$PAM_SLURM_ADOPT_CANDIDATES")"
  printf '%s\n' "${SSHD_PAM_LINES[@]}" >"$PAM_SSHD"
  touch "$PAM_SLURM_ADOPT_CANDIDATES"
  set_param slurm.pam_slurm_adopt true
}

@test "compute: the admins (sudo users) and pam_slurm_adopt are appended to sshd's PAM stack; a second run changes nothing" {
  setup_pam
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  expected=("${SSHD_PAM_LINES[@]}" "$BEGIN" "account sufficient pam_access.so accessfile=$ACCESS_FILE"
    "account required $PAM_SLURM_ADOPT_CANDIDATES service=sshd" "$END")
  [ "$(cat "$PAM_SSHD")" = "$(printf '%s\n' "${expected[@]}")" ]
  # bob has sudo: true in the fixture, alice does not.
  [ "$(cat "$ACCESS_FILE")" = "$(printf '%s\n' "$BEGIN" "+:root bob:ALL" "-:ALL:ALL" "$END")" ]
  cp "$PAM_SSHD" "$T/pam.first"
  cp "$ACCESS_FILE" "$T/access.first"
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  [[ "$output" == *"already has pam_slurm_adopt"* ]]
  cmp "$T/pam.first" "$PAM_SSHD"
  cmp "$T/access.first" "$ACCESS_FILE"
  [ -z "$(mutating_calls)" ]
}

@test "compute: a changed admin list replaces the block instead of adding another" {
  setup_pam
  bash "$SCRIPTS/configure_pam_adopt.sh" compute
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2001, "sudo": true}, {"name": "bob", "uid": 2002, "gid": 2002, "sudo": true}]'
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  [ "$(grep -c "^+:" "$ACCESS_FILE")" -eq 1 ]
  grep -qxF "+:root alice bob:ALL" "$ACCESS_FILE"
  [ "$(grep -cxF "$BEGIN" "$PAM_SSHD")" -eq 1 ]
}

@test "compute: the directory's admin groups pass pam_access as (group) entries" {
  setup_pam
  set_param directory '{"admin_groups": ["hpc-admins", "ops"]}'
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  grep -qxF "+:root bob (hpc-admins) (ops):ALL" "$ACCESS_FILE"
  set_param directory null
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  grep -qxF "+:root bob:ALL" "$ACCESS_FILE"
}

@test "compute: without the module built for this Slurm it stops and leaves PAM alone" {
  setup_pam
  rm "$PAM_SLURM_ADOPT_CANDIDATES"
  cp "$PAM_SSHD" "$T/before"
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -ne 0 ]
  [[ "$output" == *"pam_slurm_adopt.so is not on this node"* ]]
  cmp "$T/before" "$PAM_SSHD"
  [ ! -e "$ACCESS_FILE" ]
}

@test "compute: turned off, the blocks an earlier run wrote are removed and nothing else" {
  setup_pam
  bash "$SCRIPTS/configure_pam_adopt.sh" compute
  set_param slurm.pam_slurm_adopt false
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  [ "$(cat "$PAM_SSHD")" = "$(printf '%s\n' "${SSHD_PAM_LINES[@]}")" ]
  [ ! -s "$ACCESS_FILE" ]
}

@test "login and controller nodes never get pam_slurm_adopt in their PAM stack" {
  setup_pam
  cp "$PAM_SSHD" "$T/before"
  for node in login controller; do
    run bash "$SCRIPTS/configure_pam_adopt.sh" "$node"
    [ "$status" -eq 0 ]
    cmp "$T/before" "$PAM_SSHD"
  done
  [ ! -e "$ACCESS_FILE" ]
}

@test "controller: PrologFlags=Contain in the included accounting.conf, one reconfigure, slurm.conf untouched; then idempotent" {
  setup_pam
  printf 'AccountingStorageType=accounting_storage/slurmdbd\n' >"$SLURM_CONF_DIR/accounting.conf"
  cp "$SLURM_CONF_DIR/slurm.conf" "$T/slurm.conf.before"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_CONF_DIR/accounting.conf")" = "$(printf '%s\n' "AccountingStorageType=accounting_storage/slurmdbd" \
    "$BEGIN" "PrologFlags=Contain" "$END")" ]
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol reconfigure")" ]
  cmp "$T/slurm.conf.before" "$SLURM_CONF_DIR/slurm.conf"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  # Turned off: the block goes, with one reconfigure.
  set_param slurm.pam_slurm_adopt false
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_CONF_DIR/accounting.conf")" = "AccountingStorageType=accounting_storage/slurmdbd" ]
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol reconfigure")" ]
}

@test "controller: warns when ProctrackType is not proctrack/cgroup (sessions not contained)" {
  setup_pam
  printf 'ProctrackType=proctrack/linuxproc\n' >>"$SLURM_CONF_DIR/slurm.conf"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: [contract:slurm-proctrack-cgroup] ProctrackType is 'proctrack/linuxproc', not proctrack/cgroup"* ]]
  grep -q "^slurm-proctrack-cgroup"$'\t' "$STATE_DIR/contract_warnings"
}

@test "controller: no ProctrackType warning when slurm.conf sets proctrack/cgroup or leaves Slurm's default" {
  setup_pam
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [[ "$output" != *ProctrackType* ]]
  printf 'ProctrackType = Proctrack/Cgroup # as written by hand\n' >>"$SLURM_CONF_DIR/slurm.conf"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [[ "$output" != *ProctrackType* ]]
  run grep -q "^slurm-proctrack-cgroup" "$STATE_DIR/contract_warnings"
  [ "$status" -ne 0 ]
}

@test "controller: refuses a slurm.conf whose PrologFlags lack Contain" {
  setup_pam
  printf 'PrologFlags=Alloc\n' >>"$SLURM_CONF_DIR/slurm.conf"
  cp "$SLURM_CONF_DIR/accounting.conf" "$T/accounting.before"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -ne 0 ]
  [[ "$output" == *"sets PrologFlags=Alloc without Contain"* ]]
  cmp "$T/accounting.before" "$SLURM_CONF_DIR/accounting.conf"
  [ -z "$(mutating_calls)" ]
}

@test "controller: PrologFlags with Contain already in slurm.conf needs nothing from the platform" {
  setup_pam
  printf 'PrologFlags=Alloc,Contain\n' >>"$SLURM_CONF_DIR/slurm.conf"
  run bash "$SCRIPTS/configure_pam_adopt.sh" controller
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
}

@test "an unknown node type is an error" {
  run bash "$SCRIPTS/configure_pam_adopt.sh" worker
  [ "$status" -ne 0 ]
  [[ "$output" == *"usage: configure_pam_adopt.sh controller|login|compute (got 'worker')"* ]]
}

# The node as HyperPod's AMI has it: no pam_slurm_adopt.so. apt-get (the stub records the package as installed) also
# puts the module where the package would, so the script finds it afterwards.
module_from_package() {
  setup_pam
  set_param pam_slurm_adopt '{"artifacts": []}'
  rm -f "$PAM_SLURM_ADOPT_CANDIDATES"
  mkdir -p "$T/real-stub"
  mv "$T/bin/apt-get" "$T/real-stub/apt-get"
  printf '#!/usr/bin/env bash\n[[ " $* " == *" install "* ]] && touch "%s"\nexec "%s" "$@"\n' \
    "$PAM_SLURM_ADOPT_CANDIDATES" "$T/real-stub/apt-get" >"$T/bin/apt-get"
  chmod +x "$T/bin/apt-get"
}

@test "compute without the module: the operator's package is downloaded, verified, installed, then used" {
  module_from_package
  add_section_artifact pam_slurm_adopt pam slurm-pam-adopt slurm-pam-adopt_24.11.5-1_amd64.deb "fake module package"
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  calls aws | grep -q "s3 cp --only-show-errors s3://mirror-bucket/pam/slurm-pam-adopt_24.11.5-1_amd64.deb "
  [[ "$output" == *"installed: slurm-pam-adopt_24.11.5-1_amd64.deb"* ]]
  grep -qxF "account required $PAM_SLURM_ADOPT_CANDIDATES service=sshd" "$PAM_SSHD"
  # A second run finds the module: nothing downloaded again.
  : >"$STUB_LOG"
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -eq 0 ]
  [ -z "$(calls aws)" ]
}

@test "compute without the module: a package whose checksum differs stops the node and installs nothing" {
  module_from_package
  add_section_artifact pam_slurm_adopt pam slurm-pam-adopt slurm-pam-adopt_24.11.5-1_amd64.deb "tampered" "$(printf '0%.0s' {1..64})"
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -ne 0 ]
  [[ "$output" == *"artifact slurm-pam-adopt: checksum mismatch"* ]]
  [ -z "$(calls apt-get | grep install)" ]
  [ ! -e "$PAM_SLURM_ADOPT_CANDIDATES" ]
  ! grep -qF "pam_slurm_adopt" "$PAM_SSHD"
}

@test "compute without the module and without packages stops with what to do" {
  setup_pam
  rm -f "$PAM_SLURM_ADOPT_CANDIDATES"
  run bash "$SCRIPTS/configure_pam_adopt.sh" compute
  [ "$status" -ne 0 ]
  [[ "$output" == *"pam_slurm_adopt.so is not on this node"*"list its package in cluster.pam_slurm_adopt_artifacts"* ]]
}

@test "the parameters' module packages are checked before a node uses them" {
  set_param pam_slurm_adopt '{"artifacts": [{"name": "slurm-pam-adopt", "s3_uri": "https://example.com/x.deb", "sha256": "abc"}]}'
  run python3 "$SCRIPTS/lib/params.py" validate "$PARAMS_FILE"
  [ "$status" -ne 0 ]
  [[ "$output" == *"pam_slurm_adopt.artifacts[0].s3_uri: must be an s3:// URI"* ]]
  [[ "$output" == *"pam_slurm_adopt.artifacts[0].sha256: must be 64 lowercase hex digits"* ]]
}
