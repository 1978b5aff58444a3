#!/usr/bin/env bats
# block_imds.sh: non-root processes are refused the instance metadata service; idempotent; persisted by a unit.

load test_helper

V4_RULE="OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT"
V6_RULE="OUTPUT -d fd00:ec2::254 -m owner ! --uid-owner 0 -j REJECT"
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
  [ "$(wc -l <"$FAKE_ROOT/iptables.rules")" -eq 1 ]
  [ "$(wc -l <"$FAKE_ROOT/ip6tables.rules")" -eq 1 ]
  [ "$(calls iptables)" = "iptables -w -C $V4_RULE" ]
  [ "$(calls ip6tables)" = "ip6tables -w -C $V6_RULE" ]
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
  [ -z "$(calls systemctl)" ]
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
