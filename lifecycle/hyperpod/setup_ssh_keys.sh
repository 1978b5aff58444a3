#!/usr/bin/env bash
# Passwordless SSH between cluster nodes for every user in the parameters, as MPI launchers and pdsh need: one key
# pair per user in ~/.ssh on the shared file system (the first node to get here makes it, under a lock; later
# nodes find it), its public key in authorized_keys, and an ssh client setting for the cluster's node names.
# Homes on a node's local disk (no FSx) are not shared, so nothing is generated there.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

SSH_CLIENT_CONF="${SSH_CLIENT_CONF:-/etc/ssh/ssh_config.d/60-hyperpod-cluster.conf}"

HOME_ROOT="$(home_root)"
if [[ "$HOME_ROOT" == "$DEFAULT_HOME_ROOT" ]]; then
  log "homes are on the local disk ($HOME_ROOT): no shared SSH keys"
  exit 0
fi

# HyperPod names Slurm nodes ip-A-B-C-D after their address. A node replaced later may reuse a name with a new host
# key, so keys are accepted on first use and kept per user rather than pinned cluster-wide.
client_conf="$(mktemp)"
cat >"$client_conf" <<'CONF'
# Written by the HyperPod platform's setup_ssh_keys.sh: SSH between this cluster's nodes.
Host ip-*-*-*-*
    StrictHostKeyChecking accept-new
    UserKnownHostsFile ~/.ssh/known_hosts_cluster
    IdentityFile ~/.ssh/id_ed25519_cluster
CONF
mkdir -p "$(dirname "$SSH_CLIENT_CONF")"
if ! cmp -s "$client_conf" "$SSH_CLIENT_CONF"; then
  install -m 0644 "$client_conf" "$SSH_CLIENT_CONF"
  log "wrote $SSH_CLIENT_CONF"
fi
rm -f "$client_conf"

# ensure_keys NAME UID GID : key pair and authorized_keys in NAME's home, owned by NAME, nothing group-writable.
ensure_keys() {
  local name=$1 uid=$2 gid=$3 dir key
  dir="$HOME_ROOT/$name/.ssh"
  key="$dir/id_ed25519_cluster"
  install -d -m 0700 -o "$uid" -g "$gid" "$dir"
  (
    flock -w 120 9 || die "timed out waiting for the lock on $dir"
    if [[ ! -s "$key" ]]; then
      ssh-keygen -q -t ed25519 -N "" -C "$name@hyperpod-cluster" -f "$key"
      log "generated the cluster SSH key of $name"
    fi
    touch "$dir/authorized_keys"
    grep -qxF "$(cat "$key.pub")" "$dir/authorized_keys" || cat "$key.pub" >>"$dir/authorized_keys"
    chown "$uid:$gid" "$key" "$key.pub" "$dir/authorized_keys"
    chmod 0600 "$key" "$dir/authorized_keys"
    chmod 0644 "$key.pub"
  ) 9>"$dir/.hyperpod-keys.lock"
  chown "$uid:$gid" "$dir/.hyperpod-keys.lock"
}

users="$(params_py users "$PARAMS_FILE")"
while IFS=$'\t' read -r name uid gid _; do
  [[ -n "$name" ]] || continue
  ensure_keys "$name" "$uid" "$gid"
done <<<"$users"
