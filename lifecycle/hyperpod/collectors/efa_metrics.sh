#!/usr/bin/env bash
# EFA exporter for compute nodes, as a node-exporter textfile collector. Run by hyperpod-efa-metrics.timer; writes
# $TEXTFILE_DIR/efa.prom atomically. Reads each EFA device's port counters from sysfs,
# /sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>: the EFA driver registers them as its port stats
# (EFA_DEFINE_PORT_STATS in amzn/amzn-drivers kernel/linux/efa/src/efa_verbs.c@64788ef7: tx_bytes, tx_pkts, rx_bytes,
# rx_pkts, rx_drops, send_bytes, recv_bytes, rdma_read_bytes, rdma_write_bytes, rdma_read_wr_err,
# rdma_write_wr_err, retrans_pkts, retrans_timeout_events, unresponsive_remote_events, ...). Every counter the driver
# exposes becomes efa_<counter>_total{device,port}; which ones exist depends on the driver version.
set -euo pipefail

TEXTFILE_DIR="${TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}"
SYS_INFINIBAND="${SYS_INFINIBAND:-/sys/class/infiniband}"

out="$(mktemp "$TEXTFILE_DIR/.efa.prom.XXXXXX")"
trap 'rm -f "$out"' EXIT

# Names are cut out of the paths the globs give by parameter expansion, not basename and dirname: this runs every
# minute, and those paths end in a name, with no slash after it.
declare -A samples=()
for dev in "$SYS_INFINIBAND"/*; do
  driver="$(readlink -f "$dev/device/driver" 2>/dev/null)" || driver=""
  [[ "${driver##*/}" == efa ]] || continue
  for counter in "$dev"/ports/*/hw_counters/*; do
    [[ -f "$counter" ]] || continue
    name="${counter##*/}"
    # `lifespan` is the RDMA core's refresh interval in ms (drivers/infiniband/core/sysfs.c), not a counter.
    [[ "$name" =~ ^[a-z0-9_]+$ && "$name" != lifespan ]] || continue
    value="$(<"$counter")"
    [[ "$value" =~ ^[0-9]+$ ]] || continue
    port="${counter%/hw_counters/*}" # .../ports/<port>
    port="${port##*/}"
    samples[$name]+="efa_${name}_total{device=\"${dev##*/}\",port=\"$port\"} $value"$'\n'
  done
done

for name in $(printf '%s\n' "${!samples[@]}" | sort); do
  printf '# HELP efa_%s_total EFA port counter %s (sysfs hw_counters).\n# TYPE efa_%s_total counter\n%s' \
    "$name" "$name" "$name" "${samples[$name]}"
done >"$out"
chmod 0644 "$out"
mv "$out" "$TEXTFILE_DIR/efa.prom"
