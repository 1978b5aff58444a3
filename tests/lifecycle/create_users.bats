#!/usr/bin/env bats
# create_users.sh: fixed uids/gids, homes on FSx, sudoers.

load test_helper

@test "creates groups and users with the exact uid and gid (not the uid as gid), homes on FSx when mounted" {
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  mkdir -p "$T/fsx"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(calls groupadd)" = "$(printf 'groupadd --gid 2101 alice\ngroupadd --gid 2102 bob\ngroupadd --gid 2000 studio-shared')" ]
  calls useradd | grep -qxF "useradd --uid 2001 --gid 2101 --no-create-home --home-dir $T/fsx/home/alice --shell /bin/bash alice"
  calls useradd | grep -qxF "useradd --uid 2002 --gid 2102 --no-create-home --home-dir $T/fsx/home/bob --shell /bin/bash bob"
  grep -qxF "alice:x:2001:2101::$T/fsx/home/alice:/bin/bash" "$FAKE_ROOT/passwd"
  [ "$(stat -c '%u %a' "$T/fsx/home")" = "0 755" ]
  [ "$(stat -c '%u:%g %a' "$T/fsx/home/alice")" = "2001:2101 750" ]
  [ "$(stat -c '%u:%g %a' "$T/fsx/home/bob")" = "2002:2102 750" ]
}

@test "a new home gets /etc/skel, copied as its user; an existing home is left as it is" {
  mkdir -p "$SKEL_DIR/.config" && echo "x" >"$SKEL_DIR/.config/app"
  install -d -m 0700 -o 2002 -g 2102 "$T/home/bob" # made by another node: nothing copied, mode kept
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u:%g' "$T/home/alice/.profile" "$T/home/alice/.config/app")" = "$(printf '2001:2101\n2001:2101')" ]
  cmp "$SKEL_DIR/.profile" "$T/home/alice/.profile"
  calls setpriv | grep -q -- "--reuid=2001 --regid=2101 --init-groups --no-new-privs -- find $SKEL_DIR "
  [ "$(stat -c '%a' "$T/home/bob")" = 700 ]
  [ ! -e "$T/home/bob/.profile" ]
  [ -z "$(calls setpriv | grep -- --reuid=2002)" ]
}

@test "homes go to the default home root when FSx is not mounted" {
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  calls useradd | grep -q -- "--home-dir $T/home/alice "
}

@test "second run creates nothing" {
  bash "$SCRIPTS/create_users.sh"
  [ -n "$(calls visudo)" ] # the first run wrote a sudoers entry
  : >"$STUB_LOG"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
  [[ "$output" == *"user alice (2001) already exists"* ]]
  # The sudoers entry is the same: not written (nor validated) again.
  [ -z "$(calls visudo)" ]
  [[ "$output" != *"granted sudo"* ]]
}

@test "an existing user with another uid fails loudly" {
  echo "alice:x:1500:1500::/home/alice:/bin/bash" >>"$FAKE_ROOT/passwd"
  echo "alice:x:2101:" >>"$FAKE_ROOT/group"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"user alice exists with uid 1500, expected 2001"* ]]
  # That entry only: bob is set up all the same.
  [ "$(calls useradd)" = "useradd --uid 2002 --gid 2102 --no-create-home --home-dir $T/home/bob --shell /bin/bash bob" ]
}

@test "a uid taken by another user fails and names that user" {
  echo "carol:x:2001:2001::/home/carol:/bin/bash" >>"$FAKE_ROOT/passwd"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"uid 2001 for user alice is already used by user carol"* ]]
  [ -z "$(calls useradd | grep -- ' alice$')" ]
  calls useradd | grep -q -- ' bob$'
}

@test "a departed user's uid given to a new hire: that entry is refused, and the revocations still happen" {
  # carol (2003) had sudo; she leaves, her uid goes to erin, and bob loses sudo in the same change.
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}, {"name": "carol", "uid": 2003, "gid": 2103, "sudo": true}]'
  bash "$SCRIPTS/create_users.sh"
  [ -e "$SUDOERS_DIR/90-hyperpod-carol" ]
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}, {"name": "erin", "uid": 2003, "gid": 2103, "sudo": true}]'
  : >"$STUB_LOG"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"ERROR: uid 2003 for user erin is already used by user carol; erin gets no account here"* ]]
  [[ "$output" == *"1 entr(ies) of the users list conflict with this node's accounts"* ]]
  # carol is locked and loses sudo, bob loses sudo; erin gets neither an account nor sudo
  grep -qxF "carol:1" "$FAKE_ROOT/expired"
  [ ! -e "$SUDOERS_DIR/90-hyperpod-carol" ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-erin" ]
  [ -z "$(calls useradd)" ]
}

@test "a name the node has with another uid: the account of that name keeps no sudo and is locked if ours" {
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": true}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}]'
  bash "$SCRIPTS/create_users.sh"
  # alice (2001) left; a new alice with another uid is listed, with sudo
  set_param users '[{"name": "alice", "uid": 2009, "gid": 2101, "sudo": true}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}]'
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"ERROR: $T/home/alice is owned by uid 2001, not alice (2009)"* ]]
  grep -qxF "alice:1" "$FAKE_ROOT/expired"
  [ ! -e "$SUDOERS_DIR/90-hyperpod-alice" ]
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  # Her home moved away (another home root): the account itself is found to be someone else's.
  rm -rf "$T/home/alice"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"ERROR: user alice exists with uid 2001, expected 2009"* ]]
  grep -qxF "alice:1" "$FAKE_ROOT/expired"
  [ ! -e "$SUDOERS_DIR/90-hyperpod-alice" ]
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
}

@test "an existing group with another gid fails loudly" {
  echo "alice:x:3000:" >>"$FAKE_ROOT/group"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"group alice exists with gid 3000, expected 2101"* ]]
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
  set_param users '[{"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]'
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

# --------------------------------------------------------------------------- removal (the users sync re-runs this)

@test "a removed user this script created is locked, keeps the home and loses sudo; others are untouched" {
  bash "$SCRIPTS/create_users.sh"
  mkdir -p "$T/home/bob" && echo "checkpoint" >"$T/home/bob/model.pt"
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}]'
  : >"$STUB_LOG"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(calls usermod | grep -v -- ' -aG ')" = "usermod --lock --expiredate 1 bob" ]
  [ "$(cat "$FAKE_ROOT/expired")" = "bob:1" ]
  grep -q '^bob:x:2002:' "$FAKE_ROOT/passwd" # the account stays: files on FSx keep their owner's name
  [ "$(cat "$T/home/bob/model.pt")" = "checkpoint" ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  [ -z "$(calls userdel)" ]
  [[ "$output" == *"locked user bob (2002): no longer in the users list; home $T/home/bob kept"* ]]
  : >"$STUB_LOG"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
}

@test "users it did not create are never locked, even when a tampered state file names them" {
  echo "carol:x:3000:3000::/home/carol:/bin/bash" >>"$FAKE_ROOT/passwd"
  echo "alice:x:2001:2101::/home/alice:/bin/bash" >>"$FAKE_ROOT/passwd" # on the node before the platform
  bash "$SCRIPTS/create_users.sh"
  [ "$(cat "$STATE_DIR/users")" = "bob" ]
  set_param users '[]'
  printf 'root\n' >>"$STATE_DIR/users"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(calls usermod | grep -v -- ' -aG ')" = "usermod --lock --expiredate 1 bob" ]
  [[ "$output" == *"root has uid 0, not a user this script creates; leaving it alone"* ]]
}

@test "sudo goes when a user leaves the list, also for an account the script did not create" {
  echo "alice:x:2001:2101::/home/alice:/bin/bash" >>"$FAKE_ROOT/passwd"
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": true}]'
  bash "$SCRIPTS/create_users.sh"
  [ -e "$SUDOERS_DIR/90-hyperpod-alice" ]
  echo "ops ALL=(ALL) ALL" >"$SUDOERS_DIR/50-ops" # not ours
  set_param users '[]'
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-alice" ]
  [ -e "$SUDOERS_DIR/50-ops" ]
  [ -z "$(calls usermod | grep -v -- ' -aG ')" ]
}

@test "a user listed again is unlocked: the same account, no second useradd" {
  cp "$PARAMS_FILE" "$T/params.both"
  bash "$SCRIPTS/create_users.sh"
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}]'
  bash "$SCRIPTS/create_users.sh"
  cp "$T/params.both" "$PARAMS_FILE"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  [ "$(calls usermod | grep -v -- ' -aG ')" = "usermod --unlock --expiredate  bob" ]
  [ -z "$(calls useradd)" ]
  [ ! -s "$FAKE_ROOT/expired" ]
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  [ -z "$(cat "$STATE_DIR/users_locked")" ]
}
