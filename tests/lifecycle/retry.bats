#!/usr/bin/env bats
# lib/common.sh: retry and retry_backoff (one loop, two delay growths, each with its own log line), the log line
# itself, and where it finds itself.

load test_helper

# fails_times N : a command that fails its first N calls (counted in $T/count), then succeeds.
run_helper() {
  bash -c 'source "$1/lib/common.sh"; shift
    sleep() { echo "slept $1" >>"$T/sleeps"; }
    fails_times() { local c; c=$(cat "$T/count" 2>/dev/null || echo 0); echo $((c + 1)) >"$T/count"; ((c >= $1)); }
    "$@"' _ "$SCRIPTS" "$@"
}

@test "retry: constant delay, logs the whole command" {
  export T RETRY_DELAY=7
  run run_helper retry 4 fails_times 3 extra-arg
  [ "$status" -eq 0 ]
  [[ "$output" == *"attempt 1/4 failed, retrying in 7s: fails_times 3 extra-arg"* ]]
  [[ "$output" == *"attempt 3/4 failed, retrying in 7s: fails_times 3 extra-arg"* ]]
  [ "$(cat "$T/sleeps")" = $'slept 7\nslept 7\nslept 7' ]
}

@test "retry: gives up after ATTEMPTS with the whole command" {
  export T RETRY_DELAY=1
  run run_helper retry 2 fails_times 5 extra-arg
  [ "$status" -eq 1 ]
  [[ "$output" == *"giving up after 2 attempts: fails_times 5 extra-arg"* ]]
  [ "$(cat "$T/count")" = 2 ]
}

@test "retry_backoff: doubling delay capped at 60 s, logs the command and its first argument only" {
  export T RETRY_DELAY=20
  run run_helper retry_backoff 5 fails_times 9 secret-ish-arg
  [ "$status" -eq 1 ]
  [ "$(cat "$T/sleeps")" = $'slept 20\nslept 40\nslept 60\nslept 60' ]
  [[ "$output" == *"attempt 1/5 failed, retrying in 20s: fails_times 9"* ]]
  [[ "$output" == *"attempt 2/5 failed, retrying in 40s: fails_times 9"* ]]
  [[ "$output" == *"giving up after 5 attempts: fails_times 9"* ]]
  [[ "$output" != *secret-ish-arg* ]]
}

@test "log: a UTC timestamp whatever TZ says, and the script's name without .sh" {
  before="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  run env TZ=Asia/Tokyo bash -c 'source "$1/lib/common.sh"; log "hello  there"; TZ=Asia/Tokyo date +%z' \
    /opt/somewhere/my_step.sh "$SCRIPTS"
  after="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" =~ ^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)\ \[my_step\]\ hello\ \ there$ ]]
  ts="${BASH_REMATCH[1]}"
  [[ ! "$ts" < "$before" && ! "$ts" > "$after" ]]
  [ "${lines[1]}" = "+0900" ] # the script's own TZ is left as it was
}

@test "LIB_DIR and HYPERPOD_DIR are absolute, however common.sh is reached" {
  local want="$SCRIPTS"
  want="$(cd "$want" && pwd)"
  for how in "$SCRIPTS/lib/common.sh" ./lib/common.sh lib/common.sh lib/../lib/common.sh "$SCRIPTS/./lib/common.sh" \
    "$SCRIPTS//lib/common.sh"; do
    run bash -c 'cd "$1" && source "$2" && echo "$LIB_DIR|$HYPERPOD_DIR"' _ "$SCRIPTS" "$how"
    [ "$output" = "$want/lib|$want" ] || {
      echo "sourced as $how: $output" >&2
      return 1
    }
  done
  run bash -c 'cd "$1/lib" && source ./common.sh && echo "$LIB_DIR|$HYPERPOD_DIR"' _ "$SCRIPTS"
  [ "$output" = "$want/lib|$want" ]
}
