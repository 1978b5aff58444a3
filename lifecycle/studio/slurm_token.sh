#!/bin/bash
# Per-user mode (the cluster's login secret says "auth": "jwt"): the space holds no munge key. Its user reaches
# slurmctld with their own Slurm auth/jwt token, which the platform's token issuer (lambda/slurm_tokens) renews every
# 15 minutes in the secret <SLURM_TOKEN_SECRET_PREFIX><profile>; only this profile's execution role can read it.
# Sourced by slurm_login_node.sh; `bash slurm_token.sh refresh` is the background refresher it starts.
#
# - the token goes to $SLURM_TOKEN_FILE (default ~/.slurm/token, mode 0600, owned by $SLURM_TOKEN_OWNER, default the
#   user running this script: the IDE's user), written as that user (never by root into their home);
# - wrappers in $R/usr/local/bin (ahead of /usr/bin on PATH) export SLURM_JWT from that file on every call of sbatch,
#   squeue, ..., so a terminal opened hours ago still sends a current token;
# - the refresher re-reads the secret every $SLURM_TOKEN_REFRESH_SECONDS (default 300; 0: none, for tests).

TOKEN_FILE="${SLURM_TOKEN_FILE:-${HOME:-/home/sagemaker-user}/.slurm/token}"
TOKEN_OWNER="${SLURM_TOKEN_OWNER:-$(id -un)}"
WRAPPER_DIR="${SLURM_WRAPPER_DIR:-${SLURM_LOGIN_ROOT:-}/usr/local/bin}"
RESOURCE_METADATA="${SLURM_RESOURCE_METADATA:-/opt/ml/metadata/resource-metadata.json}"
REFRESH_SECONDS="${SLURM_TOKEN_REFRESH_SECONDS:-300}"
WRAPPED=(sbatch squeue scancel sinfo scontrol sacct sprio sshare sstat)

# token_secret_id -> <prefix><this space's user profile name>
token_secret_id() {
  local prefix="${SLURM_TOKEN_SECRET_PREFIX:-}" profile="${SLURM_STUDIO_PROFILE:-}"
  [[ -n "$prefix" ]] || die "per-user mode needs SLURM_TOKEN_SECRET_PREFIX (set by the lifecycle config)"
  if [[ -z "$profile" ]]; then
    profile="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("UserProfileName", ""))' \
      "$RESOURCE_METADATA" 2>/dev/null)" || true
  fi
  [[ "$profile" =~ ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$ ]] ||
    die "cannot tell this space's user profile (UserProfileName in $RESOURCE_METADATA): '$profile'"
  echo "$prefix$profile"
}

# as_owner CMD... : CMD as TOKEN_OWNER (this user; as root, runuser; else passwordless sudo).
as_owner() {
  if [[ "$(id -un)" == "$TOKEN_OWNER" ]]; then
    "$@"
  elif ((EUID == 0)); then
    runuser -u "$TOKEN_OWNER" -- "$@"
  else
    sudo -n -u "$TOKEN_OWNER" -- "$@"
  fi
}

# fetch_token REGION : writes the current token to TOKEN_FILE when it changed. 0: written or unchanged; 2: no token
# in the secret yet; 1: the secret cannot be read.
fetch_token() {
  local region=$1 id tmp rc=0
  id="$(token_secret_id)" || return 1
  tmp="$(mktemp)"
  if ! aws secretsmanager get-secret-value --secret-id "$id" --region "$region" --query SecretString \
    --output text >"$tmp" 2>"$tmp.err"; then
    log "cannot read $id: this profile's execution role reads only its own token secret ($(tr '\n' ' ' <"$tmp.err"))"
    rm -f "$tmp" "$tmp.err"
    return 1
  fi
  python3 - "$tmp" <<'PY' || rc=$?
import json, re, sys
path = sys.argv[1]
value = json.load(open(path))
token = value.get("token")
if not token:
    sys.exit(2)
if not re.fullmatch(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", token):
    sys.exit("the token secret does not hold a JWT")
open(path, "w").write(token + "\n")
PY
  rm -f "$tmp.err"
  if ((rc != 0)); then
    rm -f "$tmp"
    ((rc == 2)) && log "no token in $id yet: the issuer writes one within 15 minutes of deployment"
    return "$rc"
  fi
  if [[ -f "$TOKEN_FILE" ]] && cmp -s "$tmp" "$TOKEN_FILE"; then
    rm -f "$tmp"
    return 0
  fi
  # As the token's owner: the file is in their home, where root must not write through a path they can change.
  # shellcheck disable=SC2016 # the inner sh expands them
  as_owner sh -c 'set -e; umask 077; mkdir -p "$(dirname "$1")"; chmod 0700 "$(dirname "$1")"; cat >"$1.new"
    mv -f "$1.new" "$1"' _ "$TOKEN_FILE" <"$tmp" || {
    rm -f "$tmp"
    log "cannot write $TOKEN_FILE as $TOKEN_OWNER"
    return 1
  }
  rm -f "$tmp"
  log "renewed the Slurm token in $TOKEN_FILE"
}

# install_wrappers : one wrapper per client command, reading the token at each call.
install_wrappers() {
  local cmd real wrapper changed=1
  as_root install -d -m 0755 "$WRAPPER_DIR"
  for cmd in "${WRAPPED[@]}"; do
    real="$(PATH="${PATH//$WRAPPER_DIR:/}" command -v "$cmd")" || continue
    [[ "$real" != "$WRAPPER_DIR/$cmd" ]] || continue
    wrapper="$(mktemp)"
    printf '%s\n' '#!/bin/sh' "# slurm_login_node.sh (per-user mode): authenticate with this user's Slurm token" \
      "t=\"\${SLURM_TOKEN_FILE:-\$HOME/.slurm/token}\"" \
      "if [ -r \"\$t\" ]; then SLURM_JWT=\"\$(cat \"\$t\")\"; export SLURM_JWT; fi" \
      "exec $(client_exec "$real") \"\$@\"" >"$wrapper"
    if ! cmp -s "$wrapper" "$WRAPPER_DIR/$cmd" 2>/dev/null; then
      root_put "$WRAPPER_DIR/$cmd" 0755 <"$wrapper"
      changed=0
    fi
    rm -f "$wrapper"
  done
  return "$changed"
}

# start_refresher REGION : the background loop, once per space (a pid file under STATE_DIR).
start_refresher() {
  local pid_file="$STATE_DIR/token-refresher.pid" copy="$STATE_DIR/slurm_token.sh"
  ((REFRESH_SECONDS > 0)) || return 0
  if [[ -r "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
    return 0
  fi
  install -m 0700 "${BASH_SOURCE[0]}" "$copy"
  SLURM_TOKEN_REGION="$1" nohup setsid bash "$copy" refresh >>"$LOG_FILE" 2>&1 </dev/null 3>&- 9>&- &
  echo $! >"$pid_file"
  log "the Slurm token is renewed every ${REFRESH_SECONDS}s in the background (pid $!)"
}

if [[ "${BASH_SOURCE[0]}" == "$0" && "${1:-}" == refresh ]]; then
  set -uo pipefail
  log() { TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T [slurm-token] %s\n' -1 "$*"; } # (slurm_login_node.sh's log)
  die() {
    log "ERROR: $*" >&2
    exit 1
  }
  as_root() { if ((EUID == 0)); then "$@"; else sudo -n -- "$@"; fi; }
  while sleep "$REFRESH_SECONDS"; do
    fetch_token "$SLURM_TOKEN_REGION" || true
  done
fi
