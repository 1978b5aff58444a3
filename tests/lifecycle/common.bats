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

@test "params.py get: several keys, one value a line, in the order asked; a value with a line break is refused" {
  set_param slurm.auth '"jwt"' note '"two\nlines"'
  run python3 "$SCRIPTS/lib/params.py" get "$PARAMS_FILE" slurm.auth nope.missing fsx.mount true.null cluster_name
  [ "$status" -eq 0 ]
  [ "$output" = $'jwt\n\ntrue\n\nml-cluster' ]
  run python3 "$SCRIPTS/lib/params.py" get "$PARAMS_FILE" note
  [ "$status" -eq 0 ]
  [ "$output" = $'two\nlines' ] # alone, as before
  run python3 "$SCRIPTS/lib/params.py" get "$PARAMS_FILE" slurm.auth note
  [ "$status" -eq 2 ]
  [ "$output" = "error: note: the value has a line break; read it on its own" ]
  run python3 "$SCRIPTS/lib/params.py" get "$PARAMS_FILE" slurm.auth fsx
  [ "$status" -eq 2 ]
  [ "$output" = "error: value is not a scalar" ]
}

@test "params reads the whole file once; param and params_py answer from memory, another file from the file" {
  set_param slurm.auth '"jwt"' cluster_name '"first"' directory '{"uris": ["ldaps://a", "ldaps://b"]}'
  run bash -c 'source "$1/lib/common.sh"
    params slurm.auth nope.missing fsx.mount
    python3() { echo "python3 started" >&2; command python3 "$@"; }
    echo "auth=$(param slurm.auth) missing=$(param nope.missing) mount=$(param fsx.mount) unread=$(param cluster_name)"
    params_py users "$PARAMS_FILE"; params_py list "$PARAMS_FILE" directory.uris; params_py artifacts "$PARAMS_FILE"
    cp "$PARAMS_FILE" "$PARAMS_FILE.other"
    PARAMS_FILE="$PARAMS_FILE.other" param slurm.auth' _ "$SCRIPTS"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "auth=jwt missing= mount=true unread=first" ]
  [ "${lines[1]}" = $'alice\t2001\t2101\tfalse' ]
  [ "${lines[2]}" = $'bob\t2002\t2102\ttrue' ]
  [ "${lines[3]}" = "ldaps://a" ]
  [ "${lines[4]}" = "ldaps://b" ]
  [[ "${lines[5]}" == $'enroot\ts3://example-artifacts-bucket/artifacts/enroot_3.5.0-1_amd64.deb\t'* ]]
  [[ "${lines[6]}" == $'enroot+caps\t'* ]]
  [ "${lines[7]}" = "python3 started" ]
  [ "${lines[8]}" = "jwt" ]
  [ "${#lines[@]}" -eq 9 ]
  # A file params.py refuses fails the script where it reads it, with params.py's one line.
  echo '{' >"$PARAMS_FILE"
  run bash -c 'set -e; source "$1/lib/common.sh"; params slurm.auth; echo not reached' _ "$SCRIPTS"
  [ "$status" -eq 2 ]
  [[ "$output" == "error: $PARAMS_FILE is not valid JSON"* ]]
}

# ask QUESTION... : each question (`get KEY`, `list KEY`, `users`, `artifacts [SECTION]`) with its exit status and
# output, as params.py gives them or (MEMORY=1) as common.sh answers them once `params` has read the file.
ask() {
  MEMORY="${MEMORY:-}" bash -c 'source "$1/lib/common.sh"; SCRIPTS=$1; shift
    [[ -z "$MEMORY" ]] || params
    for q; do
      read -ra words <<<"$q"
      if [[ -z "$MEMORY" ]]; then
        out="$(python3 -S "$SCRIPTS/lib/params.py" "${words[0]}" "$PARAMS_FILE" "${words[@]:1}" 2>&1; echo "rc=$?")"
      elif [[ "${words[0]}" == get ]]; then
        out="$(param "${words[1]}" 2>&1; echo "rc=$?")"
      else
        out="$(params_py "${words[0]}" "$PARAMS_FILE" "${words[@]:1}" 2>&1; echo "rc=$?")"
      fi
      printf "%s => %q\n" "$q" "$out"
    done' _ "$SCRIPTS" "$@"
}

@test "params: every answer from memory is the one params.py gives, failures included" {
  # Nulls, empty and line-broken strings, numbers, lists of scalars, of objects and empty ones, an empty object, a
  # user without sudo, a section whose artifacts are no list of artifacts, and keys no file has.
  set_param note '"two\nlines"' empty '""' zero 0 ratio 0.5 shared_group '{}' \
    directory '{"uris": ["ldaps://a", 7, true, null], "admin_groups": [], "search_base": null}' \
    node_metrics '{"artifacts": [{"name": "n", "s3_uri": "s3://b/n.deb", "sha256": "00"}], "interval": [{"a": 1}]}' \
    odd '{"artifacts": "not a list"}' users '[{"name": "carol", "uid": 3001, "gid": 3001}]'
  # Each kind of answer once: a scalar of each type, null, missing (at the top, below an object, a scalar or a list), an
  # object or list asked as a scalar, a list of scalars, of objects, empty, null, and keys no file can have.
  questions=(users artifacts "artifacts container_runtime" "artifacts node_metrics" "artifacts odd" "artifacts nope"
    "artifacts fsx" "artifacts fsx.mount")
  for key in note empty zero ratio shared_group shared_group.name directory.uris directory.search_base directory.nope \
    odd.artifacts fsx.mount fsx.mount_path fsx.mount.deeper nope nope.deeper worker_groups worker_groups.0 'a..b' \
    'fsx.' '$(touch${IFS}pwned)'; do
    questions+=("get $key")
  done
  for key in note shared_group directory.uris directory.admin_groups directory.search_base node_metrics.interval \
    nope.deeper '$(touch${IFS}pwned)'; do
    questions+=("list $key")
  done
  run ask "${questions[@]}"
  [ "$status" -eq 0 ]
  from_file="$output"
  [[ "$from_file" == *"get directory.uris => \$'error: value is not a scalar\\nrc=2'"* ]] # failures are asked too
  [[ "$from_file" == *"get zero => \$'0\\nrc=0'"* ]]
  MEMORY=1 run ask "${questions[@]}"
  [ "$status" -eq 0 ]
  diff <(echo "$from_file") <(echo "$output")
  [ ! -e pwned ]
  [ ! -e "$SCRIPTS/lib/pwned" ]
  # A key the shell could not hold safely: no snapshot, so the answers come from params.py.
  set_param 'a b' 1
  [ -z "$(python3 -S "$SCRIPTS/lib/params.py" snapshot "$PARAMS_FILE")" ]
  MEMORY=1 run ask users "get zero" "get nope"
  [ "$status" -eq 0 ]
  diff <(echo "$from_file" | grep -e "^get zero =>" -e "^get nope =>" -e "^users =>") <(echo "$output")
}

@test "validate_params: scripts read the entry point's snapshot, only root's own and of their file; the trap removes it" {
  printf '%s\n' 'source "$SCRIPTS/lib/common.sh"' 'python3() { echo "python3 started" >&2; command python3 "$@"; }' \
    'params slurm.auth' 'echo "auth=$(param slurm.auth) users=$(params_py users "$PARAMS_FILE" | cut -f1 | paste -sd,)"' \
    >"$T/child.sh"
  printf '%s\n' 'set -e' 'source "$SCRIPTS/lib/common.sh"' 'trap drop_params_snapshot EXIT' \
    'validate_params "$PARAMS_FILE"' 'echo "snapshot $PARAMS_SNAPSHOT $(stat -c "%a %U" "$PARAMS_SNAPSHOT")"' \
    'bash "$T/child.sh"' \
    'sed -i "s/\"munge\"/\"jwt\"/" "$PARAMS_FILE"  # after the check: the scripts read what was validated' \
    'bash "$T/child.sh"' \
    'PARAMS_FILE="$PARAMS_FILE.copy" bash "$T/child.sh"  # another file: read from the file' \
    '[[ -z "$PLANT" ]] || $PLANT "$PARAMS_SNAPSHOT"' 'bash "$T/child.sh"' >"$T/entry.sh"
  cp "$PARAMS_FILE" "$PARAMS_FILE.copy"
  T="$T" SCRIPTS="$SCRIPTS" PLANT="" run bash "$T/entry.sh"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == "snapshot $TMPDIR/tmp."*" 600 root" ]]
  snapshot="${lines[0]#snapshot }"
  snapshot="${snapshot% 600 root}"
  [ "${lines[1]}" = "auth=munge users=alice,bob" ]
  [ "${lines[2]}" = "auth=munge users=alice,bob" ]
  [ "${lines[3]}" = "python3 started" ]
  [ "${lines[4]}" = "auth=munge users=alice,bob" ]
  [ "${lines[5]}" = "auth=munge users=alice,bob" ]
  [ "${#lines[@]}" -eq 6 ]
  [ ! -e "$snapshot" ] # the exit trap's
  # A snapshot a user could have written (theirs), or a link in its place (even to a file of root's), is never read:
  # the script reads the file.
  printf '%s\n' '#!/bin/bash' 'mv "$1" "$T/elsewhere"; ln -s "$T/elsewhere" "$1"' >"$T/link_elsewhere"
  chmod +x "$T/link_elsewhere"
  for plant in "chown nobody" "$T/link_elsewhere"; do
    cp "$PARAMS_FILE.copy" "$PARAMS_FILE"
    T="$T" SCRIPTS="$SCRIPTS" PLANT="$plant" run bash "$T/entry.sh"
    [ "$status" -eq 0 ]
    [ "${lines[5]}" = "python3 started" ]
    [ "${lines[6]}" = "auth=jwt users=alice,bob" ]
    [ "${#lines[@]}" -eq 7 ]
  done
}

@test "same_file: a copy with the same bytes; a missing copy or one that differs is not" {
  source "$SCRIPTS/lib/common.sh"
  printf 'a\nb\n' >"$T/one"
  printf 'a\nb\n' >"$T/same"
  printf 'a\nb' >"$T/other"
  same_file "$T/one" "$T/same"
  ln -s "$T/missing" "$T/dangling"
  for copy in other missing dangling; do
    run same_file "$T/one" "$T/$copy"
    [ "$status" -ne 0 ]
  done
}

@test "lib_py runs a helper of lib/ with its arguments and without the site module" {
  mkdir -p "$T/lib"
  printf 'import sys\nprint(sys.flags.no_site, sys.argv[1:], "site" in sys.modules)\n' >"$T/lib/probe.py"
  run bash -c 'source "$1/lib/common.sh"; LIB_DIR="$2/lib"; lib_py probe.py "a b" c' _ "$SCRIPTS" "$T"
  [ "$status" -eq 0 ]
  [ "$output" = "1 ['a b', 'c'] False" ]
}

# The step markers cli/diagnose.py reads from a node's log stream (lib/common.sh, step).
@test "step: a step between START and END markers with its exit code; a failed one named last by the exit trap" {
  cat >"$T/node.sh" <<EOF
set -euo pipefail
LOG_DIR="$T/log"
source "$SCRIPTS/lib/common.sh"
start_log node
step first_step true
step second_step bash -c "echo half-way; exit 3"
step never_reached true
EOF
  run bash "$T/node.sh"
  [ "$status" -eq 3 ]
  run grep -oE '\[node\] STEP-.*' "$T/log/node.log"
  [ "${lines[0]}" = "[node] STEP-START first_step" ]
  [[ "${lines[1]}" =~ ^\[node\]\ STEP-END\ first_step\ rc=0\ seconds=[0-9]+$ ]]
  [ "${lines[2]}" = "[node] STEP-START second_step" ]
  [[ "${lines[3]}" =~ ^\[node\]\ STEP-END\ second_step\ rc=3\ seconds=[0-9]+$ ]]
  [ "${lines[4]}" = "[node] STEP-FAILED second_step rc=3" ]
  [ "${#lines[@]}" -eq 5 ]
  grep -qx '.*\[node\] FAILED with exit code 3, see the lines above' "$T/log/node.log"
}

# AWS's OnInitComplete entry point waits 60 s before a failed exit "to make sure logs are uploaded"
# (awslabs/awsome-distributed-ai@95b939cd Extensions/run_extensions.sh): start_log's exit trap does the same, after its
# log is complete, for LOG_FLUSH_SECONDS.
@test "start_log: a failed run waits LOG_FLUSH_SECONDS with its log complete; a successful one exits at once" {
  export T
  # shellcheck disable=SC2016
  node='set -euo pipefail; LOG_DIR="$T/log"; source "$1/lib/common.sh"; start_log node; step only_step bash -c "exit $2"'
  LOG_FLUSH_SECONDS=2 bash -c "$node" node "$SCRIPTS" 4 &
  pid=$!
  started=$SECONDS
  for _ in $(seq 50); do
    [[ "$(tail -n1 "$T/log/node.log" 2>/dev/null)" == *STEP-FAILED* ]] && break
    sleep 0.1
  done
  [[ "$(tail -n1 "$T/log/node.log")" =~ \[node\]\ STEP-FAILED\ only_step\ rc=4$ ]]
  kill -0 "$pid" # the log is complete, and the script has not exited yet
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 4 ]
  ((SECONDS - started >= 2))
  started=$SECONDS
  LOG_FLUSH_SECONDS=30 run bash -c "$node" node "$SCRIPTS" 0
  [ "$status" -eq 0 ]
  ((SECONDS - started < 20))
  [[ "$(tail -n1 "$T/log/node.log")" == *"[node] done" ]]
}
