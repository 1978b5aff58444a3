#!/usr/bin/env bash
# Creates the users from the parameters file with fixed uids/gids, so files on FSx have the
# same owner on every node and in SageMaker Studio. Runs on every node: Slurm jobs run as them.
# Runs again whenever the parameters change (sync_users.sh): a user this script created on this node and no longer
# listed is locked (never deleted: the home on FSx is the user's data), and every sudoers file of ours that the list
# no longer asks for is removed.
#
# Homes, and (FSx) each user's checkpoint directory, are made by root only inside directories root alone can change
# (lib/user_paths.sh): the home root must be one, or nothing is created. A new home is created empty, given to its
# user, and /etc/skel is copied into it AS the user; an existing home must be a real directory of that uid, or that
# user gets no account here (reported, and the script fails once the others are done). In the checkpoint directory,
# an entry named after a user that is not that user's own directory (a link, or a directory another user made while
# earlier versions left it world-writable) is moved aside, never followed, and the user gets a fresh one.
#
# An entry this node cannot honour (a name or id another account has here) costs that entry only: revocation never
# waits for the list to be clean (see conflict).
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/user_paths.sh
source "$HERE/lib/user_paths.sh"

SKEL_DIR="${SKEL_DIR:-/etc/skel}"
# Ubuntu's HOME_MODE (/etc/login.defs), what useradd --create-home gave homes on the HyperPod AMI.
HOME_DIR_MODE=0750

params fsx.mount_path fsx.checkpoint_dir directory.search_base shared_group.name shared_group.gid
HOME_ROOT="$(home_root)"
[[ -d "$STATE_DIR" ]] || mkdir -p "$STATE_DIR"
ensure_root_dir "$HOME_ROOT" 0755 ||
  die "refusing to create homes in $HOME_ROOT: $PROBLEM. Another user could then own or replace any user's home;" \
    "make $HOME_ROOT (and every directory above it) root's, not writable by others, and run this again"
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

# getent_field VAR DB KEY N : VAR set to field N of `getent DB KEY`'s line, or "" when the entry does not exist (one
# getent, split by bash; no subshell around it: create_users.sh runs several per user at every users sync)
getent_field() {
  local entry fields=()
  entry="$(getent "$2" "$3")" || entry=""
  [[ -z "$entry" ]] || IFS=: read -r -a fields <<<"$entry"
  printf -v "$1" '%s' "${fields[$4 - 1]-}"
}

# conflict MESSAGE : an entry of the list that this node cannot honour (an id or name another account has here). Only
# that entry is skipped: the others, the locks of removed users and the sudo sweep still happen; the script fails at
# the end.
conflicts=()
conflict() {
  conflicts+=("$*")
  log "ERROR: $*" >&2
  return 1
}

ensure_group() {
  local name=$1 gid=$2 current owner
  getent_field current group "$name" 3
  if [[ -n "$current" ]]; then
    [[ "$current" == "$gid" ]] || conflict "group $name exists with gid $current, expected $gid; fix the node or the users list"
    return
  fi
  getent_field owner group "$gid" 1
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
  getent_field current passwd "$name" 3
  if [[ -n "$current" ]]; then
    [[ "$current" == "$uid" ]] || {
      conflict "user $name exists with uid $current, expected $uid; $name gets no account here (fix the node or the users list)"
      return
    }
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
  getent_field owner passwd "$uid" 1
  [[ -z "$owner" ]] || {
    conflict "uid $uid for user $name is already used by user $owner; $name gets no account here"
    return
  }
  # The home is ensure_home's: useradd would copy /etc/skel as root into a directory the user already owns.
  useradd --uid "$uid" --gid "$gid" --no-create-home --home-dir "$HOME_ROOT/$name" --shell /bin/bash "$name"
  add_line "$CREATED" "$name"
  log "created user $name ($uid:$gid), home $HOME_ROOT/$name"
}

# ensure_home NAME UID GID : NAME's home, new (0750, theirs, /etc/skel copied as them) or theirs already. On FSx
# another node may have made it first.
ensure_home() {
  local name=$1 uid=$2 gid=$3 home="$HOME_ROOT/$1"
  [[ -e "$home" || -L "$home" ]] && return 0 # checked by home_problem before
  if ! make_user_dir "$HOME_ROOT" "$name" "$uid" "$gid" "$HOME_DIR_MODE"; then
    user_dir_problem "$HOME_ROOT" "$name" "$uid"
    [[ -z "$PROBLEM" ]] && return 0 # another node's, made a moment ago
    home_problems+=("$PROBLEM")
    return 0
  fi
  if [[ -d "$SKEL_DIR" ]]; then
    # Each entry, not SKEL_DIR/. (whose mode cp would give the home).
    as_user "$uid" "$gid" find "$SKEL_DIR" -mindepth 1 -maxdepth 1 -exec cp -R --preserve=mode -t "$home" -- {} + ||
      log "WARNING: could not copy $SKEL_DIR into $home"
  fi
  log "created home $home ($uid:$gid, mode $HOME_DIR_MODE)"
}

# ensure_checkpoint_dir NAME UID GID : CHECKPOINTS/NAME, the user's own (0700), whatever was there before moved aside.
ensure_checkpoint_dir() {
  local name=$1 uid=$2 gid=$3 entry="$CHECKPOINTS/$1" what moved
  user_dir_problem "$CHECKPOINTS" "$name" "$uid"
  [[ -n "$PROBLEM" ]] || [[ ! -e "$entry" && ! -L "$entry" ]] || return 0
  if [[ -L "$entry" ]]; then
    what="a symbolic link"
  elif [[ -d "$entry" ]]; then
    what="a directory of uid $(stat -c %u "$entry"), not $name's"
  elif [[ -e "$entry" ]]; then
    what="not a directory"
  fi
  if [[ -n "${what:-}" ]]; then
    moved="$(move_aside "$CHECKPOINTS" "$name")"
    log "WARNING: $entry was $what: moved to $moved (left as it is), $name gets a directory of their own"
  fi
  make_user_dir "$CHECKPOINTS" "$name" "$uid" "$gid" 0700 || return 0
  log "checkpoint directory $entry ($uid:$gid, mode 0700)"
}

ensure_sudo() {
  local name=$1 sudo=$2 tmp
  local file="$SUDOERS_DIR/90-hyperpod-$name" entry="$1 ALL=(ALL) NOPASSWD:ALL"
  if [[ "$sudo" != "true" ]]; then
    if [[ -e "$file" ]]; then
      rm -f "$file"
      log "removed sudo for $name"
    fi
    return 0
  fi
  # Unchanged (every sync after the first): cmp reads the entry from bash, no file of ours to make and remove.
  if [[ -f "$file" ]] && cmp -s - "$file" <<<"$entry"; then
    return 0
  fi
  tmp="$(mktemp)"
  echo "$entry" >"$tmp"
  if command -v visudo >/dev/null; then
    visudo -cf "$tmp" >/dev/null || { rm -f "$tmp"; die "sudoers entry for $name does not validate"; }
  fi
  [[ -d "$SUDOERS_DIR" ]] || mkdir -p "$SUDOERS_DIR"
  install -m 0440 "$tmp" "$file"
  rm -f "$tmp"
  log "granted sudo to $name"
}

# lock_removed NAME : a user this script created and the list no longer names. usermod(8): "if you wish to lock the
# account (not only access with a password), you should also set the EXPIRE_DATE to 1"; an expired account cannot
# log in by SSH key either. The passwd entry stays, so files on FSx keep their owner's name, and the home is kept.
lock_removed() {
  local name=$1 uid home
  getent_field uid passwd "$name" 3
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
  getent_field home passwd "$name" 6
  log "locked user $name ($uid): no longer in the users list; home $home kept, running jobs and sessions are not stopped"
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
home_problems=()
set_up=() # "name uid gid" of every user whose account and home are in place
refused=() # names whose entry conflicts with this node's accounts
while IFS=$'\t' read -r name uid gid sudo; do
  [[ -n "$name" ]] || continue
  names+=("$name")
  user_dir_problem "$HOME_ROOT" "$name" "$uid"
  if [[ -n "$PROBLEM" ]]; then
    home_problems+=("$PROBLEM")
    refused+=("$name")
    continue
  fi
  if from_directory "$name" "$uid" "$gid"; then
    directory_users+=("$name")
  elif ! ensure_group "$name" "$gid" || ! ensure_user "$name" "$uid" "$gid"; then
    refused+=("$name") # no sudo, and the account of that name (if this script made it) is locked below
    continue
  fi
  ensure_home "$name" "$uid" "$gid"
  ensure_sudo "$name" "$sudo"
  set_up+=("$name $uid $gid")
done <<<"$users"

# is_current NAME : the list names NAME and this node could give it the listed identity (a refused entry's name is not:
# the account of that name here is someone else's, so it keeps no sudo and, if this script made it, is locked).
is_current() {
  local n
  for n in "${refused[@]}"; do [[ "$n" == "$1" ]] && return 1; done
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
if [[ -n "$shared_name" && -n "$shared_gid" ]] && ensure_group "$shared_name" "$shared_gid"; then
  getent_field members group "$shared_name" 4
  members=",$members,"
  while IFS=$'\t' read -r name _; do
    [[ -n "$name" && "$members" != *",$name,"* ]] || continue
    is_current "$name" || continue
    if [[ " ${directory_users[*]} " == *" $name "* ]]; then
      gpasswd --add "$name" "$shared_name" >/dev/null # usermod edits only local accounts
    else
      usermod -aG "$shared_name" "$name"
    fi
    log "added $name to group $shared_name"
  done <<<"$users"
fi

# Each user's checkpoint directory inside fsx.checkpoint_dir (made by mount_fsx.sh, root's, 0755), when homes are on
# FSx. A problem there costs checkpoints their usual place, not the node: a warning.
CHECKPOINTS=""
if [[ "$HOME_ROOT" != "$DEFAULT_HOME_ROOT" && -n "$(param fsx.checkpoint_dir)" ]]; then
  CHECKPOINTS="$(param fsx.mount_path)$(param fsx.checkpoint_dir)"
  root_dir_problem "$CHECKPOINTS"
  if [[ -n "$PROBLEM" ]]; then
    log "WARNING: no per-user checkpoint directories: $PROBLEM (mount_fsx.sh makes $CHECKPOINTS root's)"
    CHECKPOINTS=""
  fi
fi
if [[ -n "$CHECKPOINTS" ]]; then
  for entry in "${set_up[@]}"; do
    read -r name uid gid <<<"$entry"
    ensure_checkpoint_dir "$name" "$uid" "$gid"
  done
fi

for problem in "${home_problems[@]}"; do
  log "ERROR: $problem: that user gets no account or home here until it is fixed (a home must be a directory" \
    "of its own user; move this one aside or give it to them)" >&2
done
if ((${#mismatches[@]})); then
  for m in "${mismatches[@]}"; do log "ERROR: $m" >&2; done
  die "${#mismatches[@]} user(s) of the config differ from the directory: set users[].uid (and gid) to the" \
    "directory's uidNumber/gidNumber, or take them out of users; Studio and Slurm tokens use the config's ids"
fi
((${#home_problems[@]} == 0)) || die "${#home_problems[@]} user(s) have a home that is not their own (above)"
((${#conflicts[@]} == 0)) || die "${#conflicts[@]} entr(ies) of the users list conflict with this node's accounts" \
  "(above); every other user is set up, removed users are locked and sudo is swept"
