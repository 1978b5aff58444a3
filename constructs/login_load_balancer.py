"""An internal Network Load Balancer for SSH to the Slurm login group, whose targets follow HyperPod's login nodes.

HyperPod nodes are not EC2 instances of the account's (no Auto Scaling group to attach), so the target group holds
IP targets: lambda/login_targets reads each running login node's PrivatePrimaryIp (DescribeClusterNode) and makes the
target group equal to them. It runs on HyperPod's EventBridge events for the cluster (node health changes, which
include a node being replaced, and cluster state changes; Continuous-mode instance events for the login group), once
per deployment (custom resource) and hourly as a safety net.

The load balancer has its own security group: port 22 from `allowed_cidrs` only; it reaches the nodes through one
rule added to the cluster's security group (port 22 from this group). Client IP preservation stays off (the default
for IP targets), so that rule is all the nodes need; sshd logs the load balancer's address, not the person's.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.lambda_assets import RUNTIME, function_dir, handler_code
from constructs.nag_acknowledgments import acknowledge, acknowledge_provider
from constructs.platform_observability import CLUSTER_EVENT, NODE_HEALTH, STATE_CHANGE

HANDLER_DIR = function_dir("login_targets")
SSH_PORT = 22


class LoginLoadBalancer(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster_name: str,
        cluster: cdk.CfnResource,
        cluster_arn: str,
        login_group: str,
        login_count: int,
        vpc_id: str,
        subnet_ids: Sequence[str],
        cluster_security_group_id: str,
        allowed_cidrs: Sequence[str],
    ) -> None:
        super().__init__(scope, id_)
        self.security_group = ec2.CfnSecurityGroup(
            self,
            "SecurityGroup",
            vpc_id=vpc_id,
            group_description=f"{cluster_name}: SSH load balancer of the login nodes",
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=SSH_PORT,
                    to_port=SSH_PORT,
                    cidr_ip=cidr,
                    description="SSH from a network people connect from (cluster.login_access.ssh_allowed_cidrs)",
                )
                for cidr in allowed_cidrs
            ],
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="tcp",
                    from_port=SSH_PORT,
                    to_port=SSH_PORT,
                    destination_security_group_id=cluster_security_group_id,
                    description="SSH and health checks to the login nodes",
                )
            ],
        )
        ec2.CfnSecurityGroupIngress(
            self,
            "ClusterAllowsSsh",
            group_id=cluster_security_group_id,
            ip_protocol="tcp",
            from_port=SSH_PORT,
            to_port=SSH_PORT,
            source_security_group_id=self.security_group.attr_group_id,
            description=f"{cluster_name}: SSH from the login load balancer",
        )
        self.load_balancer = elbv2.CfnLoadBalancer(
            self,
            "LoadBalancer",
            type="network",
            scheme="internal",
            subnets=list(subnet_ids),
            security_groups=[self.security_group.attr_group_id],
            # Login nodes usually sit in one subnet: each AZ's address must reach them.
            load_balancer_attributes=[
                elbv2.CfnLoadBalancer.LoadBalancerAttributeProperty(
                    key="load_balancing.cross_zone.enabled", value="true"
                )
            ],
        )
        acknowledge(
            self.load_balancer,
            "AwsSolutions-ELB2",
            "a TCP pass-through listener for SSH: Network Load Balancer access logs are written only for TLS "
            "listeners; connections are visible in the VPC flow logs and in sshd's auth log on the nodes",
        )
        self.target_group = elbv2.CfnTargetGroup(
            self,
            "Targets",
            target_type="ip",
            protocol="TCP",
            port=SSH_PORT,
            vpc_id=vpc_id,
            health_check_protocol="TCP",
            health_check_port=str(SSH_PORT),
        )
        elbv2.CfnListener(
            self,
            "Ssh",
            load_balancer_arn=self.load_balancer.ref,
            port=SSH_PORT,
            protocol="TCP",
            default_actions=[elbv2.CfnListener.ActionProperty(type="forward", target_group_arn=self.target_group.ref)],
        )
        self.function = self._reconciler(cluster_name=cluster_name, cluster_arn=cluster_arn, login_group=login_group)
        self._triggers(cluster_name=cluster_name, login_group=login_group)
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            log_group=logs.LogGroup(self, "ProviderLogs", removal_policy=cdk.RemovalPolicy.DESTROY),
        )
        acknowledge_provider(provider, [self.function])
        # Once per deployment, after HyperPod reports the cluster created or updated.
        initial = cdk.CustomResource(
            self,
            "InitialTargets",
            service_token=provider.service_token,
            resource_type="Custom::LoginTargets",
            properties={"LoginGroup": login_group, "LoginCount": login_count},
        )
        initial.node.add_dependency(cluster)
        self.dns_name = self.load_balancer.attr_dns_name

    def _reconciler(self, *, cluster_name: str, cluster_arn: str, login_group: str) -> lambda_.Function:
        function = lambda_.Function(
            self,
            "Reconciler",
            runtime=RUNTIME,
            handler="login_targets.handler",
            code=handler_code(HANDLER_DIR),
            timeout=cdk.Duration.minutes(2),
            memory_size=128,
            log_group=logs.LogGroup(self, "ReconcilerLogs", removal_policy=cdk.RemovalPolicy.DESTROY),
            description=f"{cluster_name}: makes the SSH load balancer's targets the running login nodes",
            environment={
                "CLUSTER_NAME": cluster_name,
                "LOGIN_GROUP": login_group,
                "TARGET_GROUP_ARN": self.target_group.ref,
                "SSH_PORT": str(SSH_PORT),
            },
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadLoginNodes",
                actions=["sagemaker:ListClusterNodes", "sagemaker:DescribeClusterNode"],
                resources=[cluster_arn],
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="ChangeLoginTargets",
                actions=["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
                resources=[self.target_group.ref],
            )
        )
        # DescribeTargetHealth supports no resource-level permissions (Service Authorization Reference, Elastic
        # Load Balancing V2: the action lists no resource type).
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadLoginTargets", actions=["elasticloadbalancing:DescribeTargetHealth"], resources=["*"]
            )
        )
        acknowledge(
            function,
            "AwsSolutions-IAM4",
            "the login target reconciler logs to its own CloudWatch log group through the basic execution policy",
            findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
        )
        acknowledge(
            function,
            "AwsSolutions-IAM5",
            "elasticloadbalancing:DescribeTargetHealth has no resource-level permissions; the reconciler "
            "only reads the health of its own target group with it",
            findings=["Resource::*"],
        )
        return function

    def _triggers(self, *, cluster_name: str, login_group: str) -> None:
        target = targets.LambdaFunction(self.function, retry_attempts=8)
        # HyperPod's detail-types (constructs/platform_observability.py cites the events reference). The handler
        # reads the login group's state itself, so any of these is only a reason to look.
        events.Rule(
            self,
            "NodeEvents",
            description=f"{cluster_name}: node health (a login node replaced) and "
            "cluster state changes re-read the login nodes",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[NODE_HEALTH, STATE_CHANGE],
                detail={"ClusterName": [cluster_name]},
            ),
            targets=[target],
        )
        events.Rule(
            self,
            "LoginGroupEvents",
            description=f"{cluster_name}: instance events of the login group "
            "(clusters in Continuous provisioning mode)",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[CLUSTER_EVENT],
                detail={"EventDetails": {"ClusterName": [cluster_name], "InstanceGroupName": [login_group]}},
            ),
            targets=[target],
        )
        events.Rule(
            self,
            "SafetyNet",
            description=f"{cluster_name}: hourly re-read of the login nodes, in case an event was missed",
            schedule=events.Schedule.rate(cdk.Duration.hours(1)),
            targets=[target],
        )
