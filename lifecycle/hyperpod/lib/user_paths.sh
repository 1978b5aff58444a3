# shellcheck shell=bash
# Root and paths a user can change (lifecycle/README.md, "Root never acts through a path a user can change").
# Sourced after lib/common.sh, never run. Each helper either does the work AS the user, so the kernel checks every
# path component with that user's rights (a link to /etc/passwd gets the user nothing they did not have), or works
# only inside directories that root owns and nobody else may write, after checking, without following links, that
# the entry it acts on is what it expects. In such a directory nobody but root can swap an entry between the check
# and the use, so the check holds.

# Root's own locks: a root-owned 0700 directory, never a user's.
export LOCK_DIR="${LOCK_DIR:-$STATE_DIR/locks}"
# A step run as a user ends after this many seconds: a user can make a step block (a FIFO where a file is expected).
USER_STEP_TIMEOUT="${USER_STEP_TIMEOUT:-120}"

# as_user UID GID CMD... : CMD as that user, with their groups (the account must exist: setpriv --init-groups looks
# it up), no way to gain privileges (no_new_privs: setuid files do not elevate), HOME unset unless the caller sets it,
# and at most USER_STEP_TIMEOUT seconds. CMD inherits none of root's open files: every descriptor above 2 is closed
# (a lock root holds would be the user's to keep, after root's step ends, by a process left behind), stdin is
# /dev/null, and its output goes to a file of root's (0600, mktemp) that root copies to its own output afterwards,
# each line marked as the user's: never root's log itself, which the user could then write at will or keep open.
as_user() {
  local uid=$1 gid=$2 out rc=0 line fd
  shift 2
  out="$(mktemp)"
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd="${fd##*/}"
      if ((fd > 2)); then eval "exec $fd>&-"; fi
    done
    exec timeout --kill-after=10 "$USER_STEP_TIMEOUT" \
      setpriv --reuid="$uid" --regid="$gid" --init-groups --no-new-privs -- "$@"
  ) </dev/null >"$out" 2>&1 || rc=$?
  while IFS= read -r line || [[ -n "$line" ]]; do
    printf '  [as uid %s] %s\n' "$uid" "$line"
  done <"$out"
  rm -f "$out"
  ((rc != 124)) || log "WARNING: a step run as uid $uid did not finish within ${USER_STEP_TIMEOUT}s and was stopped"
  return "$rc"
}

# The checks below set PROBLEM to why a path fails them ("" when it passes) rather than print it: a caller's `$(...)`
# would start a subshell for each check, and the scripts make several per user at every users sync.

# root_dir_problem PATH [sticky] : PROBLEM set to why PATH is not a directory only root can change ("" when it is):
# PATH and each directory above it must be a real directory (no link) owned by root; PATH may not be writable by
# group or others, a directory above it only if it is sticky (as /tmp: nobody can rename or remove root's entry in
# it). With `sticky`, PATH itself is held to the rule for the directories above (it is only passed through).
root_dir_problem() {
  local path=$1 sticky=${2:-} dirs=() owners=() i dir owner mode last PARENT
  PROBLEM=""
  if [[ "$path" != /* ]]; then
    PROBLEM="$path is not an absolute path"
    return 0
  fi
  # PATH and the directories above it, nearest first, up to the first that is a link or no directory (which is then
  # the problem unless one below it has another): their owners and modes come from one stat.
  dir="$path"
  while :; do
    if [[ -L "$dir" || ! -d "$dir" ]]; then
      last="$dir"
      break
    fi
    dirs+=("$dir")
    [[ "$dir" == / ]] && break
    parent_dir "$dir"
    dir="$PARENT"
  done
  if ((${#dirs[@]})); then
    mapfile -t owners < <(stat -c '%u %a' -- "${dirs[@]}" 2>/dev/null)
  fi
  # stat prints nothing for a path it cannot examine (gone since the check above): the lines would not line up.
  if ((${#owners[@]} != ${#dirs[@]})); then
    PROBLEM="$path or a directory above it could not be examined (changed while it was checked)"
    return 0
  fi
  for i in "${!dirs[@]}"; do
    dir="${dirs[i]}" owner="${owners[i]% *}" mode="${owners[i]#* }"
    if ((owner != 0)); then
      PROBLEM="$dir is owned by uid $owner, not root"
      return 0
    fi
    if (((8#$mode & 8#022) != 0)) && { [[ "$dir" == "$path" && -z "$sticky" ]] || (((8#$mode & 8#1000) == 0)); }; then
      PROBLEM="$dir is writable by group or others (mode $mode)"
      return 0
    fi
  done
  if [[ -n "${last:-}" ]]; then
    PROBLEM="$last is not a directory (or is a symbolic link)"
  fi
  return 0
}

# ensure_root_dir PATH MODE : PATH as a directory only root can change, with MODE; created when missing (in a parent
# root owns that others may write only if it is sticky). An existing root-owned PATH of another mode gets MODE
# (logged). Sets PROBLEM (root_dir_problem's) and returns 1 when PATH or a directory above it is not root's alone.
ensure_root_dir() {
  local path=$1 mode=$2 owner current PARENT
  parent_dir "$path"
  root_dir_problem "$PARENT" sticky
  [[ -z "$PROBLEM" ]] || return 1
  # Not mkdir -p: an existing entry is checked below, never followed (nor made again: no mkdir to start for it).
  [[ -e "$path" || -L "$path" ]] || mkdir -m "$mode" "$path" 2>/dev/null || true
  if [[ ! -L "$path" && -d "$path" ]]; then
    read -r owner current < <(stat -c '%u %a' -- "$path") || true
    if [[ "$owner" == 0 ]] && ((8#$current != 8#$mode)); then
      chmod "$mode" "$path"
      log "$path had mode $current: now $mode" >&2
    fi
  fi
  root_dir_problem "$path"
  [[ -z "$PROBLEM" ]]
}

# user_dir_problem PARENT NAME UID : PROBLEM set to why PARENT/NAME is not a real directory owned by UID ("" when it
# is, or when it does not exist). Checks the entry itself, never what a link points to.
user_dir_problem() {
  local entry="$1/$2" uid=$3 owner
  PROBLEM=""
  if [[ -L "$entry" ]]; then
    PROBLEM="$entry is a symbolic link"
  elif [[ -e "$entry" && ! -d "$entry" ]]; then
    PROBLEM="$entry is not a directory"
  elif [[ -d "$entry" ]]; then
    owner="$(stat -c %u "$entry")"
    ((owner == uid)) || PROBLEM="$entry is owned by uid $owner, not $2 ($uid)"
  fi
  return 0
}

# make_user_dir PARENT NAME UID GID MODE : creates PARENT/NAME owned by UID:GID with MODE, in a PARENT only root can
# change (the caller checked it with ensure_root_dir), so the new entry cannot be swapped before chown and chmod.
# Returns 1 when PARENT/NAME exists already (created meanwhile).
make_user_dir() {
  local dir="$1/$2"
  mkdir -m 0700 "$dir" 2>/dev/null || return 1
  chown -h "$3:$4" "$dir"
  chmod "$5" "$dir"
}

# move_aside PARENT NAME : renames PARENT/NAME (whatever it is: rename never follows a link) to
# PARENT/.moved-NAME-<UTC time>, in a PARENT only root can change; prints the new path.
move_aside() {
  local to
  to="$1/.moved-$2-$(date -u +%Y%m%dT%H%M%SZ)-$$"
  mv -T -- "$1/$2" "$to"
  echo "$to"
}

# ensure_nosuid_nodev PATH : the mount at PATH must ignore setuid/setgid bits and device files, which a user can
# plant on a shared file system (from a Studio space with sudo, as any non-root uid). When its per-mount options lack
# them, the mount is remounted with MS_REMOUNT|MS_BIND: a per-mount flag change that never calls into the file
# system (mount(2), "Remounting an existing mount"; `-i`: no /sbin/mount.<type> helper), keeping its other options.
# Returns 1, with the options it found, when the mount still lacks them.
ensure_nosuid_nodev() {
  local path=$1 opts
  [[ -d "$path/." ]] || true # an automount point mounts on first access: check the real mount, not the trigger
  # The last line findmnt prints (the mount on top), cut by bash: the users sync checks this at every tick.
  opts="$(findmnt -n -o VFS-OPTIONS --mountpoint "$path")"
  opts="${opts##*$'\n'}"
  if [[ ",$opts," == *,nosuid,* && ",$opts," == *,nodev,* ]]; then
    return 0
  fi
  mount -i -o "remount,bind,$opts,nosuid,nodev" "$path" || true
  opts="$(findmnt -n -o VFS-OPTIONS --mountpoint "$path")"
  opts="${opts##*$'\n'}"
  if [[ ",$opts," == *,nosuid,* && ",$opts," == *,nodev,* ]]; then
    log "$path remounted nosuid,nodev (now $opts)" >&2
    return 0
  fi
  echo "$path is mounted with '${opts:-no options found}', without nosuid and nodev, and remounting it failed"
  return 1
}
