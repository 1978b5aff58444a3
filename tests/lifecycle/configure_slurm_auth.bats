#!/usr/bin/env bats
# lifecycle/hyperpod/configure_slurm_auth.sh with stubs: what it may and may not edit. The working auth/jwt path
# (key, block, reconfigure, tokens accepted by slurmctld, key written to the issuer's secret) runs against real
# Slurm in tests/e2e/test_slurm_jwt.py.

load test_helper

BEGIN="# BEGIN hyperpod-platform auth (configure_slurm_auth.sh manages this block; edits are overwritten)"

END="# END hyperpod-platform auth"

# jwt_mode : per-user mode, with the key and the issuer's secret in the test's directory
jwt_mode() {
  set_param slurm.auth '"jwt"' \
    slurm.jwt_key_secret_arn '"arn:aws:secretsmanager:us-east-1:111122223333:secret:ml-cluster/slurm-jwt-key-AbCdEf"'
  export JWT_KEY_FILE="$T/spool/jwt_hs256.key"
}

@test "shared mode (munge): root jobs are refused too, in the platform's block; the rest is kept; a second run changes nothing" {
  printf 'AccountingStorageType=accounting_storage/none\n' >"$SLURM_CONF_DIR/accounting.conf"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_CONF_DIR/accounting.conf")" = "$(printf '%s\n' "AccountingStorageType=accounting_storage/none" "$BEGIN" \
    "DisableRootJobs=YES" "$END")" ]
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol reconfigure")" ]
  [[ "$output" == *"root jobs are refused (DisableRootJobs=YES)"* ]]
  : >"$STUB_LOG"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
}

@test "shared mode replaces the jwt lines an earlier per-user run wrote, and keeps DisableRootJobs" {
  printf '%s\n' "AccountingStorageType=accounting_storage/none" "$BEGIN" "AuthAltTypes=auth/jwt" \
    "DisableRootJobs=YES" "$END" >"$SLURM_CONF_DIR/accounting.conf"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_CONF_DIR/accounting.conf")" = "$(printf '%s\n' "AccountingStorageType=accounting_storage/none" "$BEGIN" \
    "DisableRootJobs=YES" "$END")" ]
  [ "$(calls scontrol)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol reconfigure")" ]
}

@test "per-user mode (jwt): auth/jwt with user token creation off and a lifespan cap, root jobs refused, key made and published" {
  jwt_mode
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_CONF_DIR/accounting.conf")" = "$(printf '%s\n' "$BEGIN" "AuthAltTypes=auth/jwt" \
    "AuthAltParameters=jwt_key=$JWT_KEY_FILE,disable_token_creation,max_token_lifespan=3600" "DisableRootJobs=YES" "$END")" ]
  [ "$(stat -c '%a %s' "$JWT_KEY_FILE")" = "600 32" ]
  [ "$(calls scontrol | grep -v -- --version)" = "$(printf '%s\n' "scontrol ping" "scontrol ping" "scontrol ping" "scontrol reconfigure" "scontrol ping")" ]
  calls aws | grep -q "^aws secretsmanager put-secret-value --secret-id arn:aws:secretsmanager:us-east-1:111122223333:secret:ml-cluster/slurm-jwt-key-AbCdEf "
  : >"$STUB_LOG"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
}

@test "per-user mode on a Slurm older than 22.05: no max_token_lifespan (it does not know it), token creation still off" {
  jwt_mode
  STUB_SLURM_VERSION=21.08.8 run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  grep -qxF "AuthAltParameters=jwt_key=$JWT_KEY_FILE,disable_token_creation" "$SLURM_CONF_DIR/accounting.conf"
  [[ "$output" == *"Slurm 21.08.8 predates max_token_lifespan (22.05)"* ]]
}

@test "a slurm.conf that sets DisableRootJobs=YES itself is taken as it is; any other value is refused" {
  printf 'DisableRootJobs=yes\n' >>"$SLURM_CONF_DIR/slurm.conf"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ ! -s "$SLURM_CONF_DIR/accounting.conf" ]
  [[ "$output" == *"sets DisableRootJobs=YES itself"* ]]
  sed -i 's/^DisableRootJobs=yes$/DisableRootJobs=NO/' "$SLURM_CONF_DIR/slurm.conf"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"sets DisableRootJobs=NO; the platform refuses root jobs in every mode"* ]]
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
