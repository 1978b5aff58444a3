#!/usr/bin/env bash
# Optional container runtime for Slurm jobs (enroot + pyxis), when container_runtime.enabled.
#
# - Docker, containerd and the NVIDIA container toolkit that HyperPod's AMI ships are used as they are: replacing them
#   breaks the GPU runtime the AMI configured. docker.io at docker_apt_version is installed only where no Docker is.
# - enroot/pyxis come as .deb packages from the operator's own S3 mirror, checksum-verified before any is installed.
#   Nothing is fetched from GitHub: nodes may have no internet route, and what runs must be what was reviewed.
# - The pins were made for one Ubuntu release (container_runtime.ubuntu_release); another release stops the node
#   with a message, before anything is installed.
# - enroot keeps its runtime, data and temporary files on the instance's NVMe (or the EBS volume at /opt/sagemaker)
#   and its layer cache on FSx, as AWS's reference scripts do, not on the small root volume.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/artifacts.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/artifacts.sh"

ENROOT_CONF="${ENROOT_CONF:-/etc/enroot/enroot.conf}"
NVME_PATHS="${NVME_PATHS:-/opt/dlami/nvme /opt/sagemaker}"

if [[ "$(param container_runtime.enabled)" != "true" ]]; then
  log "container runtime disabled: skipping"
  exit 0
fi

check_ubuntu_release() {
  local want have
  want="$(param container_runtime.ubuntu_release)"
  # shellcheck disable=SC1090 # os-release is a shell fragment by definition (os-release(5))
  have="$(. "$OS_RELEASE" && echo "${ID:-}:${VERSION_ID:-}")"
  [[ "$have" == "ubuntu:$want" ]] || die "this node runs ${have/:/ } but the container runtime pins" \
    "(container_runtime.docker_apt_version and artifacts) were made for Ubuntu $want; pin packages built for" \
    "this release and set container_runtime.ubuntu_release"
  log "Ubuntu $want, as the container runtime pins expect"
}

ensure_docker() {
  local version package
  for package in docker-ce docker.io moby-engine; do
    version="$(installed_version "$package")"
    if [[ -n "$version" ]]; then
      log "using the AMI's $package $version (not replaced)"
      return 0
    fi
  done
  version="$(param container_runtime.docker_apt_version)"
  if [[ -z "$version" ]]; then
    log "no Docker on this node and container_runtime.docker_apt_version is empty: not installing Docker"
    return 0
  fi
  apt_install "docker.io=$version"
  apt-mark hold docker.io # keep unattended upgrades from moving the pin
  systemctl enable --now docker
  log "installed docker.io $version"
}

report_nvidia_toolkit() {
  local version
  version="$(installed_version nvidia-container-toolkit)"
  if [[ -n "$version" ]]; then
    log "using the AMI's nvidia-container-toolkit $version (not replaced)"
  else
    log "no nvidia-container-toolkit on this node (expected on CPU instances)"
  fi
}

# first_mounted PATH... -> the first of PATHs that is a mount point ("" when none is)
first_mounted() {
  local path
  for path in "$@"; do
    mountpoint -q "$path" && { echo "$path"; return 0; }
  done
  return 0
}

configure_enroot() {
  local scratch fsx cache conf
  if [[ -z "$(installed_version enroot)" && -z "$(installed_version enroot+caps)" ]]; then
    log "enroot is not installed: no enroot.conf to write"
    return 0
  fi
  # shellcheck disable=SC2086 # NVME_PATHS is a list
  scratch="$(first_mounted $NVME_PATHS)"
  scratch="${scratch:-/tmp}"
  fsx="$(param fsx.mount_path)"
  cache="$scratch/enroot/cache"
  if [[ -n "$fsx" ]] && mountpoint -q "$fsx"; then
    cache="$fsx/enroot/cache" # shared: a layer pulled by one node is there for all
  fi
  mkdir -p "$scratch/enroot/runtime" "$scratch/enroot/data" "$scratch/enroot/tmp" "$cache"
  chmod 1777 "$scratch/enroot/runtime" "$scratch/enroot/data" "$scratch/enroot/tmp" "$cache"
  conf="$(mktemp)"
  cat >"$conf" <<CONF
# Written by the HyperPod platform's install_container_runtime.sh.
ENROOT_RUNTIME_PATH $scratch/enroot/runtime/user-\$(id -u)
ENROOT_DATA_PATH $scratch/enroot/data/user-\$(id -u)
ENROOT_TEMP_PATH $scratch/enroot/tmp
ENROOT_CACHE_PATH $cache
ENROOT_CONFIG_PATH \${HOME}/.config/enroot
ENROOT_SQUASH_OPTIONS -comp lzo -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME no
ENROOT_RESTRICT_DEV no
ENROOT_ROOTFS_WRITABLE yes
CONF
  mkdir -p "$(dirname "$ENROOT_CONF")"
  if cmp -s "$conf" "$ENROOT_CONF"; then
    log "enroot.conf already points at $scratch and $cache"
  else
    install -m 0644 "$conf" "$ENROOT_CONF"
    log "enroot.conf: runtime and data under $scratch/enroot, layer cache in $cache"
  fi
  rm -f "$conf"
}

check_ubuntu_release
ensure_docker
report_nvidia_toolkit

download_dir="$(mktemp -d)"
trap 'rm -rf "$download_dir"' EXIT
verified=()
artifacts="$(params_py artifacts "$PARAMS_FILE")"
while IFS=$'\t' read -r name uri sha; do
  [[ -n "$name" ]] || continue
  fetch_artifact "$name" "$uri" "$sha"
done <<<"$artifacts"

# Every artifact is verified before any is installed; one apt call resolves enroot+caps -> enroot.
if ((${#verified[@]})); then
  apt_install "${verified[@]}"
  log "installed: ${verified[*]##*/}"
fi
configure_enroot
