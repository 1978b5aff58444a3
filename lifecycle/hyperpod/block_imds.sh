#!/usr/bin/env bash
# Keeps the node's instance credentials away from job processes: every process whose uid is not 0 is refused the
# instance metadata service (IPv4 169.254.169.254, and the IPv6 endpoint fd00:ec2::254 where ip6tables exists), so
# a user's job cannot take the node role's credentials (which can read the login secret, and, in shared mode, the
# munge key in it). Root (HyperPod's agents, slurmd, this platform's own timers) keeps access.
#
# A security control, so it fails the node rather than skip: no iptables, no node.
# Idempotent: each rule is checked with `-C` before `-A`. A systemd oneshot unit re-applies the rules at every boot
# (netfilter rules do not survive a reboot); the unit file is written, and systemd reloaded, only when it differs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SERVICE=hyperpod-block-imds.service
IMDS_V4=169.254.169.254
IMDS_V6=fd00:ec2::254

# ensure_rule TOOL ADDRESS : appends the reject rule to TOOL's OUTPUT chain unless it is there already.
ensure_rule() {
  local tool=$1 rule=(OUTPUT -d "$2" -m owner ! --uid-owner 0 -j REJECT)
  if "$tool" -w -C "${rule[@]}" 2>/dev/null; then
    return 0
  fi
  "$tool" -w -A "${rule[@]}" || die "$tool could not add: ${rule[*]}"
  log "$tool: OUTPUT to $2 rejected for every uid but 0"
}

command -v iptables >/dev/null || die "iptables is not installed: it is needed to keep instance credentials from non-root processes"
ensure_rule iptables "$IMDS_V4"
if command -v ip6tables >/dev/null; then
  ensure_rule ip6tables "$IMDS_V6"
else
  log "ip6tables is not installed: the IPv6 metadata endpoint $IMDS_V6 is left as the node has it"
fi

# At boot the unit runs this node's own copy, with BLOCK_IMDS_RULES_ONLY=1: rules only, no unit rewriting.
[[ "${BLOCK_IMDS_RULES_ONLY:-0}" == 1 ]] && exit 0

mkdir -p "$PLATFORM_DIR/lib"
for f in block_imds.sh lib/common.sh; do
  cmp -s "$HERE/$f" "$PLATFORM_DIR/$f" || install -m 0755 "$HERE/$f" "$PLATFORM_DIR/$f"
done

unit="$(mktemp)"
trap 'rm -f "$unit"' EXIT
cat >"$unit" <<UNIT
# Written by the HyperPod platform's block_imds.sh.
[Unit]
Description=Reject instance metadata access for every uid but root
After=network-pre.target
Before=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
Environment=BLOCK_IMDS_RULES_ONLY=1
ExecStart=/bin/bash $PLATFORM_DIR/block_imds.sh

[Install]
WantedBy=multi-user.target
UNIT
if ! cmp -s "$unit" "$SYSTEMD_DIR/$SERVICE"; then
  mkdir -p "$SYSTEMD_DIR"
  install -m 0644 "$unit" "$SYSTEMD_DIR/$SERVICE"
  log "wrote $SYSTEMD_DIR/$SERVICE"
  systemctl daemon-reload
fi
systemctl is-enabled --quiet "$SERVICE" || systemctl enable "$SERVICE"
