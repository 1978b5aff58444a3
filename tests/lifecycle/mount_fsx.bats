#!/usr/bin/env bats
# mount_fsx.sh: fstab entry and Lustre mount.

load test_helper

entry() {
  echo "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh $T/fsx lustre defaults,noatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target 0 0"
}

@test "writes the fstab line and mounts" {
  echo "UUID=abc / ext4 defaults 0 1" >"$FSTAB"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  [ "$(grep -cxF "$(entry)" "$FSTAB")" -eq 1 ]
  grep -qxF "UUID=abc / ext4 defaults 0 1" "$FSTAB"
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
  [ -z "$(calls mount)" ]
  [ ! -s "$FSTAB" ]
  [[ "$output" == *"$T/fsx is mounted by HyperPod"* ]]
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
