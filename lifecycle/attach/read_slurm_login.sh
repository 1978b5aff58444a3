#!/bin/bash
# Runs as root on an existing Slurm controller (attach mode, cluster.existing), in the Session Manager session
# `make attach` opens (cli/attach.py): reads what the controller has (its slurm.conf, Slurm version, munge key and
# its own Slurm client build) and hands it to the attach step, which checks it and writes the Slurm login secret.
# The controller ran none of this project's lifecycle scripts: this needs only what HyperPod's AMI gives
# (lifecycle/node_contract.json: /opt/slurm/etc/slurm.conf on the controller, the Slurm commands, python3, curl).
# Nothing on the controller is changed; everything it writes is in a private temporary directory, removed on exit.
#
#   read_slurm_login.sh AUTH BUNDLE_S3_PREFIX VALUE_PUT_URL BUNDLE_PUT_URL
#
# AUTH              munge (shared mode: the value carries the munge key) or jwt (per-user mode: no munge key; slurmctld
#                   must already take auth/jwt tokens, which enable_slurm_jwt.sh turns on).
# BUNDLE_S3_PREFIX  s3://BUCKET/slurm-client/: where the attach step stores the bundle; the value names it there.
# *_PUT_URL         presigned S3 PUT URLs the attach step signed for this run: the value (which holds the munge key)
#                   and the bundle never pass through the session's output, which Session Manager may log.
# Test seams: SLURM_CONF, MUNGE_KEY, SLURM_BIN_DIR, SLURM_PLUGIN_DIR, ATTACH_ALLOW_HTTP (a moto server's http URLs).
set -euo pipefail
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=.
HYPERPOD="$HERE/../hyperpod"
# The bundle's modes come from the files it is built from: the umask the platform's own controller runs with, so
# Studio users may run the commands and the same build gives the same sha256 in both modes.
umask 022
WORK="$(mktemp -d)"
chmod 700 "$WORK"
trap 'rm -rf "$WORK"' EXIT
export LOG_DIR="$WORK/log"
# shellcheck source-path=SCRIPTDIR source=../hyperpod/lib/common.sh
source "$HYPERPOD/lib/common.sh"

[[ $# -eq 4 ]] || die "usage: $0 AUTH BUNDLE_S3_PREFIX VALUE_PUT_URL BUNDLE_PUT_URL"
AUTH="$1" PREFIX="$2" VALUE_URL="$3" BUNDLE_URL="$4"
[[ "$PREFIX" =~ ^s3://[a-z0-9][a-z0-9.-]+/([A-Za-z0-9._-]+/)+$ ]] || die "BUNDLE_S3_PREFIX must be s3://BUCKET/PREFIX/, got '$PREFIX'"
[[ "$VALUE_URL" == https://* && "$BUNDLE_URL" == https://* ]] || [[ -n "${ATTACH_ALLOW_HTTP:-}" ]] ||
  die "the PUT URLs must be https"

# slurm.conf where this cluster has it: HyperPod's cluster agent writes /opt/slurm/etc/slurm.conf on the controller.
if [[ -z "${SLURM_CONF:-}" ]]; then
  for candidate in /opt/slurm/etc/slurm.conf /etc/slurm/slurm.conf /usr/local/etc/slurm.conf; do
    if grep -qiE '^\s*SlurmctldHost\s*=' "$candidate" 2>/dev/null; then SLURM_CONF="$candidate"; break; fi
  done
fi
[[ -n "${SLURM_CONF:-}" ]] || die "no slurm.conf with SlurmctldHost in /opt/slurm/etc, /etc/slurm or /usr/local/etc: is this the controller?"
export SLURM_CONF
case "$AUTH" in
  munge) ;;
  jwt)
    # Per-user mode: the value carries no munge key, so slurmctld must take tokens. enable_slurm_jwt.sh (make attach's
    # jwt step, run just before) turns it on; here it is only checked.
    # (the output in a variable first: with pipefail, grep -q quitting early would fail scontrol with SIGPIPE)
    config="$(scontrol show config 2>/dev/null)" || true
    grep -qiE '^AuthAltTypes[[:space:]]*=.*auth/jwt' <<<"$config" ||
      die "per-user mode needs auth/jwt at slurmctld ('scontrol show config' has no AuthAltTypes=auth/jwt): run" \
        "make attach's jwt step first (ARGS=\"--step jwt\")" ;;
  *) die "AUTH must be munge or jwt, got '$AUTH'" ;;
esac
MUNGE_KEY="${MUNGE_KEY:-/etc/munge/munge.key}"
[[ "$AUTH" == jwt ]] || [[ -r "$MUNGE_KEY" && ! -L "$MUNGE_KEY" ]] || die "cannot read $MUNGE_KEY (or it is a symlink)"

if [[ -x "$SLURM_BIN_DIR/sinfo" ]]; then PATH="$SLURM_BIN_DIR:$PATH"; fi
SLURM_VERSION="$(sinfo --version | awk '{print $2}')"
[[ "$SLURM_VERSION" =~ ^[0-9]+\.[0-9]+ ]] || die "unexpected 'sinfo --version' output: '$SLURM_VERSION'"

read -r bundle_file bundle_sha < <(bash "$HYPERPOD/build_slurm_client_bundle.sh" "$WORK/bundle" | tail -n1)
[[ -f "$bundle_file" && "$bundle_sha" =~ ^[0-9a-f]{64}$ ]] || die "building the Slurm client bundle failed"
built=0
SLURM_VERSION="$SLURM_VERSION" SLURM_AUTH="$AUTH" BUNDLE_URI="$PREFIX${bundle_file##*/}" BUNDLE_SHA="$bundle_sha" \
  python3 "$HYPERPOD/lib/slurm_login_value.py" "$SLURM_CONF" "$MUNGE_KEY" "$WORK/value.json" || built=$?
((built != 3)) || die "this is a backup controller that cannot resolve the primary named first in $SLURM_CONF; attach through the primary"
((built == 0)) || die "cannot build the login value from $SLURM_CONF"

curl -fsS --retry 3 -T "$bundle_file" "$BUNDLE_URL" >/dev/null || die "uploading the client bundle failed"
curl -fsS --retry 3 -T "$WORK/value.json" "$VALUE_URL" >/dev/null || die "uploading the login value failed"
log "handed over Slurm $SLURM_VERSION's login value and client bundle ${bundle_file##*/} (sha256 $bundle_sha)"
