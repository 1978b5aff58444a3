"""The platform dashboard's body, built from the config: a plain dict, so tests check its structure and metrics
without synthesizing. Every metric a widget or alarm names is in DOCUMENTED_METRICS with the page that defines it.

Not on the dashboard, because no metric exists: HyperPod publishes no CloudWatch metric for node counts or node
states (none in the AWS/SageMaker metric lists; node state is only in ListClusterNodes and the EventBridge events the
platform forwards to its SNS topic). Per instance group there is likewise no metric; each group gets a Logs Insights
widget over its lifecycle-script log streams instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

FSX_METRICS_DOC = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html"
FSX_HOW_TO_DOC = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/how_to_use_metrics.html"
LAMBDA_METRICS_DOC = "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html"
SQS_METRICS_DOC = (
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html"
)
# HyperPod's log group and its per-instance streams LifecycleConfig/<instance-group-name>/<instance-id>:
HYPERPOD_LOGS_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-management-slurm.html"

# (namespace, metric) -> where AWS documents it. AgeOfOldestQueuedMessage takes FileSystemId and Publisher
# (AutoImport | AutoExport); the CloudWatch metric list (AmazonCloudWatch/latest/monitoring/supported-metrics.html,
# AWS/FSx) lists no failure count for automatic import or export, so the alarm watches the export backlog instead.
# FSx for Lustre publishes no StorageCapacity metric per file system (that list has it for ONTAP volumes and tiers
# only): capacity and baseline throughput come from the config.
DOCUMENTED_METRICS: dict[tuple[str, str], str] = {
    ("AWS/FSx", "DataReadBytes"): FSX_METRICS_DOC,
    ("AWS/FSx", "DataWriteBytes"): FSX_METRICS_DOC,
    ("AWS/FSx", "DataReadOperations"): FSX_METRICS_DOC,
    ("AWS/FSx", "DataWriteOperations"): FSX_METRICS_DOC,
    ("AWS/FSx", "MetadataOperations"): FSX_METRICS_DOC,
    ("AWS/FSx", "ClientConnections"): FSX_HOW_TO_DOC,
    ("AWS/FSx", "FreeDataStorageCapacity"): FSX_METRICS_DOC,
    ("AWS/FSx", "AgeOfOldestQueuedMessage"): FSX_METRICS_DOC + "#auto-import-export-metrics",
    ("AWS/Lambda", "Errors"): LAMBDA_METRICS_DOC,
    ("AWS/Lambda", "Invocations"): LAMBDA_METRICS_DOC,
    ("AWS/SQS", "ApproximateNumberOfMessagesVisible"): SQS_METRICS_DOC,
}
PERIOD = 300
# lifecycle/hyperpod/lib/common.sh contract_warn: `WARNING: [contract:<fact>] <message>`.
CONTRACT_WARNING_MARK = "[contract:"
NODE_CONTRACT_TITLE = "Node contract warnings: where nodes differ from what HyperPod promises (lifecycle/CONTRACT.md)"


@dataclass(frozen=True)
class DashboardInputs:
    region: str
    file_system_id: str
    capacity_bytes: float | None  # None: a file system the platform does not own (capacity unknown at synth)
    baseline_bytes_per_second: float | None
    functions: Sequence[tuple[str, str]]  # (label, function name)
    dead_letter_queue: str | None
    alarm_arns: Sequence[str]
    cluster_log_group: str
    instance_groups: Sequence[tuple[str, str]]  # (name, role)
    free_capacity_percent: int
    throughput_percent: int


def _fsx(metric: str, fs: str, **options: Any) -> list:
    return ["AWS/FSx", metric, "FileSystemId", fs, {"stat": "Sum", **options}]


def _graph(
    title: str, metrics: list, *, width: int = 12, y_label: str = "", annotations: list | None = None, region: str
) -> dict:
    properties: dict[str, Any] = {
        "title": title,
        "view": "timeSeries",
        "region": region,
        "period": PERIOD,
        "metrics": metrics,
        "yAxis": {"left": {"label": y_label, "min": 0}},
    }
    if annotations:
        properties["annotations"] = {"horizontal": annotations}
    return {"type": "metric", "width": width, "height": 6, "properties": properties}


def dashboard_body(i: DashboardInputs) -> dict:
    fs, region = i.file_system_id, i.region
    widgets: list[dict] = [
        {
            "type": "text",
            "width": 24,
            "height": 3,
            "properties": {
                "markdown": (
                    "## HyperPod platform\n"
                    "Alarms and HyperPod node-health, cluster-state and error events go to the platform's SNS topic. "
                    "HyperPod publishes no node-count metric: `aws sagemaker list-cluster-nodes` shows node states; "
                    f"node logs are in `{i.cluster_log_group}`."
                )
            },
        }
    ]
    throughput = [
        {"expression": "(r + w) / PERIOD(r) / 1000000", "label": "client throughput (MB/s)", "id": "t"},
        _fsx("DataReadBytes", fs, id="r", visible=False),
        _fsx("DataWriteBytes", fs, id="w", visible=False),
    ]
    baseline = (
        [
            {
                "label": f"{i.throughput_percent}% of baseline",
                "value": i.baseline_bytes_per_second * i.throughput_percent / 100 / 1e6,
            }
        ]
        if i.baseline_bytes_per_second
        else None
    )
    widgets.append(_graph("FSx throughput", throughput, y_label="MB/s", annotations=baseline, region=region))
    iops = [
        {"expression": "(r + w + m) / PERIOD(r)", "label": "client IOPS", "id": "iops"},
        _fsx("DataReadOperations", fs, id="r", visible=False),
        _fsx("DataWriteOperations", fs, id="w", visible=False),
        _fsx("MetadataOperations", fs, id="m", visible=False),
    ]
    widgets.append(_graph("FSx IOPS", iops, y_label="operations/s", region=region))
    if i.capacity_bytes:
        capacity = [
            {"expression": f"100 * free / {i.capacity_bytes:.0f}", "label": "free capacity (%)", "id": "pct"},
            _fsx("FreeDataStorageCapacity", fs, id="free", visible=False),
        ]
        widgets.append(
            _graph(
                "FSx free capacity",
                capacity,
                y_label="%",
                region=region,
                annotations=[{"label": "alarm", "value": i.free_capacity_percent}],
            )
        )
    else:
        widgets.append(
            _graph("FSx free capacity", [_fsx("FreeDataStorageCapacity", fs)], y_label="bytes", region=region)
        )
    backlog = [
        [
            "AWS/FSx",
            "AgeOfOldestQueuedMessage",
            "FileSystemId",
            fs,
            "Publisher",
            publisher,
            {"stat": "Maximum", "label": publisher},
        ]
        for publisher in ("AutoImport", "AutoExport")
    ]
    widgets.append(_graph("S3 import/export backlog (age of oldest change)", backlog, y_label="seconds", region=region))
    errors = [
        ["AWS/Lambda", "Errors", "FunctionName", name, {"stat": "Sum", "label": label}] for label, name in i.functions
    ]
    widgets.append(_graph("Platform Lambda errors", errors, y_label="errors", region=region))
    if i.dead_letter_queue:
        widgets.append(
            _graph(
                "Partition events dead letters",
                [
                    [
                        "AWS/SQS",
                        "ApproximateNumberOfMessagesVisible",
                        "QueueName",
                        i.dead_letter_queue,
                        {"stat": "Maximum"},
                    ]
                ],
                y_label="messages",
                region=region,
            )
        )
    widgets.append(
        {
            "type": "alarm",
            "width": 24,
            "height": 4,
            "properties": {"title": "Platform alarms", "alarms": list(i.alarm_arns)},
        }
    )
    # Where a node differs from what lifecycle/CONTRACT.md expects of HyperPod, the lifecycle scripts adapt and print
    # CONTRACT_WARNING_MARK lines (lib/common.sh contract_warn), which HyperPod ships to the LifecycleConfig streams.
    widgets.append(
        {
            "type": "log",
            "width": 24,
            "height": 6,
            "properties": {
                "title": NODE_CONTRACT_TITLE,
                "region": region,
                "view": "table",
                "query": (
                    f"SOURCE '{i.cluster_log_group}' | fields @timestamp, @logStream, @message "
                    f"| filter @logStream like 'LifecycleConfig/' and @message like '{CONTRACT_WARNING_MARK}' "
                    f"| parse @message '{CONTRACT_WARNING_MARK}*] *' as fact, warning "
                    "| sort @timestamp desc | limit 200"
                ),
            },
        }
    )
    for name, role in i.instance_groups:
        widgets.append(
            {
                "type": "log",
                "width": 12,
                "height": 6,
                "properties": {
                    "title": f"{name} ({role}): lifecycle and node logs",
                    "region": region,
                    "view": "table",
                    "query": (
                        f"SOURCE '{i.cluster_log_group}' | fields @timestamp, @logStream, @message "
                        f"| filter @logStream like 'LifecycleConfig/{name}/' | sort @timestamp desc | limit 100"
                    ),
                },
            }
        )
    return {"start": "-PT6H", "periodOverride": "inherit", "widgets": widgets}


def metrics_named(body: dict) -> set[tuple[str, str]]:
    """(namespace, metric) of every metric a widget plots; expressions name none."""
    named = set()
    for widget in body["widgets"]:
        for row in widget.get("properties", {}).get("metrics", []):
            if isinstance(row, list):
                named.add((row[0], row[1]))
    return named
