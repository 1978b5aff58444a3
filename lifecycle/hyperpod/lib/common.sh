# shellcheck shell=bash
# Helpers and path defaults shared by the lifecycle scripts. Sourced, never run.
# Every system path is an environment variable so tests can point it at a temp dir.

# These scripts run at every node boot and every users-sync tick: what bash can do itself is not a process of its own
# (here dirname, basename and date). LIB_DIR: this file's directory, absolute.
LIB_DIR="${BASH_SOURCE[0]%/*}"
[[ "$LIB_DIR" != "${BASH_SOURCE[0]}" ]] || LIB_DIR=. # sourced as `common.sh`, from its own directory
# `cd && pwd` only for a relative path or one with . or .. in it (a subshell); an absolute one is what pwd would print.
if [[ "$LIB_DIR" != /* || "$LIB_DIR/" == */./* || "$LIB_DIR/" == */../* || "$LIB_DIR" == *//* ]]; then
  LIB_DIR="$(cd "$LIB_DIR" && pwd)"
fi
HYPERPOD_DIR="${LIB_DIR%/*}"
HYPERPOD_DIR="${HYPERPOD_DIR:-/}" # (dirname /lib is /)
# The running script's name in log lines: basename "$0" .sh, once.
SCRIPT_NAME="${0##*/}"
SCRIPT_NAME="${SCRIPT_NAME%.sh}"

# Not provisioning_parameters.json: with the API-driven Slurm configuration HyperPod refuses a lifecycle prefix that
# holds a file of that name, and writes its own under /opt/ml/config/. Ours stays beside the scripts.
export PARAMS_FILE="${PARAMS_FILE:-$HYPERPOD_DIR/platform_parameters.json}"
export RESOURCE_CONFIG="${RESOURCE_CONFIG:-/opt/ml/config/resource_config.json}"
export LOG_DIR="${LOG_DIR:-/var/log/provision}"
export FSTAB="${FSTAB:-/etc/fstab}"
export SUDOERS_DIR="${SUDOERS_DIR:-/etc/sudoers.d}"
export SLURM_CONF_DIR="${SLURM_CONF_DIR:-/opt/slurm/etc}"
export DEFAULT_HOME_ROOT="${DEFAULT_HOME_ROOT:-/home}"
export SLURM_BIN_DIR="${SLURM_BIN_DIR:-/opt/slurm/bin}"
export PATH="$PATH:$SLURM_BIN_DIR" # HyperPod installs the Slurm commands there
export OS_RELEASE="${OS_RELEASE:-/etc/os-release}"
export RETRY_DELAY="${RETRY_DELAY:-10}"
# How long a failed entry point waits, its log complete, before it exits: HyperPod ships the node's log to CloudWatch
# while the script runs, and AWS's own OnInitComplete entry point waits 60 s "to make sure logs are uploaded"
# (awslabs/awsome-distributed-ai@95b939cd 1.architectures/5.sagemaker-hyperpod/Extensions/run_extensions.sh, run_feature).
export LOG_FLUSH_SECONDS="${LOG_FLUSH_SECONDS:-60}"
# What create_users.sh created on this node (so it removes only those), and the digest of the applied parameters.
export STATE_DIR="${STATE_DIR:-/var/lib/hyperpod-platform}"
# The node's own copy of the user scripts and the parameters the users sync runs (HyperPod's download may not last).
export PLATFORM_DIR="${PLATFORM_DIR:-/opt/hyperpod-platform}"
export SYSTEMD_DIR="${SYSTEMD_DIR:-/etc/systemd/system}"

# parent_dir PATH : sets PARENT to what `dirname PATH` prints, without a process (root_dir_problem takes one step per
# path component; the helpers below make a file's directory before writing it).
parent_dir() {
  PARENT="$1"
  while [[ "$PARENT" == */ && "$PARENT" != / ]]; do PARENT="${PARENT%/}"; done # trailing slashes are not a step
  if [[ "$PARENT" != */* ]]; then
    PARENT=.
    return 0
  fi
  PARENT="${PARENT%/*}"
  while [[ "$PARENT" == */ ]]; do PARENT="${PARENT%/}"; done # nor are the slashes between the two last names
  [[ -n "$PARENT" ]] || PARENT=/
}

# write_text FILE <<TEXT : FILE holds the here-document, written by bash (`cat >FILE` is a process of its own). For
# here-documents only: read stops at a NUL byte, which one cannot hold.
write_text() {
  local text
  IFS= read -r -d '' text || true # read's status is 1 at the end of its input, which is where it stops
  printf '%s' "$text" >"$1"
}

# same_file FILE COPY : COPY exists and holds FILE's bytes (cmp -s; no cmp started when there is no COPY yet).
same_file() {
  [[ -e "$2" ]] && cmp -s "$1" "$2"
}

log() {
  # %(...)T is strftime(3) of the time now (-1); TZ=UTC0 for this printf only, as `date -u`.
  TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T [%s] %s\n' -1 "$SCRIPT_NAME" "$*"
}

die() {
  log "ERROR: $*" >&2
  exit 1
}

# lib_py SCRIPT ARG... : lib/SCRIPT (standard library only, as every helper here) with the node's python3, without the
# site module (-S): site's scan of site-packages is a good part of a Python start, and a start is most of what a helper
# costs.
lib_py() {
  python3 -S "$LIB_DIR/$1" "${@:2}"
}

# The parameters in memory: what lib/params.py prints for each question a script asks of PARAMS_FILE (`get KEY`, `list
# KEY`, `users`, `artifacts SECTION`), read in one Python start (params.py snapshot) by `params`, or from the snapshot
# file the entry point left (validate_params). A question memory has no answer for goes to params.py, which answers or
# fails as it always has.
declare -gA PARAMS_ANSWER=()
PARAMS_SNAPSHOT_OF="" # the file PARAMS_ANSWER holds

# _params_keep QUESTION ANSWER... : a snapshot's pairs (params.py snapshot), as the answers for PARAMS_FILE; an empty
# snapshot (params.py makes none of a file whose keys the shell cannot hold) leaves nothing in memory.
_params_keep() {
  local i j
  PARAMS_ANSWER=()
  PARAMS_SNAPSHOT_OF=""
  (($#)) || return 0
  for ((i = 1, j = 2; i < $#; i += 2, j += 2)); do
    PARAMS_ANSWER[${!i}]="${!j}"
  done
  PARAMS_SNAPSHOT_OF="$PARAMS_FILE"
}

# _params_from_snapshot_file : PARAMS_SNAPSHOT into memory when it is a snapshot of PARAMS_FILE: a regular file of
# this user's own (root's), never a link.
_params_from_snapshot_file() {
  local records=()
  [[ -n "${PARAMS_SNAPSHOT:-}" && -f "$PARAMS_SNAPSHOT" && ! -L "$PARAMS_SNAPSHOT" && -O "$PARAMS_SNAPSHOT" ]] || return 1
  mapfile -d '' -t records <"$PARAMS_SNAPSHOT"
  [[ "${records[0]-}" == "$PARAMS_FILE" ]] || return 1
  _params_keep "${records[@]:1}"
}

# _params_in_memory : PARAMS_ANSWER holds PARAMS_FILE's answers, read now from the entry point's snapshot if need be.
_params_in_memory() {
  [[ -n "$PARAMS_SNAPSHOT_OF" && "$PARAMS_SNAPSHOT_OF" == "$PARAMS_FILE" ]] || _params_from_snapshot_file
}

# _params_lookup COMMAND [ARG] : PARAMS_REPLY set to what `params.py COMMAND PARAMS_FILE [ARG]` prints, from memory;
# returns 1 when memory cannot say. A key the file does not have (no `path KEY`) answers as a missing one does: get
# prints an empty line, list and artifacts nothing.
_params_lookup() {
  local question="$1${2+ $2}"
  PARAMS_REPLY=""
  _params_in_memory || return 1
  if [[ -n "${PARAMS_ANSWER[$question]+set}" ]]; then
    PARAMS_REPLY="${PARAMS_ANSWER[$question]}"
  elif [[ $# -eq 2 && -z "${PARAMS_ANSWER["path $2"]+set}" ]]; then
    [[ "$1" != get ]] || PARAMS_REPLY=$'\n'
  else
    return 1
  fi
}

# param KEY.PATH -> scalar from the parameters file ("" for null/missing, true/false for booleans), from memory when it
# is there (`params`, or the entry point's snapshot).
param() {
  if _params_lookup get "$1"; then
    printf '%s' "$PARAMS_REPLY"
  else
    lib_py params.py get "$PARAMS_FILE" "$1"
  fi
}

# params KEY.PATH... : reads the whole parameters file in one Python start (a start costs more than a script's own
# work), for the `param` and `params_py` calls that follow; fails as `params.py get KEY...` fails (a missing or invalid
# file; one of several KEYs whose value has a line break: read such a key with `param` alone).
params() {
  local records=() key
  if ! _params_in_memory; then
    mapfile -d '' -t records < <(lib_py params.py snapshot "$PARAMS_FILE")
    wait "$!" || return
    _params_keep "${records[@]}"
  fi
  for key; do
    if ! _params_lookup get "$key"; then # no answer in memory: params.py says why, or reads them
      lib_py params.py get "$PARAMS_FILE" "$@" >/dev/null
      return
    fi
    if (($# > 1)) && [[ "${PARAMS_REPLY%$'\n'}" == *[$'\n\r']* ]]; then
      echo "error: $key: the value has a line break; read it on its own" >&2
      return 2
    fi
  done
}

# params_py COMMAND ARG... : lib/params.py COMMAND ARG...; `users`, `list KEY` and `artifacts [SECTION]` of PARAMS_FILE
# from memory when it is there.
params_py() {
  local asked=()
  if [[ "${2-}" == "$PARAMS_FILE" ]]; then
    case "$1 $#" in
      "users 2") asked=(users) ;;
      "list 3") asked=(list "$3") ;;
      "artifacts 2") asked=(artifacts container_runtime) ;;
      "artifacts 3") asked=(artifacts "$3") ;;
    esac
  fi
  if ((${#asked[@]})) && _params_lookup "${asked[@]}"; then
    printf '%s' "$PARAMS_REPLY"
  else
    lib_py params.py "$@"
  fi
}

# validate_params FILE : lib/params.py validate FILE, and when it is valid, its snapshot in a file of root's (mktemp,
# 0600) for the scripts this one runs (PARAMS_SNAPSHOT, read where PARAMS_FILE is FILE): they start no Python to read
# it. The exit trap removes it (drop_params_snapshot).
validate_params() {
  local snapshot rc=0
  drop_params_snapshot
  snapshot="$(mktemp)"
  {
    printf '%s\0' "$1"
    lib_py params.py validate "$1" --snapshot
  } >"$snapshot" || rc=$?
  if ((rc != 0)); then
    rm -f "$snapshot"
    return "$rc"
  fi
  export PARAMS_SNAPSHOT="$snapshot"
  PARAMS_SNAPSHOT_MADE="$snapshot"
  [[ "$1" != "$PARAMS_FILE" ]] || _params_from_snapshot_file || true
}

# drop_params_snapshot : removes the snapshot validate_params made (none: nothing)
drop_params_snapshot() {
  [[ -z "${PARAMS_SNAPSHOT_MADE:-}" ]] || rm -f "$PARAMS_SNAPSHOT_MADE"
  PARAMS_SNAPSHOT_MADE=""
  unset PARAMS_SNAPSHOT
}

# An entry point's snapshot, read once here.
[[ -z "${PARAMS_SNAPSHOT:-}" ]] || _params_from_snapshot_file || true

# set_block FILE [LINE...] : FILE with the calling script's block (between its BEGIN_MARK and END_MARK lines) holding
# LINEs, none: block removed; the file keeps its mode (644 when new). Returns 1 if the file did not change.
set_block() {
  local file=$1 new PARENT
  shift
  new="$(mktemp)"
  lib_py marked_block.py "$file" "$BEGIN_MARK" "$END_MARK" "" "$@" >"$new"
  if [[ -f "$file" ]] && cmp -s "$new" "$file" || [[ ! -f "$file" && ! -s "$new" ]]; then
    rm -f "$new"
    return 1
  fi
  parent_dir "$file"
  [[ -d "$PARENT" ]] || mkdir -p "$PARENT"
  chmod "$([[ -f "$file" ]] && stat -c %a "$file" || echo 644)" "$new"
  mv -f "$new" "$file"
}

# pam_access_admins : who pam_access(8) lets in as an administrator, one per line: the config's sudo users, and the
# directory's admin groups as (group) (the config refuses admin group names with spaces).
pam_access_admins() {
  local name sudo group
  while IFS=$'\t' read -r name _ _ sudo; do
    if [[ "$sudo" == true ]]; then printf '%s\n' "$name"; fi
  done < <(params_py users "$PARAMS_FILE")
  while IFS= read -r group; do
    if [[ -n "$group" ]]; then printf '(%s)\n' "$group"; fi
  done < <(params_py list "$PARAMS_FILE" directory.admin_groups)
}

# retry ATTEMPTS CMD... : runs CMD until it succeeds, sleeping RETRY_DELAY seconds between tries.
retry() { _retry_loop constant "$@"; }

# retry_backoff ATTEMPTS CMD... : like retry, but the delay doubles (RETRY_DELAY, 2x, 4x, ... capped at 60 s), for
# calls that fail while the node's network or the service is still coming up (S3, Secrets Manager). Its log lines
# name only the command and its first argument (`aws s3`), never the rest of the argv.
retry_backoff() { _retry_loop double "$@"; }

# _retry_loop GROWTH ATTEMPTS CMD... : the loop behind retry (GROWTH constant) and retry_backoff (GROWTH double).
_retry_loop() {
  local growth=$1 attempts=$2 n=1 delay=$RETRY_DELAY what
  shift 2
  if [[ "$growth" == constant ]]; then what="$*"; else what="$1 ${2:-}"; fi
  until "$@"; do
    if ((n >= attempts)); then
      log "giving up after $attempts attempts: $what"
      return 1
    fi
    log "attempt $n/$attempts failed, retrying in ${delay}s: $what"
    sleep "$delay"
    n=$((n + 1))
    [[ "$growth" == constant ]] || delay=$((delay * 2 > 60 ? 60 : delay * 2))
  done
}

# wait_until ATTEMPTS WHAT CMD... : polls CMD every RETRY_DELAY seconds; returns 1 (after saying what it waited
# for) when it never succeeds. Bounded, because HyperPod fails a node whose lifecycle script hangs.
wait_until() {
  local attempts=$1 what=$2 n=1
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((n >= attempts)); then
      log "gave up waiting for $what after $attempts checks, ${RETRY_DELAY}s apart"
      return 1
    fi
    ((n == 1)) && log "waiting for $what"
    sleep "$RETRY_DELAY"
    n=$((n + 1))
  done
}

# wait_for_slurmctld BEFORE : returns once a slurmctld answers `scontrol ping` (the primary or a backup: Slurm's
# clients turn to whichever answers), so that BEFORE (what the caller does next, e.g. "reading its configuration") talks
# to a running one. HyperPod may start slurmctld after OnInitComplete has begun (node_contract.json,
# slurmctld-starts-in-parallel): polls every RETRY_DELAY seconds, at most SLURM_WAIT_ATTEMPTS times, the wait logged;
# when none answers, the script fails with one line saying what it waited for and where to look.
wait_for_slurmctld() {
  local before=$1 attempts=${SLURM_WAIT_ATTEMPTS:-60} n=1 started=$SECONDS
  until _slurmctld_answers; do
    if ((n >= attempts)); then
      die "slurmctld did not answer \`scontrol ping\` within $((SECONDS - started))s ($attempts checks," \
        "${RETRY_DELAY}s apart), needed before $before: HyperPod starts slurmctld on the controller; see" \
        "\`systemctl status slurmctld\` and /var/log/slurm/slurmctld.log"
    fi
    ((n > 1)) || log "waiting for slurmctld to answer before $before (at most $attempts checks, ${RETRY_DELAY}s apart)"
    sleep "$RETRY_DELAY"
    n=$((n + 1))
  done
  ((n == 1)) || log "slurmctld answered after $((SECONDS - started))s"
}

# _slurmctld_answers : `scontrol ping` reports a controller UP ("Slurmctld(primary) at HOST is UP", scontrol(1); it
# says DOWN for one that does not answer, and exits 1 then, so the text is what is read).
_slurmctld_answers() {
  local out conf="${SLURM_CONF:-$SLURM_CONF_DIR/slurm.conf}"
  if [[ -f "$conf" ]]; then
    out="$(SLURM_CONF="$conf" scontrol ping 2>/dev/null)" || true
  else # a configless login or compute node: the client reads slurmd's cached configuration
    out="$(scontrol ping 2>/dev/null)" || true
  fi
  [[ "$out" == *" is UP"* ]]
}

# start_log NAME : sends this script's output to LOG_DIR/NAME.log as well, and on exit logs done/FAILED and
# waits for the log to be complete, so HyperPod reads the exit code after the last line is written. A failed run then
# waits LOG_FLUSH_SECONDS more before it exits, the log already complete, so its last lines reach CloudWatch.
start_log() {
  [[ -d "$LOG_DIR" ]] || mkdir -p "$LOG_DIR"
  LOG_FILE="$LOG_DIR/$1.log"
  exec > >(tee -a "$LOG_FILE") 2>&1
  TEE_PID=$!
  trap _finish_log EXIT
}

_finish_log() {
  local rc=$?
  if ((rc == 0)); then
    log "done"
  else
    log "FAILED with exit code $rc, see the lines above"
    [[ -z "${FAILED_STEP:-}" ]] || log "STEP-FAILED $FAILED_STEP rc=$rc"
  fi
  drop_params_snapshot
  exec >&- 2>&-
  wait "$TEE_PID" || true
  if ((rc != 0)); then
    sync "$LOG_FILE" 2>/dev/null || true
    sleep "$LOG_FLUSH_SECONDS"
  fi
  exit "$rc"
}

# step NAME CMD... : runs CMD as the named step of a node's set-up between two marker lines that the deploy tooling
# reads from the node's log stream (cli/diagnose.py, docs/deploy.md "My first deploy failed"):
#   <time> [<script>] STEP-START <name>
#   <time> [<script>] STEP-END <name> rc=<exit code> seconds=<elapsed>
# A failed step is remembered (FAILED_STEP) and its status returned, so `set -e` ends the script, whose exit trap then
# writes `STEP-FAILED <name> rc=<code>` as its last marker. NAME is one word ([a-z0-9_-]).
step() {
  local name=$1 started=$SECONDS rc=0
  shift
  log "STEP-START $name"
  "$@" || rc=$?
  log "STEP-END $name rc=$rc seconds=$((SECONDS - started))"
  if ((rc != 0)); then
    FAILED_STEP=$name
    return "$rc"
  fi
}

# Where home directories go: on FSx when it is mounted, so they are the same on every node.
home_root() {
  local path
  path="$(param fsx.mount_path)"
  if [[ -n "$path" ]] && mountpoint -q "$path"; then
    echo "$path/home"
  else
    echo "$DEFAULT_HOME_ROOT"
  fi
}

# slurm_setting NAME -> the last NAME=value in $SLURM_CONF ("" when absent; Slurm keys are case-insensitive).
slurm_setting() {
  sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/Ip" "${SLURM_CONF:?}" | tail -n1
}

# contract_warn FACT MESSAGE... : this node is not what lifecycle/node_contract.json's fact FACT expects of HyperPod,
# and the script took another path. The operator sees it in three places: the line `WARNING: [contract:FACT] ...` in
# the script's output, so in the node's log under LOG_DIR and (during the lifecycle hook) in HyperPod's CloudWatch
# stream LifecycleConfig/<group>/<instance-id>, which the platform dashboard's "Node contract warnings" widget lists;
# and one record FACT<TAB>SCRIPT<TAB>MESSAGE in $STATE_DIR/contract_warnings (each distinct record once).
contract_warn() {
  local fact=$1 record
  shift
  log "WARNING: [contract:$fact] $*"
  record="$fact"$'\t'"$SCRIPT_NAME"$'\t'"$*"
  [[ -d "$STATE_DIR" ]] || mkdir -p "$STATE_DIR"
  grep -qxF -- "$record" "$STATE_DIR/contract_warnings" 2>/dev/null || printf '%s\n' "$record" >>"$STATE_DIR/contract_warnings"
}

# included_conf FEATURE : returns 0 when $SLURM_CONF includes $INCLUDED_CONF, the only Slurm file the platform edits.
# Otherwise a contract warning that FEATURE is not applied, and 1. The platform never adds the include itself: slurm.conf
# is HyperPod's, and an edit there may be overwritten at its next reconfiguration (node_contract.json,
# slurm-conf-includes-accounting-conf).
included_conf() {
  local name others
  name="$(basename "${INCLUDED_CONF:?}")"
  grep -qiE "^[[:space:]]*include[[:space:]]+(\S*/)?${name//./\\.}[[:space:]]*$" "${SLURM_CONF:?}" && return 0
  others="$(sed -n 's/^[[:space:]]*include[[:space:]]\+\([^[:space:]]*\).*/\1/Ip' "$SLURM_CONF" | paste -sd' ' -)"
  contract_warn slurm-conf-includes-accounting-conf "$SLURM_CONF does not include $name (it includes:" \
    "${others:-nothing}), and the platform never edits HyperPod's slurm.conf: $1 is not applied"
  return 1
}
