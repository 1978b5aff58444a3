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

# The loader the fake bundles name as their INTERPRETER: the stub, as fake-ld (one per file, so that the default
# bundle, which names it, is the same for every test of the file).
FAKE_LD="$BATS_FILE_TMPDIR/fake-ld"

# make_template : $BATS_FILE_TMPDIR/studio-template, what every test of this file starts from (setup copies its t/ in
# one cp): the stub links, the default bundle (23.11.10) in the fake S3 and the secret naming it. Made once per file by
# the first test to get here (tests of a file run in parallel: each makes its own, renames it into place, and throws
# it away when another test's got there first).
make_template() {
  local tmpl="$BATS_FILE_TMPDIR/studio-template" new="$BATS_FILE_TMPDIR/studio-template.$BASHPID" cmd
  [[ -d "$tmpl" ]] && return 0
  mkdir -p "$new/t/bin" "$new/t/stub-state" "$new/t/s3" "$new/t/tmp"
  [[ -L "$FAKE_LD" ]] || ln -s "$BATS_TEST_DIRNAME/stubs/studio_stub" "$FAKE_LD" 2>/dev/null || true
  for cmd in "${STUDIO_STUBBED[@]}"; do
    ln -s "$BATS_TEST_DIRNAME/stubs/studio_stub" "$new/t/bin/$cmd"
  done
  : >"$new/t/calls.log"
  printf 'munge-key-bytes-0123456789' >"$new/t/munge.key"
  ( # the template's own T, S3 and secret, in a subshell: the test's are set by setup
    # shellcheck disable=SC2030
    T="$new/t" STUB_S3_DIR="$new/t/s3" STUB_SECRET="$new/t/secret.json"
    make_bundle 23.11.10
    rm -rf "$T/bundle-src"
    write_secret "{}"
    printf '%s %s\n' "$BUNDLE_SHA" "$BUNDLE_URI" >"$new/bundle"
  )
  mv -T "$new" "$tmpl" 2>/dev/null || rm -rf "$new"
}

# setup: studio_setup, without bats' DEBUG trap (a function called while functrace is off does not inherit it; see
# test_helper.bash's setup); a failure in studio_setup still fails the test.
setup() {
  local -
  set +T
  studio_setup
}

# studio_setup : the test's T copied from the file's template, every stub on PATH in effect
studio_setup() {
  T="$BATS_TEST_TMPDIR"
  # shellcheck disable=SC2031 # (make_template's subshell has its own)
  export STUB_LOG="$T/calls.log" STUB_STATE="$T/stub-state" STUB_SECRET="$T/secret.json" STUB_S3_DIR="$T/s3"
  make_template
  cp -a "$BATS_FILE_TMPDIR/studio-template/t/." "$T/"
  read -r BUNDLE_SHA BUNDLE_URI <"$BATS_FILE_TMPDIR/studio-template/bundle"
  export BUNDLE_SHA BUNDLE_URI
  export PATH="$T/bin:$PATH"
  # Every stub in effect: `hash` looks each name up as running it would, without a subshell per name.
  hash -r
  for cmd in "${STUDIO_STUBBED[@]}"; do
    hash "$cmd" 2>/dev/null || true
    [[ "${BASH_CMDS[$cmd]-}" == "$T/bin/$cmd" ]] || {
      echo "stub for $cmd is not in effect" >&2
      return 1
    }
  done
  hash -r
  export SLURM_LOGIN_ROOT="$T/root" SLURM_LOGIN_STATE_DIR="$T/home/.slurm-login"
  export SLURM_LOGIN_SECRET_ARN="$ARN" SLURM_LOGIN_FOREGROUND=1 MUNGE_USER=root
  export SLURM_LOGIN_RETRY_DELAY=0 SLURM_LOGIN_VERIFY_ATTEMPTS=2 TMPDIR="$T/tmp"
  # What the stubs report: the controller's sinfo (empty = none), name resolution.
  export STUB_SINFO_VERSION="" STUB_RESOLVES=1
  unset AWS_ENDPOINT_URL STUB_BUNDLE_SINFO_VERSION
}

# make_bundle VERSION [PLUGIN...] : a client bundle in the stub S3 as build_slurm_client_bundle.sh lays it out (its
# commands are the stub, its loader $FAKE_LD); sets BUNDLE_URI and BUNDLE_SHA for write_secret.
make_bundle() {
  local version=$1 src="$T/bundle-src/$1" cmd plugin
  shift
  rm -rf "$src"
  mkdir -p "$src/slurm-client/libexec" "$src/slurm-client/lib/slurm"
  for cmd in "${BUNDLE_COMMANDS[@]}"; do
    ln -s "$BATS_TEST_DIRNAME/stubs/studio_stub" "$src/slurm-client/libexec/$cmd"
  done
  printf '%s\n' "${BUNDLE_COMMANDS[@]}" >"$src/slurm-client/COMMANDS"
  for plugin in auth_munge "$@"; do : >"$src/slurm-client/lib/slurm/$plugin.so"; done
  echo "$version" >"$src/slurm-client/VERSION"
  echo "$FAKE_LD" >"$src/slurm-client/INTERPRETER"
  tar -czf "$src/bundle.tar.gz" -C "$src" slurm-client
  BUNDLE_SHA="$(sha256sum "$src/bundle.tar.gz")"
  BUNDLE_SHA="${BUNDLE_SHA%% *}"
  BUNDLE_URI="s3://sagemaker-lc-ml-cluster-123456789012-eu-west-1/slurm-client/slurm-client-$version-$BUNDLE_SHA.tar.gz"
  cp "$src/bundle.tar.gz" "$STUB_S3_DIR/${BUNDLE_URI##*/}"
  export BUNDLE_SHA BUNDLE_URI
}

# write_secret JSON_OVERRIDES : the published value with some keys replaced ("{}" for none)
write_secret() {
  python3 -S - "$STUB_SECRET" "$T/munge.key" "$1" <<'EOF'
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

# calls NAME -> the recorded calls of one stub (one awk: see test_helper.bash calls)
calls() {
  awk -v prefix="$1 " 'index($0, prefix) == 1' "$STUB_LOG"
}
