#!/bin/bash
# studio_workdir.sh PATHS_FILE SBATCH [ARGS...] : runs SBATCH so that the job starts where the caller is, as the cluster
# sees it.
# Installed by slurm_login_node.sh (root-owned, $R/usr/local/lib/hyperpod/studio-workdir); the sbatch wrapper on PATH
# execs it. sbatch takes the job's working directory from getcwd(), which in a Studio space is under Studio's FSx mount
# (/mnt/custom-file-systems/fsx_lustre/fs-...), a path no node has. With the pairs fsx_paths.sh recorded
# (PATHS_FILE: "<studio mount> <cluster path>" lines), a directory under the mount becomes --chdir=<cluster path>/<rest>,
# given first so that a -D/--chdir on the command line still wins; a script with an #SBATCH -D/--chdir directive keeps
# its own. SLURM_SUBMIT_DIR is set to the same cluster path. Elsewhere (the home volume) sbatch runs unchanged, with a
# note that the nodes do not have that directory.
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
      SLURM_SUBMIT_DIR="$cluster${cwd#"$studio"}"
      export SLURM_SUBMIT_DIR
      exec "$sbatch" --chdir="$SLURM_SUBMIT_DIR" "$@"
    fi
  done <"$paths_file"
  if [[ -n "$first" ]]; then
    echo "sbatch: note: $cwd is not on the cluster's FSx, so the job starts in /tmp on its node; submit from under" \
      "$first (your FSx partition, the same path on the cluster) or pass --chdir" >&2
  fi
fi
exec "$sbatch" "$@"
