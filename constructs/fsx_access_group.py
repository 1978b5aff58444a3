"""Studio access to a bring-your-own FSx for Lustre file system.

When the platform creates the file system, Studio reaches it through declarative security group rules. A file system
created elsewhere cannot be changed by this stack, so a custom resource adds our access group to each of its network
interfaces, keeping the groups they have, and removes only that group on delete (lambda/fsx_access_group/).
"""

from __future__ import annotations


import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.lambda_assets import RUNTIME, function_dir, function_log_group, handler_code
from constructs.lustre_ports import LUSTRE_PORTS
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider

HANDLER_DIR = function_dir("fsx_access_group")
RESOURCE_TYPE = "Custom::FsxAccessGroup"


class FsxAccessGroup(Construct):
    def __init__(self, scope: Construct, id_: str, *, file_system_id: str, security_group_id: str, vpc_id: str) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        log_group = function_log_group(self, "OnEventLogs")
        self.on_event = lambda_.Function(
            self,
            "OnEvent",
            runtime=RUNTIME,
            handler="access_group.on_event",
            code=handler_code(HANDLER_DIR),
            timeout=cdk.Duration.minutes(5),
            memory_size=256,
            log_group=log_group,
            description="Adds the Studio access security group to an existing FSx for Lustre file system's ENIs",
        )

        # DescribeFileSystems and DescribeNetworkInterfaces support no resource-level permissions.
        self.on_event.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadFileSystemInterfaces",
                actions=["fsx:DescribeFileSystems", "ec2:DescribeNetworkInterfaces"],
                resources=["*"],
            )
        )
        # The request names the ENI and every group it will have (the file system's own ones included, which this
        # stack does not know), so both resource types are authorized; the VPC condition keeps them to this VPC.
        network_interfaces = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        security_groups = stack.format_arn(service="ec2", resource="security-group", resource_name="*")
        self.on_event.add_to_role_policy(
            iam.PolicyStatement(
                sid="SetFileSystemInterfaceGroups",
                actions=["ec2:ModifyNetworkInterfaceAttribute"],
                resources=[network_interfaces, security_groups],
                conditions={
                    "ArnEquals": {"ec2:Vpc": stack.format_arn(service="ec2", resource="vpc", resource_name=vpc_id)}
                },
            )
        )

        provider_logs = function_log_group(self, "ProviderLogs")
        self.provider = cr.Provider(self, "Provider", on_event_handler=self.on_event, log_group=provider_logs)
        self.resource = cdk.CfnResource(
            self,
            "Resource",
            type=RESOURCE_TYPE,
            properties={
                "ServiceToken": self.provider.service_token,
                "FileSystemId": file_system_id,
                "SecurityGroupId": security_group_id,
            },
        )
        self._acknowledge(network_interfaces, security_groups)

    def _acknowledge(self, network_interfaces: str, security_groups: str) -> None:
        acknowledge(
            self.on_event,
            "AwsSolutions-IAM5",
            "the handler describes file systems and network interfaces, which support only '*', and sets the "
            "security groups of the file system's ENIs, whose ids (and existing groups) are only known at "
            "deploy time; ec2:Vpc limits that to ENIs and groups in this stack's VPC",
            findings=["Resource::*", f"Resource::{network_interfaces}", f"Resource::{security_groups}"],
        )
        managed_policy = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        acknowledge(
            self.on_event,
            "AwsSolutions-IAM4",
            "the FSx access-group handler logs to its own CloudWatch log group through the basic execution policy",
            findings=[managed_policy],
        )
        acknowledge_provider(self.provider, [self.on_event])


class LustreAccessGroup(ec2.CfnSecurityGroup):
    """A security group of ours for a file system the platform does not own: it lets the cluster reach Lustre (and
    Studio, which adds its rule), and FsxAccessGroup attaches it to the file system's network interfaces (and
    detaches it on delete). The rules and the attachment ("LustreAccess") are created beside the group, in `scope`
    (the storage stack), where they have always been: their logical ids are those of deployed stacks."""

    def __init__(
        self, scope: Construct, id_: str, *, file_system_id: str, vpc_id: str, cluster_security_group_id: str
    ) -> None:
        super().__init__(
            scope,
            id_,
            vpc_id=vpc_id,
            group_description="Attached to the ENIs of the existing FSx for Lustre file system: "
            "Lustre from the cluster and Studio",
        )
        for low, high in LUSTRE_PORTS:
            ec2.CfnSecurityGroupIngress(
                scope,
                f"LustreFromCluster{low}",
                group_id=self.attr_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                source_security_group_id=cluster_security_group_id,
                description="Lustre from the cluster's nodes",
            )
            ec2.CfnSecurityGroupEgress(
                scope,
                f"LustreToCluster{low}",
                group_id=self.attr_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                destination_security_group_id=cluster_security_group_id,
                description="Lustre servers to the cluster's clients",
            )
        self.attachment = FsxAccessGroup(
            scope, "LustreAccess", file_system_id=file_system_id, security_group_id=self.attr_group_id, vpc_id=vpc_id
        )
