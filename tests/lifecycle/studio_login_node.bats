#!/usr/bin/env bats
# lifecycle/studio/slurm_login_node.sh with stubbed commands: version logic, idempotency, failures.
# tests/e2e/test_studio_slurm_login.py runs the same script against real Slurm daemons.

bats_require_minimum_version 1.5.0
load studio_helper

key() { echo "$SLURM_LOGIN_ROOT/etc/munge/munge.key"; }
conf() { echo "$SLURM_LOGIN_ROOT/etc/slurm/slurm.conf"; }

@test "major_minor reads Slurm, Debian and sinfo version strings" {
  # shellcheck source-path=SCRIPTDIR source=../../lifecycle/studio/slurm_login_node.sh
  source "$LCC"
  [ "$(major_minor 23.11.10)" = 23.11 ]
  [ "$(major_minor 1:23.11.4-1ubuntu2)" = 23.11 ]
  [ "$(major_minor 22.05.8-4+deb12u3)" = 22.05 ]
  [ "$(major_minor 'slurm 24.05.1')" = 24.05 ]
  [ "$(major_minor 'slurm-wlm 22.05.8')" = 22.05 ]
  [ "$(major_minor 24.11)" = 24.11 ]
  [ -z "$(major_minor '(none)')" ]
  [ -z "$(major_minor 23)" ]
}

@test "same_release compares major.minor only, never a prefix" {
  # shellcheck source-path=SCRIPTDIR source=../../lifecycle/studio/slurm_login_node.sh
  source "$LCC"
  same_release 23.11.10 23.11.4-1ubuntu2
  same_release 23.11 1:23.11.1
  run ! same_release 23.11.10 23.1.0
  run ! same_release 23.11.10 24.11.1
  run ! same_release 23.11.10 21.08.5-2ubuntu1
  run ! same_release 23.11.10 ""
  run ! same_release "" ""
}

@test "the secret ARN comes from the environment, then the embedded value, then the env file" {
  # shellcheck source-path=SCRIPTDIR source=../../lifecycle/studio/slurm_login_node.sh
  source "$LCC"
  [ "$(secret_arn)" = "$ARN" ]
  unset SLURM_LOGIN_SECRET_ARN
  [ -z "$(secret_arn)" ]
  echo "export SLURM_LOGIN_SECRET_ARN='arn:aws:secretsmanager:us-east-1:1:secret:from-file'" >"$T/env"
  ENV_FILE="$T/env"
  [ "$(secret_arn)" = "arn:aws:secretsmanager:us-east-1:1:secret:from-file" ]
  EMBEDDED_SECRET_ARN="arn:aws:secretsmanager:us-east-1:1:secret:embedded"
  [ "$(secret_arn)" = "arn:aws:secretsmanager:us-east-1:1:secret:embedded" ]
}

@test "the script carries the ARN placeholder once (the lifecycle config's bootstrap fetches it, no size limit)" {
  [ "$(grep -c '@SLURM_LOGIN_SECRET_ARN@' "$LCC")" -eq 1 ]
}

client() { echo "$SLURM_LOGIN_ROOT/opt/hyperpod-slurm-client"; }

@test "first start installs the controller's client bundle, writes key and conf, starts munged from the bundle" {
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"changed: client bundle commands on PATH munge key slurm.conf munged"* ]]
  [[ "$(calls aws)" == *"s3 cp --only-show-errors $BUNDLE_URI "* ]]
  [ "$(cat "$(client)/.sha256")" = "$BUNDLE_SHA" ]
  # Wrappers hand the bundle's libraries to the loader on its command line; no LD_LIBRARY_PATH.
  [ "$(tail -n1 "$(client)/bin/sinfo")" = "exec $FAKE_LD --library-path $(client)/lib:$(client)/lib/slurm --argv0 sinfo $(client)/libexec/sinfo \"\$@\"" ]
  ! grep -rq LD_LIBRARY_PATH "$(client)/bin" "$SLURM_LOGIN_ROOT/usr/local/bin" || false
  # sbatch goes through the working-directory helper (root's copy of studio_workdir.sh); the others straight on.
  helper="$SLURM_LOGIN_ROOT/usr/local/lib/hyperpod/studio-workdir"
  [ "$(tail -n1 "$SLURM_LOGIN_ROOT/usr/local/bin/sbatch")" = "exec $helper $SLURM_LOGIN_ROOT/etc/hyperpod-fsx-paths $(client)/bin/sbatch \"\$@\"" ]
  [ "$(tail -n1 "$SLURM_LOGIN_ROOT/usr/local/bin/squeue")" = "exec $(client)/bin/squeue \"\$@\"" ]
  cmp "$REPO_ROOT/lifecycle/studio/studio_workdir.sh" "$helper"
  [ "$(stat -c %a "$helper")" = 755 ]
  # Every wrapper root's and 0755 (root_put_all), and nothing of the writing left beside them.
  [ "$(stat -c '%a %U' "$(client)"/bin/* "$SLURM_LOGIN_ROOT"/usr/local/bin/* | sort -u)" = "755 root" ]
  [ "$(ls -A "$(client)/bin" | wc -l)" -eq 9 ]
  [ "$(ls -A "$SLURM_LOGIN_ROOT/usr/local/bin" | wc -l)" -eq 9 ]
  grep -q "PATH=\"$(client)/bin:" "$SLURM_LOGIN_ROOT/etc/profile.d/hyperpod-slurm-client.sh"
  [[ "$(calls fake-ld)" == *"--argv0 sinfo $(client)/libexec/sinfo --version"* ]]
  cmp "$T/munge.key" "$(key)"
  [ "$(stat -c %a "$(key)")" = 400 ]
  # The published slurm.conf, with the bundle's plugin directory.
  [ "$(cat "$(conf)")" = "$(printf 'ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-12\nAuthType=auth/munge\nPluginDir=%s' "$(client)/lib/slurm")" ]
  [[ "$(calls aws)" == *"get-secret-value --secret-id $ARN --region eu-west-1"* ]]
  [[ "$(calls munged)" == *"--key-file $(key) --socket $SLURM_LOGIN_ROOT/run/munge/munge.socket.2"* ]]
  [[ "$output" != *"munge-key-bytes"* && "$output" != *"$(base64 <"$T/munge.key")"* ]]
  grep -q "ready: sbatch" "$SLURM_LOGIN_STATE_DIR/setup.log"
}

@test "the controller's PluginDir is replaced by the bundle's" {
  write_secret '{"slurm_conf": "ClusterName=ml-cluster\nPluginDir=/opt/slurm/lib/slurm\n"}'
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^PluginDir=' "$(conf)")" -eq 1 ]
  grep -qx "PluginDir=$(client)/lib/slurm" "$(conf)"
  grep -q '^#PluginDir=/opt/slurm/lib/slurm' "$(conf)"
}

@test "a second start changes nothing: no download, no munged" {
  run bash "$LCC"
  [ "$status" -eq 0 ]
  : >"$STUB_LOG"
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nothing changed"* ]]
  [[ "$(calls aws)" != *"s3 cp"* ]]
  [ -z "$(calls munged)" ]
}

@test "a new bundle in the secret replaces the installed one" {
  run bash "$LCC"
  [ "$status" -eq 0 ]
  old="$BUNDLE_SHA"
  make_bundle 23.11.10 auth_jwt
  write_secret "{}"
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"changed: client bundle"* ]]
  [ "$(cat "$(client)/.sha256")" = "$BUNDLE_SHA" ]
  [ "$BUNDLE_SHA" != "$old" ]
  [ -f "$(client)/lib/slurm/auth_jwt.so" ]
  [ ! -e "$(client).new" ]
  [ ! -e "$(client).old" ]
}

@test "a download whose sha256 is not the secret's is refused and nothing is installed" {
  echo tampered >>"$STUB_S3_DIR/${BUNDLE_URI##*/}"
  run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"has sha256 $(sha256sum "$STUB_S3_DIR/${BUNDLE_URI##*/}" | awk '{print $1}'), but the cluster published $BUNDLE_SHA: refusing to install it"* ]]
  [ ! -e "$(client)" ]
  [ ! -e "$(key)" ]
  [ ! -e "$(conf)" ]
  [ -z "$(calls fake-ld)" ]
}

@test "a bundle of another Slurm than the secret's is refused, naming both versions" {
  make_bundle 23.11.9
  write_secret '{"slurm_version": "23.11.10"}'
  run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"Slurm version mismatch: the cluster runs Slurm 23.11.10 (23.11) but the client bundle is 23.11.9 (23.11)"* ]]
  [ ! -e "$(client)" ]
  [ ! -e "$(client).new" ]
  [ ! -e "$(key)" ]
}

@test "a bundle whose sinfo reports another version fails naming both" {
  STUB_BUNDLE_SINFO_VERSION=22.05.8 run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the cluster runs Slurm 23.11.10 (23.11) but the installed client (sinfo --version) is 22.05.8 (22.05)"* ]]
  [ ! -e "$(key)" ]
}

@test "no bundle in the secret, or a malformed one, is an error naming the field; apt is never used" {
  for override in '{"client_bundle": null}' '{"client_bundle": {"s3_uri": "https://example.com/x.tar.gz", "sha256": "'"$BUNDLE_SHA"'"}}' \
    '{"client_bundle": {"s3_uri": "'"$BUNDLE_URI"'", "sha256": "abc"}}'; do
    write_secret "$override"
    run bash "$LCC"
    [ "$status" -eq 1 ]
    [[ "$output" == *"client_bundle"* ]]
    [ ! -e "$(client)" ]
    [ ! -e "$(conf)" ]
  done
  ! grep -qE 'apt-get|apt-cache|dpkg' "$LCC" || false
}

@test "an unreadable bundle fails after bounded retries with the IAM hint" {
  STUB_S3_FAIL="An error occurred (403) when calling the HeadObject operation: Forbidden" run bash "$LCC"
  [ "$status" -eq 1 ]
  [ "$(calls aws | grep -c 's3 cp')" -eq 3 ]
  [[ "$output" == *"needs s3:GetObject on it"* ]]
}

@test "a new munge key in the secret replaces the file and restarts munged" {
  run bash "$LCC"
  [ "$status" -eq 0 ]
  printf 'rotated-key' >"$T/munge.key"
  write_secret "{}"
  : >"$STUB_LOG"
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"changed: munge key munged"* ]]
  cmp "$T/munge.key" "$(key)"
  [ "$(calls munged | head -1)" = "munged --socket $SLURM_LOGIN_ROOT/run/munge/munge.socket.2 --stop" ]
  [ "$(calls munged | wc -l)" -eq 2 ]
}

@test "munged listens where slurm.conf's AuthInfo says" {
  write_secret '{"slurm_conf": "ClusterName=ml-cluster\nAuthInfo=socket=/custom/munge.sock,ttl=60\n"}'
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$(calls munged)" == *"--socket /custom/munge.sock "* ]]
}

@test "an unresolvable controller name gets one hosts entry" {
  STUB_RESOLVES=0 run bash "$LCC"
  [ "$status" -eq 0 ]
  STUB_RESOLVES=0 run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_LOGIN_ROOT/etc/hosts")" = "10.1.0.12 ip-10-1-0-12" ]
}

@test "every controller of a multi-head cluster gets its hosts entry, once" {
  write_secret '{"controllers": [{"host": "ip-10-1-0-12", "addr": "10.1.0.12"},
                                 {"host": "ip-10-1-0-13", "addr": "10.1.0.13"}, {"host": "ip-10-1-0-14", "addr": ""}]}'
  STUB_RESOLVES=0 run bash "$LCC"
  [ "$status" -eq 0 ]
  STUB_RESOLVES=0 run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(cat "$SLURM_LOGIN_ROOT/etc/hosts")" = $'10.1.0.12 ip-10-1-0-12\n10.1.0.13 ip-10-1-0-13' ]
}

@test "a controllers entry that is not a host name and an IPv4 address is refused before anything is written" {
  for entry in '{"host": "ip-10-1-0-13;id", "addr": "10.1.0.13"}' '{"host": "ip-10-1-0-13", "addr": "evil.example.com"}' \
    '"ip-10-1-0-13"'; do
    write_secret "{\"controllers\": [{\"host\": \"ip-10-1-0-12\", \"addr\": \"10.1.0.12\"}, $entry]}"
    run bash "$LCC"
    [ "$status" -eq 1 ]
    [[ "$output" == *"the secret's controllers entry"* ]]
    [ ! -e "$(key)" ]
    [ ! -e "$(conf)" ]
  done
}

@test "an unreachable slurmctld fails with the security-group hint" {
  STUB_SINFO_FAIL=1 run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"sinfo cannot reach slurmctld at 10.1.0.12"*"TCP 6817"* ]]
}

@test "a secret without the controller's settings is reported by name" {
  write_secret '{"munge_key_b64": "", "slurm_conf": ""}'
  run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the secret lacks munge_key_b64, slurm_conf"* ]]
  [ ! -e "$(key)" ]
}

@test "no secret ARN anywhere is an error" {
  unset SLURM_LOGIN_SECRET_ARN
  run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"no secret ARN: set SLURM_LOGIN_SECRET_ARN or write it to $SLURM_LOGIN_ROOT/etc/slurm-login.env"* ]]
}

@test "unreadable secret fails after bounded retries with the IAM hint" {
  STUB_AWS_GET_ERROR=AccessDeniedException run bash "$LCC"
  [ "$status" -eq 1 ]
  [ "$(calls aws | wc -l)" -eq 3 ]
  [[ "$output" == *"needs secretsmanager:GetSecretValue"* ]]
}

@test "without the foreground flag it returns at once and finishes in the background" {
  unset SLURM_LOGIN_FOREGROUND
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"continues in the background"* ]]
  for _ in $(seq 100); do
    grep -q "ready: sbatch" "$SLURM_LOGIN_STATE_DIR/setup.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "ready: sbatch" "$SLURM_LOGIN_STATE_DIR/setup.log"
  [ -x "$SLURM_LOGIN_STATE_DIR/slurm_login_node.sh" ]
}

@test "a run started while another holds the lock leaves it alone" {
  mkdir -p "$SLURM_LOGIN_STATE_DIR"
  exec 8>"$SLURM_LOGIN_STATE_DIR/lock"
  flock 8
  run bash "$LCC"
  exec 8>&-
  [ "$status" -eq 0 ]
  [[ "$output" == *"another setup run is in progress"* ]]
  [ -z "$(calls aws)" ]
}

@test "values that would redirect the space or make it run foreign code are refused before anything is written" {
  for override in '{"controller_addr": "evil.example.com"}' '{"controller_host": "ip-10-1-0-12;rm -rf /"}' \
    '{"slurm_conf": "ClusterName=ml-cluster\nPlugStackConfig=/home/sagemaker-user/plugstack.conf\n"}' \
    '{"slurm_conf": "ClusterName=ml-cluster\nPluginDir=/usr/lib/slurm:/fsx/plugins\n"}' \
    '{"slurm_conf": "ClusterName=ml-cluster\nSrunProlog=/opt/slurm/../../tmp/x.sh\n"}' \
    '{"slurm_conf_includes": {"accounting.conf": "TaskProlog=/tmp/prolog.sh\n"}}' '{"auth": "none"}'; do
    write_secret "$override"
    run bash "$LCC"
    [ "$status" -eq 1 ]
    [[ "$output" == *"the secret's"* ]]
    [ ! -e "$(key)" ]
    [ ! -e "$(conf)" ]
  done
  write_secret '{"slurm_conf": "ClusterName=ml-cluster\nPlugStackConfig=/opt/slurm/etc/plugstack.conf\n"}'
  run bash "$LCC"
  [ "$status" -eq 0 ]
}

@test "per-user mode needs the bundle's auth_jwt.so" {
  write_secret '{"auth": "jwt", "munge_key_b64": ""}'
  SLURM_TOKEN_SECRET_PREFIX=p/ run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"per-user mode needs auth_jwt.so, which the controller's client bundle lacks"* ]]
  [ ! -e "$(client)" ]
  [ ! -e "$(client).new" ]
}

@test "per-user mode (auth jwt) needs no munge key and never installs or starts munge" {
  make_bundle 23.11.10 auth_jwt
  write_secret '{"auth": "jwt", "munge_key_b64": ""}'
  SLURM_TOKEN_SECRET_PREFIX="" run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"per-user mode needs SLURM_TOKEN_SECRET_PREFIX"* ]]
  [ -z "$(calls munged)" ]
  [ ! -e "$(key)" ]
}
