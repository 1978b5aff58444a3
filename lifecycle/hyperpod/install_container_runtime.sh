#!/usr/bin/env bash
# Optional container runtime: docker.io from the Ubuntu archive at a pinned version, and
# enroot/pyxis .deb packages from the operator's own S3 mirror, checksum-verified before install.
# Nothing is fetched from GitHub: nodes may have no internet route, and what runs must be what
# the operator reviewed.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

APT_ATTEMPTS="${APT_ATTEMPTS:-3}"
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=300)

if [[ "$(param container_runtime.enabled)" != "true" ]]; then
  log "container runtime disabled: skipping"
  exit 0
fi

installed_version() {
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true
}

apt_updated=false
apt_install() {
  if [[ "$apt_updated" == false ]]; then
    retry "$APT_ATTEMPTS" apt-get "${APT_OPTS[@]}" update
    apt_updated=true
  fi
  retry "$APT_ATTEMPTS" apt-get "${APT_OPTS[@]}" install "$@"
}

install_docker() {
  local version
  version="$(param container_runtime.docker_apt_version)"
  if [[ -z "$version" ]]; then
    log "container_runtime.docker_apt_version is empty: not installing docker"
    return 0
  fi
  if [[ "$(installed_version docker.io)" == "$version" ]]; then
    log "docker.io $version already installed"
    return 0
  fi
  apt_install "docker.io=$version"
  # Keep unattended upgrades from moving the pin.
  apt-mark hold docker.io
  systemctl enable --now docker
  log "installed docker.io $version"
}

# fetch_artifact NAME S3_URI SHA256 : downloads into $download_dir and verifies it, unless the
# same version is installed. The file name must follow Debian's package_version_arch.deb.
fetch_artifact() {
  local name=$1 uri=$2 sha=$3 file package version
  file="$(basename "$uri")"
  [[ "$file" =~ ^([^_]+)_([^_]+)_([^_]+)\.deb$ ]] \
    || die "artifact $name: $file is not named package_version_arch.deb"
  package="${BASH_REMATCH[1]}"
  version="${BASH_REMATCH[2]}"
  if [[ "$(installed_version "$package")" == "$version" ]]; then
    log "artifact $name: $package $version already installed"
    return 0
  fi
  retry 3 aws s3 cp --only-show-errors "$uri" "$download_dir/$file" \
    || die "artifact $name: could not download $uri"
  echo "$sha  $file" >"$download_dir/$file.sha256"
  (cd "$download_dir" && sha256sum --check --quiet "$file.sha256") \
    || die "artifact $name: checksum mismatch for $uri (expected sha256 $sha); nothing installed"
  verified+=("$download_dir/$file")
}

install_docker

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
