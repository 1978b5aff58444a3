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
# package_version_arch.deb.
# shellcheck disable=SC2154 # download_dir is the caller's (made and removed there)
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
  retry_backoff 5 aws s3 cp --only-show-errors "$uri" "$download_dir/$file" \
    || die "artifact $name: could not download $uri"
  echo "$sha  $file" >"$download_dir/$file.sha256"
  (cd "$download_dir" && sha256sum --check --quiet "$file.sha256") \
    || die "artifact $name: checksum mismatch for $uri (expected sha256 $sha); nothing installed"
  verified+=("$download_dir/$file")
}
