#!/usr/bin/env bats
# lifecycle/hyperpod/configure_sssd.sh with stubs: what it refuses before it touches the node. What it configures
# (sssd against a real slapd, NSS, PAM, sudo, a second run changing nothing) runs for real in
# tests/e2e/test_directory_sssd.py.

load test_helper

setup_directory() {
  # A copy of the scripts with the CA beside them, as HyperPod lays out the lifecycle prefix on a node.
  cp -r "$SCRIPTS" "$T/hyperpod"
  mkdir -p "$T/hyperpod/directory"
  cp "$REPO_ROOT/tests/fixtures/directory-ca.pem" "$T/hyperpod/directory/ca.pem"
  SHA="$(sha256sum "$T/hyperpod/directory/ca.pem" | cut -d' ' -f1)"
  set_param directory "{\"uris\": [\"ldaps://ldap.example.com\"], \"start_tls\": false,
    \"search_base\": \"dc=example,dc=com\", \"bind_dn\": \"cn=bind,dc=example,dc=com\",
    \"bind_password_secret_arn\": \"arn:aws:secretsmanager:us-east-1:111122223333:secret:bind-AbCdEf\",
    \"region\": \"us-east-1\", \"ldap_schema\": \"rfc2307\", \"access_groups\": [\"hpc-users\"],
    \"admin_groups\": [\"hpc-admins\"], \"ca_certificate\": {\"file\": \"directory/ca.pem\", \"sha256\": \"$SHA\"},
    \"artifacts\": []}"
  # A node that has sssd and its LDAP provider, unless a test takes them away.
  export SSSD_CONF_DIR="$T/sssd" NSSWITCH="$T/nsswitch.conf" PAM_DIR="$T/pam.d"
  export SSSD_COMMAND="$T/sbin/sssd" SSSD_LDAP_PROVIDERS="$T/lib/sssd/libsss_ldap.so"
  mkdir -p "$T/sbin" "$T/lib/sssd"
  printf '#!/bin/sh\n' >"$SSSD_COMMAND"
  chmod +x "$SSSD_COMMAND"
  touch "$SSSD_LDAP_PROVIDERS"
}

# untouched : nothing of the node was written, and no AWS call, package install or restart happened
untouched() {
  [ ! -e "$SSSD_CONF_DIR/sssd.conf" ]
  [ ! -e "$NSSWITCH" ]
  [ ! -e "$SUDOERS_DIR/91-hyperpod-directory" ]
  [ -z "$(mutating_calls)" ]
}

@test "without a directory section it changes nothing" {
  run bash "$SCRIPTS/configure_sssd.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"directory integration is off: nothing to change"* ]]
  [ -z "$(mutating_calls)" ]
}

@test "a plaintext ldap:// URI without start_tls is refused before anything is written" {
  setup_directory
  set_param directory.uris '["ldaps://ldap1.example.com", "ldap://ldap2.example.com"]'
  run bash "$T/hyperpod/configure_sssd.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"refusing 'ldap://ldap2.example.com': only ldaps:// URIs, or ldap:// with start_tls"* ]]
  untouched
}

@test "ldap:// passes the URI check with start_tls (and stops later, here at the missing CA)" {
  setup_directory
  set_param directory.uris '["ldap://ldap2.example.com"]' \
    directory.start_tls true
  rm "$T/hyperpod/directory/ca.pem"
  run bash "$T/hyperpod/configure_sssd.sh"
  [ "$status" -ne 0 ]
  [[ "$output" != *"refusing"* ]]
  [[ "$output" == *"the directory CA certificate $T/hyperpod/directory/ca.pem is missing"* ]]
  untouched
}

@test "a node without sssd and no artifacts to install stops and says what it needs" {
  setup_directory
  rm "$SSSD_COMMAND"
  run bash "$T/hyperpod/configure_sssd.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"sssd with its LDAP provider is not on this node"* ]]
  [[ "$output" == *"sssd-common, sssd-ldap, libnss-sss and libpam-sss"* ]]
  [[ "$output" == *"cluster.directory.artifacts"* ]]
  untouched
}

@test "a node without the LDAP provider installs the listed artifacts, verified, and stops if they did not bring it" {
  setup_directory
  rm "$SSSD_LDAP_PROVIDERS"
  python3 -S - "$PARAMS_FILE" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["directory"]["artifacts"] = [{"name": "sssd-ldap", "s3_uri": "s3://mirror/debs/sssd-ldap_2.6.3-1ubuntu3_amd64.deb",
                                "sha256": "c2e1c4b1f0c25ac7f3ac3b5a6f4f0e6dd3e7b5b7f1a5e23c4b8a9f1e2d3c4b5a"}]
json.dump(p, open(sys.argv[1], "w"))
PY
  printf 'not the package' >"$STUB_S3_DIR/sssd-ldap_2.6.3-1ubuntu3_amd64.deb"
  run bash "$T/hyperpod/configure_sssd.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"artifact sssd-ldap: checksum mismatch"* ]]
  [ -z "$(calls apt-get)" ]
  # The right bytes install, but a package that does not bring the provider still stops the script.
  sha="$(sha256sum "$STUB_S3_DIR/sssd-ldap_2.6.3-1ubuntu3_amd64.deb" | cut -d' ' -f1)"
  sed -i "s/c2e1c4b1f0c25ac7f3ac3b5a6f4f0e6dd3e7b5b7f1a5e23c4b8a9f1e2d3c4b5a/$sha/" "$PARAMS_FILE"
  run bash "$T/hyperpod/configure_sssd.sh"
  [ "$status" -ne 0 ]
  [[ "$(calls apt-get)" == *"install"*"sssd-ldap_2.6.3-1ubuntu3_amd64.deb"* ]]
  [[ "$output" == *"sssd with its LDAP provider is not on this node"* ]]
  [ ! -e "$SSSD_CONF_DIR/sssd.conf" ]
}

@test "a CA certificate that does not match its sha256 is refused before the password is read" {
  setup_directory
  echo "# tampered" >>"$T/hyperpod/directory/ca.pem"
  run bash "$T/hyperpod/configure_sssd.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"does not match its sha256 in the parameters ($SHA); nothing changed"* ]]
  [ ! -e "$SSSD_CONF_DIR/hyperpod-directory-ca.pem" ]
  untouched
}
