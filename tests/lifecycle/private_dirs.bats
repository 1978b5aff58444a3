#!/usr/bin/env bats
# The users' private directories the Slurm node scripts make on FSx are exactly the roots platform_config/storage.py
# private_fsx_roots lists (besides Studio's partitions, which the partition handlers make): the storage stack denies
# every principal but FSx the S3 prefixes that mirror those roots (tests/test_storage.py checks the template against
# the list), so a private directory the scripts make and the list misses would be readable and writable through S3.

load test_helper

# found_private_roots : each directory under $T/fsx holding an entry that is one user's own and closed to others
# (no read for others; not what is inside one), as a path under the mount; one per line, sorted
found_private_roots() {
  find "$T/fsx" -mindepth 1 -type d ! -user 0 ! -perm -o=r -printf '%h\n' -prune | sed "s|^$T/fsx||" | sort -u
}

@test "the private directories the node scripts make on FSx are the roots private_fsx_roots lists" {
  set_param container_runtime.enabled true container_runtime.docker_apt_version '"24.0.7-0ubuntu2~22.04.1"' \
    container_runtime.artifacts '[]'
  add_artifacts enroot enroot_3.5.0-1_amd64.deb "fake enroot" enroot-caps enroot+caps_3.5.0-1_amd64.deb "fake enroot caps"
  run bash "$SCRIPTS/mount_fsx.sh"
  [ "$status" -eq 0 ]
  for script in create_users.sh setup_ssh_keys.sh install_container_runtime.sh; do
    run bash "$SCRIPTS/$script"
    echo "$output"
    [ "$status" -eq 0 ]
  done
  found="$(found_private_roots)"
  listed="$(cd "$REPO_ROOT" && .venv/bin/python -c '
import json, sys
from platform_config.storage import private_fsx_roots, Storage
params = json.load(open(sys.argv[1]))
storage = Storage.model_validate({"checkpoint_dir": params["fsx"]["checkpoint_dir"]})
print("\n".join(sorted(private_fsx_roots(storage, None))))' "$PARAMS_FILE")"
  echo "found by the scripts:"$'\n'"$found"$'\n'"listed:"$'\n'"$listed"
  [ -n "$found" ]
  [ "$found" = "$listed" ]
}
