# shellcheck shell=bash
# Shared setup for studio_*.bats: the Slurm login scripts with every system command stubbed
# (studio_stub) and every system path in a temp dir. The secret lives in $STUB_SECRET as JSON.

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
# shellcheck disable=SC2034  # used by the .bats files that load this
LCC="$REPO_ROOT/lifecycle/studio/slurm_login_node.sh"
# shellcheck disable=SC2034
PUBLISH="$REPO_ROOT/lifecycle/hyperpod/publish_slurm_login.sh"
ARN="arn:aws:secretsmanager:eu-west-1:123456789012:secret:hyperpod/slurm-login-AbCdEf"

# sinfo here is the controller's (publish_slurm_login.sh); the Studio side runs the client bundle's (make_bundle).
STUDIO_STUBBED=(aws sinfo getent runuser sudo hostname useradd)
BUNDLE_COMMANDS=(sinfo sbatch squeue scancel sacct scontrol munge unmunge munged)

setup() {
  T="$BATS_TEST_TMPDIR"
  export STUB_LOG="$T/calls.log" STUB_STATE="$T/stub-state" STUB_SECRET="$T/secret.json" STUB_S3_DIR="$T/s3"
  mkdir -p "$T/bin" "$STUB_STATE" "$STUB_S3_DIR"
  ln -s "$BATS_TEST_DIRNAME/stubs/studio_stub" "$T/fake-ld"
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
  # What the stubs report: the controller's sinfo (empty = none), name resolution.
  export STUB_SINFO_VERSION="" STUB_RESOLVES=1
  unset AWS_ENDPOINT_URL STUB_BUNDLE_SINFO_VERSION
  mkdir -p "$TMPDIR"
  printf 'munge-key-bytes-0123456789' >"$T/munge.key"
  make_bundle 23.11.10
  write_secret "{}"
}

# make_bundle VERSION [PLUGIN...] : a client bundle in the stub S3 as build_slurm_client_bundle.sh lays it out (its
# commands are the stub, its loader $T/fake-ld); sets BUNDLE_URI and BUNDLE_SHA for write_secret.
make_bundle() {
  local version=$1 src="$T/bundle-src/$1" cmd plugin
  shift
  rm -rf "$src"
  mkdir -p "$src/slurm-client/libexec" "$src/slurm-client/lib/slurm"
  for cmd in "${BUNDLE_COMMANDS[@]}"; do
    ln -s "$BATS_TEST_DIRNAME/stubs/studio_stub" "$src/slurm-client/libexec/$cmd"
    echo "$cmd" >>"$src/slurm-client/COMMANDS"
  done
  for plugin in auth_munge "$@"; do : >"$src/slurm-client/lib/slurm/$plugin.so"; done
  echo "$version" >"$src/slurm-client/VERSION"
  echo "$T/fake-ld" >"$src/slurm-client/INTERPRETER"
  tar -czf "$src/bundle.tar.gz" -C "$src" slurm-client
  BUNDLE_SHA="$(sha256sum "$src/bundle.tar.gz" | awk '{print $1}')"
  BUNDLE_URI="s3://sagemaker-lc-ml-cluster-123456789012-eu-west-1/slurm-client/slurm-client-$version-$BUNDLE_SHA.tar.gz"
  cp "$src/bundle.tar.gz" "$STUB_S3_DIR/${BUNDLE_URI##*/}"
  export BUNDLE_SHA BUNDLE_URI
}

# write_secret JSON_OVERRIDES : the published value with some keys replaced ("{}" for none)
write_secret() {
  python3 - "$STUB_SECRET" "$T/munge.key" "$1" <<'EOF'
import base64, json, sys
import os
path, key, overrides = sys.argv[1:]
value = {
    "slurm_version": "23.11.10", "controller_host": "ip-10-1-0-12", "controller_addr": "10.1.0.12",
    "slurmctld_port": 6817, "cluster_name": "ml-cluster",
    "munge_key_b64": base64.b64encode(open(key, "rb").read()).decode(),
    "slurm_conf": "ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-12\nAuthType=auth/munge\n",
    "client_bundle": {"s3_uri": os.environ["BUNDLE_URI"], "sha256": os.environ["BUNDLE_SHA"]},
}
value.update(json.loads(overrides))
json.dump(value, open(path, "w"))
EOF
}

# calls NAME -> the recorded calls of one stub
calls() {
  grep "^$1 " "$STUB_LOG" || true
}
