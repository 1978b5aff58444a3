#!/usr/bin/env bats
# enroot's settings and per-user directories (install_container_runtime.sh, enroot_dirs.sh, lib/safe_dirs.py) on the
# AMI model, whose enroot.conf is laid out as AWS's reference scripts leave it (lifecycle/node_contract.json,
# enroot-conf): per-uid runtime and data directories made lazily under 1777 parents, one shared 1777 layer cache.
#
# The attacks run as real unprivileged users against the real file system: `attacker` plants a layer where the
# victim's enroot would look, pre-creates the victim's data directory, and links the platform's own directory to one
# root owns. enroot_value evaluates a setting as enroot does for a user: the first value wins, enroot.conf before the
# enroot.conf.d/*.conf drop-ins, expanded as that user (NVIDIA/enroot@8ea147d enroot.in, config::load,
# config::init, config::export).

bats_require_minimum_version 1.5.0
load test_helper

ATTACKER=hpnc-attacker
VICTIM=hpnc-victim
LAYER=sha256:8f1d5c2a5e0c3b1f7d9e4a6b2c8d0e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d

setup_file() {
  [[ $EUID -eq 0 ]] || return 0
  local user uid=64101
  for user in "$ATTACKER" "$VICTIM"; do
    id "$user" >/dev/null 2>&1 || /usr/sbin/useradd --uid "$uid" --user-group --no-create-home --shell /bin/bash "$user"
    uid=$((uid + 1))
  done
}

teardown_file() {
  [[ $EUID -eq 0 ]] || return 0
  local user
  for user in "$ATTACKER" "$VICTIM"; do
    /usr/sbin/userdel "$user" 2>/dev/null || true
  done
}

# as USER CMD... : runs CMD as USER (uid, gid, no other groups)
as() {
  local user=$1
  shift
  setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --clear-groups "$@"
}

# enroot_value USER KEY -> KEY as enroot would use it when USER runs it
enroot_value() {
  local user=$1 key=$2 file k v
  for file in "$ENROOT_CONF" "$(dirname "$ENROOT_CONF")"/enroot.conf.d/*.conf; do
    [[ -f "$file" ]] || continue
    while IFS=$' \t=' read -r k v; do
      if [[ "$k" == "$key" ]]; then
        as "$user" env -i HOME=/nonexistent PATH=/usr/bin:/bin bash -c 'eval echo "$1"' _ "$v"
        return 0
      fi
    done <"$file"
  done
  return 1
}

drop_in() { echo "$(dirname "$ENROOT_CONF")/enroot.conf.d/50-hyperpod-platform.conf"; }

# The test's node with the attacker and the victim as its configured users, FSx mounted (as HyperPod mounts it), the
# container runtime on, and every directory down to the test's own reachable by the two users.
setup_node() {
  [[ $EUID -eq 0 ]] || skip "needs root: the attacks run as other users"
  set_param container_runtime.enabled true \
    container_runtime.artifacts '[]' \
    users "[{\"name\": \"$ATTACKER\", \"uid\": $(id -u "$ATTACKER"), \"gid\": $(id -g "$ATTACKER"), \"sudo\": false},
    {\"name\": \"$VICTIM\", \"uid\": $(id -u "$VICTIM"), \"gid\": $(id -g "$VICTIM"), \"sudo\": false}]"
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  local dir="$T"
  while [[ "$dir" != / && "$dir" != /tmp ]]; do
    chmod o+x "$dir"
    dir="${dir%/*}"
  done
}

@test "HyperPod's enroot.conf is kept except its three storage lines, moved to the drop-in" {
  setup_node
  cp "$ENROOT_CONF" "$T/enroot.conf.hyperpod"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  # Every line HyperPod wrote is still there; the three storage lines only behind the platform's marker.
  diff <(grep -vE '^ENROOT_(RUNTIME|DATA|CACHE)_PATH' "$T/enroot.conf.hyperpod") \
    <(grep -v '^# hyperpod-platform:' "$ENROOT_CONF")
  [ "$(grep -c '^# hyperpod-platform: set in enroot.conf.d/50-hyperpod-platform.conf' "$ENROOT_CONF")" -eq 3 ]
  cmp "$T/enroot.conf.hyperpod" "$ENROOT_CONF.hyperpod-original"
  # HyperPod's other settings still win over the drop-in's (enroot keeps the first value it reads).
  [ "$(enroot_value "$VICTIM" ENROOT_TEMP_PATH)" = "$T/nvme/tmp" ]
  [ "$(enroot_value "$VICTIM" ENROOT_CONFIG_PATH)" = "/nonexistent/enroot" ]
  [[ "$output" == *"WARNING: [contract:enroot-conf] $ENROOT_CONF set ENROOT_RUNTIME_PATH ENROOT_CACHE_PATH ENROOT_DATA_PATH"* ]]
  cp "$ENROOT_CONF" "$T/after-first"
  cp "$(drop_in)" "$T/drop-in-first"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  cmp "$T/after-first" "$ENROOT_CONF"
  cmp "$T/drop-in-first" "$(drop_in)"
}

@test "no enroot.conf from HyperPod: the drop-in alone, nothing else written" {
  setup_node
  ami_node controller --absent fsx-mounted --absent enroot-conf
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [ ! -e "$ENROOT_CONF" ]
  [ "$(ls "$(dirname "$ENROOT_CONF")")" = "enroot.conf.d" ]
  [ "$(enroot_value "$VICTIM" ENROOT_DATA_PATH)" = "$T/nvme/hyperpod-enroot/data/user-$(id -u "$VICTIM")" ]
  [[ "$output" == *"WARNING: [contract:enroot-conf] no $ENROOT_CONF from HyperPod"* ]]
}

@test "attack: a layer planted in the shared cache is not in the victim's cache" {
  setup_node
  shared="$(enroot_value "$VICTIM" ENROOT_CACHE_PATH)" # HyperPod's shared cache, before the platform runs
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  cache="$(enroot_value "$VICTIM" ENROOT_CACHE_PATH)"
  # The attacker plants a layer where the victim's enroot looks it up by digest, and in the old shared cache.
  as "$ATTACKER" sh -c "mkdir -p '$cache' && echo evil >'$cache/$LAYER'" || true
  as "$ATTACKER" sh -c "echo evil >'$shared/$LAYER'" || true
  [ "$cache" != "$shared" ]
  [ ! -e "$cache/$LAYER" ]
  [ "$(stat -c '%U %a' "$cache")" = "$VICTIM 700" ]
  [ "$(stat -c '%U %a' "$(dirname "$cache")")" = "root 755" ]
  # The attacker's own cache is theirs alone, too.
  [ "$(stat -c '%U %a' "$(enroot_value "$ATTACKER" ENROOT_CACHE_PATH)")" = "$ATTACKER 700" ]
}

@test "attack: a data directory pre-created for the victim is moved aside, not used, not followed" {
  setup_node
  # Before the platform runs: the victim's data directory where HyperPod's enroot.conf puts it, made by the attacker,
  # and the NVMe's root open to all, with a link where the platform's own directory goes, to a directory root owns.
  planted="$(enroot_value "$VICTIM" ENROOT_DATA_PATH)"
  as "$ATTACKER" mkdir -p "$planted"
  mkdir "$T/precious"
  chmod 1777 "$T/nvme"
  as "$ATTACKER" ln -s "$T/precious" "$T/nvme/hyperpod-enroot"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"moved $T/nvme/hyperpod-enroot aside"*"it was not used or followed"* ]]
  data="$(enroot_value "$VICTIM" ENROOT_DATA_PATH)"
  [ "$data" != "$planted" ]
  [ "$(stat -c '%U %a' "$data")" = "$VICTIM 700" ]
  # The attacker can neither write into the victim's data directory nor make one beside it.
  run ! as "$ATTACKER" mkdir "$data/x"
  [[ "$output" == *"Permission denied"* ]]
  run ! as "$ATTACKER" mkdir "$(dirname "$data")/user-99999"
  [[ "$output" == *"Permission denied"* ]]
  # Root did not follow the link: the directory it pointed to is as it was, and the link is set aside.
  [ "$(stat -c '%u %a' "$T/precious")" = "0 755" ]
  [ -z "$(ls -A "$T/precious")" ]
  [ -L "$(echo "$T"/nvme/hyperpod-enroot.untrusted-*)" ]
}

@test "a user directory owned by someone else is moved aside and made anew for its user" {
  setup_node
  bash "$SCRIPTS/install_container_runtime.sh"
  data="$(enroot_value "$VICTIM" ENROOT_DATA_PATH)"
  rmdir "$data"
  mkdir "$data"
  chown "$ATTACKER:" "$data"
  run bash "$SCRIPTS/enroot_dirs.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%U %a' "$data")" = "$VICTIM 700" ]
  [ "$(stat -c '%U' "$(echo "$data".untrusted-*)")" = "$ATTACKER" ]
}

@test "after a reboot empties the NVMe, the node's own copy makes the directories again" {
  setup_node
  bash "$SCRIPTS/install_container_runtime.sh"
  rm -rf "$T/nvme/hyperpod-enroot"
  run bash "$PLATFORM_DIR/enroot_dirs.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%U %a' "$T/nvme/hyperpod-enroot/runtime/user-$(id -u "$VICTIM")")" = "$VICTIM 700" ]
  grep -qx "ExecStart=/bin/bash $PLATFORM_DIR/enroot_dirs.sh" "$SYSTEMD_DIR/hyperpod-enroot-dirs.service"
  grep -qx "Before=slurmd.service" "$SYSTEMD_DIR/hyperpod-enroot-dirs.service"
}

@test "a file system not mounted at boot is skipped, nothing made under its mount point" {
  setup_node
  bash "$SCRIPTS/install_container_runtime.sh"
  rm -rf "$T/fsx/.hyperpod-platform"
  grep -vxF "$T/fsx" "$FAKE_ROOT/mounts" >"$T/mounts" && mv "$T/mounts" "$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/enroot_dirs.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$T/fsx is not mounted: $T/fsx/.hyperpod-platform/enroot-cache skipped"* ]]
  [ ! -e "$T/fsx/.hyperpod-platform" ]
}

@test "safe_dirs.py root-dir takes several directories and stops at the first it refuses" {
  mkdir -m 0755 "$T/r"
  mkdir -m 0777 "$T/open"
  run python3 "$SCRIPTS/lib/safe_dirs.py" root-dir "$T/r/a" 0755 "$T/r/b" 1777 "$T/open/c" 0755 "$T/r/d" 0755
  [ "$status" -eq 3 ]
  [ "${lines[0]}" = "made $T/r/a (root, 755)" ]
  [ "${lines[1]}" = "made $T/r/b (root, 1777)" ]
  [[ "${lines[2]}" == "refused: $T/open: owned by uid 0 or writable by others" ]]
  [ ! -e "$T/open/c" ]
  [ ! -e "$T/r/d" ]
  [ "$(stat -c %a "$T/r/b")" = 1777 ]
}

@test "safe_dirs.py roots: every root and its users' directories in one start; a refused root does not stop the next" {
  mkdir -m 0755 "$T/r"
  mkdir -m 0777 "$T/open"
  mkdir -m 0755 "$T/r/kept"
  ln -s "$T/r" "$T/link"
  run python3 "$SCRIPTS/lib/safe_dirs.py" roots 2001:2101 2002:2102 -- "$T/r/kept" 0755 per-user \
    "$T/open/x" 0755 per-user "$T/link/y" 0755 shared "$T/r/tmp" 1777 shared "$T/r/cache" 0755 per-user
  [ "$status" -eq 3 ]
  [ "${lines[0]}" = "made $T/r/kept/user-2001 (2001:2101, 700)" ] # the root itself was kept: not printed
  [ "${lines[1]}" = "made $T/r/kept/user-2002 (2002:2102, 700)" ]
  [ "${lines[2]}" = "ERROR: refused: $T/open: owned by uid 0 or writable by others" ]
  [[ "${lines[3]}" == "ERROR: refused: $T/link: "* ]]
  [ "${lines[4]}" = "made $T/r/tmp (root, 1777)" ]
  [ "${lines[5]}" = "made $T/r/cache (root, 755)" ]
  [ "${lines[6]}" = "made $T/r/cache/user-2001 (2001:2101, 700)" ]
  [ "${#lines[@]}" -eq 8 ]
  [ "$(stat -c '%u:%g %a' "$T/r/cache/user-2002")" = "2002:2102 700" ]
  [ ! -e "$T/r/tmp/user-2001" ]
  [ ! -e "$T/open/x" ]
  [ ! -e "$T/r/y" ]
  # Nothing refused, nothing new: nothing to say.
  run python3 "$SCRIPTS/lib/safe_dirs.py" roots 2001:2101 -- "$T/r/kept" 0755 per-user "$T/r/tmp" 1777 shared
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  run python3 "$SCRIPTS/lib/safe_dirs.py" roots 2001:2101 -- "$T/r/kept" 0755 sometimes
  [ "$status" -eq 3 ]
  [[ "$output" == "refused: usage: "* ]]
}
