#!/usr/bin/env bash
# Metrics from the node (observability.node_metrics), when platform_parameters.json has a node_metrics block:
#
#   every node       prometheus-node-exporter (127.0.0.1:9100, textfile collector dir $TEXTFILE_DIR)
#                    Prometheus in agent mode (hyperpod-metrics-agent.service): scrapes only this node's exporters
#                    and remote-writes, SigV4-signed, to the platform's Amazon Managed Service for Prometheus workspace
#   controller       the Slurm collector (collectors/slurm_metrics.sh, hyperpod-slurm-metrics.timer)
#   compute + GPU    NVIDIA DCGM exporter (hyperpod-dcgm-exporter.service, 127.0.0.1:9400)
#   compute + EFA    the EFA collector (collectors/efa_metrics.sh, hyperpod-efa-metrics.timer)
#
# Packages come only from the operator's S3 mirror (node_metrics.artifacts), each checksum-verified before any is
# installed (lib/artifacts.sh). Every file is written, and systemd reloaded or a service restarted, only when its
# content differs: a second run changes nothing.
#
# The agent runs as root because block_imds.sh leaves the instance metadata service (the node role's credentials,
# which SigV4 signs with) to uid 0 only; it listens on loopback and is confined with systemd's sandboxing options.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/artifacts.sh
source "$HERE/lib/artifacts.sh"

NODE_TYPE="${1:?usage: install_node_metrics.sh NODE_TYPE INSTANCE_GROUP}"
INSTANCE_GROUP="${2:?usage: install_node_metrics.sh NODE_TYPE INSTANCE_GROUP}"
TEXTFILE_DIR="${TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}" # the Debian package's default textfile directory
METRICS_CONF_DIR="${METRICS_CONF_DIR:-/etc/hyperpod-metrics}"
METRICS_STATE_DIR="${METRICS_STATE_DIR:-/var/lib/hyperpod-metrics}"
NODE_EXPORTER_DEFAULTS="${NODE_EXPORTER_DEFAULTS:-/etc/default/prometheus-node-exporter}"
NVIDIA_GPU_DIR="${NVIDIA_GPU_DIR:-/proc/driver/nvidia/gpus}" # one entry per GPU the NVIDIA driver sees
SYS_INFINIBAND="${SYS_INFINIBAND:-/sys/class/infiniband}"
AGENT_ADDRESS=127.0.0.1:9095
GPU_ONLY_ARTIFACTS=" dcgm-exporter "

params node_metrics.remote_write_url node_metrics.scrape_interval_seconds
if [[ -z "$(param node_metrics.remote_write_url)" ]]; then
  log "node metrics disabled: skipping"
  exit 0
fi

has_gpu() { [[ -d "$NVIDIA_GPU_DIR" && -n "$(ls -A "$NVIDIA_GPU_DIR" 2>/dev/null)" ]]; }
has_efa() {
  local dev
  for dev in "$SYS_INFINIBAND"/*; do
    [[ "$(basename "$(readlink -f "$dev/device/driver" 2>/dev/null || true)")" == efa ]] && return 0
  done
  return 1
}

gpu=no
if [[ "$NODE_TYPE" == compute ]] && has_gpu; then
  gpu=yes
elif [[ "$NODE_TYPE" == compute ]]; then
  log "no NVIDIA GPU on this node: DCGM exporter not installed"
fi

changed_units=()
# put_file MODE DEST [UNIT] < content : writes DEST only when its content differs; records UNIT as changed.
put_file() {
  local mode=$1 dest=$2 unit=${3:-} tmp PARENT
  tmp="$(mktemp)"
  cat >"$tmp"
  if same_file "$tmp" "$dest"; then
    rm -f "$tmp"
    return 0
  fi
  parent_dir "$dest"
  [[ -d "$PARENT" ]] || mkdir -p "$PARENT"
  install -m "$mode" "$tmp" "$dest"
  rm -f "$tmp"
  log "wrote $dest"
  [[ -z "$unit" ]] || changed_units+=("$unit")
}

# run_unit UNIT : (re)starts UNIT after its files changed; otherwise only enables it if it is not.
run_unit() {
  local unit=$1
  if [[ " ${changed_units[*]} " == *" $unit "* ]]; then
    systemctl enable "$unit"
    systemctl restart "$unit"
    log "started $unit"
  elif ! systemctl is-enabled --quiet "$unit"; then
    systemctl enable --now "$unit"
    log "enabled $unit"
  fi
}

# retire_unit UNIT : a packaged service this platform replaces by its own (different flags, loopback only).
retire_unit() {
  if systemctl is-enabled --quiet "$1" || systemctl is-active --quiet "$1"; then
    systemctl disable --now "$1"
    log "disabled the packaged $1 (replaced by the platform's unit)"
  fi
}

# --- packages: every one verified before any is installed
# wanted_here NAME : GPU-only artifacts are skipped on nodes without an NVIDIA GPU.
wanted_here() {
  if [[ "$GPU_ONLY_ARTIFACTS" == *" $1 "* && "$gpu" != yes ]]; then
    log "artifact $1: only for compute nodes with an NVIDIA GPU, not installed on this $NODE_TYPE node"
    return 1
  fi
}
install_artifacts node_metrics wanted_here

# --- node exporter (the package's unit, our flags)
mkdir -p "$TEXTFILE_DIR"
put_file 0644 "$NODE_EXPORTER_DEFAULTS" prometheus-node-exporter <<CONF
# Written by the HyperPod platform's install_node_metrics.sh.
ARGS="--web.listen-address=127.0.0.1:9100 --collector.textfile.directory=$TEXTFILE_DIR"
CONF

# --- Prometheus agent (its write-ahead log under METRICS_STATE_DIR, the one path its sandbox may write)
mkdir -p "$METRICS_STATE_DIR"
chmod 0700 "$METRICS_STATE_DIR"
retire_unit prometheus # the package's full server (TSDB, port 9090) would run beside the agent
agent_conf="$(lib_py node_metrics.py agent-config "$PARAMS_FILE" "$NODE_TYPE" "$INSTANCE_GROUP" "$gpu")"
put_file 0644 "$METRICS_CONF_DIR/agent.yml" hyperpod-metrics-agent.service <<<"$agent_conf"
put_file 0644 "$SYSTEMD_DIR/hyperpod-metrics-agent.service" hyperpod-metrics-agent.service <<UNIT
[Unit]
Description=Prometheus agent: remote-writes this node's metrics (HyperPod platform)
Wants=network-online.target
After=network-online.target prometheus-node-exporter.service

[Service]
ExecStart=/usr/bin/prometheus --enable-feature=agent --config.file=$METRICS_CONF_DIR/agent.yml --storage.agent.path=$METRICS_STATE_DIR/agent --web.listen-address=$AGENT_ADDRESS
Restart=always
RestartSec=10
NoNewPrivileges=true
ProtectSystem=strict
ReadWritePaths=$METRICS_STATE_DIR
ProtectHome=true
PrivateTmp=true
PrivateDevices=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectControlGroups=true

[Install]
WantedBy=multi-user.target
UNIT

# --- DCGM exporter (GPU compute nodes)
if [[ "$gpu" == yes ]]; then
  retire_unit nvidia-dcgm-exporter # NVIDIA's packaged unit listens on every interface (:9400)
  # Flags: NVIDIA/dcgm-exporter pkg/cmd/app.go@d5e5f51 (--address, -f); the counters file is the package's default.
  # After DCGM's own unit (node_contract.json, systemd-unit-names).
  put_file 0644 "$SYSTEMD_DIR/hyperpod-dcgm-exporter.service" hyperpod-dcgm-exporter.service <<UNIT
[Unit]
Description=NVIDIA DCGM exporter on loopback (HyperPod platform)
Wants=nvidia-dcgm.service
After=nvidia-dcgm.service

[Service]
ExecStart=/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv --address 127.0.0.1:9400
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
UNIT
fi

# --- textfile collectors, on a timer at the scrape interval
install_collector() {
  local what=$1 unit="hyperpod-$1-metrics" interval
  interval="$(param node_metrics.scrape_interval_seconds)"
  put_file 0755 "$PLATFORM_DIR/collectors/${what}_metrics.sh" "$unit.timer" <"$HERE/collectors/${what}_metrics.sh"
  put_file 0644 "$SYSTEMD_DIR/$unit.service" "$unit.timer" <<UNIT
[Unit]
Description=Writes $what metrics for the node exporter (HyperPod platform)

[Service]
Type=oneshot
Environment=TEXTFILE_DIR=$TEXTFILE_DIR
ExecStart=$PLATFORM_DIR/collectors/${what}_metrics.sh
UNIT
  put_file 0644 "$SYSTEMD_DIR/$unit.timer" "$unit.timer" <<UNIT
[Unit]
Description=Runs $unit every ${interval}s

[Timer]
OnActiveSec=5s
OnUnitActiveSec=${interval}s
AccuracySec=1s

[Install]
WantedBy=timers.target
UNIT
}

units=(prometheus-node-exporter hyperpod-metrics-agent.service)
[[ "$gpu" == yes ]] && units+=(hyperpod-dcgm-exporter.service)
# The Slurm collector reports cluster-wide counts: one controller only (the primary, CONTROLLER_ROLE from
# on_init_complete.sh), or dashboards summing them would count a multi-head cluster twice.
if [[ "$NODE_TYPE" == controller && "${CONTROLLER_ROLE:-primary}" == primary ]]; then
  install_collector slurm
  units+=(hyperpod-slurm-metrics.timer)
elif [[ "$NODE_TYPE" == controller ]]; then
  log "a backup controller: the primary reports Slurm's cluster-wide metrics"
fi
if [[ "$NODE_TYPE" == compute ]] && has_efa; then
  install_collector efa
  units+=(hyperpod-efa-metrics.timer)
elif [[ "$NODE_TYPE" == compute ]]; then
  log "no EFA device on this node: EFA collector not installed"
fi

((${#changed_units[@]} == 0)) || systemctl daemon-reload
for unit in "${units[@]}"; do
  run_unit "$unit"
done
log "node metrics: ${units[*]} on this $NODE_TYPE node, remote write to $(param node_metrics.remote_write_url)"
