#!/usr/bin/env bats
# lifecycle/attach/enable_slurm_jwt.sh: make attach's jwt step on an existing controller (per-user mode). slurmctld is
# a stub here whose answers the test sets (UP or DOWN after a reconfigure or a restart, tokens accepted or not), so the
# rollback paths run; tests/e2e/test_attach_slurm.py runs the script against real slurmctld 24.11.

SCRIPT="$BATS_TEST_DIRNAME/../../lifecycle/attach/enable_slurm_jwt.sh"

setup() {
  T="$(mktemp -d)"
  mkdir -p "$T/bin" "$T/etc" "$T/plugins" "$T/spool"
  : >"$T/plugins/auth_jwt.so"
  printf 'ClusterName=foreign\nSlurmctldHost=ctl(127.0.0.1)\nSlurmUser=root\ninclude accounting.conf\n' >"$T/etc/slurm.conf"
  printf '# HyperPod accounting\nAccountingStorageType=accounting_storage/slurmdbd\n' >"$T/etc/accounting.conf"
  chmod 0644 "$T/etc/accounting.conf"
  echo UP >"$T/state"
  echo 24.11.5 >"$T/version"
  # scontrol: --version, ping (the state file), reconfigure (the state after it: $T/after_reconfigure, when present),
  # show config (PluginDir and the AuthAlt lines the included file holds).
  cat >"$T/bin/scontrol" <<'SH'
#!/bin/bash
echo "scontrol $*" >>"$T/calls"
case "$1" in
  --version) echo "slurm $(cat "$T/version")" ;;
  ping) [[ "$(cat "$T/state")" == UP ]] && echo "Slurmctld(primary) at ctl is UP" || { echo "Slurmctld(primary) at ctl is DOWN"; exit 1; } ;;
  reconfigure) [[ "$(cat "$T/state")" == UP ]] || exit 1; [[ ! -f "$T/after_reconfigure" ]] || cp "$T/after_reconfigure" "$T/state" ;;
  show) echo "PluginDir = $T/plugins"; grep -h '^AuthAlt' "$T/etc/accounting.conf" | sed 's/=/ = /' ;;
esac
SH
  # sinfo with a token: accepted when slurmctld is UP, loaded the settings ($T/loaded) and the key signs it.
  cat >"$T/bin/sinfo" <<'SH'
#!/bin/bash
echo "sinfo SLURM_JWT=${SLURM_JWT:+set}" >>"$T/calls"
[[ -n "${SLURM_JWT:-}" && "$(cat "$T/state")" == UP && -f "$T/loaded" ]]
SH
  cat >"$T/bin/systemctl" <<'SH'
#!/bin/bash
echo "systemctl $*" >>"$T/calls"
[[ ! -f "$T/after_restart" ]] || cp "$T/after_restart" "$T/state"
[[ ! -f "$T/restart_loads" ]] || touch "$T/loaded"
SH
  cat >"$T/bin/curl" <<'SH'
#!/bin/bash
echo "curl ${*: -1}" >>"$T/calls"
cp "${@: -2:1}" "$T/handed_over"
SH
  chmod +x "$T/bin/"*
  : >"$T/calls"
  export T PATH="$T/bin:$PATH" SLURM_CONF="$T/etc/slurm.conf" JWT_KEY_FILE="$T/spool/jwt_hs256.key"
  export SLURM_WAIT_ATTEMPTS=2 RETRY_DELAY=0 BACKUP_SUFFIX=test SLURMCTLD_RESTART="systemctl restart slurmctld"
  export SLURM_BIN_DIR="$T/none" ATTACH_ALLOW_HTTP=1
  ORIGINAL="$(cat "$T/etc/accounting.conf")"
}

teardown() {
  rm -rf "$T"
}

# slurmctld 24.11 loads the new AuthAltTypes on `scontrol reconfigure` (it starts anew): the stub does when told.
loads_on_reconfigure() {
  sed -i 's|^  reconfigure) |  reconfigure) touch "$T/loaded"; |' "$T/bin/scontrol"
}

@test "plan prints the key, the diff, the backup, the reconfigure and the rollback, and changes nothing" {
  run "$SCRIPT" plan
  [ "$status" -eq 0 ]
  [[ "$output" == *"key: create $JWT_KEY_FILE (32 random bytes, owner root, mode 0600)"* ]]
  [[ "$output" == *"+AuthAltTypes=auth/jwt"* ]]
  [[ "$output" == *"+AuthAltParameters=jwt_key=$JWT_KEY_FILE,disable_token_creation,max_token_lifespan=3600"* ]]
  [[ "$output" == *"backed up first to $T/etc/accounting.conf.before-jwt-test"* ]]
  [[ "$output" == *"then: scontrol reconfigure"* && "$output" == *"rollback: when 'scontrol ping'"* ]]
  [ "$(cat "$T/etc/accounting.conf")" = "$ORIGINAL" ]
  [ ! -e "$JWT_KEY_FILE" ] && [ ! -e "$T/etc/accounting.conf.before-jwt-test" ]
  ! grep -q "reconfigure" "$T/calls"
}

@test "apply backs up, makes the key, writes the block, reconfigures, hands the key over; a second run changes nothing" {
  loads_on_reconfigure
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 0 ]
  [[ "$output" == *"slurmctld is UP and accepts auth/jwt tokens"* ]]
  [ "$(cat "$T/etc/accounting.conf.before-jwt-test")" = "$ORIGINAL" ]
  [ "$(stat -c %a "$T/etc/accounting.conf")" = 644 ]
  [ "$(tail -n 4 "$T/etc/accounting.conf" | sed -n 2,3p)" = "AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY_FILE,disable_token_creation,max_token_lifespan=3600" ]
  [ "$(stat -c '%a %s' "$JWT_KEY_FILE")" = "600 32" ]
  python3 -S -c 'import base64, json, sys
assert base64.b64decode(json.load(open(sys.argv[1]))["jwt_hs256_key_b64"]) == open(sys.argv[2], "rb").read()' \
    "$T/handed_over" "$JWT_KEY_FILE"
  [[ "$output" != *"$(base64 -w0 "$JWT_KEY_FILE")"* ]]
  [ "$(grep -c 'scontrol reconfigure' "$T/calls")" -eq 1 ]
  ! grep -q systemctl "$T/calls"

  key="$(base64 -w0 "$JWT_KEY_FILE")" written="$(cat "$T/etc/accounting.conf")"
  BACKUP_SUFFIX=second run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 0 ]
  [[ "$output" == *"auth/jwt is already on"*"nothing changed"* ]]
  [ "$(grep -c 'scontrol reconfigure' "$T/calls")" -eq 1 ]
  [ ! -e "$T/etc/accounting.conf.before-jwt-second" ]
  [ "$(base64 -w0 "$JWT_KEY_FILE")" = "$key" ] && [ "$(cat "$T/etc/accounting.conf")" = "$written" ]
}

@test "slurmctld that does not come back after the reconfigure: the backup goes back, the new key goes, it is restarted" {
  loads_on_reconfigure
  echo DOWN >"$T/after_reconfigure"
  echo UP >"$T/after_restart"
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ]
  [[ "$output" == *"ROLLBACK: slurmctld did not answer 'scontrol ping' after the change"* ]]
  [[ "$output" == *"Rolled back to $T/etc/accounting.conf.before-jwt-test; slurmctld is UP now"* ]]
  [ "$(cat "$T/etc/accounting.conf")" = "$ORIGINAL" ]
  [ ! -e "$JWT_KEY_FILE" ] && [ ! -e "$T/handed_over" ]
  grep -q "systemctl restart slurmctld" "$T/calls"
}

@test "a slurmctld that refuses the key's tokens after a restart is rolled back" {
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ]
  [[ "$output" == *"ROLLBACK: slurmctld does not accept tokens signed with $JWT_KEY_FILE"* ]]
  [[ "$output" == *"slurmctld is UP now"* ]]
  [ "$(grep -c 'systemctl restart slurmctld' "$T/calls")" -eq 1 ]
  [ "$(cat "$T/etc/accounting.conf")" = "$ORIGINAL" ] && [ ! -e "$JWT_KEY_FILE" ]
}

@test "a slurmctld restarted for the tokens that does not come back is rolled back, and the script says it is DOWN" {
  echo DOWN >"$T/after_restart"
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ]
  [[ "$output" == *"ROLLBACK: slurmctld did not answer 'scontrol ping' after 'systemctl restart slurmctld'"* ]]
  [[ "$output" == *"slurmctld is DOWN now"* ]]
  [ "$(cat "$T/etc/accounting.conf")" = "$ORIGINAL" ] && [ ! -e "$JWT_KEY_FILE" ]
}

@test "Slurm before 23.11 loads auth/jwt only on a restart: the plan says so and apply restarts once" {
  echo 23.02.7 >"$T/version"
  touch "$T/restart_loads"
  run "$SCRIPT" plan
  [[ "$output" == *"then: scontrol reconfigure, and systemctl restart slurmctld (Slurm 23.02.7 loads"* ]]
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 0 ]
  [ "$(grep -c 'systemctl restart slurmctld' "$T/calls")" -eq 1 ]
  [ -s "$T/handed_over" ]
}

@test "with several controllers the key goes to their StateSaveLocation and the plan says only this one changes" {
  unset JWT_KEY_FILE
  printf 'SlurmctldHost=ctl2(127.0.0.2)\nStateSaveLocation=%s\n' "$T/spool" >>"$T/etc/slurm.conf"
  run "$SCRIPT" plan
  [ "$status" -eq 0 ]
  [[ "$output" == *"key: create $T/spool/jwt_hs256.key"* ]]
  [[ "$output" == *"WARNING: $T/etc/slurm.conf names 2 controllers. This changes this one only"* ]]
}

@test "an existing key is kept and not removed by a rollback" {
  head -c 32 /dev/urandom >"$JWT_KEY_FILE"
  key="$(base64 -w0 "$JWT_KEY_FILE")"
  echo DOWN >"$T/after_reconfigure"
  run "$SCRIPT" plan
  [[ "$output" == *"key: keep $JWT_KEY_FILE (exists)"* ]]
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ]
  [ "$(base64 -w0 "$JWT_KEY_FILE")" = "$key" ]
}

@test "refused, with nothing changed: no include, the admin's own AuthAltTypes, no auth_jwt plugin, a symlinked key" {
  sed -i '/^include/d' "$T/etc/slurm.conf"
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ] && [[ "$output" == *"does not include accounting.conf"*"add the line 'include accounting.conf'"* ]]
  echo "include accounting.conf" >>"$T/etc/slurm.conf"

  echo "AuthAltTypes=auth/jwt" >>"$T/etc/slurm.conf"
  run "$SCRIPT" plan
  [ "$status" -eq 1 ] && [[ "$output" == *"sets AuthAltTypes=auth/jwt itself"* ]]
  sed -i '/^AuthAltTypes/d' "$T/etc/slurm.conf"

  echo "AuthAltParameters=jwt_key=/elsewhere" >>"$T/etc/accounting.conf"
  run "$SCRIPT" plan
  [ "$status" -eq 1 ] && [[ "$output" == *"already sets AuthAltParameters outside the platform's block"* ]]
  printf '%s\n' "$ORIGINAL" >"$T/etc/accounting.conf"

  rm "$T/plugins/auth_jwt.so"
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ] && [[ "$output" == *"no auth_jwt.so in Slurm's PluginDir ($T/plugins)"* ]]
  : >"$T/plugins/auth_jwt.so"

  ln -s "$T/etc/slurm.conf" "$JWT_KEY_FILE"
  run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ] && [[ "$output" == *"$JWT_KEY_FILE is a symlink"* ]]
  grep -q '^ClusterName=foreign' "$T/etc/slurm.conf"

  rm "$JWT_KEY_FILE"
  ATTACH_ALLOW_HTTP="" run "$SCRIPT" apply http://s3.test/put
  [ "$status" -eq 1 ] && [[ "$output" == *"the key's PUT URL must be https"* ]]

  [ "$(cat "$T/etc/accounting.conf")" = "$ORIGINAL" ]
  ! grep -q "reconfigure" "$T/calls"
  [ -z "$(find "$T/etc" "$T/spool" -name '*before-jwt*' -o -name 'jwt_hs256.key')" ]
}
