"""Closes the platform VPC's default security group: a custom resource (lambda/default_security_group) revokes its
inbound and outbound rules, which CloudFormation cannot remove. aws-cdk-lib's `restrictDefaultSecurityGroup` does the
same for its L2 Vpc only; the platform's VPC is an L1 (constructs/hyperpod_vpc.py says why)."""

from __future__ import annotations


import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.lambda_assets import RUNTIME, function_dir, handler_code
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider

HANDLER_DIR = function_dir("default_security_group")
RESOURCE_TYPE = "Custom::RestrictDefaultSecurityGroup"


class RestrictDefaultSecurityGroup(Construct):
    def __init__(self, scope: Construct, id_: str, *, security_group_id: str) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        self.on_event = lambda_.Function(
            self,
            "OnEvent",
            runtime=RUNTIME,
            handler="restrict.on_event",
            code=handler_code(HANDLER_DIR),
            timeout=cdk.Duration.minutes(2),
            memory_size=128,
            log_group=logs.LogGroup(self, "OnEventLogs", removal_policy=cdk.RemovalPolicy.DESTROY),
            description="Removes every rule of the platform VPC's default security group",
        )
        group_arn = stack.format_arn(service="ec2", resource="security-group", resource_name=security_group_id)
        self.on_event.add_to_role_policy(
            iam.PolicyStatement(
                sid="CloseDefaultGroup",
                actions=["ec2:RevokeSecurityGroupIngress", "ec2:RevokeSecurityGroupEgress"],
                resources=[group_arn],
            )
        )
        # DescribeSecurityGroups supports no resource-level permissions (Service Authorization Reference, Amazon EC2).
        self.on_event.add_to_role_policy(
            iam.PolicyStatement(sid="ReadDefaultGroup", actions=["ec2:DescribeSecurityGroups"], resources=["*"])
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event,
            log_group=logs.LogGroup(self, "ProviderLogs", removal_policy=cdk.RemovalPolicy.DESTROY),
        )
        self.resource = cdk.CfnResource(
            self,
            "Resource",
            type=RESOURCE_TYPE,
            properties={"ServiceToken": self.provider.service_token, "SecurityGroupId": security_group_id},
        )
        acknowledge(
            self.on_event,
            "AwsSolutions-IAM5",
            "ec2:DescribeSecurityGroups supports only '*'; the handler reads the one default group it closes",
            findings=["Resource::*"],
        )
        acknowledge(
            self.on_event,
            "AwsSolutions-IAM4",
            "the default security group handler logs to its own CloudWatch log group through the basic "
            "execution policy",
            findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
        )
        acknowledge_provider(self.provider, [self.on_event])
