"""support.cfn_lint: cfn-lint in the test process reports what the released cfn-lint reports."""

from __future__ import annotations

import json
import re

from support import cfn_lint

# One finding or more of twenty rules: E1101's child rules (property names, types, enums, patterns, IAM policies,
# security-group ports, ids), intrinsic functions, references, conditions, outputs, a pair of resources (E3019).
PLANTED = {
    "Parameters": {"Unused": {"Type": "String"}, "Size": {"Type": "Number", "Default": 5}},
    "Conditions": {"Never": {"Fn::Equals": [{"Ref": "AWS::Region"}, "mars-1"]}},
    "Resources": {
        "Bucket": {
            "Type": "AWS::S3::Bucket",
            "Properties": {"BucketNam": "x", "VersioningConfiguration": {"Status": "On"}},
        },
        "Twin": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "same-name"}},
        "OtherTwin": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "same-name"}},
        "Group": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": "Special ^ chars",
                "VpcId": "vpc-1",
                "SecurityGroupIngress": [
                    {"IpProtocol": "1", "CidrIp": "10.0.0.0/8"},
                    {"IpProtocol": "tcp", "FromPort": "a", "ToPort": 22},
                ],
            },
        },
        "Role": {
            "Type": "AWS::IAM::Role",
            "DependsOn": "Missing",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
                    ],
                },
                "Policies": [
                    {
                        "PolicyName": "p",
                        "PolicyDocument": {
                            "Version": "blah",
                            "Statement": [{"Effect": "NotAllow", "Action": "s3:GetObject", "Resource": "arn"}],
                        },
                    }
                ],
            },
        },
        "Queue": {
            "Type": "AWS::SQS::Queue",
            "Condition": "Nope",
            "Properties": {
                "QueueName": {"Fn::Join": [",", "notalist"]},
                "DelaySeconds": {"Ref": "Nothing"},
                "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["Bucket", "Nope"]}, "maxReceiveCount": 5},
                "KmsMasterKeyId": {"Fn::Sub": "${Undefined}"},
            },
        },
        "Log": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 4}},
        "Function": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "python2.7",
                "Handler": "h",
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Code": {"ZipFile": "x"},
                "MemorySize": {"Ref": "Size"},
            },
        },
    },
    "Outputs": {"Out": {"Value": {"Ref": "Missing2"}}},
}


def test_cfn_lint_reports_the_same_findings_as_released(tmp_path):
    """The memoized functions of support.cfn_lint (in place while the suite lints) return what cfn-lint 1.58.0's own
    code returns: the same findings, in the same order, on a template with findings of twenty rules."""
    import cfnlint.jsonschema.validators

    path = tmp_path / "planted.template.json"
    path.write_text(json.dumps(PLANTED, indent=1))
    ours = cfn_lint.lint([path])[path]
    in_place = {(owner, name): getattr(owner, name) for owner, name, _ in cfn_lint._released}
    assert len(in_place) == 4 and all(in_place[owner, name] is not value for owner, name, value in cfn_lint._released)
    with cfn_lint.as_released():
        assert cfnlint.jsonschema.validators.create is not in_place[cfnlint.jsonschema.validators, "create"]
        released = cfn_lint.lint([path])[path]
    assert all(getattr(owner, name) is value for (owner, name), value in in_place.items())
    rules = {re.match(r"\[(\w+):", finding)[1] for finding in released}
    assert len(rules) == 20 and {"E3002", "E3012", "E3030", "E3031", "E3510", "E3687", "E3019"} <= rules, released
    assert ours == released
