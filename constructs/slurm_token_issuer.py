"""Per-user mode on Slurm: the function that mints each Studio user's Slurm auth/jwt token (lambda/slurm_tokens) and,
per batch of users, the schedule that invokes it and the users' token secrets and execution roles.

Who can read what (docs/security.md):
- the signing key secret (cluster stack, addressed by its fixed name): written by the cluster's role, read only by
  this function's role;
- user U's token secret `<name>/slurm-token/U`: written only by this function, read only by U's execution role,
  encrypted with this construct's customer managed key (like every other platform secret); the function may encrypt
  with it only for secrets under the token prefix, U's role decrypt only U's secret, both through Secrets Manager;
- U's execution role: the shared Studio app permissions (a managed policy) plus read on U's token secret only.
The function refuses to mint for system accounts: `reserved_users`/`reserved_prefixes` (platform_config/facts.py reads
them from config/facts/reserved-users.json, the list config validation uses) reach it through its environment.
A Studio user profile's spaces run as the profile's `UserSettings.ExecutionRole`
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_UserSettings.html), so IAM binds a token to one profile.
"""

from __future__ import annotations

import json
from typing import cast
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct
from constructs.lambda_assets import RUNTIME, function_dir, function_log_group, handler_code
from constructs.nag_acknowledgments import acknowledge
from constructs.nested_template import NestedTemplate, top_level_logical_id
from constructs.pseudo_parameters import REGION

HANDLER_DIR = function_dir("slurm_tokens")
TOKEN_LIFETIME_SECONDS = 3600
SCHEDULE = "rate(15 minutes)"  # a token always has at least 45 minutes left while the issuer runs


class SlurmTokenIssuer(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        role_name: str,
        key_secret_name: str,
        secret_prefix: str,
        reserved_users: Sequence[str],
        reserved_prefixes: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        self.secret_prefix = secret_prefix
        # The users' token secrets: a customer managed key, as the login secret and the signing key have. Retained like
        # theirs (the secrets go with the stack; nothing else is encrypted with it).
        self.key = kms.Key(
            self,
            "TokenKey",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description="Encrypts the Studio users' Slurm token secrets",
        )
        self.role = iam.Role(
            self,
            "Role",
            role_name=role_name,
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Mints Studio users' Slurm auth/jwt tokens into their own secrets",
        )
        log_group = function_log_group(self, "Logs")
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            handler="issuer.handler",
            timeout=cdk.Duration.minutes(5),
            memory_size=256,
            role=self.role,
            log_group=log_group,
            retry_attempts=0,
            code=handler_code(HANDLER_DIR),
            environment={
                "KEY_SECRET_ID": key_secret_name,
                "TOKEN_SECRET_PREFIX": secret_prefix,
                "TOKEN_LIFETIME": str(TOKEN_LIFETIME_SECONDS),
                "RESERVED_USERS": ",".join(sorted(reserved_users)),
                "RESERVED_USER_PREFIXES": ",".join(reserved_prefixes),
            },
        )
        self.token_secrets_arn = stack.format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{secret_prefix}*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        # The key secret and its KMS key live in the cluster stack, created alongside this one: named by pattern, not
        # referenced. A secret's ARN is its name and six random characters; Secrets Manager encrypts a secret under
        # the encryption context {"SecretARN": <its ARN>}
        # (https://docs.aws.amazon.com/secretsmanager/latest/userguide/security-encryption.html), which pins the
        # decrypt to this secret whatever key the cluster stack made. The key's own policy names this role too.
        key_secret_arn = stack.format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{key_secret_name}-??????",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        keys = stack.format_arn(service="kms", resource="key", resource_name="*")
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadSigningKey", actions=["secretsmanager:GetSecretValue"], resources=[key_secret_arn]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="DecryptSigningKey",
                actions=["kms:Decrypt"],
                resources=[keys],
                conditions={
                    "StringEquals": {"kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com"},
                    "StringLike": {"kms:EncryptionContext:SecretARN": key_secret_arn},
                },
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteUserTokens", actions=["secretsmanager:PutSecretValue"], resources=[self.token_secrets_arn]
            )
        )
        # PutSecretValue makes Secrets Manager ask KMS for a data key under the secret's ARN as encryption context.
        self.via_secrets_manager = f"secretsmanager.{REGION}.amazonaws.com"
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="EncryptUserTokens",
                actions=["kms:GenerateDataKey", "kms:Encrypt", "kms:Decrypt"],
                resources=[self.key.key_arn],
                conditions={
                    "StringEquals": {"kms:ViaService": self.via_secrets_manager},
                    "StringLike": {"kms:EncryptionContext:SecretARN": self.token_secrets_arn},
                },
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="Logs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn, f"{log_group.log_group_arn}:log-stream:*"],
            )
        )
        # jsii types default_child as IConstruct | None; a LogGroup's is its CfnLogGroup.
        log_group_l1 = cast(logs.CfnLogGroup, log_group.node.default_child)
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "the issuer writes tokens only to secrets named with this platform's token prefix (one per user, "
            "created by the nested user stacks), logs to streams of its own log group, and decrypts through "
            "Secrets Manager only with the signing key secret's ARN as encryption context (the key is the "
            "cluster stack's, not referenced so Studio does not wait for the cluster)",
            findings=[
                f"Resource::{self.token_secrets_arn}",
                f"Resource::{keys}",
                f"Resource::<{stack.get_logical_id(log_group_l1)}.Arn>:log-stream:*",
            ],
        )

    def users(
        self,
        scope: Construct,
        template: NestedTemplate,
        *,
        users: Sequence[str],
        role_path: str,
        policy_arn: str,
        deploy_role_arn: str,
    ) -> tuple[dict[str, dict], dict[str, dict]]:
        """For `scope`, a nested user stack whose template `template` builds: for each user a token secret, its
        resource policy and an execution role; one schedule for the batch. Returns (resources by logical id,
        {user: {"Fn::GetAtt": [role, "Arn"]}})."""
        role_path, policy_arn = template.value(role_path), template.value(policy_arn)
        token_key_arn = template.value(self.key.key_arn)
        via_secrets_manager = template.value(self.via_secrets_manager)
        issuer_role_arn, deploy_role_arn = template.value(self.role.role_arn), template.value(deploy_role_arn)
        function_arn = template.value(self.function.function_arn)
        resources, roles = {}, {}
        for user in users:
            secret_id, policy_id, role_id = (
                top_level_logical_id(f"{kind}-{user}") for kind in ("SlurmToken", "SlurmTokenPolicy", "ExecutionRole")
            )
            role_arn = {"Fn::GetAtt": [role_id, "Arn"]}
            resources[secret_id] = {
                "Type": "AWS::SecretsManager::Secret",
                "Properties": {
                    "Name": f"{self.secret_prefix}{user}",
                    "Description": f"Slurm auth/jwt token of Studio user {user} (renewed every 15 minutes)",
                    "SecretString": json.dumps({"user": user}),
                    "KmsKeyId": token_key_arn,
                },
            }
            resources[role_id] = {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "Path": role_path,
                    "Description": f"Studio apps of user {user}: the shared app permissions and {user}'s Slurm token",
                    "AssumeRolePolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "sagemaker.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ],
                    },
                    "ManagedPolicyArns": [policy_arn],
                    "Policies": [
                        {
                            "PolicyName": "OwnSlurmToken",
                            "PolicyDocument": {
                                "Version": "2012-10-17",
                                "Statement": [
                                    {
                                        "Sid": "ReadOwnSlurmToken",
                                        "Effect": "Allow",
                                        "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                                        "Resource": {"Ref": secret_id},
                                    },
                                    {
                                        "Sid": "DecryptOwnSlurmToken",
                                        "Effect": "Allow",
                                        "Action": "kms:Decrypt",
                                        "Resource": token_key_arn,
                                        "Condition": {
                                            "StringEquals": {
                                                "kms:ViaService": via_secrets_manager,
                                                "kms:EncryptionContext:SecretARN": {"Ref": secret_id},
                                            }
                                        },
                                    },
                                ],
                            },
                        }
                    ],
                },
            }
            resources[policy_id] = {
                "Type": "AWS::SecretsManager::ResourcePolicy",
                "Properties": {
                    "SecretId": {"Ref": secret_id},
                    "BlockPublicPolicy": True,
                    "ResourcePolicy": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "OnlyTheUserReads",
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": "secretsmanager:GetSecretValue",
                                "Resource": "*",
                                "Condition": {"ArnNotEquals": {"aws:PrincipalArn": role_arn}},
                            },
                            {
                                "Sid": "OnlyTheIssuerWrites",
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": ["secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret"],
                                "Resource": "*",
                                "Condition": {"ArnNotEquals": {"aws:PrincipalArn": [issuer_role_arn, deploy_role_arn]}},
                            },
                        ],
                    },
                },
            }
            roles[user] = role_arn
        resources["SlurmTokenSchedule"] = {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "Description": f"Renews the Slurm tokens of {users[0]} .. {users[-1]}",
                "ScheduleExpression": SCHEDULE,
                "State": "ENABLED",
                "Targets": [
                    {
                        "Id": "SlurmTokenIssuer",
                        "Arn": function_arn,
                        "Input": json.dumps({"users": list(users)}, separators=(",", ":")),
                    }
                ],
            },
        }
        resources["SlurmTokenScheduleInvokes"] = {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "Action": "lambda:InvokeFunction",
                "FunctionName": function_arn,
                "Principal": "events.amazonaws.com",
                "SourceArn": {"Fn::GetAtt": ["SlurmTokenSchedule", "Arn"]},
            },
        }
        acknowledge(
            scope,
            "AwsSolutions-SMG4",
            "a user's Slurm token secret is rewritten every 15 minutes by the token issuer with a token valid "
            "for one hour; Secrets Manager rotation would add nothing",
        )
        return resources, roles
