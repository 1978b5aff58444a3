#!/bin/bash
# SageMaker Studio lifecycle config (JupyterLab and Code Editor): makes the space a client of the
# HyperPod cluster's EKS control plane. It installs kubectl and helm (and optionally eksctl) into
# ~/.local/bin after checking each file's sha256, and writes a kube context named after the cluster.
# Studio allows an LCC 5 minutes, so this returns at once and does the work in the background; read
# $HOME/.eks-login/setup.log. Every run is idempotent. See README.md here.
#
# Set by the lifecycle-config bootstrap (see constructs/studio_lifecycle_configs.py):
#   EKS_CLUSTER_NAME, AWS_DEFAULT_REGION, KUBECTL_SHA256, HELM_SHA256   required
#   EKS_TOOLS_DIR     optional: holds kubectl/kubectl and helm/helm (the kubectl layer's layout);
#                     default: this script's directory, where the bootstrap copies the scripts and tools
#   EKSCTL_S3_URI, EKSCTL_SHA256   optional, together: an eksctl release tarball or binary on S3
#   KUBE_NAMESPACE    optional default namespace of the context (for example the team's namespace)
#   KUBE_NAMESPACES   optional, without KUBE_NAMESPACE: "namespace=profile,profile ..." (each team's members);
#                     this space's profile (fsx_paths.sh profile_name) picks its own, a profile in no team gets
#                     default (read-only there: docs/eks.md, "Users in no team")
#   KUBE_TEAM_GROUPS  optional, without either: "hyperpod-team-=hyperpod-ns-": the namespace comes from the caller's
#                     Kubernetes groups (kubectl auth whoami), group <prefix><team> -> namespace <ns prefix><team>
#   MLFLOW_PRESIGNED_UPLOADS  optional, "true": MLflow artifacts go through the tracking server's presigned URLs
#                     (sagemaker-mlflow's SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED), in terminals and notebooks

# The background run executes a copy elsewhere; it inherits the value resolved here by the first run.
EKS_TOOLS_DIR="${EKS_TOOLS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
STATE_DIR="${EKS_LOGIN_STATE_DIR:-${HOME:-/home/sagemaker-user}/.eks-login}"
LOG_FILE="${EKS_LOGIN_LOG:-$STATE_DIR/setup.log}"
PREFIX="${EKS_LOGIN_PREFIX:-${HOME:-/home/sagemaker-user}/.local}"
KUBECONFIG_FILE="${KUBECONFIG:-${HOME:-/home/sagemaker-user}/.kube/config}"
KUBECONFIG_FILE="${KUBECONFIG_FILE%%:*}" # the first file when KUBECONFIG lists several
BASHRC="${EKS_LOGIN_BASHRC:-${HOME:-/home/sagemaker-user}/.bashrc}"
RETRY_DELAY="${EKS_LOGIN_RETRY_DELAY:-5}"

# shellcheck source-path=SCRIPTDIR source=fsx_paths.sh
source "$(dirname "${BASH_SOURCE[0]}")/fsx_paths.sh"

# %(...)T: the time now (-1) without starting date(1) for every line; TZ=UTC0 for this printf only, as `date -u`.
log() { TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T [eks-login] %s\n' -1 "$*"; }
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

# check_env : every required variable is set and every digest is 64 hex characters; all problems at once.
check_env() {
  local problems=() var
  for var in EKS_CLUSTER_NAME KUBECTL_SHA256 HELM_SHA256; do
    [[ -n "${!var:-}" ]] || problems+=("$var is not set")
  done
  [[ -n "${AWS_DEFAULT_REGION:-${AWS_REGION:-}}" ]] || problems+=("AWS_DEFAULT_REGION is not set")
  if [[ -n "${EKSCTL_S3_URI:-}" && -z "${EKSCTL_SHA256:-}" ]]; then
    problems+=("EKSCTL_S3_URI is set but EKSCTL_SHA256 is not; eksctl is installed only with its checksum")
  fi
  if [[ -n "${EKSCTL_S3_URI:-}" && "$EKSCTL_S3_URI" != s3://* ]]; then
    problems+=("EKSCTL_S3_URI='$EKSCTL_S3_URI' is not an s3:// URI")
  fi
  for var in KUBECTL_SHA256 HELM_SHA256 EKSCTL_SHA256; do
    if [[ -n "${!var:-}" && ! "${!var}" =~ ^[0-9a-f]{64}$ ]]; then
      problems+=("$var='${!var}' is not a sha256 digest (64 lowercase hex characters)")
    fi
  done
  if [[ -n "${KUBE_NAMESPACE:-}" && ! "$KUBE_NAMESPACE" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]]; then
    problems+=("KUBE_NAMESPACE='$KUBE_NAMESPACE' is not a Kubernetes namespace name")
  fi
  if ((${#problems[@]})); then
    die "$(printf '%s; ' "${problems[@]}")these come from the lifecycle-config bootstrap"
  fi
}

# verify FILE EXPECTED : fails naming the file and both digests unless FILE's sha256 is EXPECTED.
verify() {
  local file=$1 expected=$2 actual
  [[ -f "$file" ]] || die "$file is missing (the bootstrap copies it from the lifecycle bucket)"
  actual="$(sha256_of "$file")"
  [[ "$actual" == "$expected" ]] ||
    die "checksum mismatch for $file: expected sha256 $expected, actual $actual; not installing it"
}

# install_tool SRC NAME EXPECTED : installs SRC as $PREFIX/bin/NAME unless that already has digest EXPECTED.
install_tool() {
  local src=$1 name=$2 expected=$3 dest="$PREFIX/bin/$2" tmp
  if [[ -x "$dest" && "$(sha256_of "$dest")" == "$expected" ]]; then
    log "$name already installed ($dest)"
    return 0
  fi
  verify "$src" "$expected"
  mkdir -p "$PREFIX/bin"
  tmp="$(mktemp "$PREFIX/bin/.$name.XXXXXX")"
  cp "$src" "$tmp"
  chmod 0755 "$tmp"
  # Check the copy too: what lands in bin/ is exactly what was verified.
  [[ "$(sha256_of "$tmp")" == "$expected" ]] || {
    rm -f "$tmp"
    die "the copy of $src changed while installing; not installing $name"
  }
  mv -f "$tmp" "$dest"
  log "installed $name ($expected) as $dest"
  CHANGED+=("$name")
}

# install_eksctl : the operator's mirrored eksctl (a release tarball or the bare binary), checksummed.
install_eksctl() {
  local work=$1 dest="$PREFIX/bin/eksctl" record="$STATE_DIR/eksctl.sha256" download bin
  # The record pairs the artifact's digest with the binary installed from it.
  if [[ -x "$dest" && -f "$record" && "$(cat "$record")" == "$EKSCTL_SHA256 $(sha256_of "$dest")" ]]; then
    log "eksctl already installed from $EKSCTL_S3_URI ($dest)"
    return 0
  fi
  download="$work/eksctl.download"
  aws s3 cp --only-show-errors "$EKSCTL_S3_URI" "$download" ||
    die "cannot copy $EKSCTL_S3_URI: the Studio execution role needs s3:GetObject on it"
  verify "$download" "$EKSCTL_SHA256"
  if tar -tzf "$download" >/dev/null 2>&1; then
    mkdir -p "$work/eksctl"
    tar -xzf "$download" -C "$work/eksctl"
    bin="$(find "$work/eksctl" -type f -name eksctl | head -n1)"
    [[ -n "$bin" ]] || die "$EKSCTL_S3_URI is a tarball without an eksctl file"
  else
    bin="$download"
  fi
  install_tool "$bin" eksctl "$(sha256_of "$bin")"
  echo "$EKSCTL_SHA256 $(sha256_of "$dest")" >"$record"
}

# ensure_path_in_bashrc : new terminals find $PREFIX/bin even when the image's profile does not add it.
ensure_path_in_bashrc() {
  local marker="# eks-login: $PREFIX/bin on PATH"
  grep -qxF "$marker" "$BASHRC" 2>/dev/null && return 0
  mkdir -p "$(dirname "$BASHRC")"
  {
    echo "$marker"
    # shellcheck disable=SC2016 # $PATH expands when the shell reads .bashrc
    printf 'case ":$PATH:" in *":%s:"*) ;; *) export PATH="%s:$PATH" ;; esac\n' "$PREFIX/bin" "$PREFIX/bin"
  } >>"$BASHRC"
  CHANGED+=("PATH in $BASHRC")
}

# resolve_namespace : KUBE_NAMESPACE from KUBE_NAMESPACES and this space's profile, when not given directly.
resolve_namespace() {
  local profile entry
  [[ -n "${KUBE_NAMESPACE:-}" || -z "${KUBE_NAMESPACES:-}" ]] && return 0
  if ! profile="$(profile_name)"; then
    log "WARNING: cannot tell this space's user profile; the context keeps namespace default" >&2
    return 0
  fi
  for entry in $KUBE_NAMESPACES; do
    if [[ ",${entry#*=}," == *",$profile,"* ]]; then
      KUBE_NAMESPACE="${entry%%=*}"
      return 0
    fi
  done
  KUBE_NAMESPACE=default
  log "profile $profile is in no team: namespace default, where it may only read; an admin adds it to a team" \
    "(eks.task_governance.teams[].members; docs/eks.md, Users in no team)"
}

# namespace_from_groups : KUBE_NAMESPACE from the caller's team group, as the API server sees the caller (used when the
# lifecycle config holds no member list, which a large platform's would not fit); default when none or unreachable.
namespace_from_groups() {
  local groups group prefix="${KUBE_TEAM_GROUPS:-}" ns_prefix="${KUBE_TEAM_GROUPS:-}"
  prefix="${prefix%%=*}" ns_prefix="${ns_prefix#*=}"
  [[ -n "${KUBE_NAMESPACE:-}" || -z "${KUBE_TEAM_GROUPS:-}" ]] && return 0
  KUBE_NAMESPACE=default
  if ! groups="$("$PREFIX/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --context "$EKS_CLUSTER_NAME" \
    --request-timeout=15s auth whoami -o 'jsonpath={.status.userInfo.groups[*]}' 2>/dev/null)"; then
    log "WARNING: cannot ask the API server who this space is; namespace default until the next start" >&2
    return 0
  fi
  for group in $groups; do
    if [[ "$group" == "$prefix"* && "$group" != "$prefix" ]]; then
      KUBE_NAMESPACE="$ns_prefix${group#"$prefix"}"
      [[ "$KUBE_NAMESPACE" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] || die "group $group gives no namespace name"
      return 0
    fi
  done
  log "this space's role is in no team: namespace default, where it may only read (docs/eks.md, Users in no team)"
}

# ensure_presigned_uploads : SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED=true for new terminals (.bashrc) and Python kernels
# (an IPython startup file), so mlflow.log_artifact needs no S3 rights on the tracking server's bucket.
ensure_presigned_uploads() {
  local marker="# eks-login: MLflow artifacts through presigned URLs" startup
  [[ "${MLFLOW_PRESIGNED_UPLOADS:-}" == true ]] || return 0
  if ! grep -qxF "$marker" "$BASHRC" 2>/dev/null; then
    mkdir -p "$(dirname "$BASHRC")"
    printf '%s\nexport SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED=true\n' "$marker" >>"$BASHRC"
    CHANGED+=("presigned MLflow uploads in $BASHRC")
  fi
  startup="${EKS_LOGIN_IPYTHON_STARTUP:-${HOME:-/home/sagemaker-user}/.ipython/profile_default/startup}"
  if [[ ! -f "$startup/00-mlflow-presigned-uploads.py" ]]; then
    mkdir -p "$startup"
    printf '%s\nimport os\nos.environ.setdefault("SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED", "true")\n' "$marker" \
      >"$startup/00-mlflow-presigned-uploads.py"
    CHANGED+=("presigned MLflow uploads in Python kernels")
  fi
}

# update_kubeconfig REGION : the context named after the cluster, current, with the namespace if given.
update_kubeconfig() {
  local region=$1 before="" attempt=1
  [[ -f "$KUBECONFIG_FILE" ]] && before="$(sha256_of "$KUBECONFIG_FILE")"
  mkdir -p "$(dirname "$KUBECONFIG_FILE")"
  until aws eks update-kubeconfig --name "$EKS_CLUSTER_NAME" --region "$region" \
    --alias "$EKS_CLUSTER_NAME" --kubeconfig "$KUBECONFIG_FILE" >/dev/null; do
    if ((attempt >= 3)); then
      die "cannot describe EKS cluster $EKS_CLUSTER_NAME in $region: the Studio execution role needs" \
        "eks:DescribeCluster on it, and the space's VPC needs a route to the EKS API"
    fi
    log "aws eks update-kubeconfig failed (attempt $attempt/3), retrying in ${RETRY_DELAY}s" >&2
    sleep "$RETRY_DELAY"
    attempt=$((attempt + 1))
  done
  namespace_from_groups
  if [[ -n "${KUBE_NAMESPACE:-}" ]]; then
    "$PREFIX/bin/kubectl" config set-context "$EKS_CLUSTER_NAME" --namespace "$KUBE_NAMESPACE" \
      --kubeconfig "$KUBECONFIG_FILE" >/dev/null || die "cannot set namespace $KUBE_NAMESPACE in $KUBECONFIG_FILE"
  fi
  chmod 600 "$KUBECONFIG_FILE"
  if [[ "$(sha256_of "$KUBECONFIG_FILE")" != "$before" ]]; then CHANGED+=("kubeconfig"); fi
}

setup() {
  set -euo pipefail
  umask 022
  local region work
  CHANGED=()
  resolve_namespace
  check_env
  region="${AWS_DEFAULT_REGION:-$AWS_REGION}"
  command -v aws >/dev/null || die "the AWS CLI is not on PATH (SageMaker Distribution images include it)"
  work="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now: the trap must remove this run's directory
  trap "rm -rf '$work'" EXIT
  log "cluster $EKS_CLUSTER_NAME in $region; tools from $EKS_TOOLS_DIR into $PREFIX/bin"

  install_tool "$EKS_TOOLS_DIR/kubectl/kubectl" kubectl "$KUBECTL_SHA256"
  install_tool "$EKS_TOOLS_DIR/helm/helm" helm "$HELM_SHA256"
  if [[ -n "${EKSCTL_S3_URI:-}" ]]; then install_eksctl "$work"; fi
  ensure_path_in_bashrc
  ensure_presigned_uploads
  update_kubeconfig "$region"
  # The team's pods mount this space's partition at the cluster's path; the space gets that path too.
  link_fsx_paths || log "ERROR: the cluster's FSx paths are not linked in this space (see above)"

  # Reaching the API server needs an EKS access entry for the Studio execution role and HTTPS to the
  # endpoint; report it, but the client setup above is complete either way.
  if "$PREFIX/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --context "$EKS_CLUSTER_NAME" \
    --request-timeout=15s version >"$work/version.out" 2>&1; then
    log "the API server answers: $(grep -i '^server version' "$work/version.out" || true)"
  else
    log "WARNING: kubectl cannot reach or authenticate to $EKS_CLUSTER_NAME yet ($(tail -n1 "$work/version.out"))." \
      "The execution role needs an EKS access entry, and the cluster security group must allow HTTPS from Studio."
  fi
  if ((${#CHANGED[@]} == 0)); then
    log "nothing changed: kubectl, helm${EKSCTL_S3_URI:+, eksctl} and the kube context already match"
  else
    log "changed: ${CHANGED[*]}"
  fi
  log "ready: kubectl and helm in $PREFIX/bin, context $EKS_CLUSTER_NAME${KUBE_NAMESPACE:+ (namespace $KUBE_NAMESPACE)} in $KUBECONFIG_FILE"
}

main() {
  local copy
  if [[ "${EKS_LOGIN_FOREGROUND:-0}" == 1 || "${EKS_LOGIN_CHILD:-0}" == 1 ]]; then
    mkdir -p "$STATE_DIR"
    exec 9>"$STATE_DIR/lock"
    if ! flock -n 9; then
      log "another setup run is in progress (lock $STATE_DIR/lock); leaving it to finish"
      return 0
    fi
    if [[ "${EKS_LOGIN_CHILD:-0}" == 1 ]]; then
      setup
    else
      # Foreground (tests, manual runs): show the output and keep it in the log as well.
      mkdir -p "$(dirname "$LOG_FILE")"
      setup 2>&1 | tee -a "$LOG_FILE"
      return "${PIPESTATUS[0]}"
    fi
    return
  fi
  export EKS_TOOLS_DIR
  # Studio may remove the script file once the LCC exits, so the background run uses a copy.
  mkdir -p "$STATE_DIR" "$(dirname "$LOG_FILE")"
  copy="$STATE_DIR/eks_login_node.sh"
  install -m 0700 "${BASH_SOURCE[0]}" "$copy"
  install -m 0700 "$(dirname "${BASH_SOURCE[0]}")/fsx_paths.sh" "$STATE_DIR/fsx_paths.sh"
  EKS_LOGIN_CHILD=1 nohup setsid bash "$copy" >>"$LOG_FILE" 2>&1 </dev/null &
  log "EKS client setup continues in the background (pid $!); log: $LOG_FILE"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
