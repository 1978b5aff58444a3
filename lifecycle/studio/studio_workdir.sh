#!/bin/bash
# studio_workdir.sh PATHS_FILE SBATCH [ARGS...] : runs SBATCH so that the job starts where the caller is, as the cluster
# sees it.
# Installed by slurm_login_node.sh (root-owned, $R/usr/local/lib/hyperpod/studio-workdir); the sbatch wrapper on PATH
# execs it. sbatch takes the job's working directory from getcwd(), which in a Studio space is under Studio's FSx mount
# (/mnt/custom-file-systems/fsx_lustre/fs-...), a path no node has. With the pairs fsx_paths.sh recorded
# (PATHS_FILE: "<studio mount> <cluster path>" lines), a directory under the mount becomes --chdir=<cluster path>/<rest>,
# given first so that a -D/--chdir on the command line still wins; a script with an #SBATCH -D/--chdir directive keeps
# its own. Elsewhere (the home volume) sbatch runs unchanged, with a note that the nodes do not have that directory.
# The job's SLURM_SUBMIT_DIR stays Studio's path: sbatch sets it from getcwd() over any value in its environment or
# in --export (seen with real Slurm in tests/e2e/test_studio_slurm_login.py), so job scripts should use the directory
# they start in ($PWD), not $SLURM_SUBMIT_DIR.
set -u
paths_file=$1
sbatch=$2
shift 2

chooses_own_directory() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      -D | -D?* | --chdir | --chdir=*) return 0 ;;
    esac
    if [[ -f "$arg" && -r "$arg" ]] && grep -qE '^#SBATCH[[:space:]]+(-D|--chdir)' "$arg" 2>/dev/null; then
      return 0
    fi
  done
  return 1
}

if [[ -r "$paths_file" ]] && ! chooses_own_directory "$@"; then
  cwd="$(pwd -P)"
  first=""
  while read -r studio cluster; do
    [[ -n "$studio" && -n "$cluster" ]] || continue
    first="${first:-$cluster}"
    if [[ "$cwd" == "$studio" || "$cwd" == "$studio"/* ]]; then
      exec "$sbatch" --chdir="$cluster${cwd#"$studio"}" "$@"
    fi
  done <"$paths_file"
  if [[ -n "$first" ]]; then
    echo "sbatch: note: $cwd is not on the cluster's FSx, so the job starts in /tmp on its node; submit from under" \
      "$first (your FSx partition, the same path on the cluster) or pass --chdir" >&2
  fi
fi
exec "$sbatch" "$@"
