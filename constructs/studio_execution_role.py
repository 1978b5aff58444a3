"""A Studio apps' execution role (the domain's shared one, or a task-governance team member's on EKS): what Studio's
HyperPod pages and a user's own spaces need, and grant methods for what the other Studio constructs ship. Each grant
adds its statement and its cdk-nag acknowledgment together, and records the wildcard findings it acknowledged, so a
managed policy that copies the role's statements acknowledges exactly those (`user_policy`)."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from constructs.nag_acknowledgments import acknowledge

# Every resource of the platform carries this tag (stacks/platform.py); Studio finds its HyperPod cluster by it.
PLATFORM_TAG = "hyperpod-platform"
# Studio's HyperPod pages: what AWS's Studio + HyperPod template grants its Studio role (config/facts/
# studio_access_policy.json, "hyperpod_pages"), on this platform's clusters only.
HYPERPOD_PAGE_ACTIONS = ("sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode", "sagemaker:ListClusterNodes")
# AWS's policy variables for the caller's own domain and profile, resolved by SageMaker on each request.
DOMAIN_ID, PROFILE_NAME = "${sagemaker:DomainId}", "${sagemaker:UserProfileName}"


class StudioExecutionRole(iam.Role):
    """`platform_name`'s Studio apps: read its HyperPod clusters (by tag, or `attached_cluster_arn` in attach mode),
    reach the scheduler (`eks_cluster_name` on EKS, else the Slurm login secret `slurm_login_secret_arn`), their
    own spaces, and Studio's log streams."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        description: str,
        platform_name: str,
        attached_cluster_arn: str | None,
        eks_cluster_name: str | None,
        slurm_login_secret_arn: str | None,
        role_name: str | None = None,
    ) -> None:
        super().__init__(
            scope,
            id_,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            role_name=role_name,
            description=f"{description}: read the cluster and reach its scheduler (Slurm or EKS), use MLflow",
        )
        self.findings: list[str] = []  # every wildcard finding acknowledged on this role's statements
        stack = cdk.Stack.of(self)
        # A HyperPod cluster's ARN ends in an id SageMaker generates, so it is not known before the cluster exists
        # (and this stack does not wait for it): the statement names this platform's clusters by their tag. Both
        # actions accept the cluster resource type with aws:ResourceTag
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html).
        # What AWS's own Studio + HyperPod template grants for Studio's HyperPod pages (config/facts/
        # studio_access_policy.json), scoped to this platform's clusters.
        if attached_cluster_arn:  # attach mode: the one existing cluster, by the ARN the config names
            self.add_to_policy(
                iam.PolicyStatement(
                    sid="DescribeCluster", actions=list(HYPERPOD_PAGE_ACTIONS), resources=[attached_cluster_arn]
                )
            )
        else:
            clusters = stack.format_arn(service="sagemaker", resource="cluster", resource_name="*")
            self.add_to_policy(
                iam.PolicyStatement(
                    sid="DescribeCluster",
                    actions=list(HYPERPOD_PAGE_ACTIONS),
                    resources=[clusters],
                    conditions={"StringEquals": {f"aws:ResourceTag/{PLATFORM_TAG}": platform_name}},
                )
            )
            self._acknowledge(
                f"read-only on the HyperPod clusters tagged {PLATFORM_TAG}={platform_name} (this "
                "platform's); the cluster's ARN holds an id generated at creation, after this stack",
                [f"Resource::{clusters}"],
            )
        # The HyperPod page lists clusters first; ListClusters authorizes no resource type (config/facts/iam_actions.json).
        self.add_to_policy(iam.PolicyStatement(sid="ListClusters", actions=["sagemaker:ListClusters"], resources=["*"]))
        for statement in own_spaces_statements(self):
            self.add_to_policy(statement)
        self._acknowledge(
            "sagemaker:ListClusters and the List/Describe actions of AWS's policy for a user's own spaces "
            "authorize no resource type or any of the domain's; creating, updating and deleting spaces "
            "and apps is limited to this domain and to the caller's own profile ('Give your users access "
            "to spaces', config/facts/studio_access_policy.json); tagging only what Studio creates",
            ["Resource::*", *(f"Resource::{r}" for r in own_spaces_wildcards(self))],
        )
        if eks_cluster_name is not None:
            # eks:AccessKubernetesApi: AWS services (Studio's HyperPod task pages) read the cluster's Kubernetes objects
            # as this role ("Grant AWS services write access to Kubernetes APIs", EKS user guide,
            # https://docs.aws.amazon.com/eks/latest/userguide/mutate-workloads.html: reads need it, writes also
            # eks:MutateViaKubernetesApi, not granted). What they see is what the role's access entry allows.
            self.add_to_policy(
                iam.PolicyStatement(
                    sid="DescribeEksCluster",
                    actions=["eks:DescribeCluster", "eks:AccessKubernetesApi"],
                    resources=[stack.format_arn(service="eks", resource="cluster", resource_name=eks_cluster_name)],
                )
            )
        else:
            if slurm_login_secret_arn is None:
                raise ValueError(
                    "a Studio execution role needs eks_cluster_name (EKS) or slurm_login_secret_arn (Slurm)"
                )
            self.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadSlurmLoginSecret",
                    actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                    resources=[slurm_login_secret_arn],
                )
            )
        studio_logs = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name="/aws/sagemaker/studio:*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.add_to_policy(
            iam.PolicyStatement(
                sid="LifecycleConfigLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[studio_logs],
            )
        )
        self._acknowledge(
            "Studio writes app and lifecycle-config logs to streams it names per app under the "
            "/aws/sagemaker/studio log group",
            [f"Resource::{studio_logs}"],
        )

    def grant_mlflow(self, tracking_server_arn: str) -> None:
        self.add_to_policy(
            iam.PolicyStatement(
                sid="UseMlflow",
                actions=[
                    "sagemaker-mlflow:*",
                    "sagemaker:DescribeMlflowTrackingServer",
                    "sagemaker:CreatePresignedMlflowTrackingServerUrl",
                ],
                resources=[tracking_server_arn],
            )
        )
        self._acknowledge(
            "the MLflow data-plane actions (experiments, runs, metrics, models) are granted on this "
            "stack's one tracking server only",
            ["Action::sagemaker-mlflow:*"],
        )

    def grant_read_prefix(self, bucket: s3.IBucket, prefix: str, *, sid: str, reason: str) -> None:
        """Read (and list) the objects under `prefix` of `bucket`: sids Read<sid> and List<sid>."""
        objects = bucket.arn_for_objects(f"{prefix}/*")
        self.add_to_policy(iam.PolicyStatement(sid=f"Read{sid}", actions=["s3:GetObject"], resources=[objects]))
        self.add_to_policy(
            iam.PolicyStatement(
                sid=f"List{sid}",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}/*"]}},
            )
        )
        self._acknowledge(reason, [f"Resource::{objects}"])

    def grant_slurm_client_bundle(self, bucket: s3.IBucket, prefix: str) -> None:
        """The controller's own Slurm client (lifecycle/hyperpod/build_slurm_client_bundle.sh), whose sha256 the
        login secret carries: its name holds that sha256, unknown at synth, so the prefix is the narrowest ARN."""
        bundles = bucket.arn_for_objects(f"{prefix}/*")
        self.add_to_policy(
            iam.PolicyStatement(sid="ReadSlurmClientBundle", actions=["s3:GetObject"], resources=[bundles])
        )
        self._acknowledge(
            "Studio login nodes download the Slurm controller's client bundle, named by its sha256 "
            f"(unknown at synth), from the lifecycle bucket's {prefix}/ prefix only",
            [f"Resource::{bundles}"],
        )

    def user_policy(self, scope: Construct, id_: str) -> iam.ManagedPolicy:
        """A managed policy holding exactly this role's statements (the same document), for each user's own role in
        per-user mode; acknowledged for the findings this role's grants acknowledged."""
        policy = iam.ManagedPolicy(
            scope,
            id_,
            # jsii types children as IConstruct; a Role's "DefaultPolicy" is its iam.Policy.
            document=cast(iam.Policy, self.node.find_child("DefaultPolicy")).document,
            description="Studio apps in per-user mode: what the shared execution role may do",
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "the shared Studio app permissions, for each user's own role: Studio log streams under "
            "/aws/sagemaker/studio, this platform's Studio scripts and tools bundle, read-only on the HyperPod "
            "clusters tagged as this platform's, this stack's MLflow server, and AWS's policy for a user's "
            "own Studio spaces (List/Describe on '*', spaces and apps of this domain and the caller's own "
            "profile)",
            findings=list(dict.fromkeys(self.findings)),
        )
        return policy

    def _acknowledge(self, reason: str, findings: list[str]) -> None:
        acknowledge(self, "AwsSolutions-IAM5", reason, findings=findings)
        self.findings += findings


def own_spaces_statements(scope: Construct) -> list[iam.PolicyStatement]:
    """AWS's policy for a user's own spaces ("Give your users access to spaces", config/facts/studio_access_policy.json)
    with this stack's region and account. One change: apps of spaces without an owner (shared spaces) in this domain
    only (the page: in any domain of the account)."""
    stack = cdk.Stack.of(scope)

    def arn(resource: str, name: str) -> str:
        return stack.format_arn(service="sagemaker", resource=resource, resource_name=name)

    own_profile = arn("user-profile", f"{DOMAIN_ID}/{PROFILE_NAME}")
    domain_apps, domain_spaces = arn("app", f"{DOMAIN_ID}/*"), arn("space", f"{DOMAIN_ID}/*")
    spaces = ["sagemaker:CreateSpace", "sagemaker:UpdateSpace", "sagemaker:DeleteSpace"]
    apps = ["sagemaker:CreateApp", "sagemaker:DeleteApp"]
    return [
        iam.PolicyStatement(
            sid="SharedSpaceApps",
            actions=apps,
            resources=[domain_apps],
            conditions={"Null": {"sagemaker:OwnerUserProfileArn": "true"}},
        ),
        iam.PolicyStatement(
            sid="SMStudioCreatePresignedDomainUrlForUserProfile",
            actions=["sagemaker:CreatePresignedDomainUrl"],
            resources=[own_profile],
        ),
        iam.PolicyStatement(
            sid="SMStudioAppPermissionsListAndDescribe",
            actions=[
                "sagemaker:ListApps",
                "sagemaker:ListDomains",
                "sagemaker:ListUserProfiles",
                "sagemaker:ListSpaces",
                "sagemaker:DescribeApp",
                "sagemaker:DescribeDomain",
                "sagemaker:DescribeUserProfile",
                "sagemaker:DescribeSpace",
            ],
            resources=["*"],
        ),
        iam.PolicyStatement(
            sid="SMStudioAppPermissionsTagOnCreate",
            actions=["sagemaker:AddTags"],
            resources=[arn("*", "*")],
            conditions={"Null": {"sagemaker:TaggingAction": "false"}},
        ),
        iam.PolicyStatement(
            sid="SMStudioRestrictSharedSpacesWithoutOwners",
            actions=spaces,
            resources=[domain_spaces],
            conditions={"Null": {"sagemaker:OwnerUserProfileArn": "true"}},
        ),
        iam.PolicyStatement(
            sid="SMStudioRestrictSpacesToOwnerUserProfile",
            actions=spaces,
            resources=[domain_spaces],
            conditions={
                "ArnLike": {"sagemaker:OwnerUserProfileArn": own_profile},
                "StringEquals": {"sagemaker:SpaceSharingType": ["Private", "Shared"]},
            },
        ),
        iam.PolicyStatement(
            sid="SMStudioRestrictCreatePrivateSpaceAppsToOwnerUserProfile",
            actions=apps,
            resources=[domain_apps],
            conditions={
                "ArnLike": {"sagemaker:OwnerUserProfileArn": own_profile},
                "StringEquals": {"sagemaker:SpaceSharingType": ["Private"]},
            },
        ),
    ]


def own_spaces_wildcards(scope: Construct) -> list[str]:
    """The wildcard resources of own_spaces_statements, as cdk-nag reports them (a policy variable as <name>)."""
    stack = cdk.Stack.of(scope)
    domain = DOMAIN_ID.replace("${", "<").replace("}", ">")
    return [
        stack.format_arn(service="sagemaker", resource=r, resource_name=n)
        for r, n in (("app", f"{domain}/*"), ("*", "*"), ("space", f"{domain}/*"))
    ]
