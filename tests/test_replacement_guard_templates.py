"""cli/replacement_guard.py on templates, without CloudFormation: the IAM grants an update adds, the stack policy
that protects the stateful resources, and the parameters passed to the CDK CLI. Its reading of change sets:
test_replacement_guard_reading.py; the whole flow through the real CDK CLI: test_replacement_guard.py."""

from __future__ import annotations

from cli import replacement_guard as guard
from cli.template_replacements import iam_widening, load_assembly


def test_iam_widening_names_new_grants_and_dropped_denies():
    def role(statements, managed=()):
        return {
            "Resources": {
                "Role": {
                    "Type": "AWS::IAM::Role",
                    "Properties": {
                        "ManagedPolicyArns": list(managed),
                        "Policies": [{"PolicyName": "p", "PolicyDocument": {"Statement": statements}}],
                    },
                }
            }
        }

    read = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}
    deny = {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"}
    before = role([read, deny])
    assert iam_widening(before, before) == []
    after = role(
        [{**read, "Action": ["s3:GetObject", "s3:PutObject"]}], managed=["arn:aws:iam::aws:policy/ReadOnlyAccess"]
    )
    assert iam_widening(before, after) == [
        "Role: + managed policy on arn:aws:iam::aws:policy/ReadOnlyAccess",
        "Role: + s3:PutObject on arn:aws:s3:::b/*",
        "Role: - Deny s3:DeleteObject on *",
    ]
    assert iam_widening(after, before) == []  # narrowing is not widening


def test_stack_policy_denies_replacing_and_deleting_stateful_resources(synth):
    storage = synth("default").templates["storage"]
    ids = guard.stateful_ids(storage)
    types = {storage["Resources"][i]["Type"] for i in ids}
    assert {"AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation", "AWS::S3::Bucket", "AWS::KMS::Key"} <= types
    allow, deny = guard.stack_policy(ids)["Statement"]
    assert allow == {"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}
    assert deny["Effect"] == "Deny" and deny["Action"] == ["Update:Replace", "Update:Delete"]
    assert deny["Resource"] == [f"LogicalResourceId/{i}" for i in sorted(ids)]


def test_every_template_parameter_is_passed_with_the_config_value(synth, tmp_path):
    templates = load_assembly(synth("containers").out_dir)
    stacks = [
        guard.Stack(name=f.removesuffix(".template.json"), region="us-west-2", template=t, template_file=tmp_path / f)
        for f, t in templates.items()
        if ".nested." not in f
    ]
    assert guard.parameter_arguments(stacks) == ["--parameters", "course-cluster-studio:SharedFSx=False"]
