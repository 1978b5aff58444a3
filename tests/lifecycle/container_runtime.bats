#!/usr/bin/env bats
# install_container_runtime.sh on the AMI model (test_helper: Docker, enroot and pyxis as HyperPod leaves them): what
# HyperPod set up is kept (no reinstall at another version, no Docker replaced); only what a node lacks is installed,
# from checksum-verified artifacts, with a contract warning; enroot's settings go to a drop-in (enroot_dirs.bats has
# the per-user directories and the attacks).

load test_helper

setup_runtime() {
  set_param_and_artifacts container_runtime artifacts container_runtime.enabled true \
    container_runtime.docker_apt_version '"24.0.7-0ubuntu2~22.04.1"' \
    container_runtime.artifacts '[]' \
    -- enroot enroot_3.5.0-1_amd64.deb "fake enroot" enroot-caps enroot+caps_3.5.0-1_amd64.deb "fake enroot caps"
}

@test "nothing is installed when the runtime is disabled" {
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"container runtime disabled"* ]]
  [ -z "$(mutating_calls)" ]
}

# without FACT... : this test's node lacks those facts (and FSx is the lifecycle script's to mount, as in setup)
without() {
  local args=(--absent fsx-mounted) fact
  for fact in "$@"; do args+=(--absent "$fact"); done
  ami_node controller "${args[@]}"
}

drop_in() { echo "$(dirname "$ENROOT_CONF")/enroot.conf.d/50-hyperpod-platform.conf"; }

@test "the AMI's Docker and NVIDIA container toolkit are reused, never replaced" {
  setup_runtime
  echo "1.17.8-1" >"$FAKE_ROOT/dpkg/nvidia-container-toolkit"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [ -z "$(calls apt-get | grep docker)" ]
  [ -z "$(calls apt-mark)" ]
  [ -z "$(calls systemctl | grep docker)" ]
  [[ "$output" == *"using the AMI's docker-ce 5:27.3.1-1~ubuntu.22.04~jammy (not replaced)"* ]]
  [[ "$output" == *"using the AMI's nvidia-container-toolkit 1.17.8-1 (not replaced)"* ]]
  [[ "$output" != *"[contract:docker]"* ]]
}

@test "HyperPod's enroot at another version is kept: no download, no install" {
  setup_runtime
  [ "$(cat "$FAKE_ROOT/dpkg/enroot")" = "3.4.1-1" ]
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"artifact enroot: the node has enroot 3.4.1-1 (HyperPod's): kept, the artifact is not installed"* ]]
  [ -z "$(calls aws)" ]
  [ -z "$(calls apt-get)" ]
  [ "$(cat "$FAKE_ROOT/dpkg/enroot")" = "3.4.1-1" ]
  [ ! -e "$STATE_DIR/contract_warnings" ] || ! grep -q "^enroot-installed" "$STATE_DIR/contract_warnings" || false
}

@test "no Docker on the node: docker.io at the pinned version, with a contract warning" {
  setup_runtime
  without docker
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  calls apt-get | grep -q "install docker.io=24.0.7-0ubuntu2~22.04.1$"
  [ "$(calls apt-mark)" = "apt-mark hold docker.io" ]
  [[ "$output" == *"WARNING: [contract:docker] no Docker on this node: installing docker.io 24.0.7-0ubuntu2~22.04.1"* ]]
  grep -q "^docker	install_container_runtime	" "$STATE_DIR/contract_warnings"
}

@test "no enroot on the node: verified artifacts installed, with a contract warning" {
  setup_runtime
  without enroot-installed
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  calls aws | grep -q "s3 cp --only-show-errors s3://mirror-bucket/artifacts/enroot_3.5.0-1_amd64.deb "
  calls aws | grep -q "s3 cp --only-show-errors s3://mirror-bucket/artifacts/enroot+caps_3.5.0-1_amd64.deb "
  calls apt-get | grep -qE "install .*/enroot_3.5.0-1_amd64.deb .*/enroot\+caps_3.5.0-1_amd64.deb$"
  [ "$(cat "$FAKE_ROOT/dpkg/enroot")" = "3.5.0-1" ]
  [ "$(grep -ci github "$STUB_LOG")" -eq 0 ]
  [[ "$output" == *"WARNING: [contract:enroot-installed] the node lacks enroot enroot-caps: installing the container_runtime artifacts"* ]]
}

@test "a checksum mismatch fails, names the artifact and installs no artifact" {
  setup_runtime
  without enroot-installed pyxis
  add_artifact pyxis pyxis_0.20.0-1_amd64.deb "tampered" "$(printf 'a%.0s' {1..64})"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"artifact pyxis: checksum mismatch for s3://mirror-bucket/artifacts/pyxis_0.20.0-1_amd64.deb"* ]]
  [ "$(calls apt-get | grep -c '\.deb')" -eq 0 ]
  [ ! -e "$FAKE_ROOT/dpkg/enroot" ]
  [ -z "$(ls -A "$TMPDIR")" ]
}

@test "a pyxis artifact is not installed where HyperPod's pyxis is (built from source: only its pyxis.conf)" {
  setup_runtime
  add_artifact pyxis nvslurm-plugin-pyxis_0.20.0-1_amd64.deb "a build for another Slurm"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"artifact pyxis: the node has $PYXIS_CONF (HyperPod's): kept"* ]]
  [ -z "$(calls aws)" ]
}

@test "second run downloads and installs nothing" {
  setup_runtime
  without docker enroot-installed
  bash "$SCRIPTS/install_container_runtime.sh"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [ -z "$(mutating_calls)" ]
}

@test "an artifact not named package_version_arch.deb is rejected" {
  setup_runtime
  add_artifact odd enroot-latest.deb "x"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"artifact odd: enroot-latest.deb is not named package_version_arch.deb"* ]]
}

@test "HyperPod's runtime on another Ubuntu release: nothing to install, the node continues" {
  setup_runtime
  printf 'ID=ubuntu\nVERSION_ID="24.04"\n' >"$OS_RELEASE"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [ -z "$(calls apt-get)" ]
  [[ "$output" != *"[contract:os-release]"* ]]
}

@test "no enroot and another Ubuntu release: nothing installed, warned, the node continues" {
  setup_runtime
  without docker enroot-installed
  printf 'ID=ubuntu\nVERSION_ID="24.04"\n' >"$OS_RELEASE"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: [contract:os-release] this node runs ubuntu 24.04, but container_runtime's pinned packages were made for Ubuntu 22.04: docker.io 24.0.7-0ubuntu2~22.04.1 not installed"* ]]
  [[ "$output" == *"WARNING: [contract:os-release] this node runs ubuntu 24.04"*": enroot enroot-caps not installed"* ]]
  [[ "$output" == *"enroot is not installed: no enroot settings to write"* ]]
  [ -z "$(mutating_calls)" ]
}

@test "enroot keeps runtime and data on the NVMe and its layer cache on FSx, one directory per user" {
  setup_runtime
  echo "$T/fsx" >>"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  grep -qxF "ENROOT_RUNTIME_PATH $T/nvme/hyperpod-enroot/runtime/user-\$(id -u)" "$(drop_in)"
  grep -qxF "ENROOT_DATA_PATH $T/nvme/hyperpod-enroot/data/user-\$(id -u)" "$(drop_in)"
  grep -qxF "ENROOT_TEMP_PATH $T/nvme/hyperpod-enroot/tmp" "$(drop_in)"
  grep -qxF "ENROOT_CACHE_PATH $T/fsx/.hyperpod-platform/enroot-cache/user-\$(id -u)" "$(drop_in)"
  [ "$(stat -c %a "$T/nvme/hyperpod-enroot/tmp")" = "1777" ]
  [ "$(stat -c '%u %a' "$T/nvme/hyperpod-enroot/data")" = "0 755" ]
  [ "$(stat -c '%u %g %a' "$T/nvme/hyperpod-enroot/data/user-2001")" = "2001 2101 700" ]
  [ "$(stat -c '%u %g %a' "$T/fsx/.hyperpod-platform/enroot-cache/user-2002")" = "2002 2102 700" ]
  calls systemctl | grep -qx "systemctl enable hyperpod-enroot-dirs.service"
}

@test "without NVMe or FSx, enroot falls back to the EBS volume and keeps its cache there" {
  setup_runtime
  without nvme-scratch
  echo "$T/opt-sagemaker" >>"$FAKE_ROOT/mounts"
  mkdir -p "$T/opt-sagemaker"
  run bash "$SCRIPTS/install_container_runtime.sh"
  [ "$status" -eq 0 ]
  grep -qxF "ENROOT_CACHE_PATH $T/opt-sagemaker/hyperpod-enroot/cache/user-\$(id -u)" "$(drop_in)"
  grep -qxF "ENROOT_TEMP_PATH $T/opt-sagemaker/hyperpod-enroot/tmp" "$(drop_in)"
}
