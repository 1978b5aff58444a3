"""FSx for Lustre partitions for Studio users, created without a shell on any node.

A partition is a directory under the data repository association's path. The handler puts an S3 directory
marker carrying FSx POSIX metadata (owner, group, mode) under the DRA's prefix and imports it with an FSx
data repository task; the custom resource completes only when that task has succeeded, so the directory
exists with the right owner and mode before CloudFormation moves on (lambda/fsx_partitions/).

At most MAX_IMPORTS_IN_FLIGHT import tasks run on the file system because of us: the handlers wait for a free slot
(and FSx's DataRepositoryTaskExecuting / ServiceLimitExceeded answers) before starting one, and `chain_template`
lets a stack create its partitions in that many lanes instead of all at once.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct
from constructs.lambda_assets import RUNTIME, execution_role, function_dir, function_log_group, handler_code
from constructs.nag_acknowledgments import Rule, acknowledge, acknowledge_provider, acknowledge_rules
from constructs.nested_template import NestedTemplate
from constructs.pseudo_parameters import PARTITION

HANDLER_DIR = function_dir("fsx_partitions")
MAX_IMPORTS_IN_FLIGHT = 4
RESERVED_UIDS_FILE = "/var/task/reserved_uids.json"  # Lambda unpacks the code in /var/task


class FsxPartitions(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        file_system_id: str,
        file_system_path: str,
        data_bucket_name: str,
        s3_prefix: str,
        partition_root: str,
        role_names: dict[str, str] | None = None,
    ) -> None:
        """role_names: fixed IAM role names per handler ("OnEvent", "IsComplete", "ProfileEvents") for a bucket
        policy that names them before they exist; generated names when None."""
        super().__init__(scope, id_)
        self.role_names = role_names or {}
        self.file_system_id = file_system_id
        self.file_system_path = file_system_path.rstrip("/")
        self.data_bucket_name = data_bucket_name
        self.s3_prefix = s3_prefix
        self.partition_root = partition_root
        code = handler_code(HANDLER_DIR)

        def function(name: str, handler: str, timeout: cdk.Duration, **kwargs) -> lambda_.Function:
            log_group = function_log_group(self, f"{name}Logs")
            fn = lambda_.Function(
                self,
                name,
                runtime=RUNTIME,
                code=code,
                handler=handler,
                timeout=timeout,
                memory_size=256,
                log_group=log_group,
                role=self._role(name),
                environment={"MAX_IMPORTS_IN_FLIGHT": str(MAX_IMPORTS_IN_FLIGHT)},
                **kwargs,
            )
            self._grant(execution_role(fn))
            return fn

        self.on_event = function("OnEvent", "custom_resource.on_event", cdk.Duration.minutes(2))
        self.is_complete = function("IsComplete", "custom_resource.is_complete", cdk.Duration.minutes(1))
        provider_logs = function_log_group(self, "ProviderLogs")
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event,
            is_complete_handler=self.is_complete,
            query_interval=cdk.Duration.seconds(20),
            total_timeout=cdk.Duration.minutes(30),
            log_group=provider_logs,
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(destination=provider_logs, level=sfn.LogLevel.ALL),
        )
        acknowledge_provider(self.provider, [self.on_event, self.is_complete])
        # Read once: every read of a jsii property is a round trip to the kernel, and partition() runs per user.
        self._service_token = self.provider.service_token

    def partition(
        self,
        scope: Construct,
        id_: str,
        *,
        relative_name: str,
        uid: str,
        gid: str,
        mode: str,
        condition: cdk.CfnCondition | None = None,
    ) -> cdk.CfnResource:
        resource = cdk.CfnResource(
            scope,
            id_,
            type="Custom::FsxPartition",
            properties=self._properties(relative_name=relative_name, uid=uid, gid=gid, mode=mode),
        )
        # Deleting this resource never deletes the directory: the handler's Delete only detaches.
        if condition is not None:
            resource.cfn_options.condition = condition
        return resource

    def partition_template(
        self,
        template: NestedTemplate,
        *,
        relative_name: str,
        uid: str,
        gid: str,
        mode: str,
        condition: str | None = None,
    ) -> dict:
        """The same partition as a resource of a nested stack's template (constructs/nested_template.py), for stacks
        of many: the shared values (service token, file system, bucket) become parameters once per stack."""
        return {
            "Type": "Custom::FsxPartition",
            "Properties": self._properties(
                relative_name=relative_name, uid=uid, gid=gid, mode=mode, shared=template.value
            ),
            **({"Condition": condition} if condition else {}),
        }

    def _properties(self, *, relative_name: str, uid: str, gid: str, mode: str, shared=lambda value: value) -> dict:
        return {
            "ServiceToken": shared(self._service_token),
            "FileSystemId": shared(self.file_system_id),
            "FileSystemPath": self.file_system_path,
            "DataBucket": shared(self.data_bucket_name),
            "S3Prefix": self.s3_prefix,
            "RelativePath": f"{self.partition_root}/{relative_name}",
            "Uid": uid,
            "Gid": gid,
            "Mode": mode,
        }

    @staticmethod
    def path_attribute(resource: cdk.CfnResource) -> dict:
        """The partition's directory, known only once its import succeeded: whatever mounts it through this
        reference (a profile, the domain) is created after the directory exists."""
        return {"Fn::GetAtt": [resource.logical_id, "Path"]}

    @staticmethod
    def chain_template(resources: dict[str, dict], logical_ids: list[str], lanes: int = MAX_IMPORTS_IN_FLIGHT) -> None:
        """Create the partitions of a template (`partition_template`) `lanes` at a time: each waits for the one
        `lanes` places before it."""
        for index in range(lanes, len(logical_ids)):
            resources[logical_ids[index]]["DependsOn"] = [logical_ids[index - lanes]]

    def path_of(self, relative_name: str) -> str:
        return f"{self.file_system_path}/{self.partition_root}/{relative_name}"

    def watch_profiles(
        self,
        *,
        domain_id: str,
        domain_arn_prefix: str,
        condition: cdk.CfnCondition | None,
        reserved_uids: Mapping[int, str],
    ) -> None:
        """Profiles created outside the stack (console, CLI) get a private partition too, unless their uid is
        another profile's or a config user's (`reserved_uids`: uid -> user name), see profile_events.py."""
        self.dead_letters = sqs.Queue(
            self,
            "ProfileEventsDeadLetters",
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            retention_period=cdk.Duration.days(14),
        )
        self.profile_events = self._function_for_events(domain_id, reserved_uids)
        self.profile_events.add_to_role_policy(
            iam.PolicyStatement(
                sid="MergeProfileFileSystems",
                actions=["sagemaker:DescribeUserProfile", "sagemaker:UpdateUserProfile"],
                resources=[f"{domain_arn_prefix}/*"],
            )
        )
        # Whose uid is whose: the handler lists the domain's profiles (filtered by DomainIdEquals).
        self.profile_events.add_to_role_policy(
            iam.PolicyStatement(sid="ListProfilesForUids", actions=["sagemaker:ListUserProfiles"], resources=["*"])
        )
        rule = events.Rule(
            self,
            "OnCreateUserProfile",
            description="Private FSx partition for new Studio profiles",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=["AWS API Call via CloudTrail"],
                detail={
                    "eventSource": ["sagemaker.amazonaws.com"],
                    "eventName": ["CreateUserProfile"],
                    "requestParameters": {"domainId": [domain_id]},
                },
            ),
        )
        rule.add_target(
            targets.LambdaFunction(
                self.profile_events,
                dead_letter_queue=self.dead_letters,
                retry_attempts=8,
                max_event_age=cdk.Duration.hours(6),
            )
        )
        if condition is not None:
            # The rule and everything that names it (invoke permission, DLQ policy) exist only in per-user mode.
            for resource in (*rule.node.find_all(), *self.dead_letters.node.find_all()):
                if isinstance(resource, (lambda_.CfnPermission, sqs.CfnQueuePolicy, events.CfnRule)):
                    resource.cfn_options.condition = condition
        acknowledge(
            execution_role(self.profile_events),
            "AwsSolutions-IAM5",
            "new profiles in this domain are only known by name once created; the handler may describe "
            "and update profiles of this one domain, and list profiles (ListUserProfiles takes no resource "
            "ARN) to refuse a uid another profile holds",
            findings=[f"Resource::{domain_arn_prefix}/*", "Resource::*"],
        )
        acknowledge(
            self.dead_letters,
            "AwsSolutions-SQS3",
            "this queue is the dead-letter queue of the profile-events function and its EventBridge target",
        )

    def _function_for_events(self, domain_id: str, reserved_uids: Mapping[int, str]) -> lambda_.Function:
        log_group = function_log_group(self, "ProfileEventsLogs")
        fn = lambda_.Function(
            self,
            "ProfileEvents",
            runtime=RUNTIME,
            handler="profile_events.handler",
            timeout=cdk.Duration.minutes(15),
            memory_size=256,
            log_group=log_group,
            retry_attempts=2,
            dead_letter_queue=self.dead_letters,
            role=self._role("ProfileEvents"),
            code=handler_code(self._code_with_reserved_uids(reserved_uids)),
            environment={
                "RESERVED_UIDS_FILE": RESERVED_UIDS_FILE,
                "DOMAIN_ID": domain_id,
                "FILE_SYSTEM_ID": self.file_system_id,
                "FILE_SYSTEM_PATH": self.file_system_path,
                "DATA_BUCKET": self.data_bucket_name,
                "S3_PREFIX": self.s3_prefix,
                "PARTITION_ROOT": self.partition_root,
                "MAX_WAIT_SECONDS": "780",
                "MAX_IMPORTS_IN_FLIGHT": str(MAX_IMPORTS_IN_FLIGHT),
            },
        )
        self._grant(execution_role(fn))
        return fn

    @staticmethod
    def _code_with_reserved_uids(reserved_uids: Mapping[int, str]) -> str:
        """The handler code plus reserved_uids.json: a thousand users do not fit Lambda's 4 KB of environment. The
        asset hash follows the content, so the folder's temporary name does not matter."""
        folder = Path(tempfile.mkdtemp(prefix="fsx-profile-events-"))
        for source in HANDLER_DIR.glob("*.py"):
            shutil.copyfile(source, folder / source.name)
        (folder / Path(RESERVED_UIDS_FILE).name).write_text(
            json.dumps({str(uid): name for uid, name in sorted(reserved_uids.items())}, indent=0, sort_keys=True)
        )
        return str(folder)

    def _role(self, handler: str) -> iam.Role | None:
        """A fixed-name role when one was asked for (else the function makes its own, as before)."""
        if handler not in self.role_names:
            return None
        role = iam.Role(
            self,
            f"{handler}Role",
            role_name=self.role_names[handler],
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaBasicExecutionRole")
            ],
        )
        return role

    def _grant(self, role: iam.IRole) -> None:
        stack = cdk.Stack.of(self)
        bucket_arn = f"arn:{PARTITION}:s3:::{self.data_bucket_name}"
        marker_prefix = f"{bucket_arn}/{self.s3_prefix}{self.partition_root}/*"
        file_system_arn = stack.format_arn(service="fsx", resource="file-system", resource_name=self.file_system_id)
        tasks = stack.format_arn(service="fsx", resource="task", resource_name="*")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PartitionMarkers", actions=["s3:GetObject", "s3:PutObject"], resources=[marker_prefix]
            )
        )
        # Without ListBucket, S3 answers a missing marker with 403 instead of 404.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListPartitionMarkers",
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{self.s3_prefix}{self.partition_root}/*"]}},
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ImportPartitions", actions=["fsx:CreateDataRepositoryTask"], resources=[file_system_arn, tasks]
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="WatchImports", actions=["fsx:DescribeDataRepositoryTasks"], resources=["*"])
        )
        acknowledge_rules(
            role,
            [
                Rule(
                    "AwsSolutions-IAM5",
                    "partition handlers write directory markers only under the partition root of the data bucket, "
                    "start import tasks (whose ids FSx assigns) on this file system, and poll tasks, which "
                    "DescribeDataRepositoryTasks supports only on '*'",
                    findings=["Resource::*", f"Resource::{marker_prefix}", f"Resource::{tasks}"],
                ),
                Rule(
                    "AwsSolutions-IAM4",
                    "partition handlers log to their own CloudWatch log group through the basic execution policy",
                    findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
                ),
            ],
        )
