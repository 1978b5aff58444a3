#!/usr/bin/env bash
# Keeps the node's instance credentials away from job processes: every process whose uid is not 0 is refused the
# instance metadata service (IPv4 169.254.169.254, and the IPv6 endpoint fd00:ec2::254 where ip6tables exists), so
# a user's job cannot take the node role's credentials (which can read the login secret, and, in shared mode, the
# munge key in it). Root (HyperPod's agents, slurmd, this platform's own timers) keeps access.
#
# HyperPod's sagemaker-role-proxy-agent serves the execution role's credentials on the node; how is not published
# (lifecycle/node_contract.json, role-proxy-imds and hyperpod-agents-run-as-root, both unverified). So:
#   - each address is rejected twice, by destination and by conntrack's original destination: a proxy that answers
#     on 169.254.169.254 itself is caught by the first rule, one reached through a nat OUTPUT DNAT of that address by
#     the second (the filter table sees a redirected packet's new destination, never 169.254.169.254;
#     iptables-extensions(8), conntrack --ctorigdst). `--ctdir ORIGINAL` keeps the second rule off REJECT's own
#     answer, which carries the same connection: without it the caller waits for a timeout instead of being refused
#     (tests/e2e/test_imds_block.py shows both). The nat rules the node has for the address (any chain) are logged.
#   - the proxy such a rule leads to (DNAT --to-destination IP:PORT, REDIRECT --to-ports PORT) is refused to every uid
#     but root as well: a user who connects to its port directly never goes through the metadata address.
#   - a HyperPod unit (sagemaker-*.service) that runs as a user other than root keeps access: an ACCEPT for its uid
#     ahead of the rejects, and a contract warning naming the unit.
#   - then, as `nobody`, a connection to 169.254.169.254:80 and to each proxy endpoint found must be refused; one that
#     succeeds fails the node. "The block holds" is said only when every path was tested so: a nat rule for the
#     address of another kind (a jump to a chain of its own, a DNAT without a port, ...) gets a contract warning that
#     the block is not verified for it.
#
# A security control, so it fails the node rather than skip: no iptables, no node.
# Idempotent: each rule is checked with `-C` before it is added. A systemd oneshot unit re-applies the rules at every
# boot (netfilter rules do not survive a reboot); the unit file is written, and systemd reloaded, only when it differs.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SERVICE=hyperpod-block-imds.service
IMDS_V4=169.254.169.254
IMDS_V6=fd00:ec2::254
IMDS_PROBE="${IMDS_PROBE:-1}"

# ensure TOOL OP RULE... : RULE in TOOL's filter table (OP -A appends, -I inserts at the top) unless it is there.
ensure() {
  local tool=$1 op=$2
  shift 2
  "$tool" -w -C "$@" 2>/dev/null && return 0
  if [[ "$op" == -I ]]; then
    "$tool" -w -I "$1" 1 "${@:2}" || die "$tool could not add: $*"
  else
    "$tool" -w -A "$@" || die "$tool could not add: $*"
  fi
  log "$tool: $*"
}

# exempt_uids -> "uid unit" for every HyperPod unit that runs as a user other than root (contract warning each)
exempt_uids() {
  local unit user uid
  while read -r unit _; do
    [[ "$unit" == sagemaker-*.service ]] || continue
    user="$(systemctl show -p User --value "$unit" 2>/dev/null || true)"
    [[ -z "$user" || "$user" == root || "$user" == 0 ]] && continue
    uid="$(id -u "$user" 2>/dev/null)" || { log "WARNING: $unit runs as $user, which does not exist"; continue; }
    echo "$uid $unit"
  done < <(systemctl list-units --type=service --all --no-legend --plain 'sagemaker-*' 2>/dev/null || true)
}

# block TOOL ADDRESS : TOOL's rules for ADDRESS, exemptions first.
block() {
  local tool=$1 address=$2 uid unit
  while read -r uid unit; do
    [[ -n "$uid" ]] || continue
    ensure "$tool" -I OUTPUT -d "$address" -m owner --uid-owner "$uid" -j ACCEPT
    ensure "$tool" -I OUTPUT -m conntrack --ctorigdst "$address" --ctdir ORIGINAL -m owner --uid-owner "$uid" -j ACCEPT
  done <<<"$EXEMPT"
  ensure "$tool" -A OUTPUT -d "$address" -m owner ! --uid-owner 0 -j REJECT
  ensure "$tool" -A OUTPUT -m conntrack --ctorigdst "$address" --ctdir ORIGINAL -m owner ! --uid-owner 0 -j REJECT
}

# redirects TOOL ADDRESS : every nat rule of the node (any chain) that names ADDRESS, one a line, as `iptables -S`
# prints it.
redirects() {
  "$1" -w -t nat -S 2>/dev/null | grep -F -- "$2" || true
}

# PROXIES: "address port" of each local endpoint a nat rule sends metadata traffic to; UNTESTED: the nat rules for the
# address whose arrangement this script does not know (so cannot test).
PROXIES=()
UNTESTED=()

# block_proxies ADDRESS : the credential proxy a DNAT (--to-destination IP:PORT, or IP with the rule's --dport) or a
# REDIRECT (--to-ports PORT, a port of this host) of ADDRESS leads to is itself refused to every uid but root and the
# exempt ones: a user who connects to it directly, not through ADDRESS, never passes the original-destination rule.
block_proxies() {
  local address=$1 rule ip port uid unit
  while IFS= read -r rule; do
    [[ -n "$rule" ]] || continue
    log "iptables: this node redirects metadata traffic ($rule); the block matches it by its original destination"
    ip="" port=""
    if [[ "$rule" =~ -j\ DNAT\ --to-destination\ ([0-9.]+)(:([0-9]+))?($|\ ) ]]; then
      ip="${BASH_REMATCH[1]}" port="${BASH_REMATCH[3]}"
      if [[ -z "$port" && "$rule" =~ --dport\ ([0-9]+)($|\ ) ]]; then port="${BASH_REMATCH[1]}"; fi
    elif [[ "$rule" =~ -j\ REDIRECT\ --to-ports\ ([0-9]+)($|\ ) ]]; then
      ip=127.0.0.1 port="${BASH_REMATCH[1]}"
    fi
    if [[ -z "$ip" || -z "$port" || "$rule" != *" -p tcp "* ]]; then
      UNTESTED+=("$rule")
      continue
    fi
    while read -r uid unit; do
      [[ -n "$uid" ]] || continue
      ensure iptables -I OUTPUT -d "$ip" -p tcp --dport "$port" -m owner --uid-owner "$uid" -j ACCEPT
    done <<<"$EXEMPT"
    ensure iptables -A OUTPUT -d "$ip" -p tcp --dport "$port" -m owner ! --uid-owner 0 -j REJECT
    PROXIES+=("$ip $port")
  done < <(redirects iptables "$address")
}

# reach ADDRESS PORT : how a connection as `nobody` to ADDRESS:PORT ends: connected, refused, or the error/timeout.
reach() {
  timeout 5 setpriv --reuid=65534 --regid=65534 --clear-groups \
    bash -c "exec 3<>/dev/tcp/$1/$2 && echo connected" 2>&1 || true
}

# probe : as `nobody`, the metadata service and every proxy endpoint found must refuse the connection (REJECT answers
# at once); one that accepts fails the node. "The block holds" only when every path was tested and refused, and no
# redirection of another kind was found: for one this script does not know, it says it could not test it.
probe() {
  local result target address port tested=() silent=()
  [[ "$IMDS_PROBE" == 1 ]] || return 0
  for target in "$IMDS_V4 80" "${PROXIES[@]}"; do
    read -r address port <<<"$target"
    result="$(reach "$address" "$port")"
    case "$result" in
      *connected*) die "a process running as nobody still reached $address:$port$([[ "$address" == "$IMDS_V4" ]] ||
        echo " (the credential proxy the metadata address is redirected to)"): the metadata block is not effective" ;;
      *"Connection refused"*) tested+=("$address:$port") ;;
      *) silent+=("$address:$port (${result:-timed out})") ;;
    esac
  done
  if ((${#UNTESTED[@]})); then
    contract_warn role-proxy-imds "metadata traffic is redirected in a way this check does not know how to test" \
      "(${UNTESTED[*]}); the rules are in place, but the block is NOT verified for that path"
  elif ((${#silent[@]})); then
    log "as nobody, ${silent[*]} gave no answer within 5 s; the rules are in place, the block is not verified"
  else
    log "as nobody, ${tested[*]} refuse the connection: the block holds"
  fi
}

command -v iptables >/dev/null || die "iptables is not installed: it is needed to keep instance credentials from non-root processes"
EXEMPT="$(exempt_uids)"
while read -r uid unit; do
  [[ -n "$uid" ]] || continue
  contract_warn hyperpod-agents-run-as-root "$unit runs as uid $uid, not root: that uid keeps instance metadata" \
    "access (an ACCEPT ahead of the block); any other process of that uid has it too"
done <<<"$EXEMPT"
block iptables "$IMDS_V4"
block_proxies "$IMDS_V4"
if command -v ip6tables >/dev/null; then
  block ip6tables "$IMDS_V6"
  redirects ip6tables "$IMDS_V6" | while IFS= read -r rule; do
    contract_warn role-proxy-imds "IPv6 metadata traffic is redirected ($rule): the original-destination rule" \
      "covers it, but the proxy it leads to is not blocked or tested"
  done
else
  log "ip6tables is not installed: the IPv6 metadata endpoint $IMDS_V6 is left as the node has it"
fi
probe

# At boot the unit runs this node's own copy, with BLOCK_IMDS_RULES_ONLY=1: rules only, no unit rewriting.
[[ "${BLOCK_IMDS_RULES_ONLY:-0}" == 1 ]] && exit 0

mkdir -p "$PLATFORM_DIR/lib"
for f in block_imds.sh lib/common.sh; do
  same_file "$HERE/$f" "$PLATFORM_DIR/$f" || install -m 0755 "$HERE/$f" "$PLATFORM_DIR/$f"
done

unit="$(mktemp)"
trap 'rm -f "$unit"' EXIT
write_text "$unit" <<UNIT
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
if ! same_file "$unit" "$SYSTEMD_DIR/$SERVICE"; then
  mkdir -p "$SYSTEMD_DIR"
  install -m 0644 "$unit" "$SYSTEMD_DIR/$SERVICE"
  log "wrote $SYSTEMD_DIR/$SERVICE"
  systemctl daemon-reload
fi
systemctl is-enabled --quiet "$SERVICE" || systemctl enable "$SERVICE"
