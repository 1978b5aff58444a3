# shellcheck shell=bash
# Shared setup for studio_*.bats: the Slurm login scripts with every system command stubbed
# (studio_stub) and every system path in a temp dir. The secret lives in $STUB_SECRET as JSON.

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
# shellcheck disable=SC2034  # used by the .bats files that load this
LCC="$REPO_ROOT/lifecycle/studio/slurm_login_node.sh"
# shellcheck disable=SC2034
PUBLISH="$REPO_ROOT/lifecycle/hyperpod/publish_slurm_login.sh"
ARN="arn:aws:secretsmanager:eu-west-1:123456789012:secret:hyperpod/slurm-login-AbCdEf"

STUDIO_STUBBED=(aws sinfo munge unmunge munged apt-get apt-cache getent runuser sudo hostname)

setup() {
  T="$BATS_TEST_TMPDIR"
  export STUB_LOG="$T/calls.log" STUB_STATE="$T/stub-state" STUB_SECRET="$T/secret.json"
  mkdir -p "$T/bin" "$STUB_STATE"
  touch "$STUB_LOG"
  for cmd in "${STUDIO_STUBBED[@]}"; do
    ln -s "$BATS_TEST_DIRNAME/stubs/studio_stub" "$T/bin/$cmd"
  done
  export PATH="$T/bin:$PATH"
  for cmd in "${STUDIO_STUBBED[@]}"; do
    [[ "$(command -v "$cmd")" == "$T/bin/$cmd" ]] || {
      echo "stub for $cmd is not in effect" >&2
      return 1
    }
  done
  export SLURM_LOGIN_ROOT="$T/root" SLURM_LOGIN_STATE_DIR="$T/home/.slurm-login"
  export SLURM_LOGIN_SECRET_ARN="$ARN" SLURM_LOGIN_FOREGROUND=1 MUNGE_USER=root
  export SLURM_LOGIN_RETRY_DELAY=0 SLURM_LOGIN_VERIFY_ATTEMPTS=2 TMPDIR="$T/tmp"
  # What the stubs report: the installed client (empty = none), apt's candidate, name resolution.
  export STUB_SINFO_VERSION="" STUB_APT_CANDIDATE="23.11.4-1ubuntu2" STUB_RESOLVES=1
  unset SLURM_PKG_DIR SLURM_LOGIN_SKIP_INSTALL AWS_ENDPOINT_URL
  mkdir -p "$TMPDIR"
  printf 'munge-key-bytes-0123456789' >"$T/munge.key"
  write_secret "{}"
}

# write_secret JSON_OVERRIDES : the published value with some keys replaced ("{}" for none)
write_secret() {
  python3 - "$STUB_SECRET" "$T/munge.key" "$1" <<'EOF'
import base64, json, sys
path, key, overrides = sys.argv[1:]
value = {
    "slurm_version": "23.11.10", "controller_host": "ip-10-1-0-12", "controller_addr": "10.1.0.12",
    "slurmctld_port": 6817, "cluster_name": "ml-cluster",
    "munge_key_b64": base64.b64encode(open(key, "rb").read()).decode(),
    "slurm_conf": "ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-12\nAuthType=auth/munge\n",
}
value.update(json.loads(overrides))
json.dump(value, open(path, "w"))
EOF
}

# calls NAME -> the recorded calls of one stub
calls() {
  grep "^$1 " "$STUB_LOG" || true
}
