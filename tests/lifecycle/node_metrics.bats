#!/usr/bin/env bats
# install_node_metrics.sh: exporters and the Prometheus agent from checksum-verified S3 artifacts, on the right node
# types only, idempotent; and the EFA textfile collector against a sysfs tree with the EFA driver's counter names.

load test_helper

URL="https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123/api/v1/remote_write"

setup_metrics() {
  export TEXTFILE_DIR="$T/textfile" METRICS_CONF_DIR="$T/hyperpod-metrics" METRICS_STATE_DIR="$T/metrics-state"
  export NODE_EXPORTER_DEFAULTS="$T/default/prometheus-node-exporter" NVIDIA_GPU_DIR="$T/nvidia/gpus"
  export SYS_INFINIBAND="$T/infiniband"
  set_param_and_artifacts node_metrics metrics \
    node_metrics "{\"remote_write_url\": \"$URL\", \"region\": \"us-west-2\", \"scrape_interval_seconds\": 30, \"artifacts\": []}" -- \
    prometheus-node-exporter prometheus-node-exporter_1.7.0-1ubuntu0.1_amd64.deb "fake node exporter" \
    prometheus prometheus_2.45.3+ds-2ubuntu0.1_amd64.deb "fake prometheus" \
    dcgm-exporter dcgm-exporter_4.8.3-ubuntu22.04u5_amd64.deb "fake dcgm exporter"
}

# add_metrics_artifact NAME FILE CONTENT [SHA]
add_metrics_artifact() { add_section_artifact node_metrics metrics "$@"; }

with_gpu() { mkdir -p "$NVIDIA_GPU_DIR/0000:00:1e.0"; }

# with_efa DEVICE : a sysfs device bound to the efa driver, with every port counter the driver defines
with_efa() {
  local dev="$SYS_INFINIBAND/$1" i=0 counter
  mkdir -p "$T/drivers/efa" "$dev/device" "$dev/ports/1/hw_counters"
  ln -sfn "$T/drivers/efa" "$dev/device/driver"
  for counter in $(cd "$REPO_ROOT" && python3 -c 'from constructs.node_metric_names import EFA_PORT_COUNTERS as c; print(*c)'); do
    i=$((i + 1))
    echo "$((i * 1000))" >"$dev/ports/1/hw_counters/$counter"
  done
  echo 10 >"$dev/ports/1/hw_counters/lifespan"
}

install_as() {
  run bash "$SCRIPTS/install_node_metrics.sh" "$1" "$2"
}

# tree_digest -> one digest of every file the script may write
tree_digest() {
  find "$T" -path "$T/tmp" -prune -o -path "$T/log" -prune -o -type f -print0 | sort -z | xargs -0 sha256sum \
    | grep -vF "$STUB_LOG" | sha256sum
}

@test "no node_metrics block: nothing is installed" {
  install_as controller controller-machine
  [ "$status" -eq 0 ]
  [[ "$output" == *"node metrics disabled: skipping"* ]]
  [ -z "$(mutating_calls)" ]
}

@test "controller: node exporter and agent from verified artifacts, Slurm collector; no DCGM, no EFA" {
  setup_metrics
  with_gpu
  with_efa rdmap0s6
  install_as controller controller-machine
  echo "$output"
  [ "$status" -eq 0 ]
  calls aws | grep -q "s3://mirror-bucket/metrics/prometheus-node-exporter_1.7.0-1ubuntu0.1_amd64.deb "
  calls aws | grep -q "s3://mirror-bucket/metrics/prometheus_2.45.3+ds-2ubuntu0.1_amd64.deb "
  [ -z "$(calls aws | grep dcgm)" ]
  [[ "$output" == *"artifact dcgm-exporter: only for compute nodes with an NVIDIA GPU, not installed on this controller node"* ]]
  [ "$(cat "$FAKE_ROOT/dpkg/prometheus")" = "2.45.3+ds-2ubuntu0.1" ]
  [ ! -e "$FAKE_ROOT/dpkg/dcgm-exporter" ]
  grep -qF -- "--enable-feature=agent --config.file=$METRICS_CONF_DIR/agent.yml" "$SYSTEMD_DIR/hyperpod-metrics-agent.service"
  grep -qF -- '--web.listen-address=127.0.0.1:9100 --collector.textfile.directory='"$TEXTFILE_DIR" "$NODE_EXPORTER_DEFAULTS"
  python3 -S - "$METRICS_CONF_DIR/agent.yml" "$URL" <<'PY'
import json, sys
conf = json.load(open(sys.argv[1]))
assert conf["remote_write"] == [{"url": sys.argv[2], "sigv4": {"region": "us-west-2"}}], conf["remote_write"]
assert [j["job_name"] for j in conf["scrape_configs"]] == ["node"], conf["scrape_configs"]
assert conf["scrape_configs"][0]["static_configs"][0]["targets"] == ["127.0.0.1:9100"]
assert conf["scrape_configs"][0]["static_configs"][0]["labels"]["node_type"] == "controller"
assert conf["global"]["scrape_interval"] == "30s"
PY
  grep -qxF "ReadWritePaths=$METRICS_STATE_DIR" "$SYSTEMD_DIR/hyperpod-metrics-agent.service"
  [ "$(stat -c %a "$METRICS_STATE_DIR")" = 700 ] # ProtectSystem=strict: the path must exist for the unit to start
  [ -f "$SYSTEMD_DIR/hyperpod-slurm-metrics.timer" ]
  cmp "$SCRIPTS/collectors/slurm_metrics.sh" "$PLATFORM_DIR/collectors/slurm_metrics.sh"
  [ ! -e "$SYSTEMD_DIR/hyperpod-dcgm-exporter.service" ]
  [ ! -e "$SYSTEMD_DIR/hyperpod-efa-metrics.timer" ]
  calls systemctl | grep -qxF "systemctl enable --now hyperpod-slurm-metrics.timer" \
    || calls systemctl | grep -qxF "systemctl restart hyperpod-slurm-metrics.timer"
  calls systemctl | grep -qxF "systemctl restart hyperpod-metrics-agent.service"
  calls systemctl | grep -qxF "systemctl restart prometheus-node-exporter"
  [ "$(grep -ci github "$STUB_LOG")" -eq 0 ]
}

@test "a backup controller (multi-head) leaves Slurm's cluster-wide metrics to the primary" {
  setup_metrics
  CONTROLLER_ROLE=backup install_as controller controller-machine
  [ "$status" -eq 0 ]
  [[ "$output" == *"a backup controller: the primary reports Slurm's cluster-wide metrics"* ]]
  [ ! -e "$SYSTEMD_DIR/hyperpod-slurm-metrics.timer" ]
  [ -f "$SYSTEMD_DIR/hyperpod-metrics-agent.service" ]
  CONTROLLER_ROLE=primary install_as controller controller-machine
  [ "$status" -eq 0 ]
  [ -f "$SYSTEMD_DIR/hyperpod-slurm-metrics.timer" ]
}

@test "the agent configuration passes promtool and the units pass systemd-analyze verify" {
  command -v promtool >/dev/null || skip "promtool not installed (Debian package prometheus)"
  command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed"
  setup_metrics
  install_as controller controller-machine
  [ "$status" -eq 0 ]
  run promtool check config --agent "$METRICS_CONF_DIR/agent.yml"
  echo "$output"
  [ "$status" -eq 0 ]
  run env SYSTEMD_LOG_LEVEL=err systemd-analyze verify --man=no "$SYSTEMD_DIR/hyperpod-metrics-agent.service" \
    "$SYSTEMD_DIR/hyperpod-slurm-metrics.service" "$SYSTEMD_DIR/hyperpod-slurm-metrics.timer"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}

@test "GPU compute node with EFA: DCGM exporter and EFA collector; no Slurm collector" {
  setup_metrics
  with_gpu
  with_efa rdmap0s6
  install_as compute worker-group-1
  echo "$output"
  [ "$status" -eq 0 ]
  calls aws | grep -q "dcgm-exporter_4.8.3-ubuntu22.04u5_amd64.deb "
  [ "$(cat "$FAKE_ROOT/dpkg/dcgm-exporter")" = "4.8.3-ubuntu22.04u5" ]
  grep -qF -- "--address 127.0.0.1:9400" "$SYSTEMD_DIR/hyperpod-dcgm-exporter.service"
  python3 -S -c 'import json,sys; c=json.load(open(sys.argv[1])); assert [j["job_name"] for j in c["scrape_configs"]] == ["node", "dcgm"]' \
    "$METRICS_CONF_DIR/agent.yml"
  [ -f "$SYSTEMD_DIR/hyperpod-efa-metrics.timer" ]
  [ ! -e "$SYSTEMD_DIR/hyperpod-slurm-metrics.timer" ]
  [ ! -e "$PLATFORM_DIR/collectors/slurm_metrics.sh" ]
  calls systemctl | grep -qxF "systemctl restart hyperpod-dcgm-exporter.service"
}

@test "compute node without a GPU or EFA: no DCGM download, no EFA collector, and it says so" {
  setup_metrics
  install_as compute worker-group-1
  [ "$status" -eq 0 ]
  [[ "$output" == *"no NVIDIA GPU on this node: DCGM exporter not installed"* ]]
  [[ "$output" == *"no EFA device on this node: EFA collector not installed"* ]]
  [ -z "$(calls aws | grep dcgm)" ]
  [ ! -e "$FAKE_ROOT/dpkg/dcgm-exporter" ]
  [ ! -e "$SYSTEMD_DIR/hyperpod-dcgm-exporter.service" ]
  [ ! -e "$SYSTEMD_DIR/hyperpod-efa-metrics.timer" ]
  [ -z "$(calls systemctl | grep -E 'dcgm|efa|slurm')" ]
}

@test "login node with a GPU and EFA: only the node exporter and the agent" {
  setup_metrics
  with_gpu
  with_efa rdmap0s6
  install_as login login-group
  [ "$status" -eq 0 ]
  [ -z "$(calls aws | grep dcgm)" ]
  [ -z "$(calls systemctl | grep -E 'dcgm|efa|slurm')" ]
  [ "$(ls "$SYSTEMD_DIR")" = "hyperpod-metrics-agent.service" ]
}

@test "a checksum mismatch fails, names the artifact and installs nothing" {
  setup_metrics
  add_metrics_artifact prometheus prometheus_2.45.3+ds-2ubuntu0.1_amd64.deb "tampered" "$(printf 'b%.0s' {1..64})"
  python3 -S - "$PARAMS_FILE" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
arts = p["node_metrics"]["artifacts"]
p["node_metrics"]["artifacts"] = [arts[0], arts[3], arts[2]]  # node exporter, tampered prometheus, dcgm
json.dump(p, open(sys.argv[1], "w"))
PY
  install_as controller controller-machine
  [ "$status" -ne 0 ]
  [[ "$output" == *"artifact prometheus: checksum mismatch for s3://mirror-bucket/metrics/prometheus_2.45.3+ds-2ubuntu0.1_amd64.deb"* ]]
  [ -z "$(calls apt-get | grep install)" ]
  # The AMI's own packages (tests/lifecycle/ami_model.py) are there; none of the metrics packages is.
  [ -z "$(ls "$FAKE_ROOT/dpkg" | grep -E '^(prometheus|prometheus-node-exporter|dcgm-exporter)$')" ]
  [ -z "$(calls systemctl)" ]
  [ ! -e "$SYSTEMD_DIR" ] || [ -z "$(ls "$SYSTEMD_DIR")" ]
  [ ! -e "$NODE_EXPORTER_DEFAULTS" ]
  # The failed run removed its download directory (it holds the verified node exporter package).
  [ -z "$(ls -A "$TMPDIR")" ]
}

@test "second run changes nothing, on every node type" {
  setup_metrics
  with_gpu
  with_efa rdmap0s6
  for node in "controller controller-machine" "compute worker-group-1" "login login-group"; do
    read -r type group <<<"$node"
    bash "$SCRIPTS/install_node_metrics.sh" "$type" "$group"
    before="$(tree_digest)"
    : >"$STUB_LOG"
    run bash "$SCRIPTS/install_node_metrics.sh" "$type" "$group"
    [ "$status" -eq 0 ]
    [ -z "$(mutating_calls)" ]
    [ -z "$(calls systemctl | grep -vE '^systemctl is-(enabled|active) ')" ]
    [ "$(tree_digest)" = "$before" ]
    [[ "$output" != *"wrote "* ]]
  done
}

@test "a changed scrape interval rewrites the agent configuration and restarts only what changed" {
  setup_metrics
  install_as controller controller-machine
  : >"$STUB_LOG"
  set_param node_metrics.scrape_interval_seconds 60
  install_as controller controller-machine
  [ "$status" -eq 0 ]
  grep -q '"scrape_interval": "60s"' "$METRICS_CONF_DIR/agent.yml"
  grep -qxF "OnUnitActiveSec=60s" "$SYSTEMD_DIR/hyperpod-slurm-metrics.timer"
  calls systemctl | grep -qxF "systemctl restart hyperpod-metrics-agent.service"
  calls systemctl | grep -qxF "systemctl restart hyperpod-slurm-metrics.timer"
  [ -z "$(calls systemctl | grep 'restart prometheus-node-exporter')" ]
  [ -z "$(calls apt-get)" ]
}

@test "the packaged Prometheus server is disabled in favour of the agent" {
  setup_metrics
  echo prometheus >>"$FAKE_ROOT/enabled_units"
  install_as compute worker-group-1
  [ "$status" -eq 0 ]
  calls systemctl | grep -qxF "systemctl disable --now prometheus"
}

@test "a remote-write URL that is not https is refused by the parameter check" {
  setup_metrics
  set_param node_metrics.remote_write_url '"http://aps-workspaces.example/api/v1/remote_write"'
  run python3 "$SCRIPTS/lib/params.py" validate "$PARAMS_FILE"
  [ "$status" -eq 2 ]
  [[ "$output" == *"node_metrics.remote_write_url: must be an https:// URL, got 'http://aps-workspaces.example/api/v1/remote_write'"* ]]
}

@test "on_init_complete.sh runs the installer with the node's type and group, only when node_metrics is set" {
  setup_metrics
  STUB_IPS="10.1.0.31" run bash "$SCRIPTS/on_init_complete.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node metrics: prometheus-node-exporter hyperpod-metrics-agent.service on this compute node"* ]]
  grep -q '"instance_group": "worker-group-1"' "$METRICS_CONF_DIR/agent.yml"
}

@test "EFA collector: one efa_<counter>_total series per counter of each EFA device; other RDMA devices ignored" {
  export TEXTFILE_DIR="$T/textfile" SYS_INFINIBAND="$T/infiniband"
  mkdir -p "$TEXTFILE_DIR"
  with_efa rdmap0s6
  mkdir -p "$T/drivers/mlx5_core" "$SYS_INFINIBAND/mlx5_0/device" "$SYS_INFINIBAND/mlx5_0/ports/1/hw_counters"
  ln -sfn "$T/drivers/mlx5_core" "$SYS_INFINIBAND/mlx5_0/device/driver"
  echo 5 >"$SYS_INFINIBAND/mlx5_0/ports/1/hw_counters/tx_bytes"
  run bash "$SCRIPTS/collectors/efa_metrics.sh"
  [ "$status" -eq 0 ]
  grep -qxF 'efa_tx_bytes_total{device="rdmap0s6",port="1"} 1000' "$TEXTFILE_DIR/efa.prom"
  grep -qxF '# TYPE efa_rx_drops_total counter' "$TEXTFILE_DIR/efa.prom"
  [ -z "$(grep -E 'mlx5|lifespan' "$TEXTFILE_DIR/efa.prom")" ]
  [ "$(grep -c '^efa_' "$TEXTFILE_DIR/efa.prom")" -eq "$(cd "$REPO_ROOT" && python3 -c 'from constructs.node_metric_names import EFA; print(len(EFA))')" ]
  [ -z "$(ls -A "$TEXTFILE_DIR" | grep -v '^efa.prom$')" ]
}
