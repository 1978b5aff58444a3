"""Alerting rules the metrics workspace evaluates (observability/rules/, constructs/metrics_workspace.py): a node whose
users sync stopped succeeding is an alert, not one log line on the node."""

import json
import re
import shutil
import subprocess

import pytest
import yaml

from support.paths import ROOT

RULES = ROOT / "observability" / "rules" / "users_sync.yaml"
RULES_TEST = ROOT / "tests" / "fixtures" / "users_sync_rules_test.yaml"
SYNC = ROOT / "lifecycle" / "hyperpod" / "sync_users.sh"


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if promtool is None:  # Debian's prometheus package (a host package of make test, docs/testing.md)
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return promtool


def test_the_stale_users_sync_alert_fires_after_five_periods_and_only_then():
    """promtool evaluates the shipped rule on three nodes (tests/fixtures/users_sync_rules_test.yaml): one that keeps
    succeeding never alerts, one that stopped alerts once its last success is over 750 s old, one that never
    succeeded alerts as soon as that holds for it."""
    promtool = _promtool()
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    result = subprocess.run([promtool, "test", "rules", str(RULES_TEST)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rule_reads_the_metric_the_users_sync_writes_and_its_period():
    """The rule's metric is one sync_users.sh writes, and its threshold is five of the timer's periods (OnUnitActiveSec
    plus RandomizedDelaySec, install_users_sync.sh): renaming the metric or slowing the timer breaks this test."""
    (rule,) = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    metric, threshold = re.fullmatch(r"time\(\) - (\w+) > (\d+)", rule["expr"]).groups()
    assert re.search(rf"^{metric} ", SYNC.read_text(), re.M), metric
    timer = (ROOT / "lifecycle" / "hyperpod" / "install_users_sync.sh").read_text()
    active = int(re.search(r"^OnUnitActiveSec=(\d+)min$", timer, re.M).group(1)) * 60
    delay = int(re.search(r"^RandomizedDelaySec=(\d+)s$", timer, re.M).group(1))
    assert int(threshold) == 5 * (active + delay)


def test_the_workspace_ships_the_rules_unchanged(synth):
    """The metrics variant's workspace gets every rule file as a rule groups namespace, byte for byte."""
    template = synth("metrics").templates["storage"]
    namespaces = [
        r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::APS::RuleGroupsNamespace"
    ]
    (workspace_id,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::APS::Workspace"]
    assert [(n["Name"], n["Data"]) for n in namespaces] == [("hyperpod-platform-users-sync", RULES.read_text())]
    assert json.dumps(namespaces[0]["Workspace"]) == json.dumps({"Fn::GetAtt": [workspace_id, "Arn"]})
