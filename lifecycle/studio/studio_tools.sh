#!/bin/bash
# SageMaker Studio lifecycle config (JupyterLab and Code Editor, Slurm and EKS): installs the HyperPod CLI (`hyp`)
# and jq for the space's user from the platform's tools bundle in the lifecycle bucket. No internet: the bundle holds
# a hash-locked wheelhouse and a static jq (tools/build_studio_tools.py). Every file is checked against SHA256SUMS,
# whose own sha256 the lifecycle config carries; the bundle's pinned pip, run from its wheel, installs with --no-index
# --require-hashes --no-deps. Studio allows an LCC 5 minutes, so this returns at once and works in the background;
# read ~/.studio-tools/setup.log. A start that finds the same bundle installed downloads nothing. See README.md here.
#
# Set by the lifecycle-config bootstrap (constructs/studio_lifecycle_configs.py):
#   STUDIO_TOOLS_S3_URI   s3:// prefix of the bundle
#   STUDIO_TOOLS_SHA256   sha256 of the bundle's SHA256SUMS
# Overrides (tests, manual runs): STUDIO_TOOLS_SOURCE_DIR (a local copy of the bundle instead of S3),
# STUDIO_TOOLS_PYTHON (default python3), STUDIO_TOOLS_PREFIX (default ~/.local), STUDIO_TOOLS_STATE_DIR (default
# ~/.studio-tools), STUDIO_TOOLS_LOG, STUDIO_TOOLS_BASHRC, STUDIO_TOOLS_FOREGROUND=1 (run inline).

HOME_DIR="${HOME:-/home/sagemaker-user}"
STATE_DIR="${STUDIO_TOOLS_STATE_DIR:-$HOME_DIR/.studio-tools}"
LOG_FILE="${STUDIO_TOOLS_LOG:-$STATE_DIR/setup.log}"
PREFIX="${STUDIO_TOOLS_PREFIX:-$HOME_DIR/.local}"
BASHRC="${STUDIO_TOOLS_BASHRC:-$HOME_DIR/.bashrc}"
PYTHON="${STUDIO_TOOLS_PYTHON:-python3}"
MANIFEST=SHA256SUMS

# %(...)T: the time now (-1) without starting date(1) for every line; TZ=UTC0 for this printf only, as `date -u`.
log() { TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T [studio-tools] %s\n' -1 "$*"; }
die() {
  log "ERROR: $*" >&2
  exit 1
}

# sha256_of FILE -> its sha256: sha256sum's first field, cut by bash (no cut of its own per digest)
sha256_of() {
  local line
  line="$(sha256sum "$1")" || return
  echo "${line%% *}"
}

check_env() {
  local problems=()
  if [[ -z "${STUDIO_TOOLS_SOURCE_DIR:-}" ]]; then
    [[ "${STUDIO_TOOLS_S3_URI:-}" == s3://* ]] || problems+=("STUDIO_TOOLS_S3_URI='${STUDIO_TOOLS_S3_URI:-}' is not an s3:// URI")
  fi
  [[ "${STUDIO_TOOLS_SHA256:-}" =~ ^[0-9a-f]{64}$ ]] ||
    problems+=("STUDIO_TOOLS_SHA256='${STUDIO_TOOLS_SHA256:-}' is not a sha256 digest (64 lowercase hex characters)")
  if ((${#problems[@]})); then
    die "$(printf '%s; ' "${problems[@]}")these come from the lifecycle-config bootstrap"
  fi
}

# check_owner : installs go into the home of whoever runs this, never into someone else's. Root in a space whose
# home belongs to the app user would leave root-owned files there; Studio runs lifecycle configs as the app user.
check_owner() {
  local dir owner
  for dir in "$HOME_DIR" "$STATE_DIR" "$PREFIX" "$PREFIX/bin"; do
    [[ -e "$dir" || -L "$dir" ]] || continue
    [[ -L "$dir" ]] && die "$dir is a symbolic link; refusing to install through it"
    owner="$(stat -c %u "$dir")"
    [[ "$owner" == "$(id -u)" ]] ||
      die "$dir belongs to uid $owner, not to uid $(id -u) running this; run it as the space's user"
  done
}

# installed_matches : the bundle with this digest is installed and its files are still what it installed.
installed_matches() {
  local record="$STATE_DIR/installed" digest venv
  [[ -f "$record" ]] || return 1
  read -r digest venv <"$record" || return 1
  [[ "$digest" == "$STUDIO_TOOLS_SHA256" && -x "$venv/bin/hyp" && -f "$venv/.complete" ]] || return 1
  [[ "$(readlink "$PREFIX/bin/hyp")" == "$venv/bin/hyp" ]] || return 1
  [[ -f "$STATE_DIR/jq.sha256" && -x "$PREFIX/bin/jq" &&
    "$(sha256_of "$PREFIX/bin/jq")" == "$(cat "$STATE_DIR/jq.sha256")" ]]
}

# fetch_bundle DEST : copies the bundle and checks SHA256SUMS against STUDIO_TOOLS_SHA256, then every file.
fetch_bundle() {
  local dest=$1 actual
  mkdir -p "$dest"
  if [[ -n "${STUDIO_TOOLS_SOURCE_DIR:-}" ]]; then
    cp -R "$STUDIO_TOOLS_SOURCE_DIR/." "$dest/"
  else
    aws s3 cp --only-show-errors --recursive --exclude 'eksctl/*' "$STUDIO_TOOLS_S3_URI" "$dest/" ||
      die "cannot copy $STUDIO_TOOLS_S3_URI: the execution role needs s3:GetObject and s3:ListBucket on it"
  fi
  [[ -f "$dest/$MANIFEST" ]] || die "the bundle has no $MANIFEST"
  actual="$(sha256_of "$dest/$MANIFEST")"
  [[ "$actual" == "$STUDIO_TOOLS_SHA256" ]] ||
    die "checksum mismatch for $MANIFEST: expected sha256 $STUDIO_TOOLS_SHA256, actual $actual; installing nothing"
  (cd "$dest" && sha256sum --check --strict --quiet "$MANIFEST") ||
    die "a file of the bundle does not match its sha256 in $MANIFEST; installing nothing"
}

# install_jq BUNDLE : the static jq into $PREFIX/bin through a temp file checked again before the rename.
install_jq() {
  local bundle=$1 expected tmp
  expected="$(awk '$2 == "jq/jq" { print $1 }' "$bundle/$MANIFEST")"
  [[ -n "$expected" ]] || die "the bundle lists no jq/jq"
  if [[ -x "$PREFIX/bin/jq" && "$(sha256_of "$PREFIX/bin/jq")" == "$expected" ]]; then
    log "jq already installed ($PREFIX/bin/jq)"
  else
    mkdir -p "$PREFIX/bin"
    tmp="$(mktemp "$PREFIX/bin/.jq.XXXXXX")"
    cp "$bundle/jq/jq" "$tmp"
    chmod 0755 "$tmp"
    [[ "$(sha256_of "$tmp")" == "$expected" ]] || {
      rm -f "$tmp"
      die "the copy of jq changed while installing"
    }
    mv -f "$tmp" "$PREFIX/bin/jq"
    log "installed jq ($("$PREFIX/bin/jq" --version)) as $PREFIX/bin/jq"
    CHANGED+=(jq)
  fi
  echo "$expected" >"$STATE_DIR/jq.sha256"
}

# installer_wheel BUNDLE REQUIREMENTS : the path of the pip wheel the requirements file pins (exactly one pip line,
# exactly one such wheel in the bundle, with that sha256). The installer is the bundle's pinned pip, not the image's.
installer_wheel() {
  local bundle=$1 requirements=$2 pins version digest wheels
  mapfile -t pins < <(grep -E '^pip==' "$requirements")
  ((${#pins[@]} == 1)) ||
    die "${requirements##*/} pins pip ${#pins[@]} times, not once: the bundle is not from tools/build_studio_tools.py"
  [[ "${pins[0]}" =~ ^pip==([^ ]+)\ --hash=sha256:([0-9a-f]{64})$ ]] || die "cannot read the pip pin '${pins[0]}'"
  version="${BASH_REMATCH[1]}" digest="${BASH_REMATCH[2]}"
  wheels=("$bundle/hyp/wheels/pip-$version-"*.whl)
  [[ ${#wheels[@]} == 1 && -f "${wheels[0]}" ]] ||
    die "the bundle has no single pip-$version wheel in hyp/wheels, which ${requirements##*/} pins; installing nothing"
  [[ "$(sha256_of "${wheels[0]}")" == "$digest" ]] ||
    die "${wheels[0]##*/} does not have the sha256 ${requirements##*/} pins; installing nothing"
  printf '%s\n' "${wheels[0]}"
}

# install_hyp BUNDLE : a venv of its own (hyp's exact pins would clash with the image's environment), built from
# the bundle's wheels for this Python by the bundle's pip, then ~/.local/bin/hyp pointing into it.
install_hyp() {
  local bundle=$1 tag requirements installer venv old usage
  tag="$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')" ||
    die "cannot run $PYTHON (STUDIO_TOOLS_PYTHON)"
  requirements="$bundle/hyp/requirements-$tag.txt"
  if [[ ! -f "$requirements" ]]; then
    local built=("$bundle"/hyp/requirements-*.txt)
    built=("${built[@]##*/requirements-}")
    die "the bundle has no hyp wheels for $tag ($PYTHON); it has them for: ${built[*]%.txt}"
  fi
  venv="$STATE_DIR/hyp-${STUDIO_TOOLS_SHA256:0:16}-$tag"
  if [[ ! -f "$venv/.complete" ]]; then
    installer="$(installer_wheel "$bundle" "$requirements")" || exit 1
    rm -rf "$venv"
    # Not ensurepip's pip (unpinned; before 24.2 a third of this install went into its closing message): the venv
    # runs the pinned pip from its wheel (python pip-*.whl/pip), which installs itself into the venv with the rest.
    "$PYTHON" -m venv --without-pip "$venv" || die "$PYTHON -m venv --without-pip failed"
    "$venv/bin/python" "$installer/pip" install --quiet --disable-pip-version-check --no-index --no-cache-dir \
      --find-links "$bundle/hyp/wheels" --require-hashes --no-deps -r "$requirements" ||
      die "pip could not install hyp from the bundle (see above); nothing was linked"
    usage="$("$venv/bin/hyp" --help)" || die "$venv/bin/hyp --help fails; nothing was linked"
    log "$venv/bin/hyp --help runs: ${usage%%$'\n'*}"
    touch "$venv/.complete"
    CHANGED+=(hyp)
  fi
  mkdir -p "$PREFIX/bin"
  if [[ "$(readlink "$PREFIX/bin/hyp" 2>/dev/null)" != "$venv/bin/hyp" ]]; then
    ln -sfn "$venv/bin/hyp" "$PREFIX/bin/.hyp.new"
    mv -Tf "$PREFIX/bin/.hyp.new" "$PREFIX/bin/hyp"
    CHANGED+=("hyp link")
  fi
  echo "$STUDIO_TOOLS_SHA256 $venv" >"$STATE_DIR/installed"
  for old in "$STATE_DIR"/hyp-*; do
    [[ "$old" == "$venv" || ! -d "$old" ]] || rm -rf "$old"
  done
  log "hyp: $PREFIX/bin/hyp -> $venv/bin/hyp"
}

ensure_path_in_bashrc() {
  local marker="# studio-tools: $PREFIX/bin on PATH"
  grep -qxF "$marker" "$BASHRC" 2>/dev/null && return 0
  {
    echo "$marker"
    # shellcheck disable=SC2016 # $PATH expands when the shell reads .bashrc
    printf 'case ":$PATH:" in *":%s:"*) ;; *) export PATH="%s:$PATH" ;; esac\n' "$PREFIX/bin" "$PREFIX/bin"
  } >>"$BASHRC"
  CHANGED+=("PATH in $BASHRC")
}

setup() {
  set -euo pipefail
  umask 022
  local work
  CHANGED=()
  check_env
  check_owner
  if installed_matches; then
    ensure_path_in_bashrc
    log "nothing changed: hyp and jq from bundle $STUDIO_TOOLS_SHA256 are installed"
    return 0
  fi
  work="$(mktemp -d "$STATE_DIR/bundle.XXXXXX")"
  # shellcheck disable=SC2064 # expand now: the trap must remove this run's directory
  trap "rm -rf '$work'" EXIT
  fetch_bundle "$work"
  install_jq "$work"
  install_hyp "$work"
  ensure_path_in_bashrc
  log "changed: ${CHANGED[*]:-nothing}"
}

main() {
  local copy
  # Checked before anything is written, in the foreground, so a refusal reaches the lifecycle config's own log.
  check_env
  check_owner
  mkdir -p "$STATE_DIR"
  if [[ "${STUDIO_TOOLS_FOREGROUND:-0}" == 1 || "${STUDIO_TOOLS_CHILD:-0}" == 1 ]]; then
    exec 9>"$STATE_DIR/lock"
    if ! flock -n 9; then
      log "another run is in progress (lock $STATE_DIR/lock); leaving it to finish"
      return 0
    fi
    if [[ "${STUDIO_TOOLS_CHILD:-0}" == 1 ]]; then
      setup
    else
      setup 2>&1 | tee -a "$LOG_FILE"
      return "${PIPESTATUS[0]}"
    fi
    return
  fi
  # Studio may remove the script once the LCC exits, so the background run uses a copy.
  copy="$STATE_DIR/studio_tools.sh"
  install -m 0700 "${BASH_SOURCE[0]}" "$copy"
  STUDIO_TOOLS_CHILD=1 nohup setsid bash "$copy" >>"$LOG_FILE" 2>&1 </dev/null &
  log "hyp and jq are being installed in the background (pid $!); log: $LOG_FILE"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
