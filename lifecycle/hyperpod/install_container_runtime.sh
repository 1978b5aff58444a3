#!/usr/bin/env bash
# The container runtime for Slurm jobs (Docker, enroot, pyxis), when container_runtime.enabled. In OnInitComplete mode
# HyperPod has already set up Docker, Enroot and Pyxis (lifecycle/node_contract.json: docker, enroot-installed,
# enroot-conf, pyxis): this script configures only what HyperPod left unconfigured, and says so when it does.
#
# - Docker, containerd and the NVIDIA container toolkit on the node are used as they are. No Docker: docker.io at
#   docker_apt_version (contract warning).
# - enroot and pyxis: a package the node already has is never reinstalled or upgraded, at whatever version. Only a
#   missing one is installed, from the operator's S3 mirror, every sha256 checked before any install (contract
#   warning). The pins are made for container_runtime.ubuntu_release: on another release nothing is installed, a
#   contract warning says why, and the node continues (without containers if HyperPod provided none).
# - enroot's settings: HyperPod's enroot.conf is kept. The platform adds /etc/enroot/enroot.conf.d/
#   50-hyperpod-platform.conf; enroot lets the first definition win (environment, enroot.conf, then drop-ins in
#   order: NVIDIA/enroot@8ea147d enroot.in config::export), so HyperPod's own settings stay in force. The three
#   storage paths are the exception: per-user runtime and data directories on the NVMe and a per-user layer cache on
#   FSx, made by root for every user before any job (enroot_dirs.sh). If enroot.conf sets one of them, that line is
#   commented out with a marker (a drop-in cannot override it), because a shared cache or a lazily made per-uid
#   directory under a world-writable parent lets one user plant a layer or pre-create another user's data directory.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/artifacts.sh
source "$HERE/lib/artifacts.sh"

ENROOT_CONF="${ENROOT_CONF:-/etc/enroot/enroot.conf}"
NVME_PATHS="${NVME_PATHS:-/opt/dlami/nvme /opt/sagemaker}"
ENROOT_DIRS_STATE="${ENROOT_DIRS_STATE:-$STATE_DIR/enroot_dirs}"
DROP_IN_NAME=50-hyperpod-platform.conf
STORAGE_KEYS="ENROOT_RUNTIME_PATH|ENROOT_DATA_PATH|ENROOT_CACHE_PATH"
MOVED_MARK="# hyperpod-platform: set in enroot.conf.d/$DROP_IN_NAME (a drop-in cannot override enroot.conf):"

params container_runtime.enabled container_runtime.ubuntu_release container_runtime.docker_apt_version fsx.mount_path
if [[ "$(param container_runtime.enabled)" != "true" ]]; then
  log "container runtime disabled: skipping"
  exit 0
fi

# release_matches : 0 when the node runs the Ubuntu release the pins were made for; else a contract warning and 1.
release_matches() {
  local want have
  want="$(param container_runtime.ubuntu_release)"
  # shellcheck disable=SC1090 # os-release is a shell fragment by definition (os-release(5))
  have="$(. "$OS_RELEASE" && echo "${ID:-}:${VERSION_ID:-}")"
  [[ "$have" == "ubuntu:$want" ]] && return 0
  contract_warn os-release "this node runs ${have/:/ }, but container_runtime's pinned packages were made for" \
    "Ubuntu $want: $1 not installed (pin packages built for this release and set container_runtime.ubuntu_release)"
  return 1
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
    contract_warn docker "no Docker on this node and container_runtime.docker_apt_version is empty: not installing one"
    return 0
  fi
  release_matches "docker.io $version" || return 0
  contract_warn docker "no Docker on this node: installing docker.io $version"
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

# The pyxis.conf pyxis installs ("required /path/spank_pyxis.so"); configure_slurm.sh reads the same candidates.
pyxis_conf() {
  local candidate
  for candidate in ${PYXIS_CONF:-/usr/local/share/pyxis/pyxis.conf /usr/share/pyxis/pyxis.conf}; do
    [[ -f "$candidate" ]] && { echo "$candidate"; return 0; }
  done
  return 1
}

# on_node PACKAGE -> what of PACKAGE's family the node already has ("" when none): enroot and enroot+caps are one
# family, and pyxis built from source (as AWS's scripts do) has no Debian package, only its pyxis.conf.
on_node() {
  local package=$1 member version
  case "$package" in
    enroot | enroot+caps)
      for member in enroot enroot+caps; do
        version="$(installed_version "$member")"
        [[ -n "$version" ]] && { echo "$member $version"; return 0; }
      done
      ;;
    *pyxis*)
      version="$(installed_version "$package")"
      [[ -n "$version" ]] && { echo "$package $version"; return 0; }
      pyxis_conf && return 0
      ;;
    *)
      version="$(installed_version "$package")"
      [[ -n "$version" ]] && echo "$package $version"
      ;;
  esac
  return 0
}

# Artifacts for packages the node lacks: downloaded and verified (all of them) before one apt call installs them.
install_missing_artifacts() {
  local name uri sha package have missing=()
  while IFS=$'\t' read -r name uri sha; do
    [[ -n "$name" ]] || continue
    package="$(basename "$uri")"
    package="${package%%_*}"
    have="$(on_node "$package")"
    if [[ -n "$have" ]]; then
      log "artifact $name: the node has $have (HyperPod's): kept, the artifact is not installed"
      continue
    fi
    missing+=("$name")
  done < <(params_py artifacts "$PARAMS_FILE")
  ((${#missing[@]})) || return 0
  local fact=enroot-installed
  [[ "${missing[*]}" == *pyxis* && "${missing[*]}" != *enroot* ]] && fact=pyxis
  release_matches "${missing[*]}" || return 0
  contract_warn "$fact" "the node lacks ${missing[*]}: installing the container_runtime artifacts"
  # shellcheck disable=SC2317 # called by install_artifacts
  is_missing() { [[ " ${missing[*]} " == *" $1 "* ]]; }
  install_artifacts container_runtime is_missing
}

# root_dir PATH MODE [PATH MODE]... : each PATH made, in order, as root's own directory (lib/safe_dirs.py, one start
# for them all); 1 when something on the way is not root's alone (the caller then tries the next place).
root_dir() {
  local out paths=() i
  for ((i = 1; i < $#; i += 2)); do paths+=("${!i}"); done
  if out="$(lib_py safe_dirs.py root-dir "$@" 2>&1)"; then
    log "$out"
    return 0
  fi
  log "not using ${paths[*]}: $out"
  return 1
}

# Comments out the storage keys in HyperPod's enroot.conf (each line kept after the marker); 0 when it changed.
move_storage_keys() {
  local new PARENT
  [[ -f "$ENROOT_CONF" ]] || return 1
  grep -qE "^[[:space:]]*($STORAGE_KEYS)([[:space:]=]|$)" "$ENROOT_CONF" || return 1
  [[ -e "$ENROOT_CONF.hyperpod-original" ]] || cp -p "$ENROOT_CONF" "$ENROOT_CONF.hyperpod-original"
  parent_dir "$ENROOT_CONF"
  new="$(mktemp "$PARENT/.enroot.conf.XXXXXX")"
  sed -E "s,^([[:space:]]*($STORAGE_KEYS)([[:space:]=].*)?)$,$MOVED_MARK \\1," "$ENROOT_CONF" >"$new"
  chmod --reference="$ENROOT_CONF" "$new"
  mv -f "$new" "$ENROOT_CONF"
  return 0
}

configure_enroot() {
  local candidate scratch="" mount="" fsx cache cache_mount conf drop_in moved PARENT
  if [[ -z "$(on_node enroot)" ]]; then
    log "enroot is not installed: no enroot settings to write"
    return 0
  fi
  # Runtime, data and temporary files on the NVMe (else the EBS volume, else root's state directory), never on a path
  # a user could have made first.
  # shellcheck disable=SC2086 # NVME_PATHS is a list
  for candidate in $NVME_PATHS -; do
    [[ "$candidate" == - ]] || mountpoint -q "$candidate" || continue
    if [[ "$candidate" == - ]]; then
      scratch="$STATE_DIR/enroot" mount=-
      contract_warn nvme-scratch "no usable NVMe or EBS scratch volume (${NVME_PATHS}): enroot's runtime and data" \
        "go to $scratch on the root volume"
      root_dir "$scratch" 0755 || die "cannot make $scratch safely"
      break
    fi
    if root_dir "$candidate/hyperpod-enroot" 0755; then
      scratch="$candidate/hyperpod-enroot" mount="$candidate"
      break
    fi
  done
  # tmp holds mktemp names: sticky, like /tmp.
  root_dir "$scratch/runtime" 0755 "$scratch/data" 0755 "$scratch/tmp" 1777 ||
    die "cannot make $scratch/runtime, $scratch/data and $scratch/tmp safely"
  fsx="$(param fsx.mount_path)"
  cache="$scratch/cache" cache_mount="$mount"
  if [[ -n "$fsx" ]] && mountpoint -q "$fsx" && root_dir "$fsx/.hyperpod-platform/enroot-cache" 0755; then
    cache="$fsx/.hyperpod-platform/enroot-cache" cache_mount="$fsx" # per user, kept across nodes and replacements
  else
    root_dir "$cache" 0755 || die "cannot make $cache safely"
  fi
  parent_dir "$ENROOT_DIRS_STATE"
  mkdir -p "$PARENT"
  printf '%s %s %s %s\n' "$scratch/runtime" 0755 per-user "$mount" "$scratch/data" 0755 per-user "$mount" \
    "$scratch/tmp" 1777 shared "$mount" "$cache" 0755 per-user "$cache_mount" >"$ENROOT_DIRS_STATE.new"
  mv -f "$ENROOT_DIRS_STATE.new" "$ENROOT_DIRS_STATE"

  conf="$(mktemp)"
  write_text "$conf" <<CONF
# Written by the HyperPod platform's install_container_runtime.sh (lifecycle/node_contract.json, enroot-conf).
# enroot keeps the first value it reads (enroot.conf, then these drop-ins): HyperPod's own settings win over these,
# except the three storage paths, which the platform took out of enroot.conf. Their user-<uid> directories are made by
# root for every configured user (owner the user, mode 0700) before any job and at every boot (enroot_dirs.sh).
ENROOT_RUNTIME_PATH $scratch/runtime/user-\$(id -u)
ENROOT_DATA_PATH $scratch/data/user-\$(id -u)
ENROOT_CACHE_PATH $cache/user-\$(id -u)
ENROOT_TEMP_PATH $scratch/tmp
ENROOT_SQUASH_OPTIONS -comp lzo -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME no
ENROOT_RESTRICT_DEV no
ENROOT_ROOTFS_WRITABLE yes
CONF
  parent_dir "$ENROOT_CONF"
  drop_in="$PARENT/enroot.conf.d/$DROP_IN_NAME"
  mkdir -p "$PARENT/enroot.conf.d"
  if same_file "$conf" "$drop_in"; then
    log "$drop_in already points at $scratch and $cache"
  else
    install -m 0644 "$conf" "$drop_in"
    log "wrote $drop_in: runtime and data under $scratch, layer cache in $cache, one directory per user"
  fi
  rm -f "$conf"
  if [[ ! -f "$ENROOT_CONF" ]]; then
    contract_warn enroot-conf "no $ENROOT_CONF from HyperPod: enroot runs with its defaults and $drop_in"
  elif move_storage_keys; then
    moved="$(grep -F "$MOVED_MARK" "$ENROOT_CONF" | sed -E 's/.*: *([A-Z_]+).*/\1/' | paste -sd' ' -)"
    contract_warn enroot-conf "$ENROOT_CONF set $moved, which the platform must own (a shared cache or lazily" \
      "made per-uid directories let one user plant a layer or another user's data directory): commented out" \
      "there (original in $ENROOT_CONF.hyperpod-original), set in $drop_in; HyperPod's other settings kept"
  fi
  bash "$HERE/enroot_dirs.sh"
  install_boot_unit
}

# hyperpod-enroot-dirs.service: the per-user directories again at every boot, before slurmd takes jobs (the NVMe may
# come back empty, and lifecycle scripts do not run after a reboot). It runs this node's own copy of the scripts.
install_boot_unit() {
  local unit f
  mkdir -p "$PLATFORM_DIR/lib"
  for f in enroot_dirs.sh lib/common.sh lib/params.py lib/safe_dirs.py; do
    same_file "$HERE/$f" "$PLATFORM_DIR/$f" || install -m 0755 "$HERE/$f" "$PLATFORM_DIR/$f"
  done
  f=lib/platform_parameters.schema.json  # what lib/params.py validates against
  same_file "$HERE/$f" "$PLATFORM_DIR/$f" || install -m 0644 "$HERE/$f" "$PLATFORM_DIR/$f"
  same_file "$PARAMS_FILE" "$PLATFORM_DIR/platform_parameters.json" ||
    install -m 0644 "$PARAMS_FILE" "$PLATFORM_DIR/platform_parameters.json"
  unit="$(mktemp)"
  # Ordered against HyperPod's units (node_contract.json, systemd-unit-names); another name loses only the order.
  write_text "$unit" <<UNIT
# Written by the HyperPod platform's install_container_runtime.sh.
[Unit]
Description=Per-user enroot directories (owner the user, mode 0700) before Slurm takes jobs
After=local-fs.target remote-fs.target dlami-nvme.service
Before=slurmd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash $PLATFORM_DIR/enroot_dirs.sh

[Install]
WantedBy=multi-user.target
UNIT
  if ! same_file "$unit" "$SYSTEMD_DIR/hyperpod-enroot-dirs.service"; then
    mkdir -p "$SYSTEMD_DIR"
    install -m 0644 "$unit" "$SYSTEMD_DIR/hyperpod-enroot-dirs.service"
    log "wrote $SYSTEMD_DIR/hyperpod-enroot-dirs.service"
    systemctl daemon-reload
  fi
  rm -f "$unit"
  systemctl is-enabled --quiet hyperpod-enroot-dirs.service || systemctl enable hyperpod-enroot-dirs.service
}

ensure_docker
report_nvidia_toolkit
install_missing_artifacts
configure_enroot
