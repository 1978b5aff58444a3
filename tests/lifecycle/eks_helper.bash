# shellcheck shell=bash
# Shared setup for studio_eks_login_node.bats: aws is a stub (eks_stub), HOME is a temp dir, and the
# "tools directory" the bootstrap would copy from S3 holds fake kubectl/helm whose checksums are computed here.

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
# shellcheck disable=SC2034  # used by the .bats file that loads this
LCC="$REPO_ROOT/lifecycle/studio/eks_login_node.sh"
STUB="$BATS_TEST_DIRNAME/stubs/eks_stub"

# fake_tool NAME DEST : a copy of the stub that acts as NAME, with its own checksum
fake_tool() {
  mkdir -p "${2%/*}"
  { cat "$STUB"; echo "# fake $1 for tests"; } >"$2"
  chmod 0755 "$2"
}

sha() {
  local out
  out="$(sha256sum "$1")"
  echo "${out%% *}"
}

# make_tools : $BATS_FILE_TMPDIR/eks-tools, the "tools directory" with fake kubectl and helm, and their checksums
# (the same for every test of the file: setup copies it). Made by the first test to get here; tests run in parallel,
# so each makes its own and renames it into place (a rename onto one made first fails and is thrown away).
make_tools() {
  local tmpl="$BATS_FILE_TMPDIR/eks-tools" new="$BATS_FILE_TMPDIR/eks-tools.$BASHPID"
  [[ -d "$tmpl" ]] && return 0
  fake_tool kubectl "$new/s3-copy/kubectl/kubectl"
  fake_tool helm "$new/s3-copy/helm/helm"
  echo "$(sha "$new/s3-copy/kubectl/kubectl") $(sha "$new/s3-copy/helm/helm")" >"$new/sha256"
  mv -T "$new" "$tmpl" 2>/dev/null || rm -rf "$new"
}

# setup: eks_setup, without bats' DEBUG trap (a function called while functrace is off does not inherit it; see
# test_helper.bash's setup); a failure in eks_setup still fails the test.
setup() {
  local -
  set +T
  eks_setup
}

# eks_setup : the test's HOME, stub aws and tools directory, and the settings the bootstrap would export
eks_setup() {
  T="$BATS_TEST_TMPDIR"
  export STUB_LOG="$T/calls.log" STUB_S3_DIR="$T/s3" HOME="$T/home"
  mkdir -p "$T/bin" "$STUB_S3_DIR" "$HOME"
  touch "$STUB_LOG"
  ln -s "$STUB" "$T/bin/aws"
  export PATH="$T/bin:$PATH"
  [[ "$(command -v aws)" == "$T/bin/aws" ]] || {
    echo "stub for aws is not in effect" >&2
    return 1
  }
  TOOLS="$T/s3-copy"
  make_tools
  cp -a "$BATS_FILE_TMPDIR/eks-tools/s3-copy" "$TOOLS"
  read -r KUBECTL_SHA256 HELM_SHA256 <"$BATS_FILE_TMPDIR/eks-tools/sha256"
  export EKS_CLUSTER_NAME=ml-cluster AWS_DEFAULT_REGION=eu-west-1 EKS_TOOLS_DIR="$TOOLS"
  export KUBECTL_SHA256 HELM_SHA256
  export EKS_LOGIN_FOREGROUND=1 EKS_LOGIN_RETRY_DELAY=0 TMPDIR="$T/tmp"
  unset EKSCTL_S3_URI EKSCTL_SHA256 KUBE_NAMESPACE KUBE_NAMESPACES KUBE_TEAM_GROUPS AWS_REGION KUBECONFIG STUB_AWS_EKS_ERROR STUB_API_DOWN
  unset EKS_LOGIN_STATE_DIR EKS_LOGIN_LOG EKS_LOGIN_PREFIX EKS_LOGIN_BASHRC EKS_LOGIN_CHILD
  mkdir -p "$TMPDIR"
  # shellcheck disable=SC2034  # BIN is used by the .bats file
  BIN="$HOME/.local/bin"
  KUBECONFIG_FILE="$HOME/.kube/config"
}

# mirror_eksctl tarball|binary : puts a fake eksctl release on the fake S3 and points the env at it
mirror_eksctl() {
  fake_tool eksctl "$T/release/eksctl"
  if [[ "$1" == tarball ]]; then
    tar -czf "$STUB_S3_DIR/eksctl_Linux_amd64.tar.gz" -C "$T/release" eksctl
    export EKSCTL_S3_URI="s3://tools-mirror/eksctl/v0.210.0/eksctl_Linux_amd64.tar.gz"
    EKSCTL_SHA256="$(sha "$STUB_S3_DIR/eksctl_Linux_amd64.tar.gz")"
  else
    cp "$T/release/eksctl" "$STUB_S3_DIR/eksctl"
    export EKSCTL_S3_URI="s3://tools-mirror/eksctl/v0.210.0/eksctl"
    EKSCTL_SHA256="$(sha "$STUB_S3_DIR/eksctl")"
  fi
  export EKSCTL_SHA256
}

# kubeconfig_get PYTHON_EXPR : evaluates an expression over the (JSON) kubeconfig as `c`
kubeconfig_get() {
  python3 -S -c "import json,sys; c=json.load(open(sys.argv[1])); print($1)" "$KUBECONFIG_FILE"
}

# calls NAME -> the recorded calls of one stub or fake tool (one awk: see test_helper.bash calls)
calls() {
  awk -v prefix="$1 " 'index($0, prefix) == 1' "$STUB_LOG"
}
