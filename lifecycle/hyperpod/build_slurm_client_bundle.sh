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
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

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

# libs FILE... -> "soname<TAB>path" for every library the files load that is not glibc's; fails on one not found.
libs() {
  local f out
  for f in "$@"; do
    out="$(ldd "$f" 2>&1)" || { [[ "$out" == *"not a dynamic executable"* ]] && continue; die "ldd $f: $out"; }
    GLIBC_LIBS="$GLIBC_LIBS" awk -v file="$f" '
      BEGIN { glibc = ENVIRON["GLIBC_LIBS"] }
      $2 == "=>" && $3 == "not" { print "MISSING\t" file "\t" $1; next }
      $2 == "=>" && $3 ~ /^\// { n = $1; if (n !~ glibc) print n "\t" $3 }' <<<"$out"
  done | sort -u
}

main() {
  local version dir work root cmd path interp plugins=() missing missing_cmd name src rest tarball sha n=0
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
  # Plugins are what Slurm dlopen()s by path; copies of real files (a symlink would point into this node).
  for src in "$dir"/*.so; do
    [[ -f "$src" ]] || continue
    install -m 0755 "$(readlink -f "$src")" "$root/lib/slurm/${src##*/}"
    plugins+=("$root/lib/slurm/${src##*/}")
  done
  missing=()
  while IFS=$'\t' read -r name src rest; do
    if [[ "$name" == MISSING ]]; then
      # A plugin for hardware or a service this node lacks (e.g. NVML on a CPU controller): clients never load it.
      missing+=("${src##*/} needs $rest")
      continue
    fi
    # libslurmfull.so and friends are in lib/slurm already; a second copy would only grow the bundle.
    [[ -e "$root/lib/slurm/$name" ]] && continue
    install -m 0644 "$(readlink -f "$src")" "$root/lib/$name"
    n=$((n + 1))
  done < <(libs "$root"/libexec/* "${plugins[@]}")
  # A command whose library is missing here would not run on the controller either.
  missing_cmd="$(libs "$root"/libexec/* | awk -F'\t' '$1 == "MISSING" && !found {print $2 " needs " $3; found = 1}')"
  [[ -z "$missing_cmd" ]] || die "${missing_cmd#"$root"/libexec/}, which is not installed"
  ((${#missing[@]} == 0)) || log "plugins whose libraries this node lacks (bundled as they are): ${missing[*]}"
  interp="$(for cmd in "$root"/libexec/*; do ldd "$cmd" 2>/dev/null; done |
    awk '$1 ~ /ld-linux|ld64/ && !found {print ($3 ~ /^\//) ? $3 : $1; found = 1}')" # no early exit: pipefail
  [[ "$interp" == /* ]] || die "cannot work out the commands' program interpreter from ldd"
  echo "$version" >"$root/VERSION"
  echo "$interp" >"$root/INTERPRETER"
  sort -o "$root/COMMANDS" "$root/COMMANDS"
  tarball="$work/bundle.tar.gz"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$work" -cf - slurm-client |
    gzip -n -9 >"$tarball"
  sha="$(sha256sum "$tarball" | awk '{print $1}')"
  install -m 0644 "$tarball" "$OUT_DIR/slurm-client-$version-$sha.tar.gz"
  log "Slurm $version client bundle: $(wc -l <"$root/COMMANDS") commands, ${#plugins[@]} plugins, $n libraries," \
    "$(du -k "$tarball" | awk '{print $1}') KiB, sha256 $sha"
  printf '%s\t%s\n' "$OUT_DIR/slurm-client-$version-$sha.tar.gz" "$sha"
}

main
