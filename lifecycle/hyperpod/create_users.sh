#!/usr/bin/env bash
# Creates the users from the parameters file with fixed uids/gids, so files on FSx have the
# same owner on every node and in SageMaker Studio. Runs on every node: Slurm jobs run as them.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

HOME_ROOT="$(home_root)"
mkdir -p "$HOME_ROOT"
log "home directories under $HOME_ROOT"

# field N of a getent line, or "" when the entry does not exist
getent_field() {
  local entry
  entry="$(getent "$1" "$2" || true)"
  [[ -n "$entry" ]] && cut -d: -f"$3" <<<"$entry"
  return 0
}

ensure_group() {
  local name=$1 gid=$2 current owner
  current="$(getent_field group "$name" 3)"
  if [[ -n "$current" ]]; then
    [[ "$current" == "$gid" ]] || die "group $name exists with gid $current, expected $gid; fix the node or the users list"
    return 0
  fi
  owner="$(getent_field group "$gid" 1)"
  if [[ -n "$owner" ]]; then
    # Users may share a primary group: the first one listed names it.
    log "gid $gid already exists as group $owner; $name joins it"
    return 0
  fi
  groupadd --gid "$gid" "$name"
  log "created group $name ($gid)"
}

ensure_user() {
  local name=$1 uid=$2 gid=$3 current owner
  current="$(getent_field passwd "$name" 3)"
  if [[ -n "$current" ]]; then
    [[ "$current" == "$uid" ]] || die "user $name exists with uid $current, expected $uid; fix the node or the users list"
    log "user $name ($uid) already exists"
    return 0
  fi
  owner="$(getent_field passwd "$uid" 1)"
  [[ -z "$owner" ]] || die "uid $uid for user $name is already used by user $owner"
  # On FSx the home may already exist (created by another node); useradd then keeps it as is.
  useradd --uid "$uid" --gid "$gid" --create-home --home-dir "$HOME_ROOT/$name" --shell /bin/bash "$name"
  log "created user $name ($uid:$gid), home $HOME_ROOT/$name"
}

ensure_sudo() {
  local name=$1 sudo=$2 tmp
  local file="$SUDOERS_DIR/90-hyperpod-$name"
  if [[ "$sudo" != "true" ]]; then
    if [[ -e "$file" ]]; then
      rm -f "$file"
      log "removed sudo for $name"
    fi
    return 0
  fi
  tmp="$(mktemp)"
  echo "$name ALL=(ALL) NOPASSWD:ALL" >"$tmp"
  if [[ -f "$file" ]] && cmp -s "$tmp" "$file"; then
    rm -f "$tmp"
    return 0
  fi
  if command -v visudo >/dev/null; then
    visudo -cf "$tmp" >/dev/null || { rm -f "$tmp"; die "sudoers entry for $name does not validate"; }
  fi
  mkdir -p "$SUDOERS_DIR"
  install -m 0440 "$tmp" "$file"
  rm -f "$tmp"
  log "granted sudo to $name"
}

users="$(params_py users "$PARAMS_FILE")"
while IFS=$'\t' read -r name uid gid sudo; do
  [[ -n "$name" ]] || continue
  ensure_group "$name" "$gid"
  ensure_user "$name" "$uid" "$gid"
  ensure_sudo "$name" "$sudo"
done <<<"$users"

# Studio's shared FSx partition belongs to this group; every user joins it so they can write there from the
# cluster too (in Studio it is their primary group).
shared_name="$(param shared_group.name)"
shared_gid="$(param shared_group.gid)"
if [[ -n "$shared_name" && -n "$shared_gid" ]]; then
  ensure_group "$shared_name" "$shared_gid"
  members=",$(getent_field group "$shared_name" 4),"
  while IFS=$'\t' read -r name _; do
    [[ -n "$name" && "$members" != *",$name,"* ]] || continue
    usermod -aG "$shared_name" "$name"
    log "added $name to group $shared_name"
  done <<<"$users"
fi
