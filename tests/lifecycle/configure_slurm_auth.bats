#!/usr/bin/env bats
# lifecycle/hyperpod/configure_slurm_auth.sh with stubs: what it may and may not edit. The working auth/jwt path
# (key, block, reconfigure, tokens accepted by slurmctld, key written to the issuer's secret) runs against real
# Slurm in tests/e2e/test_slurm_jwt.py.

load test_helper

BEGIN="# BEGIN hyperpod-platform auth (configure_slurm_auth.sh manages this block; edits are overwritten)"

@test "shared mode (munge) without an earlier block changes nothing" {
  printf 'AccountingStorageType=accounting_storage/none\n' >"$SLURM_CONF_DIR/accounting.conf"
  cp "$SLURM_CONF_DIR/accounting.conf" "$T/before"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  cmp "$T/before" "$SLURM_CONF_DIR/accounting.conf"
  [ -z "$(mutating_calls)" ]
}

@test "shared mode removes the block an earlier per-user run wrote, keeps the rest, reconfigures once" {
  printf '%s\n' "AccountingStorageType=accounting_storage/none" "$BEGIN" "AuthAltTypes=auth/jwt" \
    "DisableRootJobs=YES" "# END hyperpod-platform auth" >"$SLURM_CONF_DIR/accounting.conf"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_CONF_DIR/accounting.conf")" = "AccountingStorageType=accounting_storage/none" ]
  [ "$(calls scontrol)" = "scontrol reconfigure" ]
  : >"$STUB_LOG"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
}

@test "per-user mode without an included accounting.conf: nothing written, a contract warning, slurm.conf untouched" {
  set_param slurm.auth '"jwt"'
  printf 'ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-12(10.1.0.12)\n' >"$SLURM_CONF_DIR/slurm.conf"
  rm "$SLURM_CONF_DIR/accounting.conf"
  cp "$SLURM_CONF_DIR/slurm.conf" "$T/before"
  JWT_KEY_FILE="$T/spool/jwt_hs256.key" run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: [contract:slurm-conf-includes-accounting-conf]"*"does not include accounting.conf"*"per-user mode"* ]]
  grep -q "^slurm-conf-includes-accounting-conf	configure_slurm_auth	" "$STATE_DIR/contract_warnings"
  cmp "$T/before" "$SLURM_CONF_DIR/slurm.conf"
  [ ! -e "$SLURM_CONF_DIR/accounting.conf" ]
  [ ! -e "$T/spool/jwt_hs256.key" ]
  [ -z "$(mutating_calls)" ]
}

@test "per-user mode refuses settings of its own made elsewhere" {
  set_param slurm.auth '"jwt"'
  printf 'DisableRootJobs=NO\n' >"$SLURM_CONF_DIR/accounting.conf"
  JWT_KEY_FILE="$T/spool/jwt_hs256.key" run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"already sets DisableRootJobs outside the platform's block"* ]]
  [ "$(cat "$SLURM_CONF_DIR/accounting.conf")" = "DisableRootJobs=NO" ]
  [ -z "$(mutating_calls)" ]
}

@test "an unknown slurm.auth is an error" {
  set_param slurm.auth '"kerberos"'
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"slurm.auth must be jwt or munge, got 'kerberos'"* ]]
}
