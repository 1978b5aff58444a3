"""`cluster:` the HyperPod instance groups (controller, login, compute) and the cluster-wide settings of Slurm:
provisioning, configuration strategy, container runtime, pam_slurm_adopt. The Slurm features for departments have
sections of their own (accounting, login_access, budgets, directory), which `Cluster` holds; their rules live beside
them. This section's rules across keys (unique group names, partitions, controller and login counts, multi-head
controllers, the strategy on continuous clusters, the pinned Docker build) are in platform_config/cluster_rules.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictBool

from platform_config.accounting import Accounting
from platform_config.attach import ExistingCluster
from platform_config.budgets import ClusterBudget
from platform_config.directory import Directory
from platform_config.fields import (
    Artifact,
    AzId,
    GroupName,
    InstanceType,
    PartitionName,
    Strict,
    TrainingPlanArn,
    pattern,
)
from platform_config.login_access import LoginAccess

if TYPE_CHECKING:
    pass

# The two types AWS documents for Slurm clusters (sagemaker-hyperpod-resiliency-slurm-deep-health-checks); the API
# enum also has MultiNodeTrainingValidation (tests/test_api_constraints.py keeps this in step with botocore).
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
# AWS's deep health check pages, by orchestrator. InstanceConnectivity is the cluster-level check (NCCL tests across
# the group's instances, EFA between them): it needs at least 2 instances in the group.
DEEP_HEALTH_CHECK_PAGES = {
    "slurm": "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-deep-health-checks.html",
    "eks": "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-deep-health-checks.html",
}
CONNECTIVITY_CHECK_MIN_INSTANCES = 2
# HyperPod developer guide pages the Slurm rules below rest on.
SLURM_MIGRATION_PAGE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-slurm-api-config-migration.html"
)
EXTERNAL_ACCOUNTING_PAGE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html"
)
MULTIHEAD_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-multihead.html"
CLUSTER_EVENTS_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-events-reference.html"
LabelKey = Annotated[
    str,
    pattern(
        r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?",
        "a Kubernetes label key such as team or example.com/pool",
    ),
]
LabelValue = Annotated[
    str,
    pattern(
        r"([a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?)?",
        "a Kubernetes label value: at most 63 letters, digits, '-', '_', '.'",
    ),
]


class Taint(Strict):
    """A Kubernetes taint on an instance group's nodes (KubernetesConfig.Taints)."""

    key: LabelKey = Field(description="The taint's key.")
    value: LabelValue = Field("", description="The taint's value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field("NoSchedule", description="The effect.")


class InstanceGroup(Strict):
    """A HyperPod instance group. Slurm: exactly one controller group (1 instance, or 2 or more for HyperPod
    multi-head controllers, which needs cluster.accounting.database: managed), at most one login group, any number of
    compute groups; names unique (case-insensitive)."""

    name: GroupName = Field(description="The group's name.")
    role: Literal["controller", "login", "compute"] = Field(
        description="controller and login are Slurm's head nodes (unused on EKS); compute runs jobs."
    )
    instance_type: InstanceType = Field(description="The instance type, ml.<family>.<size>.")
    instance_count: int = Field(ge=0, le=6758, description="Instances in the group (CreateCluster's limit: 6758).")
    threads_per_core: Literal[1, 2] = Field(1, description="Threads per core: 1 (hyperthreading off) or 2.")
    ebs_volume_gib: int = Field(default=500, ge=1, le=16384, description="The extra EBS volume per node, GiB.")
    deep_health_checks: list[Literal[DEEP_HEALTH_CHECKS]] = Field(  # type: ignore[valid-type]
        default=[],
        max_length=3,
        description="Deep health checks HyperPod runs before a node joins, each at most once; only on instance types "
        "with NVIDIA GPUs or Trainium devices (config/facts/accelerators.json). InstanceConnectivity tests "
        "the network between the group's instances and needs instance_count of at least 2 (AWS's deep "
        "health check pages).",
    )
    training_plan_arn: TrainingPlanArn | None = Field(
        None, description="A SageMaker training plan (reserved capacity) the group runs on."
    )
    az_id: AzId | None = Field(
        None, description="Place this group in another configured AZ (OverrideVpcConfig); default: the first."
    )
    partitions: list[PartitionName] = Field(
        default=[],
        max_length=1,
        description="Slurm compute groups: exactly one partition name (HyperPod's SlurmConfig.PartitionNames: letters, "
        "digits and inner hyphens, no '_'); none on controller and login groups.",
    )
    kubernetes_labels: dict[LabelKey, LabelValue] = Field(
        {}, description="EKS only: labels on the group's nodes (KubernetesConfig.Labels)."
    )
    kubernetes_taints: list[Taint] = Field(
        [], description="EKS only: taints on the group's nodes, one per key and effect."
    )


class ContainerRuntime(Strict):
    """Docker, enroot and pyxis for Slurm jobs. HyperPod sets them up in OnInitComplete mode and the platform keeps
    them; docker.io at docker_apt_version and the artifacts are installed only on a node that lacks them."""

    enabled: StrictBool = Field(
        False,
        description="Docker, enroot and pyxis for Slurm jobs: what HyperPod set up on the node is kept (never "
        "reinstalled or replaced), what a node lacks is installed, and every user gets enroot "
        "directories of their own (lifecycle/CONTRACT.md).",
    )
    ubuntu_release: Literal["22.04", "24.04"] = Field(
        "22.04",
        description="The Ubuntu release the pinned packages were built for; a node on another release "
        "installs none of them (a contract warning).",
    )
    # Debian version syntax ([epoch:]upstream[-revision]: letters, digits and . + ~ -; Debian Policy 5.6.12): nodes
    # run `apt-get install docker.io=<this>`.
    docker_apt_version: Annotated[
        str,
        pattern(
            r"(([0-9]+:)?[0-9][A-Za-z0-9.+~-]*)?", "empty or a Debian package version such as 24.0.7-0ubuntu2~22.04.1"
        ),
    ] = Field(
        "",
        description="Required when enabled: the exact docker.io package version (Debian version syntax "
        "only), installed only on a node without Docker; it must be a build for ubuntu_release.",
    )
    artifacts: list[Artifact] = Field(
        [],
        description=".deb packages (package_version_arch.deb) mirrored to your S3, installed only on a node that "
        "lacks the package (HyperPod's own enroot and pyxis are kept at their version); the digest is "
        "checked before install. A pyxis package must be built against the Slurm in /opt/slurm. "
        "Nothing is fetched from GitHub at deploy time.",
    )


class Cluster(Strict):
    """The HyperPod cluster: its instance groups and, on Slurm, the features for departments; or, with `existing`,
    a cluster this platform did not build (attach mode: only Studio is built, docs/attach.md)."""

    existing: ExistingCluster | None = Field(
        None,
        description="Attach mode: the HyperPod cluster to put Studio in front of. The platform then builds no "
        "cluster, network or file system (network.existing and storage.lustre.existing name "
        "them), ignores instance_groups, and deploy, update and `make destroy` never touch the "
        "cluster, its network or its storage. Switching a deployed platform between attach and "
        "build is refused (create-only).",
    )
    node_recovery: Literal["Automatic", "None"] = Field(
        "Automatic", description="Automatic: HyperPod replaces a node that fails its health checks."
    )
    # Continuous clusters "support only the Merge behavior and reject requests that set SlurmConfigStrategy"
    # (SLURM_MIGRATION_PAGE), so setting it there is refused.
    slurm_config_strategy: Literal["Managed", "Overwrite", "Merge"] | None = Field(
        None,
        description="Slurm only: Orchestrator.Slurm.SlurmConfigStrategy, HyperPod's native Slurm configuration. "
        "Unset sends Managed, except with node_provisioning_mode: Continuous, whose clusters "
        '"support only the Merge behavior and reject requests that set SlurmConfigStrategy" '
        "(HyperPod's API-driven Slurm configuration page): there it is refused, and the template "
        "carries no strategy.",
    )
    slurm_auto_resume: StrictBool = Field(
        True,
        description="on_init_complete.sh checks that srun --auto-resume is available (lifecycle/hyperpod/README.md).",
    )
    container_runtime: ContainerRuntime = Field(ContainerRuntime(), description="Docker, enroot and pyxis.")
    accounting: Accounting = Field(Accounting(), description="Slurm accounting for departments (Slurm only).")
    login_access: LoginAccess = Field(LoginAccess(), description="How people reach the login group (Slurm only).")
    budget: ClusterBudget | None = Field(
        None,
        description="An AWS Budgets monthly cost budget over everything tagged hyperpod-platform=<name>, and per "
        "department with departments' monthly_budget_usd; alerts on actual spend.",
    )
    pam_slurm_adopt: StrictBool = Field(
        False,
        description="Slurm only. Compute nodes admit SSH only from a user with a job on that node (the session "
        "joins the job and ends with it where slurm.conf has ProctrackType=proctrack/cgroup), from "
        "users with sudo: true and members of cluster.directory.admin_groups (names without spaces, "
        "which pam_access cannot list); root always. HyperPod's AMI has no pam_slurm_adopt.so, so "
        "it needs pam_slurm_adopt_artifacts; the controller adds PrologFlags=Contain "
        '(lifecycle/hyperpod/README.md, "GPUs and SSH on compute nodes").',
    )
    pam_slurm_adopt_artifacts: list[Artifact] = Field(
        [],
        description="With pam_slurm_adopt: true, required: the .deb package(s) that put pam_slurm_adopt.so, built "
        "from the source of the Slurm release HyperPod runs (contribs/pam_slurm_adopt, as AWS's "
        "reference pam_adopt_cgroup_wheel.sh builds it), mirrored to your S3 with their SHA-256. A "
        "compute node without the module downloads, verifies and installs them; nothing is fetched "
        "from GitHub at deploy time.",
    )
    directory: Directory = Field(Directory(), description="Slurm only: directory users and groups through SSSD.")
    controller_ssh: Literal["admins", "all"] = Field(
        "admins",
        description="Slurm only. Who may SSH to the controller, which holds the JWT signing key, the "
        "controller role and the accounting database secret: admins (root, ubuntu, users with "
        "sudo: true and members of cluster.directory.admin_groups, through pam_access; Session "
        "Manager shells are not affected) or all (every user, as before).",
    )
    # Continuous is what HyperPod's cluster events (CLUSTER_EVENTS_PAGE: "SageMaker HyperPod Cluster Event" is emitted
    # in Continuous mode only), the external accounting database (EXTERNAL_ACCOUNTING_PAGE) and the multi-head
    # controllers that need it rest on. The platform's alarm topic and the login load balancer subscribe to those
    # events, so a new cluster is Continuous unless asked otherwise.
    node_provisioning_mode: Literal["Continuous", "Standard"] = Field(
        "Continuous",
        description="Slurm only (EKS has eks.node_provisioning_mode). Continuous: HyperPod's continuous "
        "provisioning, which sends cluster, instance-group and instance events (the alarm "
        "topic's error events, the login load balancer's login-group events) and which an "
        "external accounting database (accounting.database: managed, and with it multi-head "
        "controllers) needs; it takes no slurm_config_strategy. Standard: no "
        "NodeProvisioningMode in the template (CloudFormation's \"standard scaling "
        'approach"), for a cluster created that way: AWS documents no switch of an existing '
        "cluster, so keep the mode a cluster was created with.",
    )
    instance_groups: list[InstanceGroup] = Field(
        default_factory=lambda: [
            InstanceGroup(name="controller-machine", role="controller", instance_type="ml.m5.xlarge", instance_count=1),
            InstanceGroup(name="login-group", role="login", instance_type="ml.m5.xlarge", instance_count=1),
            InstanceGroup(
                name="worker-group-1",
                role="compute",
                instance_type="ml.g5.8xlarge",
                instance_count=1,
                deep_health_checks=["InstanceStress"],
                partitions=["gpu"],
            ),
        ],
        min_length=1,
        description="The cluster's instance groups.",
    )

    def node_provisioning_mode_sent(self) -> str | None:
        """What NodeProvisioningMode carries: Continuous, or nothing for Standard (the API's only value is Continuous)."""
        return self.node_provisioning_mode if self.node_provisioning_mode == "Continuous" else None

    def slurm_config_strategy_sent(self) -> str | None:
        """What Orchestrator.Slurm.SlurmConfigStrategy carries: nothing on a continuous cluster, else the setting
        (Managed when unset)."""
        if self.node_provisioning_mode == "Continuous":
            return None
        return self.slurm_config_strategy or "Managed"
