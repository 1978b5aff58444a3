"""Root squash on the platform's FSx for Lustre file system: root on any client that is not a cluster node acts as
an unprivileged user on the file system. CloudFormation has no property for it, so a custom resource calls FSx
UpdateFileSystem (lambda/fsx_root_squash/)."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.lambda_assets import RUNTIME, function_dir, function_log_group, handler_code
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider

HANDLER_DIR = function_dir("fsx_root_squash")
RESOURCE_TYPE = "Custom::FsxRootSquash"


class FsxRootSquash(Construct):
    def __init__(
        self, scope: Construct, id_: str, *, file_system_id: str, squash_to: str, no_squash_subnet_ids: Sequence[str]
    ) -> None:
        """squash_to: "UID:GID" root maps to, or "0:0" for off. no_squash_subnet_ids: subnets whose addresses keep
        root (the handler reads their CIDR blocks and turns each into one Lustre NID range)."""
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        code = handler_code(HANDLER_DIR)
        functions = {}
        for name, handler in (("OnEvent", "on_event"), ("IsComplete", "is_complete")):
            log_group = function_log_group(self, f"{name}Logs")
            fn = lambda_.Function(
                self,
                name,
                runtime=RUNTIME,
                handler=f"root_squash.{handler}",
                code=code,
                timeout=cdk.Duration.minutes(1),
                memory_size=256,
                log_group=log_group,
                description="FSx for Lustre root squash (UpdateFileSystem): not a CloudFormation property",
            )
            # Describe calls support no resource-level permissions.
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="ReadFileSystemAndSubnets",
                    actions=["fsx:DescribeFileSystems", "ec2:DescribeSubnets"],
                    resources=["*"],
                )
            )
            functions[name] = fn
        file_system_arn = stack.format_arn(service="fsx", resource="file-system", resource_name=file_system_id)
        functions["OnEvent"].add_to_role_policy(
            iam.PolicyStatement(sid="SetRootSquash", actions=["fsx:UpdateFileSystem"], resources=[file_system_arn])
        )
        provider_logs = function_log_group(self, "ProviderLogs")
        # UpdateFileSystem is asynchronous: the file system is back to AVAILABLE within minutes.
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=functions["OnEvent"],
            is_complete_handler=functions["IsComplete"],
            query_interval=cdk.Duration.seconds(30),
            total_timeout=cdk.Duration.hours(1),
            log_group=provider_logs,
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(destination=provider_logs, level=sfn.LogLevel.ALL),
        )
        self.resource = cdk.CfnResource(
            self,
            "Resource",
            type=RESOURCE_TYPE,
            properties={
                "ServiceToken": self.provider.service_token,
                "FileSystemId": file_system_id,
                "RootSquash": squash_to,
                "NoSquashSubnetIds": list(no_squash_subnet_ids),
            },
        )
        managed_policy = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        for fn in functions.values():
            acknowledge(
                fn,
                "AwsSolutions-IAM5",
                "fsx:DescribeFileSystems and ec2:DescribeSubnets support only '*'; the one write, "
                "fsx:UpdateFileSystem, names this stack's file system",
                findings=["Resource::*"],
            )
            acknowledge(
                fn,
                "AwsSolutions-IAM4",
                "the root-squash handler logs to its own CloudWatch log group through the basic execution policy",
                findings=[managed_policy],
            )
        acknowledge_provider(self.provider, list(functions.values()))
