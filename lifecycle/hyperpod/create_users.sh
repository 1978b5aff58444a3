#!/usr/bin/env bash
# Creates the users from the parameters file with fixed uids/gids, so files on FSx have the
# same owner on every node and in SageMaker Studio. Runs on every node: Slurm jobs run as them.
# Runs again whenever the parameters change (sync_users.sh): a user this script created on this node and no longer
# listed is locked (never deleted: the home on FSx is the user's data), and every sudoers file of ours that the list
# no longer asks for is removed.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

HOME_ROOT="$(home_root)"
mkdir -p "$HOME_ROOT" "$STATE_DIR"
log "home directories under $HOME_ROOT"

# One name a line: the users this script created with useradd on this node (the only ones it may ever lock), and
# those it has locked. Users that existed before (the AMI's, an admin's) are never in it, so never touched.
CREATED="$STATE_DIR/users"
LOCKED="$STATE_DIR/users_locked"
touch "$CREATED" "$LOCKED"

listed() { grep -qxF "$2" "$1"; }

add_line() { listed "$1" "$2" || echo "$2" >>"$1"; }

remove_line() {
  local tmp
  tmp="$(mktemp "$1.XXXXXX")"
  grep -vxF "$2" "$1" >"$tmp" || true
  mv "$tmp" "$1"
}

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
    if listed "$LOCKED" "$name"; then
      # Back in the list after a removal: the same account, home and files as before.
      usermod --unlock --expiredate '' "$name"
      remove_line "$LOCKED" "$name"
      log "unlocked user $name ($uid): listed again"
      return 0
    fi
    log "user $name ($uid) already exists"
    return 0
  fi
  owner="$(getent_field passwd "$uid" 1)"
  [[ -z "$owner" ]] || die "uid $uid for user $name is already used by user $owner"
  # On FSx the home may already exist (created by another node); useradd then keeps it as is.
  useradd --uid "$uid" --gid "$gid" --create-home --home-dir "$HOME_ROOT/$name" --shell /bin/bash "$name"
  add_line "$CREATED" "$name"
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

# lock_removed NAME : a user this script created and the list no longer names. usermod(8): "if you wish to lock the
# account (not only access with a password), you should also set the EXPIRE_DATE to 1"; an expired account cannot
# log in by SSH key either. The passwd entry stays, so files on FSx keep their owner's name, and the home is kept.
lock_removed() {
  local name=$1 uid
  uid="$(getent_field passwd "$name" 3)"
  if [[ -z "$uid" ]]; then
    remove_line "$CREATED" "$name"
    log "user $name is gone from this node; forgetting it"
    return 0
  fi
  # The state file is ours, but a name in it is only ever a regular user this script made.
  if ((uid < 1000)); then
    log "WARNING: $name has uid $uid, not a user this script creates; leaving it alone"
    return 0
  fi
  listed "$LOCKED" "$name" && return 0
  usermod --lock --expiredate 1 "$name"
  add_line "$LOCKED" "$name"
  log "locked user $name ($uid): no longer in the users list; home $(getent_field passwd "$name" 6) kept, running jobs and sessions are not stopped"
}

# cluster.directory (configure_sssd.sh ran first): a user the directory has is the directory's, never a local account
# that would shadow it. Its uid and gid must be the config's, which Studio's POSIX identity, per-user partition and
# Slurm token use; a mismatch is reported for every such user and fails this script once the others are done.
DIRECTORY="$(param directory.search_base)"
mismatches=()
from_directory() {
  local name=$1 uid=$2 gid=$3 entry duid dgid
  [[ -n "$DIRECTORY" ]] || return 1
  entry="$(getent -s sss passwd "$name" || true)"
  [[ -n "$entry" ]] || return 1
  IFS=: read -r _ _ duid dgid _ <<<"$entry"
  if [[ "$duid:$dgid" != "$uid:$gid" ]]; then
    mismatches+=("$name has uid:gid $duid:$dgid in the directory but $uid:$gid in users[]")
  elif [[ -n "$(getent -s files passwd "$name" || true)" ]]; then
    log "WARNING: $name is in the directory and also a local account of this node, which shadows it"
  else
    log "user $name ($uid:$gid) comes from the directory: no local account"
  fi
  return 0
}

users="$(params_py users "$PARAMS_FILE")"
names=()
directory_users=()
while IFS=$'\t' read -r name uid gid sudo; do
  [[ -n "$name" ]] || continue
  names+=("$name")
  if from_directory "$name" "$uid" "$gid"; then
    directory_users+=("$name")
  else
    ensure_group "$name" "$gid"
    ensure_user "$name" "$uid" "$gid"
  fi
  ensure_sudo "$name" "$sudo"
done <<<"$users"

is_current() {
  local n
  for n in "${names[@]}"; do [[ "$n" == "$1" ]] && return 0; done
  return 1
}

# Sudo for anyone the list no longer names, whoever created the account: our files are 90-hyperpod-<name>.
for file in "$SUDOERS_DIR"/90-hyperpod-*; do
  [[ -e "$file" ]] || continue
  name="${file##*/90-hyperpod-}"
  is_current "$name" && continue
  rm -f "$file"
  log "removed sudo for $name: no longer in the users list"
done

while read -r name; do
  if [[ -n "$name" ]] && ! is_current "$name"; then
    lock_removed "$name"
  fi
done <"$CREATED"

# Studio's shared FSx partition belongs to this group; every user joins it so they can write there from the
# cluster too (in Studio it is their primary group).
shared_name="$(param shared_group.name)"
shared_gid="$(param shared_group.gid)"
if [[ -n "$shared_name" && -n "$shared_gid" ]]; then
  ensure_group "$shared_name" "$shared_gid"
  members=",$(getent_field group "$shared_name" 4),"
  while IFS=$'\t' read -r name _; do
    [[ -n "$name" && "$members" != *",$name,"* ]] || continue
    if [[ " ${directory_users[*]} " == *" $name "* ]]; then
      gpasswd --add "$name" "$shared_name" >/dev/null # usermod edits only local accounts
    else
      usermod -aG "$shared_name" "$name"
    fi
    log "added $name to group $shared_name"
  done <<<"$users"
fi

if ((${#mismatches[@]})); then
  for m in "${mismatches[@]}"; do log "ERROR: $m" >&2; done
  die "${#mismatches[@]} user(s) of the config differ from the directory: set users[].uid (and gid) to the" \
    "directory's uidNumber/gidNumber, or take them out of users; Studio and Slurm tokens use the config's ids"
fi
