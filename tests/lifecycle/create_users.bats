#!/usr/bin/env bats
# create_users.sh: fixed uids/gids, homes on FSx, sudoers.

load test_helper

@test "creates groups and users with the exact uid and gid, homes on FSx when mounted" {
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(calls groupadd)" = "$(printf 'groupadd --gid 2001 alice\ngroupadd --gid 2002 bob\ngroupadd --gid 2000 studio-shared')" ]
  calls useradd | grep -qxF "useradd --uid 2001 --gid 2001 --create-home --home-dir $T/fsx/home/alice --shell /bin/bash alice"
  calls useradd | grep -qxF "useradd --uid 2002 --gid 2002 --create-home --home-dir $T/fsx/home/bob --shell /bin/bash bob"
  [ -d "$T/fsx/home" ]
}

@test "homes go to the default home root when FSx is not mounted" {
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  calls useradd | grep -q -- "--home-dir $T/home/alice "
}

@test "second run creates nothing" {
  bash "$SCRIPTS/create_users.sh"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  [[ "$output" == *"user alice (2001) already exists"* ]]
}

@test "an existing user with another uid fails loudly" {
  echo "alice:x:1500:1500::/home/alice:/bin/bash" >>"$FAKE_ROOT/passwd"
  echo "alice:x:2001:" >>"$FAKE_ROOT/group"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"user alice exists with uid 1500, expected 2001"* ]]
  [ -z "$(calls useradd)" ]
}

@test "a uid taken by another user fails and names that user" {
  echo "carol:x:2001:2001::/home/carol:/bin/bash" >>"$FAKE_ROOT/passwd"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"uid 2001 for user alice is already used by user carol"* ]]
  [ -z "$(calls useradd)" ]
}

@test "an existing group with another gid fails loudly" {
  echo "alice:x:3000:" >>"$FAKE_ROOT/group"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"group alice exists with gid 3000, expected 2001"* ]]
}

@test "users sharing a gid share the first user's group" {
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2000, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2000, "sudo": false}]'
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(calls groupadd)" = "groupadd --gid 2000 alice" ]
  [ "$(calls useradd | wc -l)" -eq 2 ]
}

@test "sudo is granted through a validated sudoers.d file, and only to users with sudo" {
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$SUDOERS_DIR/90-hyperpod-bob")" = "bob ALL=(ALL) NOPASSWD:ALL" ]
  [ "$(stat -c %a "$SUDOERS_DIR/90-hyperpod-bob")" = 440 ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-alice" ]
  [ "$(calls visudo | wc -l)" -eq 1 ]
}

@test "sudo is removed when a user no longer has it" {
  bash "$SCRIPTS/create_users.sh"
  set_param users '[{"name": "bob", "uid": 2002, "gid": 2002, "sudo": false}]'
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-bob" ]
}

@test "an invalid user name is rejected before anything runs" {
  set_param users '[{"name": "bob ALL=(ALL)", "uid": 2002, "gid": 2002, "sudo": true}]'
  run bash "$SCRIPTS/on_init_complete.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"is not a valid user name"* ]]
  [ ! -e "$SUDOERS_DIR" ] || [ -z "$(ls "$SUDOERS_DIR")" ]
}

@test "every user joins the Studio shared group once" {
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  grep -q "^studio-shared:x:2000:alice,bob$" "$FAKE_ROOT/group"
  [ "$(calls usermod | wc -l)" -eq 2 ]
  : >"$STUB_LOG"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ -z "$(calls usermod)" ]
}
