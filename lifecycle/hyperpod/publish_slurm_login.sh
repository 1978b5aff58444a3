#!/bin/bash
# Runs on the Slurm controller (as root, at the end of on_create). Publishes what a SageMaker Studio
# space needs to act as a Slurm login node (lifecycle/studio/slurm_login_node.sh) as one JSON value
# of the Secrets Manager secret the CDK stack created:
#   {"slurm_version", "controller_host", "controller_addr", "controllers", "slurmctld_port", "cluster_name",
#    "auth", "munge_key_b64" (munge only), "slurm_conf", "slurm_conf_includes", "client_bundle"}
# controllers [{"host", "addr"}]: every SlurmctldHost, primary first (controller_host/addr repeat it). With several
# controllers (HyperPod multi-head) each runs this script and, reading the same slurm.conf, writes the same value: the
# second finds nothing to publish, and a backup that replaces one publishes the new address; clients in Studio follow
# whichever controller is active, as Slurm clients do, from the slurm.conf's SlurmctldHost lines.
# client_bundle {"s3_uri", "sha256"}: this controller's own Slurm client, built by build_slurm_client_bundle.sh and
# uploaded under SLURM_CLIENT_BUNDLE_S3_PREFIX (the lifecycle bucket's slurm-client/ prefix, which only the cluster's
# role may write). Studio installs it from there and trusts it only if its sha256 is the one in this secret, which
# only the cluster writes. The key carries the sha256, so the same build is never uploaded twice.
# SLURM_AUTH=jwt (per-user mode): the value carries no munge key, and the key file is never read; Studio users then
# authenticate with their own auth/jwt token (configure_slurm_auth.sh, lambda/slurm_tokens).
# slurm_conf_includes maps a file name to the content of every file slurm.conf's `include` lines pull in (HyperPod's
# slurm.conf includes e.g. accounting.conf); the published slurm.conf names them relative to itself, so a client
# that writes them next to it reads the same configuration.
# Usage: publish_slurm_login.sh [SECRET_ARN]   (default: $SLURM_LOGIN_SECRET_ARN)
#   SLURM_CLIENT_BUNDLE_S3_PREFIX=s3://BUCKET/slurm-client/ (on_init_complete.sh passes slurm.client_bundle_s3_prefix)
# Writes a new secret version only when the value differs from the current one. Never prints the key.
set -euo pipefail
# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SECRET_ARN="${1:-${SLURM_LOGIN_SECRET_ARN:-}}"
SLURM_CONF="${SLURM_CONF:-$SLURM_CONF_DIR/slurm.conf}"
MUNGE_KEY="${MUNGE_KEY:-/etc/munge/munge.key}"
SLURM_WAIT_ATTEMPTS="${SLURM_WAIT_ATTEMPTS:-60}"
SLURM_AUTH="${SLURM_AUTH:-munge}"
BUNDLE_PREFIX="${SLURM_CLIENT_BUNDLE_S3_PREFIX:-}"
[[ "$SLURM_AUTH" == munge || "$SLURM_AUTH" == jwt ]] || die "SLURM_AUTH must be munge or jwt, got '$SLURM_AUTH'"

[[ -n "$SECRET_ARN" ]] || die "usage: $0 SECRET_ARN (or set SLURM_LOGIN_SECRET_ARN)"
REGION="$(cut -d: -f4 <<<"$SECRET_ARN")" # the secret's own region, whatever the instance's
[[ "$SECRET_ARN" == arn:*:secretsmanager:* && -n "$REGION" ]] || die "not a Secrets Manager ARN: $SECRET_ARN"
if [[ -n "$BUNDLE_PREFIX" && ! "$BUNDLE_PREFIX" =~ ^s3://[a-z0-9][a-z0-9.-]+/([A-Za-z0-9._-]+/)+$ ]]; then
  die "SLURM_CLIENT_BUNDLE_S3_PREFIX must be s3://BUCKET/PREFIX/ (ending in /), got '$BUNDLE_PREFIX'"
fi
# HyperPod writes slurm.conf after the node boots; publish only once it names the controller.
wait_until "$SLURM_WAIT_ATTEMPTS" "a complete $SLURM_CONF" grep -qiE '^\s*SlurmctldHost\s*=' "$SLURM_CONF" \
  || die "cannot read a slurm.conf with SlurmctldHost at $SLURM_CONF"
if [[ "$SLURM_AUTH" == munge ]]; then
  wait_until "$SLURM_WAIT_ATTEMPTS" "$MUNGE_KEY" test -r "$MUNGE_KEY" || die "cannot read $MUNGE_KEY"
fi

SLURM_VERSION="$(SLURM_CONF="$SLURM_CONF" sinfo --version | awk '{print $2}')"
[[ "$SLURM_VERSION" =~ ^[0-9]+\.[0-9]+ ]] || die "unexpected 'sinfo --version' output: '$SLURM_VERSION'"

WORK="$(mktemp -d)"
chmod 700 "$WORK"
trap 'rm -rf "$WORK"' EXIT

# The current value, if the secret has one yet (a new secret has no version until the first put: that is the one
# error that means "nothing yet"; anything else, e.g. no route yet on a fresh node, is retried).
read_current() {
  aws secretsmanager get-secret-value --secret-id "$SECRET_ARN" --region "$REGION" \
    --query SecretString --output text >"$WORK/current.json" 2>"$WORK/get.err" && return 0
  grep -q ResourceNotFoundException "$WORK/get.err" && { : >"$WORK/current.json"; return 0; }
  cat "$WORK/get.err" >&2
  return 1
}
retry_backoff 5 read_current || die "cannot read $SECRET_ARN: $(cat "$WORK/get.err")"

# The client bundle: built every run (cheap, reproducible), uploaded only when the secret does not already name it.
BUNDLE_URI="" BUNDLE_SHA=""
if [[ -n "$BUNDLE_PREFIX" ]]; then
  read -r bundle_file BUNDLE_SHA < <(SLURM_CONF="$SLURM_CONF" bash "$(dirname "${BASH_SOURCE[0]}")/build_slurm_client_bundle.sh" \
    "$WORK/bundle" | tail -n1)
  [[ -f "$bundle_file" && "$BUNDLE_SHA" =~ ^[0-9a-f]{64}$ ]] || die "building the Slurm client bundle failed"
  BUNDLE_URI="$BUNDLE_PREFIX${bundle_file##*/}"
  published_sha="$(python3 -S -c 'import json, sys
try:
    b = json.load(open(sys.argv[1])).get("client_bundle") or {}
except ValueError:
    b = {}
print(b.get("sha256", "") if b.get("s3_uri") == sys.argv[2] else "")' "$WORK/current.json" "$BUNDLE_URI")"
  if [[ "$published_sha" == "$BUNDLE_SHA" ]]; then
    log "the client bundle $BUNDLE_URI is already published"
  else
    retry_backoff 5 aws s3 cp --only-show-errors --region "$REGION" "$bundle_file" "$BUNDLE_URI" ||
      die "cannot upload the Slurm client bundle to $BUNDLE_URI"
    log "uploaded the Slurm client bundle to $BUNDLE_URI (sha256 $BUNDLE_SHA)"
  fi
else
  log "SLURM_CLIENT_BUNDLE_S3_PREFIX is not set: no client bundle (Studio login nodes need one)"
fi

# Builds the value from the files directly, so the key never appears in argv or the environment.
built=0
SLURM_VERSION="$SLURM_VERSION" SLURM_AUTH="$SLURM_AUTH" BUNDLE_URI="$BUNDLE_URI" BUNDLE_SHA="$BUNDLE_SHA" \
  python3 -S "$HERE/lib/slurm_login_value.py" "$SLURM_CONF" "$MUNGE_KEY" "$WORK/value.json" || built=$?
if ((built == 3)); then
  log "WARNING: this backup controller cannot resolve the primary named first in $SLURM_CONF; the primary publishes"
  exit 0
fi
((built == 0)) || exit "$built"

if python3 -S -c 'import json, sys
try:
    a, b = (json.load(open(p)) for p in sys.argv[1:])
except ValueError:
    sys.exit(1)
sys.exit(a != b)' "$WORK/value.json" "$WORK/current.json"; then
  log "secret $SECRET_ARN already holds these settings; nothing to publish"
  exit 0
fi
retry_backoff 5 aws secretsmanager put-secret-value --secret-id "$SECRET_ARN" --region "$REGION" \
  --secret-string "file://$WORK/value.json" >/dev/null
log "published the Slurm login settings to $SECRET_ARN"
