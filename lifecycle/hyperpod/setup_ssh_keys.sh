#!/usr/bin/env bash
# Passwordless SSH between cluster nodes for every user in the parameters, as MPI launchers and pdsh need: one key
# pair per user in ~/.ssh on the shared file system (the first node to get here makes it; later nodes find it), its
# public key in authorized_keys, and an ssh client setting for the cluster's node names.
# Homes on a node's local disk (no FSx) are not shared, so nothing is generated there.
#
# Everything inside a home runs AS its user (lib/user_paths.sh as_user): the home, ~/.ssh and every file in it are
# the user's, and cluster nodes keep root on FSx, so root following a link the user planted there would hand them any
# file on every node. As the user, a planted link gets them only what they could already write. Root keeps one lock,
# in its own directory, so two runs on a node never overlap; nodes racing for a user's first key need none: a key
# becomes id_ed25519_cluster by a hard link, which only one node can make. A user whose ~/.ssh cannot be set up (they
# broke it, or it blocks) gets a warning and is skipped; the others and the node carry on.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/user_paths.sh
source "$HERE/lib/user_paths.sh"

SSH_CLIENT_CONF="${SSH_CLIENT_CONF:-/etc/ssh/ssh_config.d/60-hyperpod-cluster.conf}"

# The parameters this script reads (FSx's mount path, the users), in one Python start: from memory below.
params fsx.mount_path
HOME_ROOT="$(home_root)"
if [[ "$HOME_ROOT" == "$DEFAULT_HOME_ROOT" ]]; then
  log "homes are on the local disk ($HOME_ROOT): no shared SSH keys"
  exit 0
fi

# HyperPod names Slurm nodes ip-A-B-C-D after their address. A node replaced later may reuse a name with a new host
# key, so keys are accepted on first use and kept per user rather than pinned cluster-wide.
client_conf="$(mktemp)"
write_text "$client_conf" <<'CONF'
# Written by the HyperPod platform's setup_ssh_keys.sh: SSH between this cluster's nodes.
Host ip-*-*-*-*
    StrictHostKeyChecking accept-new
    UserKnownHostsFile ~/.ssh/known_hosts_cluster
    IdentityFile ~/.ssh/id_ed25519_cluster
CONF
parent_dir "$SSH_CLIENT_CONF"
[[ -d "$PARENT" ]] || mkdir -p "$PARENT"
if ! same_file "$client_conf" "$SSH_CLIENT_CONF"; then
  install -m 0644 "$client_conf" "$SSH_CLIENT_CONF"
  log "wrote $SSH_CLIENT_CONF"
fi
rm -f "$client_conf"

[[ -d "$STATE_DIR" ]] || mkdir -p "$STATE_DIR"
ensure_root_dir "$LOCK_DIR" 0700 || die "cannot keep root's lock: $PROBLEM"
umask 077 # 0600: a lock anybody may open, anybody may hold
exec 9>"$LOCK_DIR/setup_ssh_keys.lock"
umask 022
flock -w 600 9 || die "another setup_ssh_keys.sh run on this node holds $LOCK_DIR/setup_ssh_keys.lock"

# user_keys NAME : runs as the user, in their home. Never call it as root.
user_keys() {
  set -euo pipefail
  local name=$1 key=.ssh/id_ed25519_cluster new pub material
  umask 077
  cd "$HOME"
  [[ -d .ssh ]] || mkdir -m 0700 .ssh
  chmod 0700 .ssh
  if [[ ! -e "$key" ]]; then
    new="$(mktemp -d .ssh/.hyperpod-keygen.XXXXXX)"
    ssh-keygen -q -t ed25519 -N "" -C "$name@hyperpod-cluster" -f "$new/key"
    # A hard link fails when the name exists: of nodes racing here, exactly one key wins.
    if ln "$new/key" "$key" 2>/dev/null; then
      mv -f "$new/key.pub" "$key.pub"
      echo "generated the cluster SSH key of $name"
    fi
    rm -rf "$new"
  fi
  # The public key from the private one: a node that lost the race may get here before the winner's .pub.
  pub="$(ssh-keygen -y -f "$key")"
  [[ "$pub" == ssh-ed25519\ * ]] || { echo "$HOME/$key does not hold an ed25519 key" >&2; return 1; }
  read -r pub material _ <<<"$pub" # the key's type and material, without its comment
  pub="$pub $material"
  touch .ssh/authorized_keys
  grep -qF "$pub" .ssh/authorized_keys || echo "$pub $name@hyperpod-cluster" >>.ssh/authorized_keys
  chmod 0600 "$key" .ssh/authorized_keys
  if [[ -e "$key.pub" ]]; then chmod 0644 "$key.pub"; fi
}

users="$(params_py users "$PARAMS_FILE")"
while IFS=$'\t' read -r name uid gid _; do
  [[ -n "$name" ]] || continue
  home="$HOME_ROOT/$name"
  user_dir_problem "$HOME_ROOT" "$name" "$uid"
  problem="$PROBLEM"
  [[ -e "$home" || -n "$problem" ]] || problem="$home does not exist"
  if [[ -z "$problem" ]] && as_user "$uid" "$gid" env HOME="$home" bash -c "$(declare -f user_keys); user_keys \"\$1\"" \
    _ "$name" 9>&-; then
    continue
  fi
  log "WARNING: could not set up the cluster SSH key of $name${problem:+: $problem} (see above); the other users" \
    "and this node carry on"
done <<<"$users"
