#!/bin/bash
# Runs as root on an existing Slurm controller (attach mode, per-user: `shared_fsx: false`), in the Session Manager
# session `make attach` opens (cli/attach.py): turns on Slurm's auth/jwt next to munge, so Studio users reach slurmctld
# with a token naming only themselves (lambda/slurm_tokens) and no Studio space holds the munge key. The controller ran
# none of this project's lifecycle scripts: this needs what HyperPod's AMI gives (lifecycle/node_contract.json:
# slurm.conf including accounting.conf, the Slurm commands, python3, curl) plus Slurm's auth_jwt plugin.
#
#   enable_slurm_jwt.sh plan            prints the change, changes nothing
#   enable_slurm_jwt.sh apply URL       makes it, then hands the key over through the presigned PUT URL
#
# The change, the same settings the platform's own controller gets (lifecycle/hyperpod/configure_slurm_auth.sh):
#   1. the HS256 key $JWT_KEY_FILE (default /var/spool/slurm/jwt_hs256.key; with several SlurmctldHost lines, in their
#      shared StateSaveLocation): 32 random bytes, owned by SlurmUser, mode 0600; an existing key is kept;
#   2. a marked block in the file slurm.conf includes (accounting.conf; slurm.conf itself is HyperPod's, which its
#      cluster agent may rewrite): AuthAltTypes=auth/jwt and
#      AuthAltParameters=jwt_key=KEY,disable_token_creation,max_token_lifespan=3600;
#   3. a backup of that file beside it (FILE.before-jwt-<UTC time>; "absent" recorded when there was none);
#   4. `scontrol reconfigure` (since 23.11 it starts slurmctld anew, which loads the new AuthAltTypes: scontrol(1));
#      when slurmctld then does not accept a token signed with the key (an older Slurm), $SLURMCTLD_RESTART;
#   5. rollback: when `scontrol ping` does not report slurmctld UP within SLURM_WAIT_ATTEMPTS checks, or it does not
#      accept the key's tokens, the backup goes back, a key made by this run is removed, slurmctld is reconfigured
#      (restarted when it does not answer), and the script fails naming what happened.
# A run on a controller that already has the block and accepts tokens changes nothing (idempotent) and hands the key
# over again. The key never passes through the session's output, which Session Manager may log.
#
# Exit status: 0 done (or planned); 1 refused or rolled back. Test seams: SLURM_CONF, INCLUDED_CONF, JWT_KEY_FILE,
# SLURM_PLUGIN_DIR, SLURMCTLD_RESTART, SLURM_WAIT_ATTEMPTS, RETRY_DELAY, ATTACH_ALLOW_HTTP, BACKUP_SUFFIX.
set -euo pipefail
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=.
umask 077
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LOG_DIR="$WORK/log"
# shellcheck source-path=SCRIPTDIR source=../hyperpod/lib/common.sh
source "$HERE/../hyperpod/lib/common.sh"

ACTION="${1:-}"
KEY_URL="${2:-}"
case "$ACTION" in
  plan) [[ $# -eq 1 ]] || die "usage: $0 plan | $0 apply KEY_PUT_URL" ;;
  apply)
    [[ $# -eq 2 ]] || die "usage: $0 apply KEY_PUT_URL"
    [[ "$KEY_URL" == https://* || -n "${ATTACH_ALLOW_HTTP:-}" ]] || die "the key's PUT URL must be https"
    ;;
  *) die "usage: $0 plan | $0 apply KEY_PUT_URL" ;;
esac

if [[ -z "${SLURM_CONF:-}" ]]; then
  for candidate in /opt/slurm/etc/slurm.conf /etc/slurm/slurm.conf /usr/local/etc/slurm.conf; do
    if grep -qiE '^\s*SlurmctldHost\s*=' "$candidate" 2>/dev/null; then SLURM_CONF="$candidate"; break; fi
  done
fi
[[ -n "${SLURM_CONF:-}" ]] || die "no slurm.conf with SlurmctldHost in /opt/slurm/etc, /etc/slurm or /usr/local/etc: is this the controller?"
export SLURM_CONF
if [[ -x "$SLURM_BIN_DIR/scontrol" ]]; then PATH="$SLURM_BIN_DIR:$PATH"; fi
INCLUDED_CONF="${INCLUDED_CONF:-${SLURM_CONF%/*}/accounting.conf}"
SLURMCTLD_RESTART="${SLURMCTLD_RESTART:-systemctl restart slurmctld}"
SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"
RETRY_DELAY="${RETRY_DELAY:-2}"
MAX_TOKEN_LIFESPAN=3600 # the token issuer's lifetime (lambda/slurm_tokens), as configure_slurm_auth.sh
BEGIN_MARK="# BEGIN hyperpod-platform attach auth/jwt (make attach manages this block; edits are overwritten)"
END_MARK="# END hyperpod-platform attach auth/jwt"

# What must hold before anything is planned: the include, no auth settings of the admin's own, the plugin.
name="${INCLUDED_CONF##*/}"
grep -qiE "^[[:space:]]*include[[:space:]]+(\S*/)?${name//./\\.}[[:space:]]*$" "$SLURM_CONF" ||
  die "$SLURM_CONF does not include $name, the only Slurm file this step edits. The change for the cluster's admin:" \
    "add the line 'include $name' to $SLURM_CONF (HyperPod's slurm.conf has it), or turn auth/jwt on by hand"
for setting in AuthAltTypes AuthAltParameters; do
  [[ -z "$(slurm_setting "$setting")" ]] ||
    die "$SLURM_CONF sets $setting=$(slurm_setting "$setting") itself: auth/jwt is the admin's there; remove it" \
      "to let make attach manage it, or keep per-user mode off (shared_fsx: true)"
done
plugin_dirs="${SLURM_PLUGIN_DIR:-$(slurm_setting PluginDir)}"
if [[ -z "$plugin_dirs" ]]; then
  plugin_dirs="$(scontrol show config 2>/dev/null | sed -n 's/^PluginDir[[:space:]]*=[[:space:]]*//p')"
fi
plugin=""
for dir in ${plugin_dirs//:/ }; do
  if [[ -f "$dir/auth_jwt.so" ]]; then plugin="$dir/auth_jwt.so"; break; fi
done
[[ -n "$plugin" ]] || die "no auth_jwt.so in Slurm's PluginDir (${plugin_dirs:-unknown}): this Slurm was built without" \
  "auth/jwt (it needs libjwt; Debian ships it as slurm-wlm-jwt-plugin). Nothing changed"

if [[ -z "${JWT_KEY_FILE:-}" ]]; then
  JWT_KEY_FILE=/var/spool/slurm/jwt_hs256.key
  if (($(grep -ciE '^\s*SlurmctldHost\s*=' "$SLURM_CONF") > 1)); then
    state_save="$(slurm_setting StateSaveLocation)"
    [[ "$state_save" == /* ]] || die "$SLURM_CONF names several controllers but no StateSaveLocation they share"
    JWT_KEY_FILE="$state_save/jwt_hs256.key"
  fi
fi
slurm_user="$(slurm_setting SlurmUser)"
slurm_user="${slurm_user:-root}" # Slurm's default SlurmUser
id -u "$slurm_user" >/dev/null 2>&1 || die "SlurmUser '$slurm_user' from $SLURM_CONF does not exist"

version="$(scontrol --version | awk '{print $2}')"
IFS=. read -r major minor _ <<<"$version"
[[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] || die "unexpected 'scontrol --version' output: '$version'"
# max_token_lifespan came with 22.05 (Slurm's NEWS); reconfigure starts a new slurmctld since 23.11 (scontrol(1)).
parameters="jwt_key=$JWT_KEY_FILE,disable_token_creation,max_token_lifespan=$MAX_TOKEN_LIFESPAN"
((10#$major * 100 + 10#$minor >= 2205)) || parameters="jwt_key=$JWT_KEY_FILE,disable_token_creation"
reconfigure_restarts=0
((10#$major * 100 + 10#$minor < 2311)) || reconfigure_restarts=1

lib_py marked_block.py "$INCLUDED_CONF" "$BEGIN_MARK" "$END_MARK" AuthAltTypes,AuthAltParameters \
  AuthAltTypes=auth/jwt "AuthAltParameters=$parameters" >"$WORK/new.conf"
[[ -f "$INCLUDED_CONF" && ! -L "$INCLUDED_CONF" || ! -e "$INCLUDED_CONF" ]] ||
  die "$INCLUDED_CONF is a symlink or not a file; not editing it"
conf_changes=1
if [[ -f "$INCLUDED_CONF" ]] && cmp -s "$WORK/new.conf" "$INCLUDED_CONF"; then conf_changes=0; fi
backup="$INCLUDED_CONF.before-jwt-${BACKUP_SUFFIX:-$(TZ=UTC0 printf '%(%Y%m%dT%H%M%SZ)T' -1)}"

# jwt_accepted : slurmctld authenticates a 60-second token for `nobody` signed with the key (as configure_slurm_auth.sh).
jwt_accepted() {
  local token
  token="$(lib_py jwt_probe.py "$JWT_KEY_FILE")"
  SLURM_JWT="$token" sinfo -h -o %P >/dev/null 2>&1
}

# slurmctld_up : `scontrol ping` reports slurmctld UP within SLURM_WAIT_ATTEMPTS checks, RETRY_DELAY seconds apart.
slurmctld_up() {
  local n=1
  until _slurmctld_answers; do
    ((n < SLURM_WAIT_ATTEMPTS)) || return 1
    sleep "$RETRY_DELAY"
    n=$((n + 1))
  done
}

controllers="$(grep -ciE '^\s*SlurmctldHost\s*=' "$SLURM_CONF")"
if [[ "$ACTION" == plan ]]; then
  echo "auth/jwt on this controller ($(hostname), Slurm $version, plugin $plugin):"
  if ((controllers > 1)); then
    echo "  WARNING: $SLURM_CONF names $controllers controllers. This changes this one only; the key is in the"
    echo "  StateSaveLocation they share, but a backup controller that reads an accounting.conf of its own takes"
    echo "  no tokens until it holds the same block: copy it there, or turn per-user mode off (shared_fsx: true)"
  fi
  if [[ -s "$JWT_KEY_FILE" ]]; then
    echo "  key: keep $JWT_KEY_FILE (exists)"
  else
    echo "  key: create $JWT_KEY_FILE (32 random bytes, owner $slurm_user, mode 0600)"
  fi
  if ((conf_changes)); then
    echo "  $INCLUDED_CONF (included by $SLURM_CONF), backed up first to $backup:"
    diff -u --label "$INCLUDED_CONF" --label "$INCLUDED_CONF (new)" "$INCLUDED_CONF" "$WORK/new.conf" 2>/dev/null |
      sed 's/^/    /' || true
    if ((reconfigure_restarts)); then
      echo "  then: scontrol reconfigure (Slurm $version starts slurmctld anew with it); if slurmctld does not accept"
      echo "        a token signed with the key: $SLURMCTLD_RESTART"
    else
      echo "  then: scontrol reconfigure, and $SLURMCTLD_RESTART (Slurm $version loads a new auth plugin only when"
      echo "        slurmctld starts)"
    fi
    echo "  rollback: when 'scontrol ping' does not report slurmctld UP within $SLURM_WAIT_ATTEMPTS checks" \
      "${RETRY_DELAY}s apart, or it refuses the key's tokens, $backup goes back, a key made here is removed and" \
      "slurmctld is reconfigured (restarted when it does not answer)"
  else
    echo "  $INCLUDED_CONF already has the settings; nothing to change there"
  fi
  echo "  then the key goes to the platform's key secret (through a presigned S3 URL, never this output)"
  exit 0
fi

key_made=0
rollback() {
  local why=$1 state
  log "ROLLBACK: $why"
  if [[ -f "$backup" ]]; then
    if [[ "$(cat "$backup.state" 2>/dev/null)" == absent ]]; then rm -f "$INCLUDED_CONF"; else cp -p "$backup" "$INCLUDED_CONF"; fi
    log "restored $INCLUDED_CONF from $backup"
  fi
  if ((key_made)); then rm -f "$JWT_KEY_FILE"; log "removed $JWT_KEY_FILE (made by this run)"; fi
  if _slurmctld_answers; then
    scontrol reconfigure || true
  else
    $SLURMCTLD_RESTART || log "'$SLURMCTLD_RESTART' failed"
  fi
  state=DOWN
  if slurmctld_up; then state=UP; fi
  die "auth/jwt is not on: $why. Rolled back to $backup; slurmctld is $state now (scontrol ping)." \
    "See slurmctld's log (scontrol show config | grep SlurmctldLogFile)"
}

# Only Slurm's own directory holds the key (with several controllers, a shared one); checked before anything changes.
parent_dir "$JWT_KEY_FILE"
key_dir="$PARENT"
if [[ -L "$key_dir" ]] || [[ -e "$key_dir" && ! "$(stat -c %U "$key_dir")" =~ ^(root|$slurm_user)$ ]]; then
  die "$key_dir is a symlink or not owned by root or $slurm_user; not writing the key there"
fi
[[ ! -L "$JWT_KEY_FILE" ]] || die "$JWT_KEY_FILE is a symlink; not using it"
if ((conf_changes)); then
  _slurmctld_answers || die "slurmctld does not answer 'scontrol ping' before the change; nothing changed"
  # The backup, beside the file and root's like it; its .state says whether there was a file to restore.
  if [[ -f "$INCLUDED_CONF" ]]; then
    cp -p "$INCLUDED_CONF" "$backup"
    echo present >"$backup.state"
  else
    : >"$backup"
    echo absent >"$backup.state"
  fi
  log "backed up $INCLUDED_CONF to $backup"
fi

[[ -d "$key_dir" ]] || install -d -m 0755 "$key_dir"
if [[ ! -s "$JWT_KEY_FILE" ]]; then
  tmp="$(mktemp "$key_dir/.jwt.XXXXXX")"
  head -c 32 /dev/urandom >"$tmp"
  chown "$slurm_user:" "$tmp"
  chmod 0600 "$tmp"
  mv -f "$tmp" "$JWT_KEY_FILE"
  key_made=1
  log "generated the HS256 key $JWT_KEY_FILE (owner $slurm_user, mode 0600)"
fi
chown "$slurm_user:" "$JWT_KEY_FILE"
chmod 0600 "$JWT_KEY_FILE"

if ((conf_changes)); then
  # Every Slurm command on the node reads the included file: it keeps its mode (0644 when it is new), whatever this
  # script's umask.
  conf_mode=0644
  [[ ! -f "$INCLUDED_CONF" ]] || conf_mode="$(stat -c %a "$INCLUDED_CONF")"
  cp "$WORK/new.conf" "$INCLUDED_CONF.platform-tmp"
  chmod "$conf_mode" "$INCLUDED_CONF.platform-tmp"
  mv -f "$INCLUDED_CONF.platform-tmp" "$INCLUDED_CONF"
  log "wrote AuthAltTypes=auth/jwt and AuthAltParameters=$parameters to $INCLUDED_CONF"
  scontrol reconfigure || log "scontrol reconfigure failed; checking slurmctld"
  slurmctld_up || rollback "slurmctld did not answer 'scontrol ping' after the change"
  if ! jwt_accepted; then
    log "slurmctld does not accept auth/jwt tokens yet; $SLURMCTLD_RESTART"
    $SLURMCTLD_RESTART || rollback "'$SLURMCTLD_RESTART' failed"
    slurmctld_up || rollback "slurmctld did not answer 'scontrol ping' after '$SLURMCTLD_RESTART'"
  fi
fi
jwt_accepted || {
  if ((conf_changes)); then rollback "slurmctld does not accept tokens signed with $JWT_KEY_FILE"; fi
  die "$INCLUDED_CONF has the settings but slurmctld does not accept tokens signed with $JWT_KEY_FILE: restart" \
    "slurmctld ($SLURMCTLD_RESTART) and run make attach again"
}
if ((conf_changes)); then
  log "slurmctld is UP and accepts auth/jwt tokens; users cannot create tokens of their own"
else
  log "auth/jwt is already on (the block in $INCLUDED_CONF; slurmctld accepts the key's tokens): nothing changed"
fi

# The key, to a private file and from it to the presigned URL: never in argv, the environment or the output.
python3 -c 'import base64, json, sys
print(json.dumps({"jwt_hs256_key_b64": base64.b64encode(open(sys.argv[1], "rb").read()).decode()}))' \
  "$JWT_KEY_FILE" >"$WORK/key.json"
curl -fsS --retry 3 -T "$WORK/key.json" "$KEY_URL" >/dev/null || die "uploading the key failed (auth/jwt stays on)"
log "handed the key over to make attach"
