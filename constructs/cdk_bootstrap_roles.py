"""The roles `cdk bootstrap` creates in the account and region, named exactly as the default stack synthesizer names
them (DefaultStackSynthesizer's DEFAULT_CLOUDFORMATION_ROLE_ARN and DEFAULT_DEPLOY_ROLE_ARN), with the qualifier
from the app's context (`@aws-cdk/core:bootstrapQualifier`, else CDK's default). Resource policies that let only named
principals change a secret or an object name them beside those principals, so a deployment can still update it."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct
from constructs.pseudo_parameters import ACCOUNT_ID, PARTITION, REGION


def _arn(scope: Construct, template: str) -> str:
    qualifier = (
        scope.node.try_get_context("@aws-cdk/core:bootstrapQualifier") or cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER
    )
    return (
        template.replace("${AWS::Partition}", PARTITION)
        .replace("${AWS::AccountId}", ACCOUNT_ID)
        .replace("${AWS::Region}", REGION)
        .replace("${Qualifier}", qualifier)
    )


def cloudformation_execution_role_arn(scope: Construct) -> str:
    """The role CloudFormation acts as while it creates, updates and deletes the stacks' resources."""
    return _arn(scope, cdk.DefaultStackSynthesizer.DEFAULT_CLOUDFORMATION_ROLE_ARN)


def deploy_role_arn(scope: Construct) -> str:
    """The role `cdk deploy` assumes to start the deployment (change sets, template uploads)."""
    return _arn(scope, cdk.DefaultStackSynthesizer.DEFAULT_DEPLOY_ROLE_ARN)


def cdk_deploy_role_arns(scope: Construct) -> list[str]:
    """The CDK bootstrap's CloudFormation execution role and deploy role of this account and region."""
    return [cloudformation_execution_role_arn(scope), deploy_role_arn(scope)]
