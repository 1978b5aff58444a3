#!/bin/bash
# Builds the Debian 13 (trixie) root the real-Slurm tests run their daemons and commands in: Slurm 24.11 (the release
# HyperPod's AMI runs) whatever Debian this machine is. tests/e2e/slurm_root.py enters it (a mount namespace of its
# own per command, then chroot); `make test` runs this when the root is missing.
#
# Usage: build_slurm_root.sh ROOT
#        build_slurm_root.sh --mirror     prints the mirror it would use (OS_RELEASE and APT_ETC name other files)
# ROOT is made atomically (built beside it, renamed into place) and then never changed: ROOT/.slurm-root-built holds
# the Slurm version it carries. The Debian mirror is the one this machine's APT sources use (deb822 .sources or
# sources.list), so the build reaches nothing apt would not.
set -euo pipefail

ROOT="${1:?usage: $0 ROOT | --mirror}"
OS_RELEASE="${OS_RELEASE:-/etc/os-release}"
APT_ETC="${APT_ETC:-/etc/apt}"
SUITE=trixie
# What the e2e tests run inside the root: the Slurm daemons and clients (slurmctld, slurmd, slurmdbd and the
# client commands), Slurm's auth/jwt plugin, munge, pam_slurm_adopt with pamtester, Python with boto3 for the AWS CLI
# stand-in (tests/e2e/aws_shim.py) and for the lifecycle scripts' own Python, and curl (node contract: on the controller;
# `make attach`'s controller step fetches and uploads with it).
PACKAGES=slurmctld,slurmd,slurmdbd,slurm-client,slurm-wlm-jwt-plugin,munge,libpam-slurm-adopt,pamtester,python3
PACKAGES+=,python3-boto3,procps,iproute2,curl
# slurmdbd's MariaDB server, in a root of its own inside this one (DATABASE_ROOT): Debian 12's MariaDB 10.11. Debian
# 13's 11.8 (11.8.9+ds-0+deb13u1) fails Debian 13's slurmdbd 24.11.5 at its first query ("Number of columns in result
# (=1) set execeeds maxmimum allowed number of columns (=0)" for `select @var := concat('')`), while the same slurmdbd
# works against 10.11; HyperPod's controller runs the MariaDB of its Ubuntu 22.04 AMI, a 10.x as well.
DATABASE_SUITE=bookworm
DATABASE_ROOT=opt/mariadb-$DATABASE_SUITE
DATABASE_PACKAGES=mariadb-server
# Files the tests' users and host names come from: the host's, read live through ROOT/host-etc (bind-mounted there
# per command), so a user the test adds after a daemon started is seen by that daemon too.
HOST_FILES=(passwd group shadow gshadow hosts)

# mirror -> the URI of this machine's APT source for its own Debian release (not -security, not -updates).
mirror() {
  local codename uri
  # shellcheck source=/dev/null
  codename="$(. "$OS_RELEASE" && echo "${VERSION_CODENAME:-}")"
  [[ -n "$codename" ]] || { echo "build_slurm_root.sh: no VERSION_CODENAME in $OS_RELEASE" >&2; return 1; }
  # deb822 stanzas (blank-line separated, per file): the first URI of a `deb` stanza whose Suites name the release.
  uri="$(shopt -s nullglob; files=("$APT_ETC"/sources.list.d/*.sources)
    ((${#files[@]} == 0)) || awk -v want="$codename" '
    function flush() {
      if (!found && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && uris) { split(uris, u, " "); found = u[1] }
      uris = ""; suites = ""; types = ""
    }
    FNR == 1 { flush() }
    /^[[:space:]]*$/ { flush(); next }
    /^URIs:/ { sub(/^URIs:[[:space:]]*/, ""); uris = $0 }
    /^Suites:/ { sub(/^Suites:[[:space:]]*/, ""); suites = $0 }
    /^Types:/ { sub(/^Types:[[:space:]]*/, ""); types = $0 }
    END { flush(); print found }
  ' "${files[@]}")"
  if [[ -z "$uri" ]]; then
    # one-line style: deb [options] URI SUITE COMPONENT...
    uri="$(shopt -s nullglob; existing=()
      for f in "$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list; do [[ -f "$f" ]] && existing+=("$f"); done
      ((${#existing[@]} == 0)) || awk -v want="$codename" '
        $1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
                      if ($(i + 1) == want) { print $i; exit } }' "${existing[@]}")"
  fi
  [[ "$uri" == http*://* ]] || { echo "build_slurm_root.sh: no APT source for $codename found" >&2; return 1; }
  echo "$uri"
}

if [[ "$ROOT" == --mirror ]]; then
  mirror
  exit
fi
[[ "$(id -u)" == 0 ]] || { echo "build_slurm_root.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || PATH="$PATH:/usr/sbin"
command -v debootstrap >/dev/null || { echo "build_slurm_root.sh: debootstrap is not installed" >&2; exit 2; }
if [[ -f "$ROOT/.slurm-root-built" ]]; then
  echo "$ROOT: Slurm $(cat "$ROOT/.slurm-root-built") (built already)"
  exit 0
fi
MIRROR="$(mirror)"
mkdir -p "${ROOT%/*}"
WORK="$(mktemp -d "$ROOT.building.XXXXXX")"
chmod 0755 "$WORK" # a root directory: packages' scripts run commands in it as their own users (munge, mysql)
trap 'rm -rf "$WORK"' EXIT
start=$SECONDS
echo "building the $SUITE root for the Slurm tests in $ROOT from $MIRROR (a minute or two)"
# bootstrap SUITE DIR PACKAGES : a minimal Debian SUITE in DIR with PACKAGES; no package caches kept, the users and
# host names this machine's.
bootstrap() {
  local f
  debootstrap --variant=minbase --include="$3" "$1" "$2" "$MIRROR" >"$WORK.log" 2>&1 || {
    tail -n 30 "$WORK.log" >&2
    echo "build_slurm_root.sh: debootstrap of $1 failed (log: $WORK.log)" >&2
    exit 1
  }
  rm -f "$WORK.log"
  rm -rf "$2"/var/cache/apt/archives/*.deb "$2"/var/lib/apt/lists/*
  mkdir -p "$2/host-etc" # tests/e2e/enter_slurm_root.sh mounts the machine's /etc there
  for f in "${HOST_FILES[@]}"; do
    ln -sfn "/host-etc/$f" "$2/etc/$f"
  done
}
bootstrap "$SUITE" "$WORK" "$PACKAGES"
mkdir "$WORK/$DATABASE_ROOT" && chmod 0755 "$WORK/$DATABASE_ROOT" # its packages run commands as their users
bootstrap "$DATABASE_SUITE" "$WORK/$DATABASE_ROOT" "$DATABASE_PACKAGES"
rm -rf "${WORK:?}/$DATABASE_ROOT"/var/lib/mysql/* # the package's own database: the tests make theirs
version="$(chroot "$WORK" /usr/sbin/slurmctld -V | awk '{print $2}')"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "build_slurm_root.sh: slurmctld -V said '$version'" >&2; exit 1; }
echo "$version" >"$WORK/.slurm-root-built"
mv -T "$WORK" "$ROOT"
trap - EXIT
echo "$ROOT: Slurm $version, $(du -sm "$ROOT" | awk '{print $1}') MB, built in $((SECONDS - start)) s"
