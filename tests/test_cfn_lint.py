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
        "Subnet": {
            "Type": "AWS::EC2::Subnet",
            "Properties": {"VpcId": "vpc-1", "CidrBlock": "10.0.0.0/24", "AvailabilityZone": "us-east-1a"},
        },
        "Thing": {"Type": "My::Org::Thing::MODULE"},
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
    "Outputs": {
        "Out": {"Value": {"Ref": "Missing2"}},
        "LogArn": {"Value": {"Fn::GetAtt": ["Log", "Arn"]}},
        "ThingBucket": {"Value": {"Ref": "ThingBucket"}},
    },
}


def test_cfn_lint_reports_the_same_findings_as_released(tmp_path):
    """The memoized functions of support.cfn_lint (in place while the suite lints) return what cfn-lint 1.58.0's own
    code returns: the same findings, in the same order, on a template with findings of twenty-odd rules and on a
    CDK template (what is not checked in one: W3010) without its module resource (its sub-resource names become
    unknown) and its log group (a GetAtt target gone), linted first in the same run, so that an answer remembered
    for the one and given for the other shows."""
    import cfnlint.jsonschema.validators

    planted = tmp_path / "planted.template.json"
    planted.write_text(json.dumps(PLANTED, indent=1))
    cdk = json.loads(planted.read_text())
    del cdk["Resources"]["Thing"], cdk["Resources"]["Log"]
    cdk["Resources"]["CDKMetadata"] = {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:deflate64:x"}}
    other = tmp_path / "cdk.template.json"
    other.write_text(json.dumps(cdk, indent=1))
    ours = cfn_lint.lint([other, planted])
    in_place = {(owner, name): getattr(owner, name) for owner, name, _ in cfn_lint._released}
    assert len(in_place) == 14 and all(in_place[owner, name] is not value for owner, name, value in cfn_lint._released)
    with cfn_lint.as_released():
        assert cfnlint.jsonschema.validators.create is not in_place[cfnlint.jsonschema.validators, "create"]
        released = cfn_lint.lint([other, planted])
    assert all(getattr(owner, name) is value for (owner, name), value in in_place.items())
    rules = {path: {re.match(r"\[(\w+):", finding)[1] for finding in found} for path, found in released.items()}
    assert (
        len(rules[planted]) == 23
        and {"E3002", "E3012", "E3030", "E3031", "E3510", "E3687", "E3019", "W3010"} <= rules[planted]
    )
    assert "W3010" not in rules[other] and any("'ThingBucket' is not one of" in f for f in released[other])
    assert not any("ThingBucket" in f for f in released[planted]) and any("'Log' is not" in f for f in released[other])
    assert ours == released
    # The one empty template that Validators made without a template share is still empty after the lint: nothing
    # wrote to it (a shared template that holds a resource fails here; no finding can show it, as every Validator
    # the linted rules make without a template is given the linted one at once).
    empty = cfnlint.jsonschema.validators.CfnTemplateValidator({}).cfn
    assert empty is cfnlint.jsonschema.validators.CfnTemplateValidator({}).cfn
    assert empty.template == {} and not empty.context.resources and not empty.context.parameters
