"""The CloudFormation requests and SageMaker answers of the task-governance handler's tests
(lambda/task_governance/governance.py): a team's compute quota and the cluster's scheduler config, as CloudFormation
delivers their properties (every scalar a string) and as SageMaker describes them."""

from __future__ import annotations

from datetime import datetime, timezone

from support.events import custom_resource_event

ACCOUNT = "111122223333"
CLUSTER = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/abcdef012345"
CONFIG_ID, QUOTA_ID, NEW_ID = "cfg012345678", "quo012345678", "new012345678"
CONFIG_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/{CONFIG_ID}"
QUOTA_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/{QUOTA_ID}"
NEW_QUOTA_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/{NEW_ID}"
CREATED_AT = datetime(2026, 11, 21, tzinfo=timezone.utc)
TOKEN = "arn:aws:lambda:us-east-1:111122223333:function:provider"
OWNER_TAG = {"Key": "hyperpod-platform:owner", "Value": "arn:aws:cloudformation:stack/TeamAQuota"}  # cfn_event's

# As CloudFormation delivers them: every scalar a string.
CONFIG_PROPS = {
    "ServiceToken": TOKEN,
    "Name": "platform-policy",
    "ClusterArn": CLUSTER,
    "SchedulerConfig": {
        "PriorityClasses": [{"Name": "inference", "Weight": "90"}, {"Name": "training", "Weight": "50"}],
        "FairShare": "Enabled",
        "IdleResourceSharing": "Enabled",
    },
    "Description": "priorities for the platform",
    "Tags": [{"Key": "team", "Value": "platform"}],
}
QUOTA_PROPS = {
    "ServiceToken": TOKEN,
    "Name": "team-a",
    "ClusterArn": CLUSTER,
    "ActivationState": "Enabled",
    "ComputeQuotaConfig": {
        "ComputeQuotaResources": [
            {"InstanceType": "ml.p5.48xlarge", "Count": "2"},
            {"InstanceType": "ml.g5.8xlarge", "Accelerators": "4", "VCpu": "12.5", "MemoryInGiB": "64"},
        ],
        "ResourceSharingConfig": {
            "Strategy": "LendAndBorrow",
            "BorrowLimit": "50",
            "AbsoluteBorrowLimits": [{"InstanceType": "ml.p5.48xlarge", "Count": "1"}],
        },
        "PreemptTeamTasks": "LowerPriority",
    },
    "ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": "10"},
}
QUOTA_CONFIG = {
    "ComputeQuotaResources": [
        {"InstanceType": "ml.p5.48xlarge", "Count": 2},
        {"InstanceType": "ml.g5.8xlarge", "Accelerators": 4, "VCpu": 12.5, "MemoryInGiB": 64.0},
    ],
    "ResourceSharingConfig": {
        "Strategy": "LendAndBorrow",
        "BorrowLimit": 50,
        "AbsoluteBorrowLimits": [{"InstanceType": "ml.p5.48xlarge", "Count": 1}],
    },
    "PreemptTeamTasks": "LowerPriority",
}


def cfn_event(request_type, props, *, resource_type="Custom::ComputeQuota", old_props=None, physical_id=None):
    return custom_resource_event(
        request_type,
        props,
        logical_id="TeamAQuota",
        resource_type=resource_type,
        old_properties=old_props,
        physical_id=physical_id,
    )


def quota(status="Created", version=1, arn=QUOTA_ARN, **extra):
    return {
        "ComputeQuotaArn": arn,
        "ComputeQuotaId": arn.rsplit("/", 1)[1],
        "Name": "team-a",
        "ComputeQuotaVersion": version,
        "Status": status,
        "ClusterArn": CLUSTER,
        "ComputeQuotaTarget": {"TeamName": "team-a"},
        "CreationTime": CREATED_AT,
        **extra,
    }


def config(status="Created", version=1, **extra):
    return {
        "ClusterSchedulerConfigArn": CONFIG_ARN,
        "ClusterSchedulerConfigId": CONFIG_ID,
        "Name": "platform-policy",
        "ClusterSchedulerConfigVersion": version,
        "Status": status,
        "ClusterArn": CLUSTER,
        "CreationTime": CREATED_AT,
        **extra,
    }


def expect_no_quota_named(stub, name="team-a"):
    stub.add_response(
        "list_compute_quotas", {"ComputeQuotaSummaries": []}, {"NameContains": name, "ClusterArn": CLUSTER}
    )
