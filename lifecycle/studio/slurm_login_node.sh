#!/bin/bash
# SageMaker Studio lifecycle config (JupyterLab and Code Editor): turns the space into a Slurm login
# node for the HyperPod cluster whose controller published its settings with
# lifecycle/hyperpod/publish_slurm_login.sh. Studio allows an LCC 5 minutes, so this returns at once
# and does the work in the background; read $HOME/.slurm-login/setup.log. See README.md here.
# Every run is idempotent. The munge key is never printed. In per-user mode (the secret's "auth" is "jwt") the space
# gets no munge key and no munged: its user authenticates with their own Slurm token (slurm_token.sh).
# The Slurm client is the controller's own build: the bundle the secret names (client_bundle, built by
# lifecycle/hyperpod/build_slurm_client_bundle.sh), downloaded from the lifecycle bucket, installed only if its sha256
# is the one in the secret and its Slurm release the controller's. No apt, no internet, no other source.

# The CDK stack replaces this placeholder with the secret's ARN when it builds the LCC content.
EMBEDDED_SECRET_ARN='@SLURM_LOGIN_SECRET_ARN@'

R="${SLURM_LOGIN_ROOT:-}" # prefix for every system path below (tests point it at a sandbox)
STATE_DIR="${SLURM_LOGIN_STATE_DIR:-${HOME:-/home/sagemaker-user}/.slurm-login}"
LOG_FILE="${SLURM_LOGIN_LOG:-$STATE_DIR/setup.log}"
ENV_FILE="${SLURM_LOGIN_ENV_FILE:-$R/etc/slurm-login.env}"
SLURM_CONF_DIR="${SLURM_CONF_DIR:-$R/etc/slurm}"
MUNGE_KEY="${MUNGE_KEY:-$R/etc/munge/munge.key}"
MUNGE_USER="${MUNGE_USER:-munge}"
MUNGE_PID_FILE="${MUNGE_PID_FILE:-$R/run/munge/munged.pid}"
MUNGE_LOG_FILE="${MUNGE_LOG_FILE:-$R/var/log/munge/munged.log}"
MUNGE_SEED_FILE="${MUNGE_SEED_FILE:-$R/var/lib/munge/munged.seed}"
HOSTS_FILE="${HOSTS_FILE:-$R/etc/hosts}"
RETRY_DELAY="${SLURM_LOGIN_RETRY_DELAY:-5}"
VERIFY_ATTEMPTS="${SLURM_LOGIN_VERIFY_ATTEMPTS:-6}"
CLIENT_DIR="${SLURM_CLIENT_DIR:-$R/opt/hyperpod-slurm-client}"
PROFILE_SNIPPET="${SLURM_CLIENT_PROFILE:-$R/etc/profile.d/hyperpod-slurm-client.sh}"

# This script's directory, as dirname would print it, without starting one ("." when run as `bash x.sh` from it).
SCRIPT_DIR="${BASH_SOURCE[0]%/*}"
[[ "$SCRIPT_DIR" != "${BASH_SOURCE[0]}" ]] || SCRIPT_DIR=.
# shellcheck source-path=SCRIPTDIR source=slurm_token.sh
source "$SCRIPT_DIR/slurm_token.sh"
# shellcheck source-path=SCRIPTDIR source=fsx_paths.sh
source "$SCRIPT_DIR/fsx_paths.sh"
# sbatch goes through this (studio_workdir.sh): a job starts where its submitter is, as the cluster sees it.
WORKDIR_HELPER="${SLURM_WORKDIR_HELPER:-$R/usr/local/lib/hyperpod/studio-workdir}"

# %(...)T: the time now (-1) without starting date(1) for every line; TZ=UTC0 for this printf only, as `date -u`.
log() { TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T [slurm-login] %s\n' -1 "$*"; }
die() {
  log "ERROR: $*" >&2
  exit 1
}

# as_root CMD... : root already, else passwordless sudo (SageMaker Distribution images grant it).
as_root() {
  if ((EUID == 0)); then "$@"; else sudo -n -- "$@"; fi
}

# root_put DEST MODE [OWNER] < CONTENT : CONTENT into DEST (a system path), owned by OWNER (default root) with MODE,
# through a temporary file beside DEST. Root reads only its stdin, which this script opens: never a file in the
# user's home or /tmp that the user could swap for a link between a check and root's read. `chown OWNER:` gives the
# file OWNER's login group (chown(1)).
root_put() {
  # shellcheck disable=SC2016 # the inner sh expands them
  as_root sh -c 'set -e; t="$(mktemp "$1.XXXXXX")"; cat >"$t"; chown "$3:" "$t"; chmod "$2" "$t"
    mv -f "$t" "$1"' _ "$1" "$2" "${3:-root}"
}

# root_put_all DIR MODE NAME TEXT [NAME TEXT]... : each TEXT and a newline into DIR/NAME, owned by root with MODE, as
# root_put writes one file, in one root shell for all of them: written into a directory root makes for them in DIR,
# then each renamed into place. Root reads only its arguments. Each NAME is a plain file name.
root_put_all() {
  # shellcheck disable=SC2016 # the inner sh expands them
  as_root sh -c 'set -e; d=$1 m=$2; shift 2; t="$(mktemp -d "$d/.root_put.XXXXXX")"; trap "rm -rf \"$t\"" EXIT
    while [ $# -ge 2 ]; do
      case $1 in "" | . | .. | */*) echo "root_put_all: not a file name: $1" >&2; exit 1 ;; esac
      printf "%s\n" "$2" >"$t/$1"; shift 2
    done
    chown root: "$t"/*; chmod "$m" "$t"/*; mv -f -t "$d" "$t"/*; rmdir "$t"; trap - EXIT' _ "$@"
}

# as_munge CMD... : runs CMD as MUNGE_USER (munged refuses a key owned by another user).
as_munge() {
  if [[ "$(id -un)" == "$MUNGE_USER" ]]; then
    "$@"
  elif ((EUID == 0)); then
    runuser -u "$MUNGE_USER" -- "$@"
  else
    sudo -n -u "$MUNGE_USER" -- "$@"
  fi
}

# major_minor VERSION -> "23.11" for "23.11.10", "1:23.11.4-1ubuntu2" or "slurm 23.11.4"; "" if none.
major_minor() {
  local v="${1##* }"
  v="${v#*:}"
  if [[ "$v" =~ ^([0-9]+)\.([0-9]+)([.-]|$) ]]; then
    echo "$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"
  fi
}

# same_release WANT HAVE : true when both name the same Slurm major.minor release.
same_release() {
  local a b
  a="$(major_minor "$1")" b="$(major_minor "$2")"
  [[ -n "$a" && "$a" == "$b" ]]
}

# mismatch_message CLUSTER_VERSION SOURCE CLIENT_VERSION
mismatch_message() {
  echo "Slurm version mismatch: the cluster runs Slurm $1 ($(major_minor "$1")) but $2 is $3" \
    "($(major_minor "$3")). Slurm client commands must match the controller's major.minor release," \
    "so nothing was installed. The controller publishes its own client bundle with its version: run" \
    "publish_slurm_login.sh on the controller again."
}

# secret_arn -> the ARN from the environment, the embedded value, or ENV_FILE (KEY=VALUE lines).
secret_arn() {
  local arn="${SLURM_LOGIN_SECRET_ARN:-}"
  if [[ -z "$arn" && "$EMBEDDED_SECRET_ARN" != @*@ ]]; then
    arn="$EMBEDDED_SECRET_ARN"
  fi
  if [[ -z "$arn" && -r "$ENV_FILE" ]]; then
    arn="$(sed -n 's/^[[:space:]]*\(export[[:space:]]\+\)\{0,1\}SLURM_LOGIN_SECRET_ARN=//p' "$ENV_FILE" |
      tail -n1 | tr -d "\"' ")"
  fi
  echo "$arn"
}

# fetch_secret ARN DIR : writes DIR/secret.json, DIR/munge.key, DIR/slurm.conf (PluginDir set to the installed
# bundle's) and the files it includes; prints S_* shell vars.
fetch_secret() {
  local arn=$1 dir=$2 region attempt=1
  region="$(cut -d: -f4 <<<"$arn")"
  [[ "$arn" == arn:*:secretsmanager:* && -n "$region" ]] || die "not a Secrets Manager ARN: '$arn'"
  until aws secretsmanager get-secret-value --secret-id "$arn" --region "$region" \
    --query SecretString --output text >"$dir/secret.json"; do
    if ((attempt >= 3)); then
      die "cannot read secret $arn: the Studio execution role needs secretsmanager:GetSecretValue on it," \
        "and the space's VPC needs a route to Secrets Manager"
    fi
    log "reading the secret failed (attempt $attempt/3), retrying in ${RETRY_DELAY}s" >&2
    sleep "$RETRY_DELAY"
    attempt=$((attempt + 1))
  done
  PLUGIN_DIR="$CLIENT_DIR/lib/slurm" python3 - "$dir" <<'PY'
import base64, ipaddress, os, json, re, shlex, sys
d = sys.argv[1]
try:
    s = json.load(open(f"{d}/secret.json"))
except ValueError as e:
    sys.exit(f"the secret value is not JSON: {e}")
auth = s.get("auth", "munge")
if auth not in ("munge", "jwt"):
    sys.exit(f"the secret's auth is {auth!r}; expected munge or jwt")
need = ("slurm_version", "controller_host", "controller_addr", "cluster_name",
        *(("munge_key_b64",) if auth == "munge" else ()), "slurm_conf")
missing = [k for k in need if not s.get(k)]
if missing:
    sys.exit("the secret lacks " + ", ".join(missing) + " (was publish_slurm_login.sh run on the controller?)")
bundle = s.get("client_bundle") or {}
if not bundle:
    sys.exit("the secret names no client_bundle: the controller publishes its Slurm client with its settings when "
             "slurm.client_bundle_s3_prefix is set; run publish_slurm_login.sh on the controller again")
if not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([A-Za-z0-9._-]+/)+slurm-client-[A-Za-z0-9._-]+\.tar\.gz",
                    str(bundle.get("s3_uri", ""))):
    sys.exit(f"the secret's client_bundle.s3_uri {bundle.get('s3_uri')!r} is not a bundle's s3:// URI")
if not re.fullmatch(r"[0-9a-f]{64}", str(bundle.get("sha256", ""))):
    sys.exit(f"the secret's client_bundle.sha256 {bundle.get('sha256')!r} is not a sha256")
# Whoever can write the secret must not redirect this space or make it run their code.
try:
    ipaddress.IPv4Address(s["controller_addr"])
except ValueError:
    sys.exit(f"the secret's controller_addr {s['controller_addr']!r} is not an IPv4 address")
if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9-]{1,63})*", s["controller_host"]):
    sys.exit(f"the secret's controller_host {s['controller_host']!r} is not a host name")
# Every controller, primary first (HyperPod multi-head); an older value names the primary only.
controllers = s.get("controllers") or [{"host": s["controller_host"], "addr": s["controller_addr"]}]
for c in controllers:
    if not isinstance(c, dict) or not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9-]{1,63})*",
                                                   str(c.get("host", ""))):
        sys.exit(f"the secret's controllers entry {c!r} has no host name")
    try:
        c.get("addr") and ipaddress.IPv4Address(c["addr"])
    except ValueError:
        sys.exit(f"the secret's controllers entry {c['host']} has an address {c['addr']!r} that is not IPv4")
# Settings that make a client load or run a file: only from Slurm's and the system's own directories.
CODE = ("PluginDir", "PlugStackConfig", "SrunProlog", "SrunEpilog", "TaskProlog", "TaskEpilog", "Prolog", "Epilog",
        "PrologSlurmctld", "EpilogSlurmctld", "HealthCheckProgram", "MailProg", "JobCompLoc", "ResvProlog",
        "ResvEpilog", "RebootProgram", "ResumeProgram", "SuspendProgram", "UnkillableStepProgram", "BurstBufferType")
SAFE = ("/opt/slurm/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/", "/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/",
        "/etc/slurm/", "/opt/aws/", "/opt/sagemaker/", "/usr/share/")
for name, text in [("slurm.conf", s["slurm_conf"]), *(s.get("slurm_conf_includes") or {}).items()]:
    for line in text.splitlines():
        m = re.match(r"\s*(\w+)\s*=\s*(\S+)", line.split("#", 1)[0])
        if m and m.group(1).lower() in (c.lower() for c in CODE):
            paths = m.group(2).split(":" if m.group(1).lower() == "plugindir" else ",")
            bad = [p for p in paths if p.startswith("/") and (".." in p or not p.startswith(SAFE))]
            if bad:
                sys.exit(f"the secret's {name} sets {m.group(1)}={m.group(2)}, outside Slurm's and system dirs")
if auth == "munge":
    with open(f"{d}/munge.key", "wb") as f:
        f.write(base64.b64decode(s["munge_key_b64"], validate=True))
# The bundle's plugins, wherever the controller keeps its own (its PluginDir or its build's default).
plugin_dir = os.environ["PLUGIN_DIR"]
conf_lines = [f"#{line}  # slurm_login_node.sh: the client bundle's plugins instead"
              if re.match(r"\s*PluginDir\s*=", line, re.I) else line for line in s["slurm_conf"].splitlines()]
with open(f"{d}/slurm.conf", "w") as f:
    f.write("\n".join(conf_lines + [f"PluginDir={plugin_dir}"]) + "\n")
# Files slurm.conf includes, published by name next to it (publish_slurm_login.sh rewrote the include lines).
for name, text in (s.get("slurm_conf_includes") or {}).items():
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name) or name == "slurm.conf":
        sys.exit(f"the secret's slurm_conf_includes has an unsafe file name {name!r}")
    with open(f"{d}/{name}", "w") as f:
        f.write(text)
sock = ""
for line in s["slurm_conf"].splitlines():
    m = re.match(r"\s*AuthInfo\s*=\s*(\S+)", line, re.I)
    for opt in (m.group(1).split(",") if m else []):
        if opt.startswith("socket="):
            sock = opt[len("socket="):]
for k in ("slurm_version", "controller_host", "controller_addr", "cluster_name"):
    print(f"S_{k}={shlex.quote(str(s[k]))}")
print(f"S_auth={auth}")
print(f"S_bundle_uri={shlex.quote(bundle['s3_uri'])}")
print(f"S_bundle_sha={bundle['sha256']}")
print(f"S_auth_socket={shlex.quote(sock)}")
pairs = " ".join(f"{c['addr']}={c['host']}" for c in controllers if c.get("addr"))
print(f"S_controllers={shlex.quote(pairs)}")
PY
}

# client_version CONF -> what the installed sinfo reports ("" when there is none).
client_version() {
  command -v sinfo >/dev/null || return 0
  { SLURM_CONF="$1" sinfo --version 2>/dev/null || true; } | awk '{print $2}'
}

# bundle_wrapper CMD INTERPRETER [ARGV0] : a wrapper that runs the bundle's CMD with the bundle's libraries (ARGV0
# yes: the loader takes --argv0; install_bundle asks it once per bundle, not once per command). They are given
# to the dynamic loader on its command line, not in LD_LIBRARY_PATH, so nothing the command starts (and no job
# sbatch submits with the caller's environment) inherits them. SLURM_CONF defaults to the slurm.conf this script
# writes, since the controller's build looks for its own default path.
# Jobs sbatch submits do not keep this path: slurmd sets every job's SLURM_CONF to its own slurm.conf (observed
# with Slurm 22.05, configless and not; tests/e2e/test_studio_slurm_login.py checks a job's srun step).
bundle_wrapper() {
  local cmd=$1 interp=$2 argv0=()
  [[ "${3:-}" != yes ]] || argv0=(--argv0 "$cmd") # glibc >= 2.33: keep argv[0]
  printf '%s\n' '#!/bin/sh' "# slurm_login_node.sh: the Slurm controller's own $cmd (client bundle, $CLIENT_DIR)" \
    "[ -n \"\${SLURM_CONF:-}\" ] || { SLURM_CONF=$SLURM_CONF_DIR/slurm.conf; export SLURM_CONF; }" \
    "exec $interp --library-path $CLIENT_DIR/lib:$CLIENT_DIR/lib/slurm ${argv0[*]} $CLIENT_DIR/libexec/$cmd \"\$@\""
}

# install_bundle WANT URI SHA256 AUTH WORK : the controller's client bundle into CLIENT_DIR, unless that exact bundle
# is there already. Refuses a download whose sha256 is not the secret's and a bundle of another Slurm release.
install_bundle() {
  local want=$1 uri=$2 sha=$3 auth=$4 work=$5 attempt=1 got version interp cmd new argv0 wrappers
  if [[ "$(cat "$CLIENT_DIR/.sha256" 2>/dev/null)" == "$sha" && -x "$CLIENT_DIR/bin/sinfo" ]]; then
    log "Slurm client bundle $sha already installed in $CLIENT_DIR"
    return 0
  fi
  until aws s3 cp --only-show-errors "$uri" "$work/bundle.tar.gz"; do
    if ((attempt >= 3)); then
      die "cannot download the Slurm client bundle $uri: the Studio execution role needs s3:GetObject on it," \
        "and the space's VPC needs a route to S3"
    fi
    log "downloading the client bundle failed (attempt $attempt/3), retrying in ${RETRY_DELAY}s" >&2
    sleep "$RETRY_DELAY"
    attempt=$((attempt + 1))
  done
  got="$(sha256sum "$work/bundle.tar.gz" | awk '{print $1}')"
  [[ "$got" == "$sha" ]] || die "the Slurm client bundle $uri has sha256 $got, but the cluster published $sha:" \
    "refusing to install it (nothing was installed)"
  # Root installs from its own copy of the archive, checked again there: never from files the user could change
  # after the check above. It unpacks it once, beside CLIENT_DIR, and what the bundle says of itself is read there;
  # a bundle refused below is removed before the script stops.
  new="$CLIENT_DIR.new"
  as_root rm -rf "$new"
  as_root install -d -m 0755 "$(dirname "$CLIENT_DIR")" "$new"
  root_put "$new/.bundle.tar.gz" 0600 <"$work/bundle.tar.gz"
  got="$(as_root sha256sum "$new/.bundle.tar.gz" | awk '{print $1}')"
  if [[ "$got" != "$sha" ]]; then
    as_root rm -rf "$new"
    die "the Slurm client bundle changed while it was being installed: refusing it (nothing was installed)"
  fi
  as_root tar -xzf "$new/.bundle.tar.gz" -C "$new" --strip-components=1 --no-same-owner --no-same-permissions \
    slurm-client
  as_root rm -f "$new/.bundle.tar.gz"
  version="$(cat "$new/VERSION" 2>/dev/null)"
  interp="$(cat "$new/INTERPRETER" 2>/dev/null)"
  # The exact build, not just the release: the controller published its own. sinfo --version checks again below.
  [[ "$version" == "$want" ]] ||
    { as_root rm -rf "$new"; die "$(mismatch_message "$want" "the client bundle" "${version:-unknown}")"; }
  if [[ "$interp" != /* || ! -x "$interp" ]]; then
    as_root rm -rf "$new"
    die "the bundle's binaries need the program interpreter '$interp', which this image lacks"
  fi
  if [[ "$auth" == jwt && ! -f "$new/lib/slurm/auth_jwt.so" ]]; then
    as_root rm -rf "$new"
    die "per-user mode needs auth_jwt.so, which the controller's client bundle lacks"
  fi
  as_root install -d -m 0755 "$new/bin"
  argv0=no
  "$interp" --help 2>/dev/null | grep -q -- --argv0 && argv0=yes
  wrappers=()
  while read -r cmd; do
    [[ "$cmd" =~ ^[a-z]+$ ]] || { as_root rm -rf "$new"; die "the client bundle lists an unexpected command name '$cmd'"; }
    wrappers+=("$cmd" "$(bundle_wrapper "$cmd" "$interp" "$argv0")")
  done <"$new/COMMANDS"
  ((${#wrappers[@]} == 0)) || root_put_all "$new/bin" 0755 "${wrappers[@]}"
  echo "$sha" | root_put "$new/.sha256" 0644
  as_root rm -rf "$CLIENT_DIR.old"
  [[ ! -e "$CLIENT_DIR" ]] || as_root mv "$CLIENT_DIR" "$CLIENT_DIR.old"
  as_root mv "$new" "$CLIENT_DIR"
  as_root rm -rf "$CLIENT_DIR.old"
  log "installed the Slurm $version client bundle in $CLIENT_DIR"
  CHANGED+=("client bundle")
}

# link_commands AUTH : the bundle's commands on every user's PATH (WRAPPER_DIR, /usr/local/bin), and a profile
# snippet for login shells. In per-user mode slurm_token.sh's wrappers take the commands it wraps.
link_commands() {
  local auth=$1 cmd changed=1 text links=()
  as_root install -d -m 0755 "$WRAPPER_DIR" "$(dirname "$PROFILE_SNIPPET")"
  install_workdir_helper && changed=0
  for cmd in "$CLIENT_DIR"/bin/*; do
    cmd="${cmd##*/}"
    [[ "$auth" == jwt && " ${WRAPPED[*]} " == *" $cmd "* ]] && continue
    text="#!/bin/sh"$'\n'"exec $(client_exec "$CLIENT_DIR/bin/$cmd") \"\$@\""
    # (no cmp to start for a wrapper not there yet)
    if [[ ! -e "$WRAPPER_DIR/$cmd" ]] || ! cmp -s "$WRAPPER_DIR/$cmd" - <<<"$text" 2>/dev/null; then
      links+=("$cmd" "$text")
    fi
  done
  if ((${#links[@]})); then
    root_put_all "$WRAPPER_DIR" 0755 "${links[@]}"
    changed=0
  fi
  printf '%s\n' "# slurm_login_node.sh: the HyperPod cluster's Slurm client" \
    "case \":\$PATH:\" in *\":$CLIENT_DIR/bin:\"*) ;; *) PATH=\"$CLIENT_DIR/bin:\$PATH\" ;; esac" \
    "export SLURM_CONF=\"\${SLURM_CONF:-$SLURM_CONF_DIR/slurm.conf}\"" >"$STATE_DIR/link.tmp"
  if [[ ! -e "$PROFILE_SNIPPET" ]] || ! cmp -s "$STATE_DIR/link.tmp" "$PROFILE_SNIPPET" 2>/dev/null; then
    root_put "$PROFILE_SNIPPET" 0644 <"$STATE_DIR/link.tmp"
    changed=0
  fi
  rm -f "$STATE_DIR/link.tmp"
  return "$changed"
}

# client_exec PATH -> what a wrapper on PATH execs for the client command PATH: sbatch through the working-directory
# helper, every other command as it is.
client_exec() {
  if [[ "${1##*/}" == sbatch ]]; then
    echo "$WORKDIR_HELPER $FSX_PATHS_FILE $1"
  else
    echo "$1"
  fi
}

# install_workdir_helper : studio_workdir.sh as WORKDIR_HELPER (root's, 0755) unless it is there already.
install_workdir_helper() {
  local source
  source="$SCRIPT_DIR/studio_workdir.sh"
  if [[ -e "$WORKDIR_HELPER" ]] && as_root cat "$WORKDIR_HELPER" 2>/dev/null | cmp -s "$source" -; then
    return 1
  fi
  as_root install -d -m 0755 "$(dirname "$WORKDIR_HELPER")"
  root_put "$WORKDIR_HELPER" 0755 <"$source"
}

# ensure_munge_user : munged runs as MUNGE_USER; a stock image without the munge package has no such user.
ensure_munge_user() {
  id -u "$MUNGE_USER" >/dev/null 2>&1 && return 0
  as_root useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$MUNGE_USER"
  CHANGED+=("user $MUNGE_USER")
}

# put_file SRC DEST MODE OWNER : installs SRC as DEST unless content, mode and owner already match.
put_file() {
  local src=$1 dest=$2 mode=$3 owner=$4
  if as_root test -f "$dest" && as_root cat "$dest" | cmp -s "$src" - &&
    [[ "$(as_root stat -c '%a %U' "$dest")" == "$mode $owner" ]]; then
    return 1
  fi
  as_root install -d -m 0755 "$(dirname "$dest")"
  root_put "$dest" "$mode" "$owner" <"$src"
}

# munge's commands from the bundle by full path: sudo resets PATH.
munge_ok() { "$CLIENT_DIR/bin/munge" -n -S "$1" </dev/null 2>/dev/null | "$CLIENT_DIR/bin/unmunge" -S "$1" >/dev/null 2>&1; }

# start_munged SOCKET KEY_CHANGED
start_munged() {
  local sock=$1 key_changed=$2 d group
  if munge_ok "$sock"; then
    [[ "$key_changed" == 1 ]] || return 0
    log "munge key changed: restarting munged"
    as_root "$CLIENT_DIR/bin/munged" --socket "$sock" --stop || true
  fi
  group="$(id -gn "$MUNGE_USER")"
  for d in "$(dirname "$sock")" "$(dirname "$MUNGE_PID_FILE")" "$(dirname "$MUNGE_LOG_FILE")" \
    "$(dirname "$MUNGE_SEED_FILE")"; do
    [[ -d "$d" ]] || as_root install -d -m 0755 -o "$MUNGE_USER" -g "$group" "$d"
  done
  log "starting munged on $sock"
  # 9>&-: the daemon must not inherit (and so hold forever) this run's lock.
  as_munge "$CLIENT_DIR/bin/munged" --key-file "$MUNGE_KEY" --socket "$sock" --pid-file "$MUNGE_PID_FILE" \
    --log-file "$MUNGE_LOG_FILE" --seed-file "$MUNGE_SEED_FILE" 9>&-
  munge_ok "$sock" || die "munged started but $sock does not answer; see $MUNGE_LOG_FILE"
  CHANGED+=("munged")
}

setup() {
  set -euo pipefail
  umask 022
  local arn work conf sock key_changed=0 have attempt=1
  CHANGED=()
  arn="$(secret_arn)"
  [[ -n "$arn" ]] || die "no secret ARN: set SLURM_LOGIN_SECRET_ARN or write it to $ENV_FILE"
  if ((EUID != 0)) && ! sudo -n true 2>/dev/null; then
    die "user $(id -un) needs passwordless sudo to install the Slurm client and start munged"
  fi
  work="$(mktemp -d)"
  chmod 700 "$work"
  # shellcheck disable=SC2064 # expand now: the trap must remove this run's directory
  trap "rm -rf '$work'" EXIT
  local vars S_slurm_version="" S_controller_host="" S_controller_addr="" S_cluster_name="" S_auth_socket="" S_auth=""
  local S_bundle_uri="" S_bundle_sha="" S_controllers=""
  vars="$(fetch_secret "$arn" "$work")" || exit 1
  eval "$vars"
  [[ -n "$(major_minor "$S_slurm_version")" ]] || die "secret has a bad slurm_version '$S_slurm_version'"
  log "cluster $S_cluster_name: Slurm $S_slurm_version, slurmctld on $S_controller_host ($S_controller_addr)"

  mkdir "$work/.bundle" # a dot: the loop below installs every other file in $work as a slurm.conf include
  install_bundle "$S_slurm_version" "$S_bundle_uri" "$S_bundle_sha" "$S_auth" "$work/.bundle"
  # The bundle's commands, ahead of anything the image ships (an older Slurm client, or munge) for this run.
  export PATH="$CLIENT_DIR/bin:$PATH"
  have="$(client_version "$work/slurm.conf")"
  [[ -n "$have" ]] || die "the installed client bundle's sinfo does not run (see the lines above)"
  [[ "$have" == "$S_slurm_version" ]] ||
    die "$(mismatch_message "$S_slurm_version" "the installed client (sinfo --version)" "$have")"
  if link_commands "$S_auth"; then CHANGED+=("commands on PATH"); fi
  link_fsx_paths || log "ERROR: the cluster's FSx paths are not linked in this space (see above); jobs submitted" \
    "from FSx directories may not find them on the nodes"
  if [[ "$S_auth" == munge ]]; then
    [[ -x "$CLIENT_DIR/bin/munged" ]] || die "the controller's client bundle has no munged"
    ensure_munge_user
    if put_file "$work/munge.key" "$MUNGE_KEY" 400 "$MUNGE_USER"; then
      key_changed=1
      CHANGED+=("munge key")
    fi
  else
    log "per-user mode: no munge key; $(id -un) authenticates with their own Slurm token"
  fi
  conf="$SLURM_CONF_DIR/slurm.conf"
  if put_file "$work/slurm.conf" "$conf" 644 root; then CHANGED+=("slurm.conf"); fi
  local included
  for included in "$work"/*; do
    case "${included##*/}" in secret.json | munge.key | slurm.conf) continue ;; esac
    if put_file "$included" "$SLURM_CONF_DIR/${included##*/}" 644 root; then CHANGED+=("${included##*/}"); fi
  done
  local pair addr host
  for pair in $S_controllers; do # every controller a client may fail over to, by name too
    addr="${pair%%=*}" host="${pair#*=}"
    getent hosts "$host" >/dev/null && continue
    if ! awk -v a="$addr" -v h="$host" \
      '$1 == a { for (i = 2; i <= NF; i++) if ($i == h) f = 1 } END { exit !f }' "$HOSTS_FILE" 2>/dev/null; then
      echo "$addr $host" | as_root tee -a "$HOSTS_FILE" >/dev/null
      CHANGED+=("hosts entry")
    fi
  done
  local region token_ok=0
  if [[ "$S_auth" == munge ]]; then
    sock="${S_auth_socket:-${MUNGE_SOCKET:-$R/run/munge/munge.socket.2}}"
    start_munged "$sock" "$key_changed"
  else
    region="$(cut -d: -f4 <<<"$arn")"
    token_secret_id >/dev/null
    if install_wrappers; then CHANGED+=("client wrappers"); fi
    fetch_token "$region" || token_ok=$?
    ((token_ok != 1)) || die "cannot read this profile's Slurm token or write it (see above)"
    start_refresher "$region"
    if ((token_ok == 2)); then
      log "ready once the token arrives: the background refresher installs it"
      return 0
    fi
  fi

  local jwt=() # an empty SLURM_JWT still selects auth/jwt
  [[ "$S_auth" == munge ]] || jwt=("SLURM_JWT=$(cat "$TOKEN_FILE")")
  until env SLURM_CONF="$conf" "${jwt[@]}" sinfo; do
    if ((attempt >= VERIFY_ATTEMPTS)); then
      die "sinfo cannot reach slurmctld at $S_controller_addr: the cluster's security group must allow" \
        "TCP 6817 from the Studio security group (see README.md)"
    fi
    sleep "$RETRY_DELAY"
    attempt=$((attempt + 1))
  done
  if ((${#CHANGED[@]} == 0)); then
    log "nothing changed: Slurm client $have, slurm.conf and the $S_auth authentication already match the cluster"
  else
    log "changed: ${CHANGED[*]}"
  fi
  log "ready: sbatch, squeue, scancel and sinfo work (SLURM_CONF=$conf)"
}

main() {
  local copy
  if [[ "${SLURM_LOGIN_FOREGROUND:-0}" == 1 || "${SLURM_LOGIN_CHILD:-0}" == 1 ]]; then
    mkdir -p "$STATE_DIR"
    exec 9>"$STATE_DIR/lock"
    if ! flock -n 9; then
      log "another setup run is in progress (lock $STATE_DIR/lock); leaving it to finish"
      return 0
    fi
    if [[ "${SLURM_LOGIN_CHILD:-0}" == 1 ]]; then
      setup
    else
      # Foreground (tests, manual runs): show the output and keep it in the log as well.
      mkdir -p "$(dirname "$LOG_FILE")"
      setup 2>&1 | tee -a "$LOG_FILE"
      return "${PIPESTATUS[0]}"
    fi
    return
  fi
  # Studio may remove the script file once the LCC exits, so the background run uses a copy.
  mkdir -p "$STATE_DIR" "$(dirname "$LOG_FILE")"
  copy="$STATE_DIR/slurm_login_node.sh"
  install -m 0700 "${BASH_SOURCE[0]}" "$copy"
  for copy in slurm_token.sh fsx_paths.sh studio_workdir.sh; do
    install -m 0700 "$SCRIPT_DIR/$copy" "$STATE_DIR/$copy"
  done
  copy="$STATE_DIR/slurm_login_node.sh"
  SLURM_LOGIN_CHILD=1 nohup setsid bash "$copy" >>"$LOG_FILE" 2>&1 </dev/null &
  log "Slurm login setup continues in the background (pid $!); log: $LOG_FILE"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
