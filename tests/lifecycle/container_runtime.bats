#!/usr/bin/env bats
# install_container_runtime.sh: the AMI's Docker reused (docker.io pinned only where none is), checksum-verified
# artifacts from S3, the Ubuntu release checked, enroot.conf on NVMe and FSx.

load test_helper

setup_runtime() {
  set_param container_runtime.enabled true
  set_param container_runtime.docker_apt_version '"24.0.7-0ubuntu2~22.04.1"'
  set_param container_runtime.artifacts '[]'
  add_artifact enroot enroot_3.5.0-1_amd64.deb "fake enroot"
  add_artifact enroot-caps enroot+caps_3.5.0-1_amd64.deb "fake enroot caps"
}

@test "nothing is installed when the runtime is disabled" {
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"container runtime disabled"* ]]
  [ -z "$(mutating_calls)" ]
}

@test "installs docker.io at the pinned version and verified artifacts from S3" {
  setup_runtime
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  calls apt-get | grep -q "install docker.io=24.0.7-0ubuntu2~22.04.1$"
  [ "$(calls apt-mark)" = "apt-mark hold docker.io" ]
  calls aws | grep -q "s3 cp --only-show-errors s3://mirror-bucket/artifacts/enroot_3.5.0-1_amd64.deb "
  calls aws | grep -q "s3 cp --only-show-errors s3://mirror-bucket/artifacts/enroot+caps_3.5.0-1_amd64.deb "
  calls apt-get | grep -qE "install .*/enroot_3.5.0-1_amd64.deb .*/enroot\+caps_3.5.0-1_amd64.deb$"
  [ "$(cat "$FAKE_ROOT/dpkg/enroot")" = "3.5.0-1" ]
  [ "$(grep -ci github "$STUB_LOG")" -eq 0 ]
}

@test "a checksum mismatch fails, names the artifact and installs no artifact" {
  setup_runtime
  add_artifact pyxis pyxis_0.20.0-1_amd64.deb "tampered" "$(printf 'a%.0s' {1..64})"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"artifact pyxis: checksum mismatch for s3://mirror-bucket/artifacts/pyxis_0.20.0-1_amd64.deb"* ]]
  [ "$(calls apt-get | grep -c '\.deb')" -eq 0 ]
  [ ! -e "$FAKE_ROOT/dpkg/enroot" ]
}

@test "second run downloads and installs nothing" {
  setup_runtime
  bash "$SCRIPTS/install_container_runtime.sh"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
}

@test "an artifact at another version is reinstalled" {
  setup_runtime
  echo "3.4.1-1" >"$FAKE_ROOT/dpkg/enroot"
  echo "3.5.0-1" >"$FAKE_ROOT/dpkg/enroot+caps"
  echo "24.0.7-0ubuntu2~22.04.1" >"$FAKE_ROOT/dpkg/docker.io"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [ "$(calls aws | wc -l)" -eq 1 ]
  calls apt-get | grep -qE "install .*/enroot_3.5.0-1_amd64.deb$"
}

@test "an artifact not named package_version_arch.deb is rejected" {
  setup_runtime
  add_artifact odd enroot-latest.deb "x"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"artifact odd: enroot-latest.deb is not named package_version_arch.deb"* ]]
}

@test "the AMI's Docker and NVIDIA container toolkit are reused, never replaced" {
  setup_runtime
  echo "5:27.3.1-1~ubuntu.22.04~jammy" >"$FAKE_ROOT/dpkg/docker-ce"
  echo "1.17.8-1" >"$FAKE_ROOT/dpkg/nvidia-container-toolkit"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [ -z "$(calls apt-get | grep docker)" ]
  [ -z "$(calls apt-mark)" ]
  [ -z "$(calls systemctl | grep docker)" ]
  [[ "$output" == *"using the AMI's docker-ce 5:27.3.1-1~ubuntu.22.04~jammy (not replaced)"* ]]
  [[ "$output" == *"using the AMI's nvidia-container-toolkit 1.17.8-1 (not replaced)"* ]]
}

@test "pins made for another Ubuntu release stop the node before anything is installed" {
  setup_runtime
  printf 'ID=ubuntu\nVERSION_ID="24.04"\n' >"$OS_RELEASE"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"this node runs ubuntu 24.04 but the container runtime pins"*"were made for Ubuntu 22.04"* ]]
  [ -z "$(mutating_calls)" ]
}

@test "enroot keeps runtime and data on the NVMe and its layer cache on FSx" {
  setup_runtime
  printf '%s\n' "$T/nvme" "$T/fsx" >>"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  grep -qxF "ENROOT_RUNTIME_PATH $T/nvme/enroot/runtime/user-\$(id -u)" "$ENROOT_CONF"
  grep -qxF "ENROOT_DATA_PATH $T/nvme/enroot/data/user-\$(id -u)" "$ENROOT_CONF"
  grep -qxF "ENROOT_TEMP_PATH $T/nvme/enroot/tmp" "$ENROOT_CONF"
  grep -qxF "ENROOT_CACHE_PATH $T/fsx/enroot/cache" "$ENROOT_CONF"
  [ "$(stat -c %a "$T/nvme/enroot/tmp")" = "1777" ]
}

@test "without NVMe or FSx, enroot falls back to the EBS volume and keeps its cache there" {
  setup_runtime
  echo "$T/opt-sagemaker" >>"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  grep -qxF "ENROOT_CACHE_PATH $T/opt-sagemaker/enroot/cache" "$ENROOT_CONF"
  grep -qxF "ENROOT_TEMP_PATH $T/opt-sagemaker/enroot/tmp" "$ENROOT_CONF"
}
