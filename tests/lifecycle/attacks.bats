#!/usr/bin/env bats
# An ordinary cluster user against the root-run lifecycle steps (lifecycle/README.md, "Root never acts through a path
# a user can change"). Each test plants the attack as a real unprivileged uid (setpriv), runs the project's script as
# root, as HyperPod (on_init_complete.sh) or the users-sync timer would, and checks the victim: a root-owned directory
# /tmp/victim-XXXXXX holding a root-owned `passwd`, whose listing, owners, modes and content must not change.
#
# The users are alice (2001:2101) and bob (2002:2102) from fixtures/platform_parameters.json. The setuid tests mount
# a tmpfs in a private mount namespace (unshare) in place of FSx and run the script's own mount code against it.

load test_helper

ALICE=(2001 2101)
BOB=(2002 2102)

# as UID GID CMD... : CMD as that unprivileged uid (the attacker); the real setpriv, not the stub
as() {
  local uid=$1 gid=$2
  shift 2
  /usr/bin/setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
}

make_victim() {
  VICTIM="$(mktemp -d /tmp/victim-XXXXXX)"
  chmod 0755 "$VICTIM"
  printf 'root:x:0:0:root:/root:/bin/bash\n' >"$VICTIM/passwd"
  chmod 0644 "$VICTIM/passwd"
  VICTIM_BEFORE="$(victim_state)"
}

victim_state() {
  find "$VICTIM" -printf '%P %u:%g %m %s\n' | sort
  sha256sum <"$VICTIM/passwd"
}

victim_unchanged() {
  local now
  now="$(victim_state)"
  [ "$now" = "$VICTIM_BEFORE" ] || {
    diff <(echo "$VICTIM_BEFORE") <(echo "$now") >&2
    return 1
  }
}

teardown() {
  if [[ -n "${VICTIM:-}" ]]; then rm -rf "$VICTIM"; fi
}

# fsx_homes : FSx mounted at $T/fsx with the users' homes as create_users.sh leaves them
fsx_homes() {
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  install -d -m 0755 "$T/fsx" "$T/fsx/home"
  install -d -m 0750 -o "${ALICE[0]}" -g "${ALICE[1]}" "$T/fsx/home/alice"
  install -d -m 0750 -o "${BOB[0]}" -g "${BOB[1]}" "$T/fsx/home/bob"
  install -d -m 0700 -o "${ALICE[0]}" -g "${ALICE[1]}" "$T/fsx/home/alice/.ssh"
}

# bob_has_keys : the other user got a key pair and authorized_keys, his own
bob_has_keys() {
  [ "$(stat -c '%u:%g %a' "$T/fsx/home/bob/.ssh/id_ed25519_cluster")" = "2002:2102 600" ]
  grep -qF "$(cut -d' ' -f1,2 "$T/fsx/home/bob/.ssh/id_ed25519_cluster.pub")" "$T/fsx/home/bob/.ssh/authorized_keys"
}

# ------------------------------------------------------------------------------------ setup_ssh_keys.sh (the keys)

@test "a symlinked ~/.ssh: nothing is created, chowned or chmodded through it, and other users get their keys" {
  make_victim
  fsx_homes
  rmdir "$T/fsx/home/alice/.ssh"
  as "${ALICE[@]}" ln -s "$VICTIM" "$T/fsx/home/alice/.ssh"
  run bash "$SCRIPTS/setup_ssh_keys.sh"
  victim_unchanged
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: could not set up the cluster SSH key of alice"* ]]
  bob_has_keys
}

@test "a symlinked private key: root neither chowns nor chmods the file it points to" {
  make_victim
  fsx_homes
  as "${ALICE[@]}" ln -s "$VICTIM/passwd" "$T/fsx/home/alice/.ssh/id_ed25519_cluster"
  as "${ALICE[@]}" sh -c "echo 'ssh-ed25519 AAAAalice alice' >'$T/fsx/home/alice/.ssh/id_ed25519_cluster.pub'"
  run bash "$SCRIPTS/setup_ssh_keys.sh"
  victim_unchanged
  [ "$status" -eq 0 ]
  bob_has_keys
}

@test "a symlinked public key: root neither chowns nor chmods the file it points to" {
  make_victim
  fsx_homes
  as "${ALICE[@]}" ssh-keygen -q -t ed25519 -N "" -C alice -f "$T/fsx/home/alice/.ssh/id_ed25519_cluster"
  as "${ALICE[@]}" rm "$T/fsx/home/alice/.ssh/id_ed25519_cluster.pub"
  as "${ALICE[@]}" ln -s "$VICTIM/passwd" "$T/fsx/home/alice/.ssh/id_ed25519_cluster.pub"
  run bash "$SCRIPTS/setup_ssh_keys.sh"
  victim_unchanged
  [ "$status" -eq 0 ]
}

@test "a symlinked authorized_keys: nothing is appended to, chowned or chmodded on the file it points to" {
  make_victim
  fsx_homes
  as "${ALICE[@]}" ln -s "$VICTIM/passwd" "$T/fsx/home/alice/.ssh/authorized_keys"
  run bash "$SCRIPTS/setup_ssh_keys.sh"
  victim_unchanged
  [ "$status" -eq 0 ]
  bob_has_keys
}

@test "a symlinked lock file in ~/.ssh: root does not open, truncate or chown what it points to" {
  make_victim
  fsx_homes
  as "${ALICE[@]}" ln -s "$VICTIM/passwd" "$T/fsx/home/alice/.ssh/.hyperpod-keys.lock"
  run bash "$SCRIPTS/setup_ssh_keys.sh"
  victim_unchanged
  [ "$status" -eq 0 ]
  [ -s "$T/fsx/home/alice/.ssh/id_ed25519_cluster" ]
  # The lock that serialises root's own runs is root's, outside every user's reach.
  [ "$(stat -c '%u %a' "$STATE_DIR/locks")" = "0 700" ]
}

@test "a FIFO planted as the private key cannot hang root's step: that user is stopped at the time limit, others get keys" {
  fsx_homes
  as "${ALICE[@]}" mkfifo "$T/fsx/home/alice/.ssh/id_ed25519_cluster"
  # Bounded by the time limit (2 s, then at most 10 s to kill), not by the FIFO: 60 s is the test's own limit.
  USER_STEP_TIMEOUT=2 run timeout 60 bash "$SCRIPTS/setup_ssh_keys.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: a step run as uid 2001 did not finish within 2s and was stopped"* ]]
  [[ "$output" == *"WARNING: could not set up the cluster SSH key of alice"* ]]
  bob_has_keys
  # and no process of alice's is left behind holding anything of root's: none of uid 2001 with this test's home for
  # HOME (as_user's environment for her key step). By HOME, not by command line: the file bats runs beside this one
  # may be running alice's key step of its own (accounting.bats' on_init_complete.sh), ssh-keygen on her key included.
  local pid
  for pid in $(pgrep -u 2001 || true); do
    if grep -qzxF "HOME=$T/fsx/home/alice" "/proc/$pid/environ" 2>/dev/null; then
      ps -o pid,args -p "$pid"
      return 1
    fi
  done
}

@test "the users-sync timer's run follows no link either" {
  make_victim
  fsx_homes
  bash "$SCRIPTS/install_users_sync.sh"
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  as "${ALICE[@]}" ln -s "$VICTIM/passwd" "$T/fsx/home/alice/.ssh/authorized_keys"
  # A stack update: bob gets sudo; the next timer run applies the users list, then the keys.
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  run env -u PARAMS_FILE bash "$PLATFORM_DIR/sync_users.sh"
  cat "$LOG_DIR/users_sync.log"
  victim_unchanged
  [ "$status" -eq 0 ]
  bob_has_keys
}

# ----------------------------------------------------------------------------------- the users sync (sync_users.sh)

# hold_locks UID GID : that user tries to take and keep every lock file root's scripts use under STATE_DIR, each in a
# background flock(1); HELD_PIDS lists them (killed by the caller), $T/held the locks she got.
hold_locks() {
  local f
  install -d -m 0777 "$T/attacker"
  HELD_PIDS=()
  while IFS= read -r f; do
    as "$1" "$2" flock -n "$f" sh -c "echo '$f' >>'$T/attacker/held'; exec sleep 60" 2>/dev/null &
    HELD_PIDS+=($!)
  done < <(find "$STATE_DIR" -name '*.lock' 2>/dev/null)
  sleep 0.5
}

@test "a user cannot stop the users sync by holding its lock: sudo revoked in S3 is revoked on the node" {
  bash "$SCRIPTS/create_users.sh"
  bash "$SCRIPTS/install_users_sync.sh"
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": true}, {"name": "carol", "uid": 2003, "gid": 2103, "sudo": false}]'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  run env -u PARAMS_FILE bash "$PLATFORM_DIR/sync_users.sh" # a first timer run: root's lock exists from now on
  [ "$status" -eq 0 ]
  [ -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  hold_locks "${ALICE[@]}"
  # bob's sudo is revoked in the stack; alice holds whatever lock she could open
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}]'
  cp "$PARAMS_FILE" "$STUB_S3_DIR/platform_parameters.json"
  USERS_SYNC_LOCK_WAIT=2 run env -u PARAMS_FILE bash "$PLATFORM_DIR/sync_users.sh"
  kill "${HELD_PIDS[@]}" 2>/dev/null || true
  cat "$LOG_DIR/users_sync.log"
  cat "$T/attacker/held" 2>/dev/null || true
  [ "$status" -eq 0 ]
  [ ! -e "$T/attacker/held" ]
  [ ! -e "$SUDOERS_DIR/90-hyperpod-bob" ]
  grep -q "usermod --lock --expiredate 1 carol" "$STUB_LOG"
}

# ------------------------------------------------------------------------------------------ homes (create_users.sh)

@test "a home root a user created first is refused: no account gets a home the user controls" {
  make_victim
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  install -d -m 1777 "$T/fsx" # world-writable and sticky, as some FSx set-ups leave the file system's root
  as "${ALICE[@]}" mkdir -m 0755 "$T/fsx/home"
  as "${ALICE[@]}" ln -s "$VICTIM" "$T/fsx/home/bob"
  run bash "$SCRIPTS/create_users.sh"
  victim_unchanged
  [ "$status" -ne 0 ]
  [[ "$output" == *"$T/fsx/home is owned by uid 2001, not root"* ]]
  [ -z "$(calls useradd)" ]
}

@test "an existing home of another owner is refused for that user only; the others are created" {
  make_victim
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  install -d -m 0755 "$T/fsx" "$T/fsx/home"
  # Left behind as alice's, e.g. a directory an admin once handed over; bob's account must not get it.
  install -d -m 0777 -o "${ALICE[0]}" -g "${ALICE[1]}" "$T/fsx/home/bob"
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"$T/fsx/home/bob is owned by uid 2001, not bob (2002)"* ]]
  [ -z "$(calls useradd | grep -- ' bob$')" ]
  calls useradd | grep -q -- "--uid 2001 --gid 2101 "
  [ "$(stat -c '%u:%g %a' "$T/fsx/home/alice")" = "2001:2101 750" ]
}

# ----------------------------------------------------------------------------- checkpoints (mount_fsx.sh, create_users.sh)

@test "a symlinked checkpoint directory: root does not chmod (or create anything in) what it points to" {
  make_victim
  set_param fsx.mount false
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  install -d -m 0755 "$T/fsx"
  install -d -m 1777 "$T/fsx/data" # a user-writable S3-linked path
  as "${ALICE[@]}" ln -s "$VICTIM" "$T/fsx/data/checkpoints"
  run bash "$SCRIPTS/mount_fsx.sh"
  victim_unchanged
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: no checkpoint directory: $T/fsx/data/checkpoints is not a directory (or is a symbolic link)"* ]]
}

@test "checkpoint directories another user planted are moved aside; each user gets one of their own, 0700" {
  make_victim
  set_param fsx.mount false
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  install -d -m 0755 "$T/fsx" "$T/fsx/data"
  install -d -m 1777 "$T/fsx/data/checkpoints" # what earlier versions made
  as "${ALICE[@]}" mkdir -m 0777 "$T/fsx/data/checkpoints/bob"        # bob's jobs would write into alice's directory
  as "${ALICE[@]}" ln -s "$VICTIM" "$T/fsx/data/checkpoints/carol"    # or through alice's link
  set_param users '[{"name": "alice", "uid": 2001, "gid": 2101, "sudo": false}, {"name": "bob", "uid": 2002, "gid": 2102, "sudo": false}, {"name": "carol", "uid": 2003, "gid": 2103, "sudo": false}]'
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  run bash "$SCRIPTS/create_users.sh"
  [ "$status" -eq 0 ]
  victim_unchanged
  [ "$(stat -c '%u %a' "$T/fsx/data/checkpoints")" = "0 755" ]
  for u in alice:2001:2101 bob:2002:2102 carol:2003:2103; do
    IFS=: read -r name uid gid <<<"$u"
    [ ! -L "$T/fsx/data/checkpoints/$name" ]
    [ "$(stat -c '%u:%g %a' "$T/fsx/data/checkpoints/$name")" = "$uid:$gid 700" ]
  done
  [[ "$output" == *"WARNING: $T/fsx/data/checkpoints/bob was a directory of uid 2001, not bob's: moved to"* ]]
  # alice keeps what she planted (her files), out of bob's way
  [ "$(find "$T/fsx/data/checkpoints" -maxdepth 1 -name '.moved-bob-*' -user 2001 | wc -l)" -eq 1 ]
  # and can no longer plant anything there for a user yet to come
  run as "${ALICE[@]}" mkdir "$T/fsx/data/checkpoints/dave"
  [ "$status" -ne 0 ]
}

# ------------------------------------------------------------------------------- setuid files on FSx (mount_fsx.sh)

# on_fsx_node MOUNT_OPTIONS SCRIPT : in a private mount namespace, a tmpfs at $T/fsx stands in for the Lustre mount
# (MOUNT_OPTIONS as HyperPod or an older fstab line made it); uid 3000 plants a setuid copy of `id` there; then
# SCRIPT runs (as root), then alice runs the planted file. Prints the file system's options and alice's euid.
on_fsx_node() {
  rm "$T/bin/mount" "$T/bin/mountpoint" "$T/bin/findmnt" # the real ones, inside the namespace
  install -d -m 0755 "$T/fsx"
  unshare --mount --propagation private bash -c '
    set -e
    mount -t tmpfs -o "$1" fsx "$2/fsx"
    install -d -m 0755 -o 3000 -g 3000 "$2/fsx/partition"
    /usr/bin/setpriv --reuid=3000 --regid=3000 --clear-groups -- sh -c \
      "cp /usr/bin/id \"$2/fsx/partition/id\" && chmod 4755 \"$2/fsx/partition/id\""
    bash "$3" >"$2/script.out" 2>&1 || { cat "$2/script.out"; exit 1; }
    echo "options $(findmnt -n -o VFS-OPTIONS --mountpoint "$2/fsx")"
    echo "euid $(/usr/bin/setpriv --reuid=2001 --regid=2101 --clear-groups -- "$2/fsx/partition/id" -u)"
  ' _ "$1" "$T" "$2"
}

@test "a setuid file on HyperPod's FSx mount does not run setuid: the mount is made nosuid,nodev" {
  set_param fsx.mount false
  run on_fsx_node rw,mode=0755 "$SCRIPTS/mount_fsx.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"euid 2001"* ]]
  [[ "$output" =~ options\ [^$'\n']*nosuid ]]
  [[ "$output" =~ options\ [^$'\n']*nodev ]]
}

@test "a setuid file another uid planted from a Studio space (sudo -u there) does not run as that uid on a node" {
  # The platform's own mount (fsx.mount true), found mounted without nosuid (a node set up by an earlier version).
  run on_fsx_node rw,mode=0755,noatime "$SCRIPTS/mount_fsx.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"euid 2001"* ]]
  [[ "$output" =~ options\ [^$'\n']*nosuid ]]
  [[ "$output" =~ options\ [^$'\n']*noatime ]] # the mount's other options are kept
  grep -q " $T/fsx lustre [^ ]*nosuid,nodev" "$FSTAB"
}

# ------------------------------------------------------------------------------------------- Studio (slurm_token.sh)

@test "Studio, space run as root: a symlinked ~/.slurm does not make root chown or chmod what it points to" {
  make_victim
  export SLURM_TOKEN_OWNER=alice SLURM_TOKEN_FILE="$T/space/home/.slurm/token" SLURM_TOKEN_SECRET_PREFIX=p/ \
    SLURM_STUDIO_PROFILE=alice
  install -d -m 0755 "$T/space"
  install -d -m 0750 -o "${ALICE[0]}" -g "${ALICE[1]}" "$T/space/home"
  as "${ALICE[@]}" ln -s "$VICTIM" "$T/space/home/.slurm"
  rm "$T/bin/aws" # a link to the shared stub: replaced, not written through
  printf '#!/bin/sh\necho "{\\"token\\": \\"aaa.bbb.ccc\\"}"\n' >"$T/bin/aws" # the profile's token secret
  chmod +x "$T/bin/aws"
  # The space's accounts only (the host may have an alice of its own, e.g. the e2e tests' users).
  printf 'root:x:0:0:root:/root:/bin/bash\nalice:x:2001:2101::%s:/bin/bash\n' "$T/space/home" >"$T/passwd"
  printf 'root:x:0:\nalice:x:2101:\n' >"$T/group"
  run "$BATS_TEST_DIRNAME/in_etc_namespace.sh" "$T" passwd group -- bash -c '
    log() { echo "$*"; }
    die() { echo "ERROR: $*"; exit 1; }
    as_root() { "$@"; }
    source "$1"
    fetch_token us-east-1' _ "$REPO_ROOT/lifecycle/studio/slurm_token.sh"
  echo "$output"
  victim_unchanged
  # alice broke her own token file, nobody else's (99: no namespace)
  [ "$status" -ne 0 ]
  [ "$status" -ne 99 ]
  # Her real home gets the token, hers, 0600.
  as "${ALICE[@]}" rm "$T/space/home/.slurm"
  run "$BATS_TEST_DIRNAME/in_etc_namespace.sh" "$T" passwd group -- bash -c '
    log() { echo "$*"; }
    die() { echo "ERROR: $*"; exit 1; }
    as_root() { "$@"; }
    source "$1"
    fetch_token us-east-1' _ "$REPO_ROOT/lifecycle/studio/slurm_token.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u:%g %a' "$T/space/home/.slurm/token")" = "2001:2101 600" ]
  [ "$(cat "$T/space/home/.slurm/token")" = "aaa.bbb.ccc" ]
}
