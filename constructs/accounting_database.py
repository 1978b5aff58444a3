"""The Slurm accounting database of `cluster.accounting.database: managed`: an RDS for MySQL instance in the cluster's
private subnets, reachable on 3306 only from the controller's security group, encrypted with its own customer key,
whose master password RDS generates into Secrets Manager and rotates (no password in any template, script or log).
HyperPod's slurmdbd connects to it through `Orchestrator.Slurm.AccountingDatabase`
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html).

Why RDS for MySQL and not Aurora MySQL Serverless v2: slurmdbd keeps its connection open, so a Serverless v2 cluster
never scales to zero and bills its minimum capacity all month, for a load of a few small writes per job that a
burstable instance carries; one instance has one endpoint and one storage volume to snapshot and restore."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from constructs import Construct
from constructs.nag_acknowledgments import acknowledge
from constructs.pseudo_parameters import REGION

PORT = 3306  # HyperPod's default Port for AccountingDatabase (botocore sagemaker ClusterAccountingDatabase.Port)
# The schema slurmdbd creates; named explicitly because the API and CloudFormation document different defaults
# (botocore 1.44.5: slurm_acct_db_<cluster id>; the CloudFormation schema: slurm_acct_db).
SCHEMA = "slurm_acct_db"
# RDS for MySQL 8.4, the LTS major version (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/
# MySQL.Concepts.VersionMgmt.html); 8.4.11 is the newest minor in the AWS::RDS::DBInstance EngineVersion enum of
# cfn-lint 1.58.0's schema (2026-10-20). Minor upgrades then come from RDS (AutoMinorVersionUpgrade).
ENGINE_VERSION = "8.4.11"
MASTER_USER = "slurm_admin"


class AccountingDatabase(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster_name: str,
        vpc_id: str,
        subnet_ids: Sequence[str],
        controller_security_group: ec2.ISecurityGroup,
        instance_class: str,
        allocated_storage_gib: int,
        multi_az: bool,
        backup_retention_days: int,
        require_tls: bool = True,
    ) -> None:
        super().__init__(scope, id_)
        # Retained: snapshots and the final snapshot are encrypted with it and unreadable without it.
        self.key = kms.Key(
            self,
            "Key",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            description=f"{cluster_name}: Slurm accounting database, its snapshots and its secret",
        )
        vpc = ec2.Vpc.from_vpc_attributes(self, "Vpc", vpc_id=vpc_id, availability_zones=["unused"])
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description=f"{cluster_name} Slurm accounting database: MySQL from the controller only",
        )
        self.security_group.add_ingress_rule(
            controller_security_group, ec2.Port.tcp(PORT), "slurmdbd on the Slurm controller"
        )
        controller_security_group.add_egress_rule(
            self.security_group, ec2.Port.tcp(PORT), "slurmdbd to the Slurm accounting database"
        )
        subnets = rds.CfnDBSubnetGroup(
            self,
            "Subnets",
            subnet_ids=list(subnet_ids),
            db_subnet_group_description=f"{cluster_name} accounting database: private subnets of the cluster",
        )
        # Slurm's accounting guide asks for innodb_lock_wait_timeout=900 so long purges and rollups do not fail
        # (https://slurm.schedmd.com/accounting.html#slurm-accounting-configuration-before-build).
        # require_secure_transport: the database refuses connections without TLS; "For MySQL 8.4 and lower, the
        # require_secure_transport parameter is set to 0 (OFF) by default. You can set [it] to 1 (ON)"; no reboot
        # (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/mysql-ssl-connections.require-ssl.html).
        settings = {"innodb_lock_wait_timeout": "900", "require_secure_transport": "1" if require_tls else "0"}
        parameters = rds.CfnDBParameterGroup(
            self,
            "Parameters",
            family="mysql8.4",
            description=f"{cluster_name} Slurm accounting database",
            parameters=settings,
        )
        self.instance = rds.CfnDBInstance(
            self,
            "Instance",
            engine="mysql",
            engine_version=ENGINE_VERSION,
            db_instance_class=instance_class,
            allocated_storage=str(allocated_storage_gib),
            storage_type="gp3",
            multi_az=multi_az,
            db_subnet_group_name=subnets.ref,
            vpc_security_groups=[self.security_group.security_group_id],
            db_parameter_group_name=parameters.ref,
            publicly_accessible=False,
            port=str(PORT),
            storage_encrypted=True,
            kms_key_id=self.key.key_arn,
            # RDS generates the password into a Secrets Manager secret encrypted with our key and rotates it (every
            # 7 days unless changed): https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/rds-secrets-manager.html
            master_username=MASTER_USER,
            manage_master_user_password=True,
            master_user_secret=rds.CfnDBInstance.MasterUserSecretProperty(kms_key_id=self.key.key_arn),
            deletion_protection=True,
            backup_retention_period=backup_retention_days,
            copy_tags_to_snapshot=True,
            auto_minor_version_upgrade=True,
            enable_cloudwatch_logs_exports=["error"],
            enable_performance_insights=False,
        )
        # Stack delete or replacement keeps the data: a final snapshot (and deletion protection refuses the delete
        # until someone turns it off on purpose).
        self.instance.cfn_options.deletion_policy = cdk.CfnDeletionPolicy.SNAPSHOT
        self.instance.cfn_options.update_replace_policy = cdk.CfnDeletionPolicy.SNAPSHOT
        self.endpoint = self.instance.attr_endpoint_address
        self.port = PORT
        self.schema = SCHEMA
        self.secret_arn = self.instance.attr_master_user_secret_secret_arn

        acknowledge(
            self.instance,
            "AwsSolutions-RDS11",
            "3306 is the port HyperPod's AccountingDatabase defaults to; the instance is private and its "
            "security group admits only the Slurm controller's group",
        )
        if not multi_az:
            acknowledge(
                self.instance,
                "AwsSolutions-RDS3",
                "single-AZ by choice (cluster.accounting.managed_database.multi_az: false): slurmctld queues "
                "accounting records while slurmdbd cannot reach the database, and backups plus the final "
                "snapshot keep the data",
            )

    def grant_read_secret(self, role: iam.IRole) -> None:
        """GetSecretValue on exactly this database's secret and Decrypt with its key, through Secrets Manager only."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadAccountingDatabaseSecret",
                actions=["secretsmanager:GetSecretValue"],
                resources=[self.secret_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DecryptAccountingDatabaseSecret",
                actions=["kms:Decrypt"],
                resources=[self.key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com"}},
            )
        )


def controller_security_group(scope: Construct, *, cluster_name: str, vpc_id: str) -> ec2.SecurityGroup:
    """The Slurm controller's own security group (OverrideVpcConfig of its instance group): the one source the
    accounting database admits. Created in `scope` (the stack), where it has always been."""
    vpc = ec2.Vpc.from_vpc_attributes(scope, "ControllerVpc", vpc_id=vpc_id, availability_zones=["unused"])
    return ec2.SecurityGroup(
        scope,
        "ControllerSecurityGroup",
        vpc=vpc,
        allow_all_outbound=False,
        description=f"{cluster_name} Slurm controller: the one source the accounting database admits",
    )
