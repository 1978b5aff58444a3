# shellcheck shell=bash
# Installing Debian packages from the operator's S3 mirror, checksum-verified before any is installed
# (install_container_runtime.sh, install_node_metrics.sh). Sourced after common.sh, never run.
# Nothing is fetched from GitHub: nodes may have no internet route, and what runs must be what was reviewed.

APT_ATTEMPTS="${APT_ATTEMPTS:-3}"
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=300)

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

# fetch_artifact NAME S3_URI SHA256 : downloads into $download_dir and verifies it, unless the same version is
# installed; appends the verified file to the caller's `verified` array. The file name must follow Debian's
# package_version_arch.deb. Logs the reason and returns 1 on any failure, so the caller can clean up before it dies.
# shellcheck disable=SC2154 # download_dir and verified are install_artifacts' locals
fetch_artifact() {
  local name=$1 uri=$2 sha=$3 file package version
  file="$(basename "$uri")"
  if [[ ! "$file" =~ ^([^_]+)_([^_]+)_([^_]+)\.deb$ ]]; then
    log "ERROR: artifact $name: $file is not named package_version_arch.deb" >&2
    return 1
  fi
  package="${BASH_REMATCH[1]}"
  version="${BASH_REMATCH[2]}"
  if [[ "$(installed_version "$package")" == "$version" ]]; then
    log "artifact $name: $package $version already installed"
    return 0
  fi
  if ! retry_backoff 5 aws s3 cp --only-show-errors "$uri" "$download_dir/$file"; then
    log "ERROR: artifact $name: could not download $uri" >&2
    return 1
  fi
  echo "$sha  $file" >"$download_dir/$file.sha256"
  if ! (cd "$download_dir" && sha256sum --check --quiet "$file.sha256"); then
    log "ERROR: artifact $name: checksum mismatch for $uri (expected sha256 $sha); nothing installed" >&2
    return 1
  fi
  verified+=("$download_dir/$file")
}

# install_artifacts SECTION [WANTED] : the artifacts platform_parameters.json lists under SECTION (those the function
# WANTED NAME accepts, when given), all downloaded and verified before one apt call installs them. Any failure
# installs none and ends the script; the download directory is removed either way.
install_artifacts() {
  local section=$1 wanted=${2:-} listing name uri sha download_dir verified=()
  listing="$(params_py artifacts "$PARAMS_FILE" "$section")" || die "could not read $section.artifacts from $PARAMS_FILE"
  download_dir="$(mktemp -d)"
  while IFS=$'\t' read -r name uri sha; do
    [[ -n "$name" ]] || continue
    [[ -z "$wanted" ]] || "$wanted" "$name" || continue
    fetch_artifact "$name" "$uri" "$sha" || { rm -rf "$download_dir"; exit 1; }
  done <<<"$listing"
  if ((${#verified[@]})); then
    apt_install "${verified[@]}" || { rm -rf "$download_dir"; die "apt could not install ${verified[*]##*/}"; }
    log "installed: ${verified[*]##*/}"
  fi
  rm -rf "$download_dir"
}
