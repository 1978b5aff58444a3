# shellcheck shell=bash
# Checks the scripts and parameters a node runs as root against the deploy's lifecycle record (lib/verify.py), before
# anything runs. Sourced after lib/common.sh, never run.
#
# The record is a Secrets Manager secret that CloudFormation writes at every deploy from the same synth as the
# lifecycle prefix (constructs/lifecycle_scripts.py): the sha256 of every script and the parameters themselves. Its
# resource policy lets no principal but CloudFormation's execution role change it, so an account principal who gets a
# file into the lifecycle bucket (or the node's copy) still cannot make a node run it. The parameters name the record
# (lifecycle_record.secret_name, .region); a node role may read only its own cluster's record (IAM), so parameters
# that name another secret fail the read. What HyperPod runs first cannot be covered: the entry point, and what it
# runs to make this check (lib/common.sh, this file, lib/verify.py, lib/params.py), run before anything checks them;
# they are checked too, but only after they ran (docs/security.md, "The lifecycle record").

# _verify_py ARG... : lib/verify.py, each line it prints logged; its exit status.
_verify_py() {
  local out rc=0 line
  out="$(lib_py verify.py "$@" 2>&1)" || rc=$?
  while IFS= read -r line; do [[ -z "$line" ]] || log "$line"; done <<<"$out"
  return "$rc"
}

# _read_secret NAME REGION OUT : the secret's string into OUT (retry_backoff's own lines stay out of it).
_read_secret() {
  aws secretsmanager get-secret-value --secret-id "$1" --region "$2" --query SecretString --output text >"$3"
}

# fetch_record PARAMS OUT : the record the parameters name, into OUT (root's, 0600); fails saying why.
fetch_record() {
  local name region names
  # The entry point's own file is read into memory (lib/common.sh params), where its next reads find it; params fails
  # as `params.py get` of the two keys fails, and `param` asks params.py when memory cannot say.
  if [[ "$1" == "$PARAMS_FILE" ]]; then
    params lifecycle_record.secret_name lifecycle_record.region || return 1
    name="$(param lifecycle_record.secret_name)" region="$(param lifecycle_record.region)"
  else
    names="$(lib_py params.py get "$1" lifecycle_record.secret_name lifecycle_record.region)" || return 1
    {
      IFS= read -r name
      IFS= read -r region
    } <<<"$names"
  fi
  if [[ -z "$name" || -z "$region" ]]; then
    log "ERROR: $1 names no lifecycle_record (secret_name, region): nothing can be checked, so nothing runs"
    return 1
  fi
  (
    umask 077
    retry_backoff 5 _read_secret "$name" "$region" "$2"
  ) || {
    log "ERROR: could not read the lifecycle record $name in $region"
    return 1
  }
}

# verify_download DIR PARAMS : DIR (HyperPod's download of the lifecycle prefix) and PARAMS are exactly what the
# deploy recorded; otherwise logs every difference and returns 1.
verify_download() {
  local record rc=0
  record="$(mktemp)"
  if fetch_record "$2" "$record"; then
    _verify_py download "$record" "$1" "$2" || rc=$?
  else
    rc=1
  fi
  rm -f "$record"
  if ((rc != 0)); then
    log "ERROR: the lifecycle scripts or parameters in $1 are not what the deploy recorded (above); nothing runs"
    return 1
  fi
  log "scripts and parameters match the deploy's lifecycle record"
}

# verify_parameters PARAMS : PARAMS (the users sync's download) are the deploy's recorded parameters.
verify_parameters() {
  local record rc=0
  record="$(mktemp)"
  if fetch_record "$1" "$record"; then
    _verify_py parameters "$record" "$1" || rc=$?
  else
    rc=1
  fi
  rm -f "$record"
  ((rc == 0)) || log "ERROR: the downloaded parameters are not the deploy's recorded ones (above)"
  return "$rc"
}

# verify_local_copy MANIFEST DIR : the node's own copy of the scripts (install_users_sync.sh) holds the bytes checked
# at creation, and no one but root can change them.
verify_local_copy() {
  local rc=0
  _verify_py local "$1" "$2" || rc=$?
  ((rc == 0)) || log "ERROR: the node's copy of the scripts in $2 is not the one checked at creation (above)"
  return "$rc"
}
