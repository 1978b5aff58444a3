#!/usr/bin/env bats
# mount_fsx.sh: fstab entry and Lustre mount.

load test_helper

entry() {
  echo "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh $T/fsx lustre defaults,noatime,flock,nosuid,nodev,_netdev,x-systemd.automount,x-systemd.requires=network-online.target 0 0"
}

@test "writes the fstab line and mounts" {
  echo "UUID=abc / ext4 defaults 0 1" >"$FSTAB"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(grep -cxF "$(entry)" "$FSTAB")" -eq 1 ]
  grep -qxF "UUID=abc / ext4 defaults 0 1" "$FSTAB"
  # The kernel keeps the fstab line's nosuid,nodev: no remount needed.
  [ "$(calls mount)" = "mount $T/fsx" ]
  [ -d "$T/fsx" ]
}

@test "fstab line is written once across two runs and the second run does not mount" {
  bash "$SCRIPTS/mount_fsx.sh"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(grep -c "$T/fsx" "$FSTAB")" -eq 1 ]
  [ -z "$(calls mount)" ]
  [ -z "$(calls systemctl)" ]
}

@test "an older entry for the same mount point is replaced, not duplicated" {
  echo "fs-old.fsx.us-east-1.amazonaws.com@tcp:/old $T/fsx lustre defaults 0 0" >"$FSTAB"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$FSTAB")" = "$(entry)" ]
}

@test "mount is retried while it fails" {
  STUB_MOUNT_FAILURES=2 run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(calls mount | wc -l)" -eq 3 ]
  [[ "$output" == *"attempt 1/6 failed"* ]]
}

@test "gives up with a clear error when the mount keeps failing" {
  STUB_MOUNT_FAILURES=99 MOUNT_ATTEMPTS=3 run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -ne 0 ]
  [ "$(calls mount | wc -l)" -eq 3 ]
  [[ "$output" == *"could not mount fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh at $T/fsx"* ]]
}

@test "with HyperPod's own mount (fsx.mount false) it waits for the mount and writes nothing" {
  set_param fsx.mount false
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(calls mount)" = "mount -i -o remount,bind,rw,relatime,nosuid,nodev $T/fsx" ]
  [ ! -s "$FSTAB" ]
  [[ "$output" == *"$T/fsx is mounted by HyperPod"* ]]
  [[ "$output" == *"$T/fsx remounted nosuid,nodev (now rw,relatime,nosuid,nodev)"* ]]
}

@test "HyperPod's mount that has nosuid and nodev already is left alone" {
  set_param fsx.mount false
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  mkdir -p "$FAKE_ROOT/mount_opts" && echo "rw,nosuid,nodev,noatime" >"$FAKE_ROOT/mount_opts/${T//\//_}_fsx"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ -z "$(calls mount)" ]
}

@test "a mount that cannot be made nosuid,nodev fails the node, before users or keys are made on it" {
  set_param fsx.mount false
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  STUB_REMOUNT_FAIL=1 run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"ERROR: $T/fsx is mounted with 'rw,relatime', without nosuid and nodev, and remounting it failed."* ]]
  [[ "$output" == *"a setuid file a Studio user planted on FSx would run as its owner here"* ]]
  [ ! -e "$T/fsx/data" ]
}

@test "an older fstab line's mount (no nosuid) is remounted, and the line replaced" {
  echo "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh $T/fsx lustre defaults,noatime,flock,_netdev 0 0" >"$FSTAB"
  echo "$T/fsx" >>"$FAKE_ROOT/mounts" # mounted from that line
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$FSTAB")" = "$(entry)" ]
  [ "$(calls mount)" = "mount -i -o remount,bind,rw,relatime,nosuid,nodev $T/fsx" ]
}

@test "with HyperPod's own mount, a mount that never comes fails the node after a bounded wait" {
  set_param fsx.mount false
  FSX_WAIT_ATTEMPTS=4 run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -ne 0 ]
  [ "$(calls mountpoint | wc -l)" -eq 4 ]
  [ -z "$(calls mount)" ]
  [[ "$output" == *"gave up waiting for HyperPod to mount FSx at $T/fsx after 4 checks"* ]]
  [[ "$output" == *"ERROR: $T/fsx is not mounted; HyperPod mounts it from the instance group's InstanceStorageConfigs"* ]]
}

@test "no file system at all: nothing to mount or wait for" {
  set_param fsx null
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ -z "$(calls mountpoint)" ]
  [[ "$output" == *"no FSx file system for this cluster"* ]]
}

# A p5.48xlarge-sized node: 192 vCPUs, 2 TiB of memory.
big_node() {
  export STUB_NPROC=192
  printf 'MemTotal:       2113500000 kB\n' >"$MEMINFO"
}

@test "large instance: AWS's LRU and RPC-in-flight settings are applied after the mount" {
  big_node
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(calls lctl)" = "lctl set_param ldlm.namespaces.*.lru_max_age=600000
lctl set_param ldlm.namespaces.*.lru_size=19200
lctl set_param osc.*OST*.max_rpcs_in_flight=32
lctl set_param mdc.*.max_rpcs_in_flight=64
lctl set_param mdc.*.max_mod_rpcs_in_flight=50" ]
  # The mount comes first: lctl settings apply to a mounted client's devices.
  [ "$(grep -nE '^(mount|lctl) ' "$STUB_LOG" | head -1 | cut -d: -f2-)" = "mount $T/fsx" ]
}

@test "more than 64 GiB but at most 64 vCPUs: LRU settings only" {
  export STUB_NPROC=64
  printf 'MemTotal:       198000000 kB\n' >"$MEMINFO"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(calls lctl)" = "lctl set_param ldlm.namespaces.*.lru_max_age=600000
lctl set_param ldlm.namespaces.*.lru_size=6400" ]
}

@test "small instance: no tuning, and the log says why" {
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ -z "$(calls lctl)" ]
  [[ "$output" == *"Lustre client defaults kept: 4 vCPUs and 7 GiB are within AWS's thresholds"* ]]
}

@test "with HyperPod's own mount the tuning is applied once the mount is there" {
  big_node
  set_param fsx.mount false
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(calls lctl | wc -l)" -eq 5 ]
  [ -z "$(calls mount | grep -v ' remount,bind,')" ]
}

@test "no tuning when HyperPod's mount never comes" {
  big_node
  set_param fsx.mount false
  FSX_WAIT_ATTEMPTS=2 run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -ne 0 ]
  [ -z "$(calls lctl)" ]
}

@test "a failing lctl is a warning, not a failed node" {
  big_node
  STUB_LCTL_FAIL=1 run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: lctl set_param osc.*OST*.max_rpcs_in_flight=32 failed"* ]]
}

@test "the checkpoint directory inside the S3-linked path is root's, 0755, in both modes; an old 1777 one becomes 0755" {
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u %a' "$T/fsx/data" "$T/fsx/data/checkpoints")" = "$(printf '0 755\n0 755')" ]
  rm -rf "$T/fsx/data"
  set_param fsx.mount false
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u %a' "$T/fsx/data/checkpoints")" = "0 755" ]
  [[ "$output" == *"checkpoint directory $T/fsx/data/checkpoints (exported to S3; one directory per user)"* ]]
  chmod 1777 "$T/fsx/data/checkpoints"
  install -d -m 0755 -o 2001 -g 2101 "$T/fsx/data/checkpoints/alice" # a user's, made while it was 1777
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u %a' "$T/fsx/data/checkpoints")" = "0 755" ]
  [[ "$output" == *"$T/fsx/data/checkpoints had mode 1777: now 0755"* ]]
  [ "$(stat -c '%u:%g %a' "$T/fsx/data/checkpoints/alice")" = "2001:2101 755" ]
}

@test "an S3-linked path others may write (not sticky) gets no checkpoint directory, and the node carries on" {
  install -d -m 0755 "$T/fsx"
  install -d -m 0777 "$T/fsx/data"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: no checkpoint directory: $T/fsx/data is writable by group or others (mode 777)"* ]]
  [ ! -e "$T/fsx/data/checkpoints" ]
}
