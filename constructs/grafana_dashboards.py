"""The Grafana dashboards the platform provisions into Amazon Managed Grafana, as plain dicts. tools/
generate_grafana_dashboards.py writes them to observability/grafana/*.json (committed; a test fails when stale) and
the observability stack hands those files to lambda/grafana_provisioning.

Dashboard JSON model: Grafana's dashboard schema (grafana/grafana kinds/dashboard, schemaVersion 39 = Grafana 10.4,
the version the workspace runs); data sources by fixed uid, created by the provisioning handler.
Every Prometheus metric a panel names is in constructs/node_metric_names.PROMETHEUS_METRICS and every CloudWatch
metric in constructs/observability_dashboard.DOCUMENTED_METRICS (tests/test_grafana.py).
"""

from __future__ import annotations

import re
from typing import Any
from collections.abc import Sequence

SCHEMA_VERSION = 39
PROMETHEUS_UID = "hyperpod-amp"
CLOUDWATCH_UID = "hyperpod-cloudwatch"
PROMETHEUS = {"type": "prometheus", "uid": PROMETHEUS_UID}
CLOUDWATCH = {"type": "cloudwatch", "uid": CLOUDWATCH_UID}
# The provisioning handler sets this constant variable to the platform's file system ID.
FILE_SYSTEM_VARIABLE = "file_system_id"
_METRIC_REFERENCE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{")


def _prom(expr: str, legend: str, ref: str = "A") -> dict:
    return {"refId": ref, "datasource": PROMETHEUS, "expr": expr, "legendFormat": legend, "range": True}


def _cloudwatch(metric: str, stat: str, ref: str) -> dict:
    return {
        "refId": ref,
        "datasource": CLOUDWATCH,
        "queryMode": "Metrics",
        "namespace": "AWS/FSx",
        "metricName": metric,
        "dimensions": {"FileSystemId": f"${FILE_SYSTEM_VARIABLE}"},
        "statistic": stat,
        "period": "300",
        "region": "default",
        "matchExact": True,
        "metricQueryType": 0,
        "metricEditorMode": 0,
        "id": "",
        "expression": "",
        "label": metric,
    }


def _panel(
    title: str,
    targets: list[dict],
    *,
    unit: str,
    datasource: dict = PROMETHEUS,
    kind: str = "timeseries",
    width: int = 12,
    height: int = 8,
    description: str = "",
) -> dict:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": datasource,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "gridPos": {"w": width, "h": height},
    }


def _dashboard(uid: str, title: str, panels: list[dict], *, variables: Sequence[dict] = ()) -> dict:
    x = y = row_height = 0
    for number, panel in enumerate(panels, start=1):
        pos = panel["gridPos"]
        if x + pos["w"] > 24:
            x, y, row_height = 0, y + row_height, 0
        pos.update(x=x, y=y)
        panel["id"] = number
        x += pos["w"]
        row_height = max(row_height, pos["h"])
    return {
        "uid": uid,
        "title": title,
        "tags": ["hyperpod"],
        "editable": False,
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "graphTooltip": 1,
        "templating": {"list": list(variables)},
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }


def gpu_dashboard() -> dict:
    return _dashboard(
        "hyperpod-gpu",
        "HyperPod: GPUs",
        [
            _panel(
                "GPU utilization by GPU",
                [_prom("DCGM_FI_DEV_GPU_UTIL{}", "{{Hostname}} GPU {{gpu}}")],
                unit="percent",
                description="Idle GPUs sit at 0 while jobs hold them",
            ),
            _panel(
                "Mean GPU utilization by node",
                [_prom("avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{})", "{{Hostname}}")],
                unit="percent",
            ),
            _panel(
                "GPU memory used",
                [
                    _prom(
                        "100 * DCGM_FI_DEV_FB_USED{} / (DCGM_FI_DEV_FB_USED{} + DCGM_FI_DEV_FB_FREE{})",
                        "{{Hostname}} GPU {{gpu}}",
                    )
                ],
                unit="percent",
            ),
            _panel(
                "GPU memory used (MiB)", [_prom("DCGM_FI_DEV_FB_USED{}", "{{Hostname}} GPU {{gpu}}")], unit="decmbytes"
            ),
            _panel("GPU temperature", [_prom("DCGM_FI_DEV_GPU_TEMP{}", "{{Hostname}} GPU {{gpu}}")], unit="celsius"),
            _panel(
                "Last XID error",
                [_prom("DCGM_FI_DEV_XID_ERRORS{} > 0", "{{Hostname}} GPU {{gpu}}")],
                unit="none",
                kind="table",
                description="Non-zero: the last XID the driver reported for that GPU",
            ),
        ],
    )


def efa_dashboard() -> dict:
    return _dashboard(
        "hyperpod-efa",
        "HyperPod: EFA",
        [
            _panel(
                "EFA receive throughput",
                [_prom("sum by (instance) (rate(efa_rx_bytes_total{}[5m])) * 8", "{{instance}}")],
                unit="bps",
            ),
            _panel(
                "EFA transmit throughput",
                [_prom("sum by (instance) (rate(efa_tx_bytes_total{}[5m])) * 8", "{{instance}}")],
                unit="bps",
            ),
            _panel(
                "EFA receive drops",
                [_prom("sum by (instance, device) (rate(efa_rx_drops_total{}[5m]))", "{{instance}} {{device}}")],
                unit="pps",
            ),
            _panel(
                "EFA retransmit timeouts",
                [
                    _prom(
                        "sum by (instance, device) (increase(efa_retrans_timeout_events_total{}[15m]))",
                        "{{instance}} {{device}}",
                    )
                ],
                unit="short",
                description="SRD path changes after a timeout; sustained growth points at a degraded link",
            ),
        ],
    )


def slurm_dashboard() -> dict:
    # collectors/slurm_metrics.sh: slurm_nodes and slurm_jobs by partition and state (sinfo %T, squeue %T, lowercase).
    states = ("allocated", "mixed", "idle", "drained", "down")
    return _dashboard(
        "hyperpod-slurm",
        "HyperPod: Slurm",
        [
            _panel(
                "Nodes by state",
                [
                    _prom(f'sum(slurm_nodes{{state="{state}"}})', state, ref=chr(65 + i))
                    for i, state in enumerate(states)
                ],
                unit="short",
                width=12,
            ),
            _panel(
                "Jobs pending and running",
                [
                    _prom('sum(slurm_jobs{state="pending"})', "pending", "A"),
                    _prom('sum(slurm_jobs{state="running"})', "running", "B"),
                ],
                unit="short",
            ),
            _panel(
                "Nodes down or draining",
                [_prom('sum(slurm_nodes{state=~"down|drained|draining"})', "down + drain")],
                unit="short",
                kind="stat",
                width=6,
            ),
            _panel(
                "Jobs pending",
                [_prom('sum(slurm_jobs{state="pending"})', "pending")],
                unit="short",
                kind="stat",
                width=6,
            ),
            _panel(
                "Node CPU busy",
                [
                    _prom(
                        '100 * (1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[5m])))', "{{instance}}"
                    )
                ],
                unit="percent",
                width=12,
            ),
            _panel(
                "Node memory available",
                [_prom("100 * node_memory_MemAvailable_bytes{} / node_memory_MemTotal_bytes{}", "{{instance}}")],
                unit="percent",
                width=12,
            ),
        ],
    )


def fsx_dashboard() -> dict:
    constant = {
        "type": "constant",
        "name": FILE_SYSTEM_VARIABLE,
        "label": "FSx file system",
        "hide": 2,
        "query": "",
        "skipUrlSync": False,
    }
    return _dashboard(
        "hyperpod-fsx",
        "HyperPod: FSx for Lustre",
        [
            _panel(
                "FSx data read and written (bytes per 5 minutes)",
                [_cloudwatch("DataReadBytes", "Sum", "A"), _cloudwatch("DataWriteBytes", "Sum", "B")],
                unit="bytes",
                datasource=CLOUDWATCH,
            ),
            _panel(
                "FSx operations (per 5 minutes)",
                [
                    _cloudwatch("DataReadOperations", "Sum", "A"),
                    _cloudwatch("DataWriteOperations", "Sum", "B"),
                    _cloudwatch("MetadataOperations", "Sum", "C"),
                ],
                unit="short",
                datasource=CLOUDWATCH,
            ),
            _panel(
                "FSx free capacity",
                [_cloudwatch("FreeDataStorageCapacity", "Sum", "A")],
                unit="bytes",
                datasource=CLOUDWATCH,
                width=24,
            ),
        ],
        variables=[constant],
    )


def dashboards() -> dict[str, dict]:
    """File name (without .json) -> dashboard."""
    return {"gpu": gpu_dashboard(), "efa": efa_dashboard(), "slurm": slurm_dashboard(), "fsx": fsx_dashboard()}


def prometheus_metrics_named(dashboard: dict) -> set[str]:
    return {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        if "expr" in target
        for name in _METRIC_REFERENCE.findall(target["expr"])
    }


def cloudwatch_metrics_named(dashboard: dict) -> set[tuple[str, str]]:
    return {
        (t["namespace"], t["metricName"])
        for panel in dashboard["panels"]
        for t in panel["targets"]
        if "metricName" in t
    }


def with_file_system(dashboard: dict, file_system_id: str) -> dict[str, Any]:
    """The dashboard with its file-system constant set (the handler does the same on the JSON it is given)."""
    for variable in dashboard["templating"]["list"]:
        if variable["name"] == FILE_SYSTEM_VARIABLE:
            variable["query"] = file_system_id
    return dashboard
