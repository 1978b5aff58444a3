#!/usr/bin/env bats
# on_create.sh, the EKS clusters' entry point (LifeCycleConfig.OnCreate): it checks and reports, and moves containerd's
# and kubelet's data onto the instance group's EBS volume (eks_data_volume.sh).

load test_helper

eks_params() {
  # The node's paths in the test's directory (the data volume is $T/opt-sagemaker in the AMI model's layout).
  export EKS_DATA_VOLUME="$T/opt-sagemaker" KUBELET_DIR="$T/var/lib/kubelet" CONTAINERD_DIR="$T/var/lib/containerd"
  export DATA_VOLUME_WAIT_ATTEMPTS=1
  cat >"$PARAMS_FILE" <<'JSON'
{"version": 1, "orchestrator": "eks", "cluster_name": "ml-cluster",
 "worker_groups": [{"instance_group_name": "controller-machine"}],
 "lifecycle_record": {"secret_name": "hyperpod-platform/ml-cluster/lifecycle-record", "region": "us-east-1"}}
JSON
}

@test "on an EKS node it validates, logs the node and runs the data volume step" {
  eks_params
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  grep -q "node type: compute (instance group controller-machine)" "$LOG_DIR/on_create.log"
  grep -q "STEP-END eks_data_volume rc=0" "$LOG_DIR/on_create.log"
  grep -q "\[on_create\] done" "$LOG_DIR/on_create.log"
}

@test "Slurm parameters are refused: Slurm groups run on_init_complete.sh" {
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "a Slurm cluster's groups must run on_init_complete.sh (OnInitComplete)" "$LOG_DIR/on_create.log"
}

@test "invalid parameters fail before touching the node" {
  eks_params
  set_param version 2
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -ne 0 ]
  [ -z "$(mutating_calls)" ]
  grep -q "version: expected 1, got 2" "$LOG_DIR/on_create.log"
}

# ------------------------------------------------------------------------------------ containerd and kubelet on the volume
# The EKS node as the AMI model lays out a HyperPod node (lifecycle/node_contract.json: the instance group's EBS volume
# mounted at /opt/sagemaker, here $T/opt-sagemaker), with kubelet's and containerd's directories as a node has them.
eks_node() {
  eks_params
  ami_node compute --absent fsx-mounted
  mkdir -p "$KUBELET_DIR/pki" "$CONTAINERD_DIR/io.containerd.content.v1.content"
  echo "key" >"$KUBELET_DIR/pki/kubelet.key"
  chmod 0600 "$KUBELET_DIR/pki/kubelet.key"
  echo "blob" >"$CONTAINERD_DIR/io.containerd.content.v1.content/layer"
  ln -s layer "$CONTAINERD_DIR/io.containerd.content.v1.content/latest"
}

@test "EKS: containerd's and kubelet's data move onto /opt/sagemaker, the services stopped around it; a second run changes nothing" {
  eks_node
  STUB_ACTIVE_UNITS="kubelet containerd" run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [ "$(readlink "$KUBELET_DIR")" = "$EKS_DATA_VOLUME/kubelet" ]
  [ "$(readlink "$CONTAINERD_DIR")" = "$EKS_DATA_VOLUME/containerd" ]
  # content, modes and links kept; the volume's directories root-only
  [ "$(cat "$EKS_DATA_VOLUME/kubelet/pki/kubelet.key")" = key ]
  [ "$(stat -c %a "$EKS_DATA_VOLUME/kubelet/pki/kubelet.key")" = 600 ]
  [ "$(readlink "$EKS_DATA_VOLUME/containerd/io.containerd.content.v1.content/latest")" = layer ]
  [ "$(stat -c %a "$EKS_DATA_VOLUME/kubelet")" = 700 ] && [ "$(stat -c %a "$EKS_DATA_VOLUME/containerd")" = 700 ]
  [ "$(calls systemctl | grep -E ' (stop|start) ')" = "$(printf '%s\n' "systemctl stop kubelet" \
    "systemctl stop containerd" "systemctl start containerd" "systemctl start kubelet")" ]
  grep -q "STEP-END eks_data_volume rc=0" "$LOG_DIR/on_create.log"
  : >"$STUB_LOG"
  STUB_ACTIVE_UNITS="kubelet containerd" run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"kubelet and containerd keep their data on $EKS_DATA_VOLUME already"* ]]
  [ -z "$(calls systemctl | grep -E ' (stop|start) ')" ]
}

@test "EKS: without the data volume mounted the node keeps the root volume and does not fail" {
  eks_node
  : >"$FAKE_ROOT/mounts"
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: $EKS_DATA_VOLUME is not mounted: containerd and kubelet keep their data on the root volume"* ]]
  [ -d "$KUBELET_DIR" ] && [ ! -L "$KUBELET_DIR" ] && [ ! -L "$CONTAINERD_DIR" ]
  [ -z "$(mutating_calls)" ]
}

# An unprivileged user (alice, uid 2001) with write access to the volume plants a link where the platform's directory
# goes; root must neither copy kubelet's keys through it nor link the node to it.
@test "EKS attack: a volume others can write is not used, and a planted link is never followed" {
  [ "$EUID" -eq 0 ] || skip "needs root to plant as another uid"
  eks_node
  victim="$(mktemp -d /tmp/victim-XXXXXX)"
  chmod 0755 "$victim"
  chmod 0777 "$EKS_DATA_VOLUME"
  /usr/bin/setpriv --reuid=2001 --regid=2101 --clear-groups -- ln -s "$victim" "$EKS_DATA_VOLUME/kubelet"
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: $EKS_DATA_VOLUME is owned by uid 0 with mode 777"* ]]
  [ -z "$(ls -A "$victim")" ]
  [ ! -L "$KUBELET_DIR" ] && [ -f "$KUBELET_DIR/pki/kubelet.key" ]
  # The volume root-only again, the link left from before: that directory is refused, the other one is used.
  chmod 0755 "$EKS_DATA_VOLUME"
  run bash "$SCRIPTS/on_create.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: $EKS_DATA_VOLUME/kubelet is not a plain directory (symbolic link): not used"* ]]
  [ -z "$(ls -A "$victim")" ]
  [ ! -L "$KUBELET_DIR" ] && [ -f "$KUBELET_DIR/pki/kubelet.key" ]
  [ "$(readlink "$CONTAINERD_DIR")" = "$EKS_DATA_VOLUME/containerd" ]
  rm -rf "$victim"
}
