#!/usr/bin/env bats
# block_imds.sh: non-root processes are refused the instance metadata service; idempotent; persisted by a unit.

load test_helper

# By destination, and by conntrack's original destination (traffic a nat rule redirects to a local credential proxy).
V4_RULE="OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT
OUTPUT -m conntrack --ctorigdst 169.254.169.254 --ctdir ORIGINAL -m owner ! --uid-owner 0 -j REJECT"
V6_RULE="OUTPUT -d fd00:ec2::254 -m owner ! --uid-owner 0 -j REJECT
OUTPUT -m conntrack --ctorigdst fd00:ec2::254 --ctdir ORIGINAL -m owner ! --uid-owner 0 -j REJECT"
UNIT_NAME=hyperpod-block-imds.service

# path_without CMD... -> $PATH minus every directory that holds one of CMD (the stubs' directory included)
path_without() {
  local dir out=() cmd keep
  IFS=: read -ra dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    keep=1
    for cmd in "$@"; do [[ -e "$dir/$cmd" ]] && keep=0; done
    ((keep)) && out+=("$dir")
  done
  (IFS=:; echo "${out[*]}")
}

@test "adds the IPv4 and IPv6 reject rules for every uid but root, and enables a boot unit" {
  run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$FAKE_ROOT/iptables.rules")" = "$V4_RULE" ]
  [ "$(cat "$FAKE_ROOT/ip6tables.rules")" = "$V6_RULE" ]
  grep -qxF "ExecStart=/bin/bash $PLATFORM_DIR/block_imds.sh" "$SYSTEMD_DIR/$UNIT_NAME"
  grep -qxF "Environment=BLOCK_IMDS_RULES_ONLY=1" "$SYSTEMD_DIR/$UNIT_NAME"
  cmp "$SCRIPTS/block_imds.sh" "$PLATFORM_DIR/block_imds.sh"
  cmp "$SCRIPTS/lib/common.sh" "$PLATFORM_DIR/lib/common.sh"
  [ "$(calls systemctl | grep -c daemon-reload)" -eq 1 ]
  grep -qxF "$UNIT_NAME" "$FAKE_ROOT/enabled_units"
}

@test "second run: rules checked, none added, unit not rewritten, systemd not reloaded" {
  bash "$SCRIPTS/block_imds.sh"
  before="$(stat -c %Y.%i "$SYSTEMD_DIR/$UNIT_NAME")"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$FAKE_ROOT/iptables.rules")" = "$V4_RULE" ]
  [ "$(cat "$FAKE_ROOT/ip6tables.rules")" = "$V6_RULE" ]
  [ "$(calls iptables | grep -v -- ' -t nat -S$')" = "$(sed 's/^/iptables -w -C /' <<<"$V4_RULE")" ]
  [ "$(calls ip6tables | grep -v -- ' -t nat -S$')" = "$(sed 's/^/ip6tables -w -C /' <<<"$V6_RULE")" ]
  [ -z "$(mutating_calls)" ]
  [ "$(stat -c %Y.%i "$SYSTEMD_DIR/$UNIT_NAME")" = "$before" ]
}

@test "a changed unit file is rewritten and systemd reloaded" {
  bash "$SCRIPTS/block_imds.sh"
  echo "# edited" >>"$SYSTEMD_DIR/$UNIT_NAME"
  : >"$STUB_LOG"
  run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [ "$(grep -c edited "$SYSTEMD_DIR/$UNIT_NAME")" -eq 0 ]
  [ "$(calls systemctl | grep -c daemon-reload)" -eq 1 ]
}

@test "boot run (the unit's): rules only, no unit or copy written" {
  BLOCK_IMDS_RULES_ONLY=1 run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$FAKE_ROOT/iptables.rules")" = "$V4_RULE" ]
  [ ! -e "$SYSTEMD_DIR/$UNIT_NAME" ]
  [ -z "$(calls systemctl | grep -vE '^systemctl (list-units|show) ')" ]
}

@test "no iptables: the node fails, naming the missing control" {
  rm "$T/bin/iptables"
  PATH="$(path_without iptables)" run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"iptables is not installed"* ]]
  [ ! -e "$SYSTEMD_DIR/$UNIT_NAME" ]
}

@test "no ip6tables: IPv4 rule added, IPv6 skipped with a log line" {
  rm "$T/bin/ip6tables"
  PATH="$(path_without ip6tables)" run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$FAKE_ROOT/iptables.rules")" = "$V4_RULE" ]
  [[ "$output" == *"ip6tables is not installed"* ]]
}

@test "iptables refuses the rule: the node fails" {
  STUB_IPTABLES_FAIL=1 run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -ne 0 ]
  [[ "$output" == *"iptables could not add"* ]]
}

@test "HyperPod units as root: no exception" {
  export STUB_UNITS="sagemaker-role-proxy-agent.service -
sagemaker-cluster-agent.service root"
  run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$FAKE_ROOT/iptables.rules")" = "$V4_RULE" ]
  [ ! -e "$STATE_DIR/contract_warnings" ]
}

@test "a HyperPod unit under another uid keeps metadata access, with a contract warning" {
  printf 'sagemaker:x:998:998::/nonexistent:/usr/sbin/nologin\n' >>"$FAKE_ROOT/passwd"
  export STUB_UNITS="sagemaker-role-proxy-agent.service -
sagemaker-host-agent.service sagemaker
hyperpod-users-sync.service nobody"
  id() { [[ "$1" == -u && "$2" == sagemaker ]] && echo 998 || command id "$@"; }
  export -f id
  run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  # The exceptions come first, so the rejects never see uid 998's traffic to the metadata service.
  [ "$(cat "$FAKE_ROOT/iptables.rules")" = "OUTPUT -m conntrack --ctorigdst 169.254.169.254 --ctdir ORIGINAL -m owner --uid-owner 998 -j ACCEPT
OUTPUT -d 169.254.169.254 -m owner --uid-owner 998 -j ACCEPT
$V4_RULE" ]
  [[ "$output" == *"WARNING: [contract:hyperpod-agents-run-as-root] sagemaker-host-agent.service runs as uid 998, not root"* ]]
  # The platform's own units (hyperpod-*) are not HyperPod's: no exception for them.
  [ "$(grep -c ACCEPT "$FAKE_ROOT/iptables.rules")" -eq 2 ]
  : >"$STUB_LOG"
  run bash "$SCRIPTS/block_imds.sh"
  [ "$(grep -c ACCEPT "$FAKE_ROOT/iptables.rules")" -eq 2 ]
  [ -z "$(mutating_calls)" ]
}

@test "a DNAT of the metadata address on the node is reported and covered by the original-destination rule" {
  export STUB_NAT_RULES="-A OUTPUT -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 127.0.0.1:8181"
  run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"this node redirects metadata traffic (-A OUTPUT -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 127.0.0.1:8181)"* ]]
  grep -qxF "OUTPUT -m conntrack --ctorigdst 169.254.169.254 --ctdir ORIGINAL -m owner ! --uid-owner 0 -j REJECT" "$FAKE_ROOT/iptables.rules"
}

@test "a REDIRECT of the metadata address to a local port: that port is refused to every uid but root" {
  export STUB_NAT_RULES="-A OUTPUT -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 8182"
  run bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  grep -qxF "OUTPUT -d 127.0.0.1 -p tcp --dport 8182 -m owner ! --uid-owner 0 -j REJECT" "$FAKE_ROOT/iptables.rules"
}

# in_netns LISTEN... -- CMD... : CMD in a network namespace of its own, where 169.254.169.254 is an address of the
# loopback (nothing listening there refuses at once, as the REJECT rules make it) and a TCP server listens on each
# LISTEN (ADDRESS:PORT) as a metadata service or credential proxy that answers.
in_netns() {
  local listen=()
  while [[ "$1" != -- ]]; do listen+=("$1"); shift; done
  shift
  unshare --net bash -c '
    set -e
    ip link set lo up
    ip addr add 169.254.169.254/32 dev lo
    while [[ "$1" != -- ]]; do
      /usr/bin/python3 -c "
import socket, sys
host, port = sys.argv[1].rsplit(\":\", 1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, int(port))); s.listen()
while True: s.accept()[0].close()" "$1" </dev/null >/dev/null 2>&1 &
      for _ in $(seq 50); do (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && break; sleep 0.1; done
      shift
    done
    shift
    rc=0
    "$@" || rc=$?
    kill $(jobs -p) 2>/dev/null || true
    exit "$rc"' _ "${listen[@]}" -- "$@"
}

@test "nobody still reaches a faked metadata service: the node fails and says why" {
  IMDS_PROBE=1 run in_netns 169.254.169.254:80 -- bash "$SCRIPTS/block_imds.sh"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"ERROR: a process running as nobody still reached 169.254.169.254:80: the metadata block is not effective"* ]]
  [[ "$output" != *"the block holds"* ]]
  # with the service refusing nobody (as the rules make it), the same check passes and says so
  IMDS_PROBE=1 run in_netns -- bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"as nobody, 169.254.169.254:80 refuse the connection: the block holds"* ]]
}

@test "a DNAT'd credential proxy that nobody reaches on its own port: the node fails, though the address refuses" {
  export STUB_NAT_RULES="-A OUTPUT -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 127.0.0.1:8181"
  IMDS_PROBE=1 run in_netns 127.0.0.1:8181 -- bash "$SCRIPTS/block_imds.sh"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"ERROR: a process running as nobody still reached 127.0.0.1:8181 (the credential proxy the metadata address is redirected to)"* ]]
  # the proxy port refusing nobody too: both paths tested, the block holds
  IMDS_PROBE=1 run in_netns -- bash "$SCRIPTS/block_imds.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"as nobody, 169.254.169.254:80 127.0.0.1:8181 refuse the connection: the block holds"* ]]
}

@test "a redirection of a kind the check cannot test: the rules go in, but it never says the block holds" {
  export STUB_NAT_RULES="-A HYPERPOD-PROXY -d 169.254.169.254/32 -j HYPERPOD-CREDENTIALS"
  IMDS_PROBE=1 run in_netns -- bash "$SCRIPTS/block_imds.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(head -n2 "$FAKE_ROOT/iptables.rules")" = "$V4_RULE" ]
  [[ "$output" == *"WARNING: [contract:role-proxy-imds] metadata traffic is redirected in a way this check does not know how to test (-A HYPERPOD-PROXY -d 169.254.169.254/32 -j HYPERPOD-CREDENTIALS)"* ]]
  [[ "$output" != *"the block holds"* ]]
}
