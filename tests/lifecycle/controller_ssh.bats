#!/usr/bin/env bats
# configure_controller_ssh.sh: SSH to the controller for administrators only, checked with the real PAM stack:
# pamtester's acct_mgmt (the account phase sshd runs) against the file the script wrote, in a private mount namespace
# whose /etc/pam.d, /etc/passwd and /etc/group are the test's (the host's are untouched).

load test_helper

PAMTESTER="$(command -v pamtester || true)"

setup_controller() {
  [[ -n "$PAMTESTER" ]] || skip "pamtester is not installed (Debian package pamtester)"
  export PAM_SSHD="$T/etc/pam.d/sshd" CONTROLLER_ACCESS_FILE="$T/security/hyperpod-controller-ssh.conf"
  mkdir -p "$T/etc/pam.d"
  # The namespace's /etc/passwd and /etc/group are the fake ones the user stubs keep.
  ln "$FAKE_ROOT/passwd" "$T/etc/passwd" && ln "$FAKE_ROOT/group" "$T/etc/group"
  # sshd's own account stack, in short (the fake users have no shadow entries for pam_unix to read)
  echo "account required pam_permit.so" >"$PAM_SSHD"
  # The config's users as create_users.sh makes them; carol is in the directory's admin group; dave is a user of the
  # node the config does not list.
  printf 'alice:x:2001:2101::/home/alice:/bin/bash\nbob:x:2002:2102::/home/bob:/bin/bash\ncarol:x:2003:2103::/home/carol:/bin/bash\ndave:x:2004:2104::/home/dave:/bin/bash\n' >>"$FAKE_ROOT/passwd"
  printf 'alice:x:2101:\nbob:x:2102:\ncarol:x:2103:\ndave:x:2104:\nhpc-admins:x:3000:carol\n' >>"$FAKE_ROOT/group"
  echo 'nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin' >>"$FAKE_ROOT/passwd"
  set_param directory '{"admin_groups": ["hpc-admins"]}'
}

# ssh_allowed USER : sshd's account phase lets USER in
ssh_allowed() {
  "$BATS_TEST_DIRNAME/in_etc_namespace.sh" "$T/etc" pam.d passwd group -- "$PAMTESTER" sshd "$1" acct_mgmt >/dev/null 2>&1
}

# ssh_denied USER : the account phase refuses USER (and not for a broken test set-up)
ssh_denied() {
  local rc=0
  ssh_allowed "$1" || rc=$?
  ((rc == 1))
}

@test "only root, ubuntu, users with sudo and the directory's admin groups pass sshd's account phase" {
  setup_controller
  ssh_allowed alice # before: every user
  run bash "$SCRIPTS/configure_controller_ssh.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$CONTROLLER_ACCESS_FILE" | grep -v '^#')" = "$(printf '%s\n' '+:root ubuntu bob (hpc-admins):ALL' '-:ALL:ALL')" ]
  for user in root ubuntu bob carol; do ssh_allowed "$user"; done
  for user in alice dave nobody; do ssh_denied "$user"; done
  # The block is appended after sshd's own stack, which stays as it was.
  [ "$(head -1 "$PAM_SSHD")" = "account required pam_permit.so" ]
}

@test "the list follows users[].sudo on the next run; a run with nothing new changes nothing" {
  setup_controller
  bash "$SCRIPTS/configure_controller_ssh.sh"
  cp -p "$PAM_SSHD" "$T/sshd.before"
  cp -p "$CONTROLLER_ACCESS_FILE" "$T/access.before"
  run bash "$SCRIPTS/configure_controller_ssh.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c %Y "$PAM_SSHD") $(stat -c %Y "$CONTROLLER_ACCESS_FILE")" = "$(stat -c %Y "$T/sshd.before") $(stat -c %Y "$T/access.before")" ]
  cmp "$T/sshd.before" "$PAM_SSHD"
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": true}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]'
  run bash "$SCRIPTS/configure_controller_ssh.sh"
  [ "$status" -eq 0 ]
  cmp "$T/sshd.before" "$PAM_SSHD"
  ssh_allowed alice
  ssh_denied bob
}

@test "slurm.controller_ssh all removes the block and the file: every user may SSH again" {
  setup_controller
  bash "$SCRIPTS/configure_controller_ssh.sh"
  ssh_denied alice
  set_param slurm.controller_ssh '"all"'
  run bash "$SCRIPTS/configure_controller_ssh.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$PAM_SSHD")" = "account required pam_permit.so" ]
  [ ! -e "$CONTROLLER_ACCESS_FILE" ]
  ssh_allowed alice
}

@test "an unknown slurm.controller_ssh is an error, and UsePAM no is reported" {
  setup_controller
  set_param slurm.controller_ssh '"nobody"'
  run bash "$SCRIPTS/configure_controller_ssh.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"slurm.controller_ssh must be admins or all, got 'nobody'"* ]]
  set_param slurm.controller_ssh null
  mkdir -p "$(dirname "$SSHD_CONFIG")" && echo "UsePAM no" >"$SSHD_CONFIG"
  run bash "$SCRIPTS/configure_controller_ssh.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: $SSHD_CONFIG has UsePAM no"* ]]
}

@test "on_init_complete.sh limits SSH on the controller only" {
  setup_controller
  # The entry point checks the whole file (lib/params.py validate): no partial directory block. Who the directory
  # admits is the other tests' subject; bob has sudo either way.
  set_param directory null
  STUB_IPS="10.1.0.31" run bash "$SCRIPTS/on_init_complete.sh" # a compute node
  [ "$status" -eq 0 ]
  [ "$(cat "$PAM_SSHD")" = "account required pam_permit.so" ]
  STUB_IPS="10.1.0.12 172.17.0.1" run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -eq 0 ]
  ssh_denied alice
  ssh_allowed bob
}
