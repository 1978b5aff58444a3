"""Custom::SchedulableNode: a resource that completes once the EKS cluster has a node the pods of some add-ons can run
on (lambda/node_readiness/readiness.py says what counts and why). Add-ons that run Deployments depend on one, so
CloudFormation creates them when they can run instead of leaving them DEGRADED, which it reports as success
(its add-on handler treats DEGRADED as a successful end state: hashicorp/terraform-provider-aws#44669).

The check lists nodes through the EKS API: its function runs in the cluster's private subnets with the kubectl
handler's security group (the API endpoint is private), authenticates as its own role, and that role's access entry
carries one Kubernetes group, which the stack binds to reading nodes. It never waits longer than `wait_minutes`:
a CloudFormation custom resource may take an hour at most, and failing would roll back the HyperPod cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.hyperpod_vpc import PrivateSubnet
from constructs.lambda_assets import RUNTIME, execution_role, function_dir, function_log_group, handler_code
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider

HANDLER_DIR = function_dir("node_readiness")
RESOURCE_TYPE = "Custom::SchedulableNode"
# CloudFormation waits for a custom resource an hour at most (ServiceTimeout: 1-3600 s,
# https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-cloudformation-customresource.html);
# the waiter gives up a few minutes before that and completes.
MAX_WAIT_MINUTES = 50
POLL_SECONDS = 30


class SchedulableNodeWaiter(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        cluster_name: str,
        vpc_id: str,
        subnets: Sequence[PrivateSubnet],
        security_group_id: str,
        kubernetes_group: str,
        wait_minutes: int = MAX_WAIT_MINUTES,
    ) -> None:
        super().__init__(scope, id_)
        if not 1 <= wait_minutes <= MAX_WAIT_MINUTES:
            raise ValueError(f"wait_minutes {wait_minutes}: 1..{MAX_WAIT_MINUTES}")
        self.cluster, self.cluster_name, self.wait_minutes = cluster, cluster_name, wait_minutes
        code = handler_code(HANDLER_DIR)
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=vpc_id,
            availability_zones=[s.az_id for s in subnets],
            private_subnet_ids=[s.subnet_id for s in subnets],
        )
        cdk.Annotations.of(vpc).acknowledge_warning(
            "@aws-cdk/aws-ec2:noSubnetRouteTableId", "the node check's function only places ENIs in these subnets"
        )
        group = ec2.SecurityGroup.from_security_group_id(self, "ApiClientGroup", security_group_id, mutable=False)

        def function(name: str, handler: str, in_vpc: bool) -> lambda_.Function:
            log_group = function_log_group(self, f"{name}Logs")
            return lambda_.Function(
                self,
                name,
                runtime=RUNTIME,
                code=code,
                handler=handler,
                timeout=cdk.Duration.minutes(1),
                memory_size=256,
                log_group=log_group,
                vpc=vpc if in_vpc else None,
                vpc_subnets=ec2.SubnetSelection(subnets=vpc.private_subnets) if in_vpc else None,
                security_groups=[group] if in_vpc else None,
            )

        # on_event only records the deadline; is_complete reads the nodes from the private API endpoint.
        self.on_event = function("OnEvent", "readiness.on_event", in_vpc=False)
        self.is_complete = function("IsComplete", "readiness.is_complete", in_vpc=True)
        self.access_entry = eks.CfnAccessEntry(
            self,
            "NodeReaderAccess",
            cluster_name=cluster_name,
            principal_arn=execution_role(self.is_complete).role_arn,
            type="STANDARD",
            kubernetes_groups=[kubernetes_group],
        )
        provider_logs = function_log_group(self, "ProviderLogs")
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event,
            is_complete_handler=self.is_complete,
            query_interval=cdk.Duration.seconds(POLL_SECONDS),
            total_timeout=cdk.Duration.minutes(wait_minutes + 5),
            log_group=provider_logs,
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(destination=provider_logs, level=sfn.LogLevel.ALL),
        )
        acknowledge_provider(self.provider, [self.on_event, self.is_complete])
        basic = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        vpc_access = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
        acknowledge(
            self.on_event,
            "AwsSolutions-IAM4",
            "the node check's deadline handler logs through the basic execution policy and calls nothing else",
            findings=[basic],
        )
        acknowledge(
            self.is_complete,
            "AwsSolutions-IAM4",
            "the node check runs in the cluster's private subnets (the "
            "EKS endpoint is private) with the AWS-managed basic and VPC-access execution policies; its only "
            "other right is reading nodes, through its EKS access entry",
            findings=[basic, vpc_access],
        )

    def wait_for(
        self,
        id_: str,
        *,
        tolerations: Sequence[Mapping[str, str]],
        after: Sequence[Construct],
        scope: Construct | None = None,
    ) -> cdk.CustomResource:
        """A resource complete once a node exists whose NoSchedule/NoExecute taints are all in `tolerations`."""
        resource = cdk.CustomResource(
            scope or self,
            id_,
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": self.cluster_name,
                "Region": cdk.Stack.of(self).region,
                "Endpoint": self.cluster.cluster_endpoint,
                "CertificateAuthorityData": self.cluster.cluster_certificate_authority_data,
                "ToleratedTaints": json.dumps(list(tolerations), sort_keys=True),
                "WaitMinutes": str(self.wait_minutes),
            },
        )
        resource.node.add_dependency(self.access_entry, *after)
        return resource
