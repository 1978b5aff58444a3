#!/usr/bin/env bats
# Revocation is a property of the users sync (sync_users.sh): whatever the stack takes away — a user, a sudo right, a
# directory admin group, a directory access group — is gone from every running node type after one timer run (the
# timer runs every two minutes: users_sync.bats), and a step that fails does not hold back the revocations of the
# others (the run then fails, and says so in its metric). Each node here is made as on_init_complete.sh makes it (SSSD,
# the users, pam_slurm_adopt, the sync), then the stack changes and the node's own copy of the sync runs.

load test_helper

CONTROLLER_IPS="10.1.0.12 172.17.0.1"
LOGIN_IPS="10.1.0.20"
COMPUTE_IPS="10.1.0.31"

setup() {
  # The stubbed node (test_helper's setup, without bats' DEBUG trap), then a directory (cluster.directory) and
  # pam_slurm_adopt on.
  local -
  set +T
  node_setup
  mkdir -p "$T/hyperpod/directory"
  cp -r "$SCRIPTS/." "$T/hyperpod/"
  cp "$REPO_ROOT/tests/fixtures/directory-ca.pem" "$T/hyperpod/directory/ca.pem"
  local sha
  sha="$(sha256sum "$T/hyperpod/directory/ca.pem" | cut -d' ' -f1)"
  set_param directory "{\"uris\": [\"ldaps://ldap.example.com\"], \"start_tls\": false,
    \"search_base\": \"dc=example,dc=com\", \"bind_dn\": \"cn=bind,dc=example,dc=com\",
    \"bind_password_secret_arn\": \"arn:aws:secretsmanager:us-east-1:111122223333:secret:bind-AbCdEf\",
    \"region\": \"us-east-1\", \"ldap_schema\": \"rfc2307\", \"access_groups\": [\"hpc-users\", \"hpc-guests\"],
    \"admin_groups\": [\"hpc-admins\", \"hpc-ops\"], \"ca_certificate\": {\"file\": \"directory/ca.pem\", \"sha256\": \"$sha\"},
    \"artifacts\": []}" \
    slurm.pam_slurm_adopt true \
    users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}]'
  export SSSD_CONF_DIR="$T/sssd" NSSWITCH="$T/nsswitch.conf" PAM_DIR="$T/pam.d"
  export SSSD_COMMAND="$T/sbin/sssd" SSSD_LDAP_PROVIDERS="$T/lib/sssd/libsss_ldap.so" STUB_SECRET_STRING=bind-password
  mkdir -p "$T/sbin" "$T/lib/sssd" "$PAM_DIR" "$(dirname "$PAM_SSHD")" "$(dirname "$PAM_SLURM_ADOPT_CANDIDATES")"
  printf '#!/bin/sh\n' >"$SSSD_COMMAND"
  chmod +x "$SSSD_COMMAND"
  touch "$SSSD_LDAP_PROVIDERS" "$PAM_SLURM_ADOPT_CANDIDATES"
  # The PAM stack pam-auth-update left: pam_sss and pam_mkhomedir in (so it is not run again); sshd's own file.
  echo "auth [success=1 default=ignore] pam_sss.so" >"$PAM_DIR/common-auth"
  echo "account [default=bad success=ok user_unknown=ignore] pam_sss.so" >"$PAM_DIR/common-account"
  echo "session optional pam_mkhomedir.so" >"$PAM_DIR/common-session"
  printf '@include common-auth\n@include common-account\n' >"$PAM_SSHD"
  ln -s "$BATS_TEST_DIRNAME/stubs/stub" "$T/bin/pam-auth-update"
  # The directory has the first access group (configure_sssd.sh waits for it to resolve).
  echo "hpc-users:*:5000:" >"$FAKE_ROOT/sss_group"
}

# node IPS TYPE : a node of TYPE made as on_init_complete.sh makes it, the sync installed, S3 holding its parameters
node() {
  export STUB_IPS="$1"
  (
    cd "$T/hyperpod"
    bash configure_sssd.sh
    bash create_users.sh
    bash configure_pam_adopt.sh "$2"
    bash install_users_sync.sh
  ) >"$T/node.log" 2>&1 || { cat "$T/node.log"; return 1; }
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
}

# revoke : the stack takes away alice, bob's sudo, the admin group hpc-ops and the access group hpc-guests
revoke() {
  set_param users '[{"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]' \
    directory.access_groups '["hpc-users"]' directory.admin_groups '["hpc-admins"]'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
}

sync() {
  run env -u PARAMS_FILE bash "$PLATFORM_DIR/sync_users.sh"
  cat "$LOG_DIR/users_sync.log"
}

metric() {
  awk -v n="$1" '$1 == n { print $2 }' "$TEXTFILE_DIR/hyperpod_users_sync.prom"
}

# granted_before : what revoke takes away is on the node now
granted_before() {
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  grep -qxF "%hpc-ops ALL=(ALL) NOPASSWD:ALL" "$SUDOERS_DIR/91-hyperpod-directory"
  grep -q "^simple_allow_groups = hpc-users, hpc-guests$" "$SSSD_CONF_DIR/sssd.conf"
}

# revoked TYPE : nothing revoke took away is left on the node
revoked() {
  grep -qxF "alice:1" "$FAKE_ROOT/expired"
  [ ! -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  ! grep -q "hpc-ops" "$SUDOERS_DIR/91-hyperpod-directory"
  grep -qxF "%hpc-admins ALL=(ALL) NOPASSWD:ALL" "$SUDOERS_DIR/91-hyperpod-directory"
  grep -q "^simple_allow_groups = hpc-users$" "$SSSD_CONF_DIR/sssd.conf"
  calls systemctl | grep -qxF "systemctl restart sssd"
  if [[ "$1" == compute ]]; then
    # pam_access lets only root and the remaining admin group past pam_slurm_adopt
    grep -qxF "+:root (hpc-admins):ALL" "$ACCESS_FILE"
  fi
}

@test "controller: a removed user, sudo right, admin group and access group are gone after one sync" {
  node "$CONTROLLER_IPS" controller
  granted_before
  revoke
  : >"$STUB_LOG"
  STUB_IPS="$CONTROLLER_IPS" sync
  [ "$status" -eq 0 ]
  revoked controller
  [ "$(metric hyperpod_users_sync_failed)" = 0 ]
}

@test "login node: a removed user, sudo right, admin group and access group are gone after one sync" {
  node "$LOGIN_IPS" login
  granted_before
  revoke
  : >"$STUB_LOG"
  STUB_IPS="$LOGIN_IPS" sync
  [ "$status" -eq 0 ]
  revoked login
}

@test "compute node: ... and the pam_slurm_adopt admin list loses bob and hpc-ops" {
  node "$COMPUTE_IPS" compute
  granted_before
  grep -qxF "+:root bob (hpc-admins) (hpc-ops):ALL" "$ACCESS_FILE"
  revoke
  : >"$STUB_LOG"
  STUB_IPS="$COMPUTE_IPS" sync
  [ "$status" -eq 0 ]
  revoked compute
}

@test "a failing step holds back no other revocation: the run fails, and its metric says so" {
  node "$COMPUTE_IPS" compute
  revoke
  : >"$STUB_LOG"
  # The bind password cannot be read now: configure_sssd.sh fails (after its retries).
  STUB_SECRET_STRING="" STUB_IPS="$COMPUTE_IPS" sync
  [ "$status" -ne 0 ]
  grep -q "ERROR: configure_sssd.sh failed" "$LOG_DIR/users_sync.log"
  # What the other steps revoke is revoked all the same.
  grep -qxF "alice:1" "$FAKE_ROOT/expired"
  [ ! -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  grep -qxF "+:root (hpc-admins):ALL" "$ACCESS_FILE"
  [ "$(metric hyperpod_users_sync_failed)" = 1 ]
  # and the next run, the secret readable again, finishes the job
  STUB_IPS="$COMPUTE_IPS" sync
  [ "$status" -eq 0 ]
  revoked compute
  [ "$(metric hyperpod_users_sync_failed)" = 0 ]
}

@test "the directory turned off: its admin groups lose sudo on a running node" {
  node "$LOGIN_IPS" login
  [ -e "$SUDOERS_DIR/91-hyperpod-directory" ]
  set_param directory null
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  STUB_IPS="$LOGIN_IPS" sync
  [ "$status" -eq 0 ]
  [ ! -e "$SUDOERS_DIR/91-hyperpod-directory" ]
}
