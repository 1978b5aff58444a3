#!/usr/bin/env bats
# Several controllers (HyperPod multi-head) with stubs: which controller is the primary (lib/params.py controller-role,
# from resource_config.json), the once-only step (accounting) on the primary alone, every other controller step on each,
# and one auth/jwt key for all controllers. The failover itself runs against two real slurmctld in
# tests/e2e/test_slurm_multihead.py.

load test_helper

# resource_config.json of a cluster whose controller group has two instances: 10.1.0.12 (controller-machine-1) and
# 10.1.0.13 (controller-machine-2). SLURM_CONFIG is the SlurmConfig block as JSON ("" leaves it out).
multihead_resource_config() {
  python3 -S - "$RESOURCE_CONFIG" "${1-}" <<'EOF'
import json, sys
path, slurm = sys.argv[1:]
config = {"ClusterType": "Slurm", "InstanceGroups": [
    {"Name": "controller-machine", "Instances": [
        {"InstanceName": "controller-machine-1", "CustomerIpAddress": "10.1.0.12", "AgentIpAddress": "172.16.0.10"},
        {"InstanceName": "controller-machine-2", "CustomerIpAddress": "10.1.0.13", "AgentIpAddress": "172.16.0.14"}]},
    {"Name": "login-group", "Instances": [{"InstanceName": "login-group-1", "CustomerIpAddress": "10.1.0.20"}]},
    {"Name": "worker-group-1", "Instances": [{"InstanceName": "worker-group-1-1", "CustomerIpAddress": "10.1.0.30"}]}]}
if slurm:
    config["SlurmConfig"] = json.loads(slurm)
json.dump(config, open(path, "w"))
EOF
}

role() {
  python3 "$SCRIPTS/lib/params.py" controller-role "$RESOURCE_CONFIG" "$PARAMS_FILE" "$@"
}

@test "SlurmConfig names the primary and the backups" {
  multihead_resource_config '{"PrimaryControllerIp": "10.1.0.13", "SecondaryControllerIps": ["10.1.0.12"]}'
  [ "$(role 10.1.0.13 172.17.0.1)" = $'primary\tSlurmConfig.PrimaryControllerIp' ]
  [ "$(role 172.17.0.1 10.1.0.12)" = $'backup\tSlurmConfig.SecondaryControllerIps' ]
}

@test "without a SlurmConfig block the group's first instance is the primary, as AWS's multi-head script elects it" {
  multihead_resource_config ""
  [ "$(role 10.1.0.12)" = $'primary\tinstance controller-machine-1 of 2; controller-machine-1 is the primary' ]
  [ "$(role 10.1.0.13)" = $'backup\tinstance controller-machine-2 of 2; controller-machine-1 is the primary' ]
  # A stale SlurmConfig that names neither address falls back the same way.
  multihead_resource_config '{"PrimaryControllerIp": "10.1.0.99", "SecondaryControllerIps": []}'
  [ "$(role 10.1.0.13)" = $'backup\tinstance controller-machine-2 of 2; controller-machine-1 is the primary' ]
}

@test "one controller is the primary; an address outside the group or no way to tell is an error" {
  multihead_resource_config ""
  python3 -S - "$RESOURCE_CONFIG" <<'EOF'
import json, sys
config = json.load(open(sys.argv[1]))
config.pop("SlurmConfig", None)
group = next(g for g in config["InstanceGroups"] if g["Name"] == "controller-machine")
group["Instances"] = [{"InstanceName": "controller-machine-7", "CustomerIpAddress": "10.1.0.12"}]
json.dump(config, open(sys.argv[1], "w"))
EOF
  [ "$(role 10.1.0.12)" = $'primary\tthe only instance of controller-machine' ]
  run role 10.1.0.30
  [ "$status" -eq 2 ]
  [[ "$output" == *"none of this node's addresses (10.1.0.30) is an instance of the controller group"* ]]
  multihead_resource_config ""
  sed -i 's/controller-machine-1/controller-machine-5/' "$RESOURCE_CONFIG"
  run role 10.1.0.13
  [ "$status" -eq 2 ]
  [[ "$output" == *"none is named 'controller-machine-1': cannot tell the primary controller"* ]]
}

# on_init_complete.sh on a controller with accounting on; sacctmgr is a stub that records and fails, so only the
# primary, which runs apply_accounting.sh, calls it (and then fails: that script's own behaviour is accounting.bats').
run_controller() {
  printf '#!/usr/bin/env bash\necho "sacctmgr $*" >>"$STUB_LOG"\nexit 1\n' >"$T/bin/sacctmgr"
  chmod +x "$T/bin/sacctmgr"
  set_param accounting.enabled true
  multihead_resource_config '{"PrimaryControllerIp": "10.1.0.12", "SecondaryControllerIps": ["10.1.0.13"]}'
  # One check for slurmdbd (SLURM_WAIT_ATTEMPTS), so slurmctld answers at once here (STUB_SLURMCTLD_LATE=0).
  STUB_IPS="$1 172.17.0.1" SLURM_WAIT_ATTEMPTS=1 STUB_SLURMCTLD_LATE=0 run bash "$SCRIPTS/on_init_complete.sh"
}

@test "the backup runs every controller step but accounting" {
  run_controller 10.1.0.13
  [ "$status" -eq 0 ]
  [[ "$output" == *"controller role: backup (SlurmConfig.SecondaryControllerIps)"* ]]
  [[ "$output" == *"[configure_slurm_auth]"* && "$output" == *"[check_gres]"* ]]
  [[ "$output" != *"[apply_accounting]"* ]]
  [ -z "$(calls sacctmgr)" ]
}

@test "the primary runs accounting" {
  # HyperPod's slurmdbd accounting, as apply_accounting.sh reads it from slurmctld
  export STUB_SCONTROL_CONFIG="ClusterName = ml-cluster
AccountingStorageType = accounting_storage/slurmdbd"
  run_controller 10.1.0.12
  [[ "$output" == *"controller role: primary (SlurmConfig.PrimaryControllerIp)"* ]]
  [[ "$output" == *"[apply_accounting]"* ]]
  [ -n "$(calls sacctmgr)" ]
}

# configure_slurm_auth.sh in per-user mode on a slurm.conf naming two controllers; the key goes to the issuer's
# secret through a stand-in `aws` that only records the call.
jwt_on_two_controllers() {
  set_param slurm.auth '"jwt"' \
    slurm.jwt_key_secret_arn '"arn:aws:secretsmanager:eu-west-1:123456789012:secret:jwt-key"'
  mkdir -p "$T/statesave" "$T/override"
  printf '%s\n' ClusterName=ml-cluster "SlurmctldHost=ip-10-1-0-12(10.1.0.12)" "SlurmctldHost=ip-10-1-0-13(10.1.0.13)" \
    "StateSaveLocation=$T/statesave" "include accounting.conf" >"$SLURM_CONF_DIR/slurm.conf"
  : >"$SLURM_CONF_DIR/accounting.conf"
  printf '#!/usr/bin/env bash\necho "aws $*" >>"$STUB_LOG"\n' >"$T/override/aws"
  chmod +x "$T/override/aws"
}

@test "several controllers share one auth/jwt key in StateSaveLocation, made by the first" {
  jwt_on_two_controllers
  unset JWT_KEY_FILE
  PATH="$T/override:$PATH" run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  key="$T/statesave/jwt_hs256.key"
  [ "$(stat -c '%s %a' "$key")" = "32 600" ]
  grep -qxF "AuthAltParameters=jwt_key=$key,disable_token_creation,max_token_lifespan=3600" "$SLURM_CONF_DIR/accounting.conf"
  [[ "$(calls aws)" == *"put-secret-value --secret-id arn:aws:secretsmanager:eu-west-1:123456789012:secret:jwt-key"* ]]
  # The other controller (its own accounting.conf and no marker of its own) keeps that key.
  sum="$(sha256sum <"$key")"
  : >"$SLURM_CONF_DIR/accounting.conf"
  rm -f "$key.published"
  PATH="$T/override:$PATH" run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ "$(sha256sum <"$key")" = "$sum" ]
  grep -qxF "AuthAltParameters=jwt_key=$key,disable_token_creation,max_token_lifespan=3600" "$SLURM_CONF_DIR/accounting.conf"
}

@test "a controller never replaces a key another one made meanwhile" {
  jwt_on_two_controllers
  unset JWT_KEY_FILE
  # The other controller writes its key while this one draws its random bytes (a stand-in for `head`).
  printf '%s\n' '#!/usr/bin/env bash' "printf other-controllers-key-0123456789ab >$T/statesave/jwt_hs256.key" \
    'exec /usr/bin/head "$@"' >"$T/override/head"
  chmod +x "$T/override/head"
  PATH="$T/override:$PATH" run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$T/statesave/jwt_hs256.key")" = other-controllers-key-0123456789ab ]
  [[ "$output" == *"another controller made $T/statesave/jwt_hs256.key first; using it"* ]]
  [ -z "$(find "$T/statesave" -name '.jwt.*')" ]
}

@test "a shared StateSaveLocation that is a symlink is refused" {
  jwt_on_two_controllers
  unset JWT_KEY_FILE
  mkdir -p "$T/elsewhere"
  rmdir "$T/statesave"
  ln -s "$T/elsewhere" "$T/statesave"
  PATH="$T/override:$PATH" run bash "$SCRIPTS/configure_slurm_auth.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"is a symlink or not owned by root"* ]]
  [ -z "$(ls -A "$T/elsewhere")" ]
}
