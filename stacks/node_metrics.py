"""Metric names the Slurm nodes' collectors emit (lifecycle/hyperpod/install_node_metrics.sh), for dashboards.

A dashboard widget may name only metrics listed here. tests/e2e/test_node_metrics.py runs the real collectors
(Debian's prometheus-node-exporter, the Prometheus agent, collectors/slurm_metrics.sh against a real slurmctld,
collectors/efa_metrics.sh against a sysfs tree with the EFA driver's counter names) and fails unless the local
receiver holds every name in NODE_EXPORTER, SLURM and EFA. DCGM needs an NVIDIA GPU, which the test machine has not:
those names come from the exporter's default counters file, not from a run.
"""
from __future__ import annotations

# prometheus-node-exporter (Debian 12: 1.5.0); a selection the dashboards use.
NODE_EXPORTER = ("node_cpu_seconds_total", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes",
                 "node_filesystem_avail_bytes", "node_network_receive_bytes_total",
                 "node_network_transmit_bytes_total", "node_load1", "node_textfile_scrape_error")

# collectors/slurm_metrics.sh (controller).
SLURM = ("slurm_up", "slurm_nodes", "slurm_cpus", "slurm_jobs")

# collectors/efa_metrics.sh (compute nodes with EFA): efa_<counter>_total for the EFA driver's port counters,
# EFA_DEFINE_PORT_STATS in amzn/amzn-drivers kernel/linux/efa/src/efa_verbs.c@64788ef7c182a9383445942b5f5f77fe1d25a290.
EFA_PORT_COUNTERS = ("tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs",
                     "recv_bytes", "recv_wrs", "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err",
                     "rdma_read_resp_bytes", "rdma_write_wrs", "rdma_write_bytes", "rdma_write_wr_err",
                     "rdma_write_recv_bytes", "retrans_bytes", "retrans_pkts", "retrans_timeout_events",
                     "unresponsive_remote_events", "impaired_remote_conn_events")
EFA = tuple(f"efa_{counter}_total" for counter in EFA_PORT_COUNTERS)

# NVIDIA DCGM exporter (GPU compute nodes), from its default counters file, etc/default-counters.csv in
# NVIDIA/dcgm-exporter@d5e5f510a1b6b393f39a43293ccd9dc985defc79; not observed by a test (no GPU there).
DCGM = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE")

# Labels every series carries: the agent's external label and scrape-config labels (lifecycle/hyperpod/lib/node_metrics.py).
LABELS = ("cluster", "instance", "node_type", "instance_group", "job")
