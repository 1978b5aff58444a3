#!/usr/bin/env bats
# lifecycle/hyperpod/publish_slurm_login.sh (controller side of the Studio login node) with stubs.
# tests/e2e/test_studio_slurm_login.py runs it against moto server and a real slurm.conf.

load studio_helper

setup_controller() {
  export SLURM_CONF="$T/slurm.conf" MUNGE_KEY="$T/munge.key" STUB_SINFO_VERSION=23.11.10 RETRY_DELAY=0
  printf '%s\n' "ClusterName=ml-cluster" "SlurmctldHost=ip-10-1-0-12(10.1.0.12)" "SlurmctldPort=6820-6821" \
    "AuthType=auth/munge" "NodeName=worker-1 CPUs=4" >"$SLURM_CONF"
  : >"$STUB_SECRET"
}

secret_field() {
  python3 -S -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print(v, end="")' "$STUB_SECRET" "$1"
}

# secret_fields : SECRET[name], every field of the published value as secret_field prints it (trailing newlines
# dropped, as $(...) drops them), from one Python start.
secret_fields() {
  declare -gA SECRET=()
  local name value
  while IFS= read -r -d '' name && IFS= read -r -d '' value; do SECRET[$name]="$value"; done < <(
    python3 -S -c 'import json, sys
for name, value in json.load(open(sys.argv[1])).items():
    print(name, str(value).rstrip("\n"), sep="\0", end="\0")' "$STUB_SECRET"
  )
}

@test "publishes the version, controller, port, cluster, key and slurm.conf as one JSON value" {
  setup_controller
  STUB_AWS_GET_ERROR=ResourceNotFoundException run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  secret_fields
  [ "${SECRET[slurm_version]}" = 23.11.10 ]
  [ "${SECRET[controller_host]}" = ip-10-1-0-12 ]
  [ "${SECRET[controller_addr]}" = 10.1.0.12 ]
  [ "${SECRET[slurmctld_port]}" = 6820 ]
  [ "${SECRET[cluster_name]}" = ml-cluster ]
  [ "${SECRET[munge_key_b64]}" = "$(base64 -w0 <"$MUNGE_KEY")" ]
  [ "${SECRET[slurm_conf]}" = "$(cat "$SLURM_CONF")" ]
  [[ "$(calls aws)" == *"put-secret-value --secret-id $ARN --region eu-west-1 --secret-string file://"* ]]
  [[ "$output" != *"$(base64 -w0 <"$MUNGE_KEY")"* && "$output" != *munge-key-bytes* ]]
}

@test "an identical current value is not published again" {
  setup_controller
  SLURM_LOGIN_SECRET_ARN="$ARN" run bash "$PUBLISH"
  [ "$status" -eq 0 ]
  : >"$STUB_LOG"
  SLURM_LOGIN_SECRET_ARN="$ARN" run bash "$PUBLISH"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nothing to publish"* ]]
  ! calls aws | grep -q put-secret-value || false
}

@test "without an address in SlurmctldHost the host's first address is used" {
  setup_controller
  sed -i 's/^SlurmctldHost=.*/SlurmctldHost=ip-10-1-0-12/' "$SLURM_CONF"
  STUB_IPS="10.1.0.99 172.17.0.1" run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  [ "$(secret_field controller_addr)" = 10.1.0.99 ]
}

@test "a read error other than 'no value yet' stops without publishing" {
  setup_controller
  STUB_AWS_GET_ERROR=AccessDeniedException run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 1 ]
  [[ "$output" == *"cannot read $ARN"*AccessDeniedException* ]]
  ! calls aws | grep -q put-secret-value || false
}

@test "included files are published by name and the include lines point at them" {
  setup_controller
  mkdir -p "$T/etc"
  echo "AccountingStorageType=accounting_storage/slurmdbd" >"$T/accounting.conf"
  printf 'GresTypes=gpu\ninclude %s\n' "$T/etc/nodes.conf" >"$T/gres.conf"
  echo "NodeName=ip-10-1-0-30 Gres=gpu:1" >"$T/etc/nodes.conf"
  printf 'include accounting.conf\nInclude %s\n' "$T/gres.conf" >>"$SLURM_CONF"
  run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  python3 -S - "$STUB_SECRET" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))
lines = value["slurm_conf"].splitlines()
assert lines[-2:] == ["include accounting.conf", "Include gres.conf"], lines
assert value["slurm_conf_includes"] == {
    "accounting.conf": "AccountingStorageType=accounting_storage/slurmdbd\n",
    "gres.conf": "GresTypes=gpu\ninclude nodes.conf\n",
    "nodes.conf": "NodeName=ip-10-1-0-30 Gres=gpu:1\n"}, value["slurm_conf_includes"]
PY
}

@test "an include that does not exist yet or is a wildcard stops without publishing" {
  setup_controller
  echo "include accounting.conf" >>"$SLURM_CONF"
  run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 1 ]
  [[ "$output" == *"'include accounting.conf' names $T/accounting.conf, which does not exist yet"* ]]
  sed -i 's|^include accounting.conf|include plugstack.conf.d/*|' "$SLURM_CONF"
  run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 1 ]
  [[ "$output" == *"is a wildcard include"* ]]
  ! calls aws | grep -q put-secret-value || false
}

@test "waits, bounded, for HyperPod to write a slurm.conf that names the controller" {
  setup_controller
  grep -v SlurmctldHost "$SLURM_CONF" >"$T/partial" && mv "$T/partial" "$SLURM_CONF"
  SLURM_WAIT_ATTEMPTS=3 run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 1 ]
  [[ "$output" == *"gave up waiting for a complete $SLURM_CONF after 3 checks"* ]]
  [[ "$output" == *"cannot read a slurm.conf with SlurmctldHost at $SLURM_CONF"* ]]
  ! calls aws | grep -q put-secret-value || false
}

@test "a missing ClusterName or ARN is an error" {
  setup_controller
  sed -i '/^ClusterName=/d' "$SLURM_CONF"
  run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 1 ]
  [[ "$output" == *"has no ClusterName"* ]]

  unset SLURM_LOGIN_SECRET_ARN
  run bash "$PUBLISH"
  [ "$status" -eq 1 ]
  [[ "$output" == *"usage:"* ]]
}

@test "per-user mode (SLURM_AUTH=jwt) publishes no munge key and never reads the key file" {
  setup_controller
  rm -f "$MUNGE_KEY"
  SLURM_AUTH=jwt STUB_AWS_GET_ERROR=ResourceNotFoundException run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  secret_fields
  [ "${SECRET[auth]}" = jwt ]
  [ -z "${SECRET[munge_key_b64]+present}" ]
  [ "${SECRET[slurm_conf]}" = "$(cat "$SLURM_CONF")" ]
}

@test "SLURM_AUTH other than munge or jwt is refused" {
  setup_controller
  SLURM_AUTH=none run bash "$PUBLISH" "$ARN"
  [ "$status" -ne 0 ]
  [[ "$output" == *"SLURM_AUTH must be munge or jwt, got 'none'"* ]]
  [ -z "$(calls aws)" ]
}

@test "several controllers (multi-head): all are published, primary first, and a backup publishes the same value" {
  setup_controller
  sed -i 's/^SlurmctldHost=.*/SlurmctldHost=ip-10-1-0-12(10.1.0.12)\nSlurmctldHost=ip-10-1-0-13(10.1.0.13)/' "$SLURM_CONF"
  run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  [[ "$output" == *"slurmctld ip-10-1-0-12 (10.1.0.12), backup ip-10-1-0-13 (10.1.0.13)"* ]]
  python3 -S - "$STUB_SECRET" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))
assert value["controllers"] == [{"host": "ip-10-1-0-12", "addr": "10.1.0.12"},
                                {"host": "ip-10-1-0-13", "addr": "10.1.0.13"}], value["controllers"]
assert (value["controller_host"], value["controller_addr"]) == ("ip-10-1-0-12", "10.1.0.12")
PY
  # The backup runs the same script at its own creation: same slurm.conf, same value, nothing written.
  : >"$STUB_LOG"
  STUB_HOSTNAME=ip-10-1-0-13 STUB_IPS=10.1.0.13 run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nothing to publish"* ]]
  ! calls aws | grep -q put-secret-value || false
}

@test "a backup that cannot resolve a primary named without its address leaves publishing to the primary" {
  setup_controller
  sed -i 's/^SlurmctldHost=.*/SlurmctldHost=ip-10-1-0-12\nSlurmctldHost=ip-10-1-0-13(10.1.0.13)/' "$SLURM_CONF"
  STUB_HOSTNAME=ip-10-1-0-13 STUB_IPS=10.1.0.13 run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: this backup controller cannot resolve the primary"* ]]
  ! calls aws | grep -q put-secret-value || false
  # Its own address never stands in for the primary's; the primary itself falls back to its first address.
  STUB_IPS="10.1.0.12 172.17.0.1" run bash "$PUBLISH" "$ARN"
  [ "$status" -eq 0 ]
  [ "$(secret_field controller_addr)" = 10.1.0.12 ]
}
