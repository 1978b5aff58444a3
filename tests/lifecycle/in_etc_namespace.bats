#!/usr/bin/env bats
# tests/lifecycle/in_etc_namespace.sh, the view of /etc the Studio-space tests run in: it must hold while tests beside
# it run useradd/userdel, which replace /etc/passwd and /etc/group by rename (the e2e tests, enroot_dirs.bats).

setup() {
  T="$(mktemp -d)"
  PROBE="hyperpod-in-etc-namespace-probe-$$-$BATS_TEST_NUMBER"
  echo host >"/etc/$PROBE"
  echo view >"$T/$PROBE"
}

teardown() {
  [[ -z "${RENAMER:-}" ]] || kill "$RENAMER" 2>/dev/null || true
  rm -f "/etc/$PROBE" "/etc/$PROBE.new"
  rm -rf "$T"
}

@test "a file renamed over /etc/NAME on the host while the command runs does not show through" {
  (while :; do echo host >"/etc/$PROBE.new" && mv "/etc/$PROBE.new" "/etc/$PROBE"; done) &
  RENAMER=$!
  run "$BATS_TEST_DIRNAME/in_etc_namespace.sh" "$T" "$PROBE" -- bash -c '
    for _ in $(seq 200); do read -r seen <"/etc/$1" && [[ "$seen" == view ]] || { echo "saw $seen"; exit 1; }; done' _ "$PROBE"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(cat "/etc/$PROBE")" = host ] # the host's file is untouched by the view
}

@test "a directory is the test's own, not merged with the host's" {
  mkdir "$T/pam.d"
  echo "auth required pam_deny.so" >"$T/pam.d/only-this"
  run "$BATS_TEST_DIRNAME/in_etc_namespace.sh" "$T" pam.d -- ls /etc/pam.d
  [ "$status" -eq 0 ]
  [ "$output" = only-this ]
}

@test "the rest of /etc is the host's" {
  run "$BATS_TEST_DIRNAME/in_etc_namespace.sh" "$T" "$PROBE" -- cat /etc/hostname "/etc/$PROBE"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$(cat /etc/hostname)" ]
  [ "${lines[1]}" = view ]
}

@test "a view that cannot be made exits 99, never the command's status" {
  run "$BATS_TEST_DIRNAME/in_etc_namespace.sh" "$T" no-such-file -- true
  [ "$status" -eq 99 ]
}
