#!/usr/bin/env bash
# Controller only. Root jobs refused in both modes, and how Studio users authenticate to slurmctld
# (platform_parameters.json `slurm.auth`). Everything goes into a delimited block of accounting.conf, the file
# HyperPod's slurm.conf includes and leaves to the customer (AWS's base-config setup_mariadb_accounting.sh appends
# there too; awslabs/awsome-distributed-ai@95b939cd); slurm.conf itself is never edited.
#
# - both modes: DisableRootJobs=YES (slurm.conf(5): "user root will be prevented from running any jobs"). In shared
#   mode every Studio user holds the munge key and can act as any uid: without it, as root on every node. A slurm.conf
#   that sets DisableRootJobs=YES itself is taken as it is; one that sets another value stops the script.
# - jwt (per-user mode, `shared_fsx: false`): Studio spaces get no munge key. slurmctld also accepts Slurm's auth/jwt
#   tokens (HS256), signed with a key only this node and the platform's token issuer hold; each Studio user receives a
#   short-lived token naming only themselves (lambda/slurm_tokens). This script
#     1. makes the key once: $JWT_KEY_FILE, 32 random bytes, mode 0600, owned by SlurmUser (/var/spool/slurm, or with
#        several controllers their shared StateSaveLocation, so a backup that takes over accepts the same tokens);
#     2. writes AuthAltTypes=auth/jwt and
#          AuthAltParameters=jwt_key=$JWT_KEY_FILE,disable_token_creation,max_token_lifespan=$MAX_TOKEN_LIFESPAN
#        slurm.conf(5): disable_token_creation 'Disable "scontrol token" use by non-SlurmUser accounts' (users would
#        otherwise mint their own long-lived tokens, which outlive their removal from the config);
#        max_token_lifespan 'max lifespan (in seconds) for any token generated for user accounts', added in Slurm
#        22.05.0rc1 (its NEWS): left out, with a log line, when `scontrol --version` is older. Both checked against
#        Debian's slurm-wlm 22.05.8 (man slurm.conf; tests/e2e/test_slurm_jwt.py);
#     3. runs `scontrol reconfigure` when the block changed, then checks that slurmctld accepts a token (Slurm before
#        23.11 loads a new auth plugin only on restart: it says so, and the cluster stays closed to Studio until then);
#     4. writes the key to the Secrets Manager secret `slurm.jwt_key_secret_arn` (write only: this node's role cannot
#        read it back; a marker file beside the key remembers what was written, so a second run writes nothing).
# - munge (shared mode): the block holds DisableRootJobs=YES only (an earlier per-user run's jwt lines go).
#
# Usage: configure_slurm_auth.sh   (reads PARAMS_FILE; idempotent; never prints the key)
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SLURM_CONF="${SLURM_CONF:-$SLURM_CONF_DIR/slurm.conf}"
INCLUDED_CONF="${INCLUDED_CONF:-$SLURM_CONF_DIR/accounting.conf}"
JWT_KEY_FILE="${JWT_KEY_FILE:-}" # default below: it depends on how many controllers slurm.conf names
SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"
# The longest token a user account may be given: the token issuer's lifetime (lambda/slurm_tokens, one hour).
MAX_TOKEN_LIFESPAN="${MAX_TOKEN_LIFESPAN:-3600}"
BEGIN_MARK="# BEGIN hyperpod-platform auth (configure_slurm_auth.sh manages this block; edits are overwritten)"
END_MARK="# END hyperpod-platform auth"

params slurm.auth slurm.jwt_key_secret_arn
mode="$(param slurm.auth)"
mode="${mode:-munge}"
[[ "$mode" == jwt || "$mode" == munge ]] || die "slurm.auth must be jwt or munge, got '$mode'"

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

# No included file (node_contract.json, slurm-conf-includes-accounting-conf): nothing is written, a contract warning, the
# node continues. Per-user mode then stays off and closed to Studio users (no token is accepted, and per-user mode never
# publishes the munge key); in shared mode root jobs stay as HyperPod's slurm.conf has them.
what=DisableRootJobs
[[ "$mode" == jwt ]] && what="DisableRootJobs and per-user mode (auth/jwt; Studio users cannot reach Slurm without it)"
included_conf "$what" || exit 0
if [[ "$mode" == jwt ]]; then
  for setting in AuthAltTypes AuthAltParameters; do
    [[ -z "$(slurm_setting "$setting")" ]] ||
      die "$SLURM_CONF sets $setting itself; the platform's per-user mode needs it from $INCLUDED_CONF"
  done
fi
block=(DisableRootJobs=YES)
case "$(slurm_setting DisableRootJobs)" in
  "") ;;
  [yY][eE][sS])
    log "$SLURM_CONF sets DisableRootJobs=YES itself"
    block=()
    ;;
  *) die "$SLURM_CONF sets DisableRootJobs=$(slurm_setting DisableRootJobs); the platform refuses root jobs in every" \
    "mode (a Studio user with the munge key would otherwise run jobs as root): remove it there" ;;
esac

# auth_parameters -> AuthAltParameters' value: max_token_lifespan only for a Slurm that knows it (22.05 and later).
auth_parameters() {
  local version major minor
  version="$(SLURM_CONF="$SLURM_CONF" scontrol --version 2>/dev/null | awk '{print $2}')"
  IFS=. read -r major minor _ <<<"$version"
  if [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] && ((10#$major * 100 + 10#$minor < 2205)); then
    log "Slurm $version predates max_token_lifespan (22.05): token creation stays disabled for users, without it" >&2
    echo "jwt_key=$JWT_KEY_FILE,disable_token_creation"
  else
    echo "jwt_key=$JWT_KEY_FILE,disable_token_creation,max_token_lifespan=$MAX_TOKEN_LIFESPAN"
  fi
}

# render_block FILE MODE > NEW : FILE with our block replaced; everything else kept.
render_block() {
  local lines=("${block[@]}")
  if [[ "$2" == jwt ]]; then
    lines=(AuthAltTypes=auth/jwt "AuthAltParameters=$(auth_parameters)" "${lines[@]}")
  fi
  lib_py marked_block.py "$1" "$BEGIN_MARK" "$END_MARK" AuthAltTypes,AuthAltParameters,DisableRootJobs \
    "${lines[@]}"
}

ensure_key() {
  local slurm_user dir tmp PARENT
  slurm_user="$(slurm_setting SlurmUser)"
  slurm_user="${slurm_user:-root}" # Slurm's default SlurmUser
  id -u "$slurm_user" >/dev/null 2>&1 || die "SlurmUser '$slurm_user' from $SLURM_CONF does not exist"
  parent_dir "$JWT_KEY_FILE"
  dir="$PARENT"
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
  token="$(lib_py jwt_probe.py "$JWT_KEY_FILE")"
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
  python3 -S -c 'import base64, json, sys
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
  wait_for_slurmctld "scontrol reconfigure ($mode settings)"
  SLURM_CONF="$SLURM_CONF" scontrol reconfigure
  log "slurmctld reconfigured"
fi

log "root jobs are refused (DisableRootJobs=YES)"
if [[ "$mode" == jwt ]]; then
  wait_for_slurmctld "checking that it accepts auth/jwt tokens"
  if jwt_accepted; then
    log "slurmctld accepts auth/jwt tokens; users cannot create tokens of their own"
  else
    log "WARNING: slurmctld does not accept auth/jwt tokens yet. Slurm releases before 23.11 load a new" \
      "authentication plugin only when slurmctld starts: restart the slurmctld service once." \
      "Until then Studio users cannot reach Slurm (their spaces hold no munge key)."
  fi
  publish_key
fi
