"""Observability: alarms, HyperPod event rules, the SNS topic, IAM of the log-retention handler, the dashboard body
and log retention across the platform's templates."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from constructs.log_retention import LogRetention
from constructs.observability_dashboard import (
    CONTRACT_WARNING_MARK,
    DOCUMENTED_METRICS,
    NODE_CONTRACT_TITLE,
    DashboardInputs,
    dashboard_body,
    metrics_named,
)
from constructs.platform_observability import (
    CLUSTER_EVENT,
    NODE_HEALTH,
    STATE_CHANGE,
    LustreTargets,
    PlatformObservability,
    Subscription,
)
from tools.render_dashboard import flatten
from support.template import resources

WIDGET_TYPES = {"metric", "text", "alarm", "log"}


def alarm_by_id(template: dict, fragment: str) -> dict:
    (found,) = [r["Properties"] for k, r in resources(template, "AWS::CloudWatch::Alarm").items() if fragment in k]
    return found


@pytest.fixture(scope="module")
def default(synth):
    return synth("default")


@pytest.fixture(scope="module")
def obs(default):
    return default.templates["observability"]


def test_fsx_free_capacity_is_metric_math_over_the_configured_capacity(default, obs):
    props = alarm_by_id(obs, "FsxFreeCapacity")
    cfg = default.config
    expression, free = props["Metrics"]
    assert expression["Expression"] == f"100 * free / {cfg.storage.lustre.storage_capacity_gib * 1024**3}"
    assert free["MetricStat"]["Metric"]["MetricName"] == "FreeDataStorageCapacity"
    assert free["MetricStat"]["Stat"] == "Sum" and free["ReturnData"] is False
    assert props["Threshold"] == cfg.observability.fsx_free_capacity_percent
    assert props["ComparisonOperator"] == "LessThanThreshold"


def test_fsx_throughput_alarm_is_sustained_use_of_the_baseline(default, obs):
    props = alarm_by_id(obs, "FsxThroughputHigh")
    lustre, o = default.config.storage.lustre, default.config.observability
    baseline = lustre.storage_capacity_gib / 1024 * lustre.throughput_mib_per_tib * 1e6  # 1200 GiB x 250 MB/s/TiB
    assert props["Metrics"][0]["Expression"] == f"100 * (r + w) / PERIOD(r) / {baseline:.0f}"
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"][1:]} == {
        "DataReadBytes",
        "DataWriteBytes",
    }
    assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == o.fsx_throughput_minutes * 60 // 300
    assert props["Threshold"] == o.fsx_throughput_percent


def test_export_backlog_alarm_watches_auto_export(default, obs):
    props = alarm_by_id(obs, "ExportBacklog")
    assert props["MetricName"] == "AgeOfOldestQueuedMessage" and props["Namespace"] == "AWS/FSx"
    assert {"Name": "Publisher", "Value": "AutoExport"} in props["Dimensions"]
    assert props["Threshold"] == default.config.observability.export_backlog_minutes * 60


def test_dead_letter_alarm_watches_the_partition_handlers_queue(default, obs):
    props = alarm_by_id(obs, "PartitionEventsDeadLetters")
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible" and props["Threshold"] == 1
    queue = default.platform.studio.partitions.dead_letters
    (dimension,) = props["Dimensions"]
    # The queue is the studio stack's (a cross-stack reference to its name).
    assert dimension["Name"] == "QueueName" and "QueueName" in json.dumps(dimension["Value"])
    assert default.platform.studio.resolve(queue.queue_name)["Fn::GetAtt"][0] in json.dumps(dimension["Value"])


def test_every_platform_function_has_an_error_alarm(default, obs):
    alarmed = {k for k in resources(obs, "AWS::CloudWatch::Alarm") if "Errors" in k}
    studio = default.templates["studio"]
    handlers = [k for k, r in resources(studio, "AWS::Lambda::Function").items() if "Providerframework" not in k]
    assert len(handlers) == 4  # OnEvent, IsComplete, ProfileEvents, the script upload
    storage = [
        k for k in resources(default.templates["storage"], "AWS::Lambda::Function") if "Providerframework" not in k
    ]
    assert sum("LustreRootSquash" in k for k in storage) == 2  # its OnEvent and IsComplete are alarmed too
    assert len(alarmed) == len(handlers) + len(storage) + len(
        [k for k in resources(default.templates["cluster"], "AWS::Lambda::Function") if "Providerframework" not in k]
    )


def test_every_alarm_notifies_the_topic_on_alarm_and_recovery(obs):
    (topic,) = resources(obs, "AWS::SNS::Topic")
    for props in (r["Properties"] for r in resources(obs, "AWS::CloudWatch::Alarm").values()):
        assert props["AlarmActions"] == [{"Ref": topic}] and props["OKActions"] == [{"Ref": topic}]


def test_topic_is_encrypted_with_a_key_alarms_and_events_may_use(obs):
    template = Template.from_json(obs)
    (key,) = [k for k in resources(obs, "AWS::KMS::Key") if k.startswith("ObservabilityTopicKey")]
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key, "Arn"]}})
    template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "EnableKeyRotation": True,
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "AlarmsAndEventsPublish",
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                                "Principal": {"Service": ["cloudwatch.amazonaws.com", "events.amazonaws.com"]},
                            }
                        )
                    ]
                )
            },
        },
    )
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Condition": {"Bool": {"aws:SecureTransport": "false"}}, "Effect": "Deny"})]
                )
            }
        },
    )


def test_hyperpod_events_reach_the_topic_with_documented_detail_types(obs):
    (topic,) = resources(obs, "AWS::SNS::Topic")
    patterns = {}
    for rule in resources(obs, "AWS::Events::Rule").values():
        props = rule["Properties"]
        assert props["Targets"] == [Match.any_value()] or len(props["Targets"]) == 1
        assert props["Targets"][0]["Arn"] == {"Ref": topic}
        (detail_type,) = props["EventPattern"]["detail-type"]
        patterns[detail_type] = props["EventPattern"]
    assert set(patterns) == {NODE_HEALTH, STATE_CHANGE, CLUSTER_EVENT}
    assert patterns[NODE_HEALTH] == {
        "source": ["aws.sagemaker"],
        "detail-type": [NODE_HEALTH],
        "detail": {"ClusterName": ["ml-cluster"]},
    }
    assert patterns[CLUSTER_EVENT]["detail"] == {
        "EventDetails": {"ClusterName": ["ml-cluster"], "EventLevel": ["Error"]}
    }
    assert NODE_HEALTH == "SageMaker HyperPod Cluster Node Health Event"  # the documented strings, verbatim
    assert STATE_CHANGE == "SageMaker HyperPod Cluster State Change"
    assert CLUSTER_EVENT == "SageMaker HyperPod Cluster Event"


def test_only_the_platforms_rules_may_publish_to_the_topic(obs):
    """EventBridge publishes only for this stack's three rules (aws:SourceArn): no statement lets events.amazonaws.com
    publish unconditioned, so another account's rule cannot put messages on the platform's alarm topic."""
    (policy,) = resources(obs, "AWS::SNS::TopicPolicy").values()
    statements = [
        st
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
        if st["Effect"] == "Allow" and "events.amazonaws.com" in json.dumps(st.get("Principal"))
    ]
    (events,) = statements
    assert events["Action"] == "sns:Publish"
    rules = sorted(resources(obs, "AWS::Events::Rule"))
    assert len(rules) == 3
    assert sorted(a["Fn::GetAtt"][0] for a in events["Condition"]["ArnEquals"]["aws:SourceArn"]) == rules
    assert all(a["Fn::GetAtt"][1] == "Arn" for a in events["Condition"]["ArnEquals"]["aws:SourceArn"])


def test_log_retention_handler_may_touch_only_the_cluster_log_group(default, obs):
    (policy,) = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for k, r in resources(obs, "AWS::IAM::Policy").items()
        if "ClusterLogRetention" in k and "Provider" not in k
    ]
    (statement,) = policy
    assert sorted(statement["Action"]) == ["logs:AssociateKmsKey", "logs:CreateLogGroup", "logs:PutRetentionPolicy"]
    arn = flatten(statement["Resource"])
    assert arn.endswith(":log-group:/aws/sagemaker/Clusters/ml-cluster/TOKEN") and "*" not in arn
    (resource,) = resources(obs, "Custom::ClusterLogRetention").values()
    assert flatten(resource["Properties"]["LogGroupName"]) == "/aws/sagemaker/Clusters/ml-cluster/TOKEN"
    assert resource["Properties"]["RetentionInDays"] == default.config.observability.log_retention_days
    # The cluster ID comes from the cluster stack: the resource runs once the cluster (and its log group) exists.
    assert {"StackName": "ml-cluster-cluster", "Region": "us-west-2", "OutputName": "ClusterIdForObservability"} in [
        part.get("Fn::GetStackOutput")
        for part in resource["Properties"]["LogGroupName"]["Fn::Join"][1]
        if isinstance(part, dict)
    ]
    assert "ClusterIdForObservability" in default.templates["cluster"]["Outputs"]
    assert default.platform.cluster in default.platform.observability.dependencies  # deployed after the cluster


def _logs_key_statement(key: dict) -> dict:
    (statement,) = [
        st
        for st in key["Properties"]["KeyPolicy"]["Statement"]
        if st.get("Sid") == "CloudWatchLogsEncryptsThisAccountsLogGroups"
    ]
    return statement


@pytest.mark.parametrize("variant", ["default", "eks", "research"])
def test_every_log_group_is_encrypted_with_its_stacks_customer_key(synth, variant):
    """Lambda, provider, asset-upload, kubectl, flow-log and EKS control-plane log groups alike: KmsKeyId names a key
    of the same template whose policy lets CloudWatch Logs use it only for this account's and region's log groups
    (encryption context aws:logs:arn)."""
    s = synth(variant)
    seen = 0
    for template in [*s.templates.values(), *s.nested.values()]:
        keys = resources(template, "AWS::KMS::Key")
        for logical, group in resources(template, "AWS::Logs::LogGroup").items():
            key_id = group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]
            key = keys[key_id]
            assert key["DeletionPolicy"] == "Retain" and key["Properties"]["EnableKeyRotation"] is True
            statement = _logs_key_statement(key)
            assert statement["Principal"] == {"Service": "logs.us-west-2.amazonaws.com"}
            assert {a.rstrip("*") for a in statement["Action"]} == {
                "kms:Encrypt",
                "kms:Decrypt",
                "kms:ReEncrypt",
                "kms:GenerateDataKey",
                "kms:Describe",
            }
            context = flatten(statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
            assert context == "arn:aws:logs:us-west-2:TOKEN:log-group:*", context
            seen += 1
    assert seen >= (14 if variant != "eks" else 20)


def test_hyperpods_own_cluster_log_group_gets_the_platform_key(obs):
    (resource,) = resources(obs, "Custom::ClusterLogRetention").values()
    key_id = resource["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]
    assert key_id.startswith("LogsKey") and _logs_key_statement(obs["Resources"][key_id])


@pytest.mark.parametrize("variant", ["default", "multi_az"])
def test_every_log_group_but_the_flow_logs_has_the_configured_retention(synth, variant):
    s = synth(variant)
    days = s.config.observability.log_retention_days
    seen = 0
    for role, template in s.templates.items():
        for logical, group in resources(template, "AWS::Logs::LogGroup").items():
            flow_logs = role == "network" and logical.startswith("VpcFlowLogGroup")
            expected = s.config.network.flow_logs.retention_days if flow_logs else days
            assert group["Properties"].get("RetentionInDays") == expected, (role, logical)
            seen += 1
    assert seen >= 8  # the asset uploads' groups (aws-cdk-lib defaults them to 731 days) included


def test_log_retention_aspect_leaves_groups_other_keys_own():
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    logs.LogGroup(stack, "Ours", retention=logs.RetentionDays.TWO_YEARS)
    theirs = logs.LogGroup(stack, "Theirs", retention=logs.RetentionDays.ONE_WEEK)
    cdk.Aspects.of(stack).add(LogRetention(30, keep=[theirs.node.default_child]))
    template = Template.from_stack(stack).to_json()
    retention = {k[:4]: r["Properties"]["RetentionInDays"] for k, r in template["Resources"].items()}
    assert retention == {"Ours": 30, "Thei": 7}


# ------------------------------------------------------------------------------------------------ dashboard
def dashboard_of(template: dict) -> dict:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    return json.loads(flatten(dashboard["Properties"]["DashboardBody"]))


def check_structure(body: dict) -> None:
    """CloudWatch's dashboard body structure: widgets with a known type and properties; a metric widget's metrics
    is an array of arrays [namespace, name, dimension name, value, ..., {options}] or expression objects."""
    assert set(body) <= {"start", "end", "periodOverride", "widgets"} and body["widgets"]
    for widget in body["widgets"]:
        assert widget["type"] in WIDGET_TYPES and isinstance(widget["properties"], dict)
        assert set(widget) <= {"type", "x", "y", "width", "height", "properties"}
        props = widget["properties"]
        if widget["type"] == "metric":
            assert isinstance(props["metrics"], list) and props["metrics"] and props["region"]
            for row in props["metrics"]:
                if isinstance(row, dict):
                    assert "expression" in row and "id" in row
                    continue
                options = row[-1] if isinstance(row[-1], dict) else {}
                names = row[:-1] if options else row
                assert len(names) >= 2 and len(names) % 2 == 0 and all(isinstance(p, str) for p in names)
        elif widget["type"] == "alarm":
            assert isinstance(props["alarms"], list) and props["alarms"]
        elif widget["type"] == "log":
            assert props["query"].startswith("SOURCE '") and props["region"]
        else:
            assert props["markdown"]


def test_dashboard_body_has_cloudwatch_structure_and_documented_metrics(default, obs):
    body = dashboard_of(obs)
    check_structure(body)
    assert metrics_named(body) <= set(DOCUMENTED_METRICS), metrics_named(body) - set(DOCUMENTED_METRICS)
    alarms = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert len(alarms[0]["properties"]["alarms"]) == len(resources(obs, "AWS::CloudWatch::Alarm"))
    titles = [w["properties"].get("title", "") for w in body["widgets"]]
    assert {"FSx throughput", "FSx IOPS", "FSx free capacity", "Platform Lambda errors"} <= set(titles)


def test_alarm_metrics_are_documented_too(obs):
    for props in (r["Properties"] for r in resources(obs, "AWS::CloudWatch::Alarm").values()):
        stats = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
        named = [(m["Namespace"], m["MetricName"]) for m in stats] or [(props["Namespace"], props["MetricName"])]
        assert set(named) <= set(DOCUMENTED_METRICS)


def test_one_log_widget_per_instance_group(default, obs):
    body = dashboard_of(obs)
    logs_widgets = [
        w["properties"]
        for w in body["widgets"]
        if w["type"] == "log" and w["properties"]["title"] != NODE_CONTRACT_TITLE
    ]
    groups = default.config.cluster.instance_groups
    assert [w["title"].split(" ")[0] for w in logs_widgets] == [g.name for g in groups]
    for widget, group in zip(logs_widgets, groups):
        assert f"like 'LifecycleConfig/{group.name}/'" in widget["query"]
        assert "SOURCE '/aws/sagemaker/Clusters/ml-cluster/TOKEN'" in widget["query"]


def test_structure_check_catches_a_broken_widget():
    inputs = DashboardInputs(
        region="us-west-2",
        file_system_id="fs-1",
        capacity_bytes=None,
        baseline_bytes_per_second=None,
        functions=[("f", "fn")],
        dead_letter_queue=None,
        alarm_arns=["arn"],
        cluster_log_group="/g",
        instance_groups=[("a", "compute")],
        free_capacity_percent=10,
        throughput_percent=80,
    )
    body = dashboard_body(inputs)
    check_structure(body)
    body["widgets"][1]["properties"]["metrics"].append(["AWS/FSx", "DataReadBytes", "FileSystemId"])
    with pytest.raises(AssertionError):
        check_structure(body)
    body = dashboard_body(inputs)
    body["widgets"][1]["properties"]["metrics"].append(["AWS/FSx", "Made-up", "FileSystemId", "fs-1"])
    assert not metrics_named(body) <= set(DOCUMENTED_METRICS)


# ------------------------------------------------------------------------------------------------ construct alone
def bare(**overrides) -> dict:
    app = cdk.App()
    stack = cdk.Stack(app, "Obs", env=cdk.Environment(account="123456789012", region="us-west-2"))
    fn = lambda_.Function(
        stack,
        "Fn",
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="x.h",
        code=lambda_.Code.from_inline("def h(e, c): pass"),
    )
    args = dict(
        name="c",
        cluster_name="c",
        cluster_id="abc123",
        functions=[("fn", fn)],
        dead_letter_queue=None,
        lustre=LustreTargets("fs-0123456789abcdef0", None, None),
        instance_groups=[("w", "compute")],
        subscriptions_=[],
        log_retention_days=30,
        free_capacity_percent=10,
        throughput_percent=80,
        throughput_minutes=30,
        export_backlog_minutes=60,
    )
    args.update(overrides)
    PlatformObservability(stack, "O", **args)
    return Template.from_stack(stack).to_json()


def test_subscriptions_come_from_the_config():
    template = bare(
        subscriptions_=[
            Subscription("email", "ops@example.com"),
            Subscription("sqs", "arn:aws:sqs:us-west-2:123456789012:alerts"),
            Subscription("https", "https://hooks.example.com/x"),
        ]
    )
    subs = sorted(
        (r["Properties"]["Protocol"], json.dumps(r["Properties"]["Endpoint"]))
        for r in resources(template, "AWS::SNS::Subscription").values()
    )
    assert subs == [
        ("email", '"ops@example.com"'),
        ("https", '"https://hooks.example.com/x"'),
        ("sqs", '"arn:aws:sqs:us-west-2:123456789012:alerts"'),
    ]


def test_a_file_system_of_unknown_size_gets_no_capacity_or_throughput_alarm():
    template = bare()
    ids = " ".join(resources(template, "AWS::CloudWatch::Alarm"))
    assert "ExportBacklog" in ids and "FsxFreeCapacity" not in ids and "FsxThroughputHigh" not in ids
    owned = " ".join(resources(bare(lustre=LustreTargets("fs-0123456789abcdef0", 2400, 500)), "AWS::CloudWatch::Alarm"))
    assert "FsxFreeCapacity" in owned and "FsxThroughputHigh" in owned
    check_structure(dashboard_of(template))


def test_dashboard_lists_node_contract_warnings(tmp_path):
    """The widget finds the lines the lifecycle scripts' contract_warn prints (lifecycle/CONTRACT.md, rule 4)."""
    import subprocess
    from pathlib import Path

    common = Path(__file__).resolve().parents[1] / "lifecycle" / "hyperpod" / "lib" / "common.sh"
    line = subprocess.run(
        ["bash", "-c", f'source "{common}"; contract_warn pyxis "wrote pyxis.conf"'],
        capture_output=True,
        text=True,
        env={"STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout.strip()
    inputs = DashboardInputs(
        region="us-west-2",
        file_system_id="fs-1",
        capacity_bytes=None,
        baseline_bytes_per_second=None,
        functions=[("f", "fn")],
        dead_letter_queue=None,
        alarm_arns=["arn"],
        cluster_log_group="/aws/sagemaker/Clusters/c/id",
        instance_groups=[("a", "compute")],
        free_capacity_percent=10,
        throughput_percent=80,
    )
    widget = next(
        w["properties"]
        for w in dashboard_body(inputs)["widgets"]
        if w["type"] == "log" and w["properties"]["title"] == NODE_CONTRACT_TITLE
    )
    assert widget["query"].startswith("SOURCE '/aws/sagemaker/Clusters/c/id' ")
    assert f"@message like '{CONTRACT_WARNING_MARK}'" in widget["query"]
    assert CONTRACT_WARNING_MARK in line and line.endswith("WARNING: [contract:pyxis] wrote pyxis.conf")
    assert (tmp_path / "contract_warnings").read_text() == "pyxis\tbash\twrote pyxis.conf\n"
