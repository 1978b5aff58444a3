#!/usr/bin/env python3
"""The Prometheus agent's configuration for one Slurm node, from platform_parameters.json's `node_metrics` block.

Used by install_node_metrics.sh on the node and by tests/e2e/test_node_metrics.py (the same code). Standard library
only: the output is JSON, which is YAML (Prometheus reads its configuration file as YAML).

  node_metrics.py agent-config PARAMS NODE_TYPE INSTANCE_GROUP GPU(yes|no)

The agent scrapes only exporters on this node's loopback and remote-writes with SigV4 (Prometheus `remote_write`
`sigv4` block, since Prometheus 2.26.0: https://prometheus.io/docs/prometheus/latest/configuration/configuration/
#remote_write), signing with the node role's credentials from the default AWS chain (instance metadata).
"""

import json
import os
import socket
import sys

# Loopback listeners. The environment overrides exist for the real-metrics test, which runs beside other services.
NODE_EXPORTER = os.environ.get("NODE_EXPORTER_ADDRESS", "127.0.0.1:9100")
DCGM_EXPORTER = os.environ.get("DCGM_EXPORTER_ADDRESS", "127.0.0.1:9400")


def agent_config(params, node_type, instance_group, gpu):
    metrics = params["node_metrics"]
    labels = {"instance": socket.gethostname(), "node_type": node_type, "instance_group": instance_group}
    jobs = [("node", NODE_EXPORTER)]
    if gpu:
        jobs.append(("dcgm", DCGM_EXPORTER))
    interval = f"{int(metrics['scrape_interval_seconds'])}s"
    return {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": "10s",
            "external_labels": {"cluster": params["cluster_name"]},
        },
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [address], "labels": labels}]} for job, address in jobs
        ],
        "remote_write": [{"url": metrics["remote_write_url"], "sigv4": {"region": metrics["region"]}}],
    }


def main(argv):
    if len(argv) != 6 or argv[1] != "agent-config" or argv[5] not in ("yes", "no"):
        print("usage: node_metrics.py agent-config PARAMS NODE_TYPE INSTANCE_GROUP yes|no", file=sys.stderr)
        return 2
    with open(argv[2], encoding="utf-8") as f:
        params = json.load(f)
    print(json.dumps(agent_config(params, argv[3], argv[4], argv[5] == "yes"), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
