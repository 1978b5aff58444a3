#!/bin/bash
# Builds a self-contained client bundle of THIS node's Slurm build (run on the controller by publish_slurm_login.sh):
# the client commands, munge's (for shared mode), the Slurm plugin directory (libslurmfull.so lives there) and every
# shared library they load except glibc's own, so a SageMaker Studio image without Slurm, or with another release,
# runs exactly the controller's client without apt or internet (lifecycle/studio/slurm_login_node.sh installs it).
#
# Usage: build_slurm_client_bundle.sh OUT_DIR
# Writes OUT_DIR/slurm-client-<version>-<sha256>.tar.gz and prints its path and sha256 (tab-separated). The archive
# is byte-for-byte reproducible (sorted names, fixed mtimes and owners, gzip without a timestamp): the same build
# gives the same sha256, so publishing again changes nothing.
# gzip -1: this runs at every controller boot, and on Debian's Slurm 22.05 (92 MB uncompressed) -1 takes 1.3 s of
# CPU for 39 MB, -6 4 s for 36 MB and -9 13 s for 36 MB. Studio downloads the bundle from S3 in the region once per
# build (it keeps it while the sha256 stays the same) and gunzip is as fast whatever the level, so the 3 MB cost less
# than the seconds saved at each boot. The level is part of the bytes: changing it changes the sha256 once.
#
# Layout (top directory slurm-client/):
#   VERSION       the Slurm version `sinfo --version` reports
#   INTERPRETER   the program interpreter the binaries were linked against (glibc's ld.so)
#   COMMANDS      the commands in libexec/, one a line
#   libexec/      the real executables
#   lib/          their non-glibc shared libraries (libslurm*, libmunge, libjwt, ...), dereferenced, by soname
#   lib/slurm/    the Slurm plugin directory
# glibc is not bundled: it must match the ld.so that loads it, which is the Studio image's own; the binaries need
# a glibc at least as new as the controller's (the install step runs `sinfo --version`, which fails otherwise).
set -euo pipefail
# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

OUT_DIR="${1:?usage: $0 OUT_DIR}"
SLURM_CONF="${SLURM_CONF:-$SLURM_CONF_DIR/slurm.conf}"
# What a Studio login node runs. salloc/srun need the Studio side reachable from the nodes (README); bundled anyway.
CLIENT_COMMANDS=(sinfo sbatch squeue scancel sacct srun salloc sacctmgr sshare sprio sstat scontrol)
REQUIRED_COMMANDS=(sinfo sbatch squeue scancel sacct scontrol)
MUNGE_COMMANDS=(munge unmunge munged)
# glibc's libraries and the kernel's vDSO: never bundled (they must match the Studio image's ld.so).
GLIBC_LIBS='^(linux-vdso|linux-gate|ld-linux[^/]*|ld64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|libmvec|libnss_[a-z]+|libthread_db|libc_malloc_debug|libmemusage|libpcprofile|libSegFault)\.so'

# plugin_dir -> SLURM_PLUGIN_DIR, else PluginDir from slurm.conf (first entry), else the directory of the
# libslurmfull.so sinfo loads (Slurm installs it into its plugin directory, pkglibdir).
plugin_dir() {
  local dir="${SLURM_PLUGIN_DIR:-}"
  if [[ -z "$dir" && -r "$SLURM_CONF" ]]; then
    dir="$(sed -n 's/^[[:space:]]*[Pp][Ll][Uu][Gg][Ii][Nn][Dd][Ii][Rr][[:space:]]*=[[:space:]]*\([^[:space:]#:]*\).*/\1/p' \
      "$SLURM_CONF" | tail -n1)"
  fi
  if [[ -z "$dir" ]]; then
    dir="$(ldd "$(command -v sinfo)" | awk '$1 ~ /^libslurmfull\.so/ && $3 ~ /^\// {print $3}')"
    dir="${dir%/*}"
  fi
  if [[ -z "$dir" ]] || ! compgen -G "$dir/auth_*.so" >/dev/null; then
    die "cannot find the Slurm plugin directory (tried SLURM_PLUGIN_DIR, PluginDir in $SLURM_CONF, libslurmfull.so's" \
      "directory '$dir'); set SLURM_PLUGIN_DIR"
  fi
  echo "$dir"
}

# dependencies FILE... -> what ldd reports for the files, from one run of ldd for them all, as lines of
#   LIB<TAB>soname<TAB>path           a library some file loads that is not glibc's (once per soname and path)
#   MISSING<TAB>file<TAB>soname       a library a file needs that this node lacks
#   INTERP<TAB>file<TAB>path          the program interpreter a file was linked against
# Files that are not dynamic executables are passed over; any other ldd error stops the build. Needs two files or
# more: ldd then heads each file's lines with "FILE:" (the required commands alone are six).
dependencies() {
  local out deps
  out="$(ldd "$@" 2>&1)" || true # non-zero when a file is not dynamic: the lines tell which
  deps="$(GLIBC_LIBS="$GLIBC_LIBS" awk '
    BEGIN { glibc = ENVIRON["GLIBC_LIBS"] }
    /^[^\t].*:$/ { file = substr($0, 1, length($0) - 1); next }
    /^[^\t]/ { print "ERROR\t" $0; next }
    $1 ~ /ld-linux|ld64/ { print "INTERP\t" file "\t" (($3 ~ /^\//) ? $3 : $1) }
    $2 == "=>" && $3 == "not" { print "MISSING\t" file "\t" $1; next }
    $2 == "=>" && $3 ~ /^\// && $1 !~ glibc && !seen[$1 "\t" $3]++ { print "LIB\t" $1 "\t" $3 }' <<<"$out")"
  if [[ "$deps" == *ERROR$'\t'* ]]; then
    die "ldd: $(awk -F'\t' '$1 == "ERROR" {print $2}' <<<"$deps" | head -n3)"
  fi
  printf '%s\n' "$deps"
}

main() {
  local version dir work root cmd path interp="" sources=() plugins=() missing kind name src tarball sha n=0
  command -v sinfo >/dev/null || die "no sinfo on PATH ($PATH)"
  if [[ -x "$SLURM_BIN_DIR/sinfo" ]]; then PATH="$SLURM_BIN_DIR:$PATH"; fi
  version="$(SLURM_CONF="$SLURM_CONF" sinfo --version | awk '{print $2}')"
  [[ "$version" =~ ^[0-9]+\.[0-9]+[.0-9A-Za-z-]*$ ]] || die "unexpected 'sinfo --version' output: '$version'"
  dir="$(plugin_dir)"
  mkdir -p "$OUT_DIR"
  work="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now: this run's directory
  trap "rm -rf '$work'" RETURN
  root="$work/slurm-client"
  mkdir -p "$root/libexec" "$root/lib/slurm"
  for cmd in "${CLIENT_COMMANDS[@]}" "${MUNGE_COMMANDS[@]}"; do
    # Slurm's commands from the installation sinfo belongs to (HyperPod: SLURM_BIN_DIR, /opt/slurm/bin), never
    # from another one further down PATH; munge's from PATH.
    if [[ " ${CLIENT_COMMANDS[*]} " == *" $cmd "* && -x "$SLURM_BIN_DIR/sinfo" ]]; then
      path="$SLURM_BIN_DIR/$cmd"
      [[ -x "$path" ]] || path=""
    else
      path="$(command -v "$cmd")" || path=""
    fi
    if [[ "$path" != /* ]]; then
      [[ " ${REQUIRED_COMMANDS[*]} " != *" $cmd "* ]] || die "the Slurm client command $cmd is not installed"
      log "no $cmd here; the bundle goes without it"
      continue
    fi
    install -m 0755 "$(readlink -f "$path")" "$root/libexec/$cmd"
    echo "$cmd" >>"$root/COMMANDS"
  done
  # Plugins are what Slurm dlopen()s by path; copies of real files (install copies what a symlink points to: a
  # symlink would point into this node).
  for src in "$dir"/*.so; do
    if [[ -f "$src" ]]; then sources+=("$src") plugins+=("$root/lib/slurm/${src##*/}"); fi
  done
  install -m 0755 -t "$root/lib/slurm" "${sources[@]}"
  dependencies "$root"/libexec/* "${plugins[@]}" >"$work/dependencies"
  missing=()
  while IFS=$'\t' read -r kind name src; do
    case "$kind" in
      MISSING)
        # A command whose library is missing here would not run on the controller either.
        [[ "$name" != "$root/libexec/"* ]] || die "${name#"$root"/libexec/} needs $src, which is not installed"
        # A plugin for hardware or a service this node lacks (e.g. NVML on a CPU controller): clients never load it.
        missing+=("${name##*/} needs $src")
        ;;
      LIB)
        # libslurmfull.so and friends are in lib/slurm already; a second copy would only grow the bundle.
        [[ -e "$root/lib/slurm/$name" ]] && continue
        install -m 0644 "$src" "$root/lib/$name"
        n=$((n + 1))
        ;;
      INTERP)
        [[ -n "$interp" || "$name" != "$root/libexec/"* ]] || interp="$src"
        ;;
    esac
  done <"$work/dependencies"
  ((${#missing[@]} == 0)) || log "plugins whose libraries this node lacks (bundled as they are): ${missing[*]}"
  [[ "$interp" == /* ]] || die "cannot work out the commands' program interpreter from ldd"
  echo "$version" >"$root/VERSION"
  echo "$interp" >"$root/INTERPRETER"
  sort -o "$root/COMMANDS" "$root/COMMANDS"
  tarball="$work/bundle.tar.gz"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$work" -cf - slurm-client |
    gzip -n -1 >"$tarball"
  sha="$(sha256sum "$tarball" | awk '{print $1}')"
  install -m 0644 "$tarball" "$OUT_DIR/slurm-client-$version-$sha.tar.gz"
  log "Slurm $version client bundle: $(wc -l <"$root/COMMANDS") commands, ${#plugins[@]} plugins, $n libraries," \
    "$(du -k "$tarball" | awk '{print $1}') KiB, sha256 $sha"
  printf '%s\t%s\n' "$OUT_DIR/slurm-client-$version-$sha.tar.gz" "$sha"
}

main
