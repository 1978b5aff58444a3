#!/usr/bin/env bash
# Controller only. How Studio users authenticate to slurmctld (platform_parameters.json `slurm.auth`):
#
# - jwt (per-user mode, `shared_fsx: false`): Studio spaces get no munge key. slurmctld also accepts Slurm's auth/jwt
#   tokens (HS256), signed with a key only this node and the platform's token issuer hold; each Studio user receives a
#   short-lived token naming only themselves (lambda/slurm_tokens). This script
#     1. makes the key once: $JWT_KEY_FILE, 32 random bytes, mode 0600, owned by SlurmUser (/var/spool/slurm, or with
#        several controllers their shared StateSaveLocation, so a backup that takes over accepts the same tokens);
#     2. writes the settings into a delimited block of accounting.conf, the file HyperPod's slurm.conf includes and
#        leaves to the customer (AWS's base-config setup_mariadb_accounting.sh appends there too;
#        awslabs/awsome-distributed-ai@95b939cd). It never edits slurm.conf itself:
#          AuthAltTypes=auth/jwt, AuthAltParameters=jwt_key=$JWT_KEY_FILE, DisableRootJobs=YES
#     3. runs `scontrol reconfigure` when the block changed, then checks that slurmctld accepts a token (Slurm before
#        23.11 loads a new auth plugin only on restart: it says so, and the cluster stays closed to Studio until then);
#     4. writes the key to the Secrets Manager secret `slurm.jwt_key_secret_arn` (write only: this node's role cannot
#        read it back; a marker file beside the key remembers what was written, so a second run writes nothing).
# - munge (shared mode): removes the block if an earlier run wrote it, and reconfigures only then.
#
# Usage: configure_slurm_auth.sh   (reads PARAMS_FILE; idempotent; never prints the key)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

SLURM_CONF="${SLURM_CONF:-$SLURM_CONF_DIR/slurm.conf}"
INCLUDED_CONF="${INCLUDED_CONF:-$SLURM_CONF_DIR/accounting.conf}"
JWT_KEY_FILE="${JWT_KEY_FILE:-}" # default below: it depends on how many controllers slurm.conf names
SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"
BEGIN_MARK="# BEGIN hyperpod-platform auth (configure_slurm_auth.sh manages this block; edits are overwritten)"
END_MARK="# END hyperpod-platform auth"

mode="$(param slurm.auth)"
mode="${mode:-munge}"
[[ "$mode" == jwt || "$mode" == munge ]] || die "slurm.auth must be jwt or munge, got '$mode'"

if [[ "$mode" == munge ]] && ! grep -qxF "$BEGIN_MARK" "$INCLUDED_CONF" 2>/dev/null; then
  log "slurm.auth munge: Studio spaces authenticate with the munge key; nothing to change"
  exit 0
fi
wait_until "$SLURM_WAIT_ATTEMPTS" "a complete $SLURM_CONF" grep -qiE '^\s*SlurmctldHost\s*=' "$SLURM_CONF" ||
  die "cannot read a slurm.conf with SlurmctldHost at $SLURM_CONF"
# Several controllers (HyperPod multi-head): a backup that takes over must accept the tokens the issuer signed, so every
# slurmctld reads one key, in StateSaveLocation, the directory Slurm requires all controllers to share (slurm.conf(5),
# SlurmctldHost/BackupController); the first controller to get here makes it.
if [[ -z "$JWT_KEY_FILE" ]]; then
  JWT_KEY_FILE=/var/spool/slurm/jwt_hs256.key
  if (($(grep -ciE '^\s*SlurmctldHost\s*=' "$SLURM_CONF") > 1)); then
    state_save="$(slurm_setting StateSaveLocation)"
    [[ "$state_save" == /* ]] || die "$SLURM_CONF names several controllers but no StateSaveLocation they share"
    JWT_KEY_FILE="$state_save/jwt_hs256.key"
  fi
fi

# render_block FILE MODE > NEW : FILE with our block replaced (jwt) or removed (munge); everything else kept.
render_block() {
  if [[ "$2" == jwt ]]; then
    python3 "$LIB_DIR/marked_block.py" "$1" "$BEGIN_MARK" "$END_MARK" AuthAltTypes,AuthAltParameters,DisableRootJobs \
      AuthAltTypes=auth/jwt "AuthAltParameters=jwt_key=$JWT_KEY_FILE" DisableRootJobs=YES
  else
    python3 "$LIB_DIR/marked_block.py" "$1" "$BEGIN_MARK" "$END_MARK" ""
  fi
}

# No included file (node_contract.json, slurm-conf-includes-accounting-conf): per-user mode stays off, closed to Studio
# users (no token is accepted, and per-user mode never publishes the munge key); a contract warning, the node continues.
if [[ "$mode" == jwt ]] && ! included_conf "per-user mode (auth/jwt for Studio users, DisableRootJobs): Studio users" \
  "cannot reach Slurm until it is"; then
  exit 0
fi
for setting in AuthAltTypes AuthAltParameters DisableRootJobs; do
  if [[ "$mode" == jwt && -n "$(slurm_setting "$setting")" ]]; then
    die "$SLURM_CONF sets $setting itself; the platform's per-user mode needs it from $INCLUDED_CONF"
  fi
done

ensure_key() {
  local slurm_user dir tmp
  slurm_user="$(slurm_setting SlurmUser)"
  slurm_user="${slurm_user:-root}" # Slurm's default SlurmUser
  id -u "$slurm_user" >/dev/null 2>&1 || die "SlurmUser '$slurm_user' from $SLURM_CONF does not exist"
  dir="$(dirname "$JWT_KEY_FILE")"
  [[ -d "$dir" ]] || install -d -m 0755 "$dir"
  # Only Slurm's own directory: root writes the key there (with several controllers, a shared one).
  [[ ! -L "$dir" && "$(stat -c %U "$dir")" =~ ^(root|$slurm_user)$ ]] ||
    die "$dir is a symlink or not owned by root or $slurm_user; not writing the key there"
  if [[ ! -s "$JWT_KEY_FILE" ]]; then
    tmp="$(mktemp "$dir/.jwt.XXXXXX")"
    head -c 32 /dev/urandom >"$tmp"
    chmod 0600 "$tmp"
    chown "$slurm_user:" "$tmp"
    # A hard link never replaces: when another controller made the key meanwhile, its key stays and is used here too.
    if ln "$tmp" "$JWT_KEY_FILE" 2>/dev/null; then
      log "generated the HS256 key $JWT_KEY_FILE (owner $slurm_user, mode 0600)"
    else
      log "another controller made $JWT_KEY_FILE first; using it"
    fi
    rm -f "$tmp"
  fi
  [[ -s "$JWT_KEY_FILE" ]] || die "$JWT_KEY_FILE is empty; remove it and run again"
  # slurmctld (as SlurmUser) reads it; nobody else may.
  chmod 0600 "$JWT_KEY_FILE"
  chown "$slurm_user:" "$JWT_KEY_FILE"
}

# jwt_accepted : true when slurmctld authenticates a 60-second token for `nobody` signed with our key.
jwt_accepted() {
  local token
  token="$(python3 - "$JWT_KEY_FILE" <<'PY'
import base64, hashlib, hmac, json, sys, time
key = open(sys.argv[1], "rb").read()
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
now = int(time.time())
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
body = b64(json.dumps({"sun": "nobody", "iat": now, "exp": now + 60}).encode())
sig = b64(hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest())
print(f"{head}.{body}.{sig}")
PY
)"
  SLURM_JWT="$token" SLURM_CONF="$SLURM_CONF" sinfo -h -o %P >/dev/null 2>&1
}

publish_key() {
  local arn region marker want work
  arn="$(param slurm.jwt_key_secret_arn)"
  [[ -n "$arn" ]] || die "slurm.auth is jwt but slurm.jwt_key_secret_arn is empty"
  region="$(cut -d: -f4 <<<"$arn")"
  [[ "$arn" == arn:*:secretsmanager:* && -n "$region" ]] || die "not a Secrets Manager ARN: $arn"
  marker="$JWT_KEY_FILE.published"
  want="$(sha256sum "$JWT_KEY_FILE" | cut -d' ' -f1) $arn"
  if [[ -r "$marker" && "$(cat "$marker")" == "$want" ]]; then
    log "the token issuer already has this key ($arn)"
    return 0
  fi
  work="$(mktemp -d)"
  chmod 700 "$work"
  # From the file to a 0600 file: the key is never in argv or the environment.
  python3 -c 'import base64, json, sys
print(json.dumps({"jwt_hs256_key_b64": base64.b64encode(open(sys.argv[1], "rb").read()).decode()}))' \
    "$JWT_KEY_FILE" >"$work/value.json"
  if ! retry_backoff 5 aws secretsmanager put-secret-value --secret-id "$arn" --region "$region" \
    --secret-string "file://$work/value.json" >/dev/null; then
    rm -rf "$work"
    die "cannot write the JWT key to $arn"
  fi
  rm -rf "$work"
  echo "$want" >"$marker"
  chmod 0600 "$marker"
  log "wrote the JWT key to $arn for the token issuer"
}

[[ "$mode" == jwt ]] && ensure_key
new="$(mktemp)"
trap 'rm -f "$new"' EXIT
render_block "$INCLUDED_CONF" "$mode" >"$new"
if [[ -f "$INCLUDED_CONF" ]] && cmp -s "$new" "$INCLUDED_CONF" || [[ ! -f "$INCLUDED_CONF" && ! -s "$new" ]]; then
  log "$INCLUDED_CONF already has the $mode settings"
else
  chmod 0644 "$new"
  cp "$new" "$INCLUDED_CONF.platform-tmp"
  mv -f "$INCLUDED_CONF.platform-tmp" "$INCLUDED_CONF"
  log "wrote the $mode settings to $INCLUDED_CONF"
  SLURM_CONF="$SLURM_CONF" scontrol reconfigure
  log "slurmctld reconfigured"
fi

if [[ "$mode" == jwt ]]; then
  if jwt_accepted; then
    log "slurmctld accepts auth/jwt tokens; root jobs are disabled"
  else
    log "WARNING: slurmctld does not accept auth/jwt tokens yet. Slurm releases before 23.11 load a new" \
      "authentication plugin only when slurmctld starts: restart the slurmctld service once." \
      "Until then Studio users cannot reach Slurm (their spaces hold no munge key)."
  fi
  publish_key
fi
