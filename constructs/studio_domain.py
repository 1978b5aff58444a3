"""The Studio domain: VpcOnly, IAM auth, JupyterLab and Code Editor with the platform's lifecycle configs and idle
shutdown, the cluster's FSx mounted as the shared partition (shared mode) and, for shared spaces, the shared space
user's identity."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct


def studio_key(scope: Construct) -> kms.Key:
    """The domain's home volumes and MLflow's artifacts; kept when the stack is deleted."""
    return kms.Key(
        scope,
        "StudioKey",
        enable_key_rotation=True,
        removal_policy=cdk.RemovalPolicy.RETAIN,
        description="Studio domain home volumes and MLflow artifacts",
    )


class StudioDomain(sagemaker.CfnDomain):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        domain_name: str,
        vpc_id: str,
        subnet_id: str,
        key: kms.IKey,
        execution_role_arn: str,
        security_group_id: str,
        jupyter_lab_arn: str,
        code_editor_arn: str,
        idle_timeout_minutes: int,
        is_shared: cdk.CfnCondition,
        file_system_id: str,
        shared_path: object,
        shared_gid: int,
        shared_space_uid: int | None,
        tag_propagation: bool,
    ) -> None:
        """`is_shared`: the condition of shared mode, in which profiles mount `shared_path` (the partition's
        attribute where there is one: the domain waits until the directory exists). `shared_space_uid`: the
        shared spaces' user (studio.shared_space_user) in shared mode, or None."""
        idle = sagemaker.CfnDomain.AppLifecycleManagementProperty(
            idle_settings=sagemaker.CfnDomain.IdleSettingsProperty(
                lifecycle_management="ENABLED",
                idle_timeout_in_minutes=idle_timeout_minutes,
                min_idle_timeout_in_minutes=60,
                max_idle_timeout_in_minutes=max(idle_timeout_minutes, 60) * 4,
            )
        )
        shared = is_shared.logical_id
        shared_file_system = [
            {"FSxLustreFileSystemConfig": {"FileSystemId": file_system_id, "FileSystemPath": shared_path}}
        ]
        shared_space_storage = (
            {}
            if shared_space_uid is None
            else {
                "custom_posix_user_config": cdk.Fn.condition_if(
                    shared, {"Uid": shared_space_uid, "Gid": shared_gid}, cdk.Aws.NO_VALUE
                ),
                "custom_file_system_configs": cdk.Fn.condition_if(shared, shared_file_system, cdk.Aws.NO_VALUE),
            }
        )
        super().__init__(
            scope,
            id_,
            domain_name=domain_name,
            auth_mode="IAM",
            app_network_access_type="VpcOnly",
            vpc_id=vpc_id,
            # Its own subnet (network.studio_subnet_cidr): the cluster's subnets keep root on FSx, Studio's do not.
            subnet_ids=[subnet_id],
            kms_key_id=key.key_arn,
            default_user_settings=sagemaker.CfnDomain.UserSettingsProperty(
                execution_role=execution_role_arn,
                security_groups=[security_group_id],
                studio_web_portal="ENABLED",
                jupyter_lab_app_settings=sagemaker.CfnDomain.JupyterLabAppSettingsProperty(
                    default_resource_spec=sagemaker.CfnDomain.ResourceSpecProperty(
                        lifecycle_config_arn=jupyter_lab_arn
                    ),
                    lifecycle_config_arns=[jupyter_lab_arn],
                    app_lifecycle_management=idle,
                ),
                code_editor_app_settings=sagemaker.CfnDomain.CodeEditorAppSettingsProperty(
                    default_resource_spec=sagemaker.CfnDomain.ResourceSpecProperty(
                        lifecycle_config_arn=code_editor_arn
                    ),
                    lifecycle_config_arns=[code_editor_arn],
                    app_lifecycle_management=sagemaker.CfnDomain.AppLifecycleManagementProperty(
                        idle_settings=sagemaker.CfnDomain.IdleSettingsProperty(
                            lifecycle_management="ENABLED", idle_timeout_in_minutes=idle_timeout_minutes
                        )
                    ),
                ),
                # The attribute, not the literal path: the domain waits until the directory exists.
                custom_file_system_configs=cdk.Fn.condition_if(shared, shared_file_system, cdk.Aws.NO_VALUE),
            ),
            # Shared spaces: the JupyterLab lifecycle config (DefaultSpaceSettings has no Code Editor settings) and, in
            # shared mode with studio.shared_space_user, that user's uid with the shared gid and the shared partition.
            default_space_settings=sagemaker.CfnDomain.DefaultSpaceSettingsProperty(
                execution_role=execution_role_arn,
                security_groups=[security_group_id],
                jupyter_lab_app_settings=sagemaker.CfnDomain.JupyterLabAppSettingsProperty(
                    default_resource_spec=sagemaker.CfnDomain.ResourceSpecProperty(
                        lifecycle_config_arn=jupyter_lab_arn
                    ),
                    lifecycle_config_arns=[jupyter_lab_arn],
                ),
                **shared_space_storage,
            ),
            # With budgets, profiles carry their department's tag; propagation passes it (and the platform's) on to
            # the spaces and apps they create (the resource schema: "tags added to Domain, User Profile and Space
            # entity is propagated to all SageMaker resources").
            tag_propagation="ENABLED" if tag_propagation else None,
        )
        # Deleting the domain keeps its home EFS volume: DeleteDomain's RetentionPolicy defaults to Retain, and
        # CloudFormation exposes no way to ask otherwise.
