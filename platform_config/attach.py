"""`cluster.existing`: attach mode. The platform becomes the Studio front door of a HyperPod cluster it did not build
(the Studio + HyperPod article's starting point: "this post assumes that you have a SageMaker HyperPod cluster").
It builds only what the article adds: the Studio domain in the cluster's VPC, the JupyterLab and Code Editor
lifecycle configs, the Lustre security group on the domain and on the file system's interfaces, shared or per-user
partitions, user profiles with their POSIX identity, MLflow; on Slurm the login secret `make attach` fills from the
existing controller, on EKS the Studio roles' access entries. Never a cluster, VPC, subnet or file system.

Synth never calls AWS, so what it cannot read from the cluster is given here and under network.existing and
storage.lustre.existing; `make preflight` checks it against the account (cli/preflight.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from platform_config.fields import ClusterName, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

# A HyperPod cluster's ARN: arn:<partition>:sagemaker:<region>:<account>:cluster/<id> (DescribeCluster's ClusterArn;
# botocore's service model, ClusterArn pattern `arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}`).
CLUSTER_ARN = r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}"
ROLE_ARN = r"arn:aws[a-z\-]*:iam::[0-9]{12}:role/[a-zA-Z0-9+=,.@_/-]{1,512}"
EKS_CLUSTER_NAME = r"[0-9A-Za-z][A-Za-z0-9\-_]{0,99}"


class ExistingCluster(Strict):
    """A HyperPod cluster this platform did not build, and how to reach it."""

    name: ClusterName = Field(description="The HyperPod cluster's name (DescribeCluster's ClusterName).")
    arn: Annotated[
        str,
        pattern(CLUSTER_ARN, "a HyperPod cluster ARN, arn:aws:sagemaker:<region>:<account>:cluster/<12-character id>"),
    ] = Field(
        description="The cluster's ARN (DescribeCluster's ClusterArn): Studio's HyperPod pages may describe this "
        "cluster and no other."
    )
    controller_group: ClusterName | None = Field(
        None,
        description="Slurm only, required there: the instance group of the Slurm controller, which `make "
        "attach` reaches through Session Manager to read the Slurm client, slurm.conf and the auth "
        "material, and to create the Studio partitions on a file system without an S3 link.",
    )
    attach_role_arn: Annotated[str, pattern(ROLE_ARN, "an IAM role ARN, arn:aws:iam::<account>:role/<name>")] | None = (
        Field(
            None,
            description="Slurm only, required there: the IAM role that runs `make attach`, the only "
            "principal besides CloudFormation allowed to write the Slurm login secret and the "
            "client bundle (the role the controller's own scripts write them with in build "
            "mode).",
        )
    )
    eks_cluster_name: (
        Annotated[str, pattern(EKS_CLUSTER_NAME, "an EKS cluster name: 1-100 letters, digits, '-', '_'")] | None
    ) = Field(
        None,
        description="EKS only, required there: the EKS cluster the HyperPod cluster is orchestrated by "
        "(DescribeCluster's Orchestrator.Eks.ClusterArn ends in it). Studio's roles get access "
        "entries on it.",
    )
    partition_namespace: (
        Annotated[str, pattern(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a Kubernetes namespace name")] | None
    ) = Field(
        None,
        description="EKS only: the namespace where `make attach` runs the Kubernetes Job that creates the Studio "
        "partitions on a file system without an S3 link (with partition_claim).",
    )
    partition_claim: (
        Annotated[str, pattern(r"[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?", "a PersistentVolumeClaim name")] | None
    ) = Field(
        None,
        description="EKS only: the PersistentVolumeClaim in partition_namespace that mounts the file system's "
        "root (AWS's Studio + HyperPod EKS template's FSxClaimName).",
    )
    partition_image: (
        Annotated[
            str,
            pattern(
                r"[a-z0-9][a-z0-9./:_-]*@sha256:[0-9a-f]{64}",
                "a container image pinned by digest, <repository>@sha256:<64 hex>",
            ),
        ]
        | None
    ) = Field(
        None,
        description="EKS only, with partition_claim: the image of the partition Job (bash and coreutils; "
        "e.g. your ECR copy of an Ubuntu image), pinned by digest; the Job runs "
        "lifecycle/attach/make_partitions.sh in it as root.",
    )


def attached(cfg: PlatformConfig) -> bool:
    """Attach mode: Studio in front of a cluster this platform did not build."""
    return cfg.cluster.existing is not None


def attach_errors(cfg: PlatformConfig) -> list[str]:
    """What attach mode needs (the network and file system named, the orchestrator's keys) and what it cannot do:
    every feature that runs on nodes this platform builds or in stacks it no longer deploys."""
    existing = cfg.cluster.existing
    lustre = cfg.storage.lustre.existing
    if existing is None:
        if lustre is not None and lustre.data_bucket is None and cfg.studio.enabled:
            return [
                (
                    "storage.lustre.existing.data_bucket: not set on a platform that builds its own cluster; its Studio "
                    "partitions are made through the file system's S3 link. Without one, partitions are made by "
                    "`make attach`, in attach mode only (cluster.existing). Allowed: the bucket the file system's data "
                    "repository association links, or studio.enabled: false"
                )
            ]
        return []
    errors: list[str] = []
    add = errors.append
    if cfg.network.existing is None:
        add(
            "network.existing: not set with cluster.existing; name the existing cluster's VPC, its private subnets and "
            "its security group (attach mode creates no network)"
        )
    if cfg.storage.lustre.existing is None:
        add(
            "storage.lustre.existing: not set with cluster.existing; name the file system the cluster mounts (attach "
            "mode creates no file system)"
        )
    if not cfg.studio.enabled:
        add(
            "studio.enabled: false with cluster.existing; attach mode builds only Studio, so there would be nothing to "
            "deploy. Allowed: true"
        )
    _, _, _, region, account, _ = (existing.arn.split(":") + [""] * 6)[:6]
    if cfg.deployment.region and region != cfg.deployment.region:
        add(
            f"cluster.existing.arn: {existing.arn!r} is in region {region!r}, not deployment.region "
            f"{cfg.deployment.region!r}; Studio must be in the cluster's region"
        )
    if cfg.deployment.account and account != cfg.deployment.account:
        add(
            f"cluster.existing.arn: {existing.arn!r} is in account {account!r}, not deployment.account "
            f"{cfg.deployment.account!r}"
        )
    if cfg.orchestrator == "slurm":
        for key in ("controller_group", "attach_role_arn"):
            if getattr(existing, key) is None:
                add(
                    f"cluster.existing.{key}: not set with orchestrator: slurm; required to read the existing "
                    "controller's Slurm client and auth material (`make attach`)"
                )
        for key in ("eks_cluster_name", "partition_namespace", "partition_claim", "partition_image"):
            if getattr(existing, key) is not None:
                add(
                    f"cluster.existing.{key}: {getattr(existing, key)!r} with orchestrator: slurm; only an EKS "
                    "cluster uses it"
                )
    else:
        if existing.eks_cluster_name is None:
            add(
                "cluster.existing.eks_cluster_name: not set with orchestrator: eks; required for the Studio roles' "
                "access entries and their kube context"
            )
        for key in ("controller_group", "attach_role_arn"):
            if getattr(existing, key) is not None:
                add(
                    f"cluster.existing.{key}: {getattr(existing, key)!r} with orchestrator: eks; only a Slurm cluster "
                    "uses it"
                )
        if not (
            (existing.partition_namespace is None)
            == (existing.partition_claim is None)
            == (existing.partition_image is None)
        ):
            add(
                "cluster.existing.partition_namespace, partition_claim and partition_image: set all three or none (the "
                "Job that creates partitions runs the image with the claim mounted in the namespace)"
            )
    if (
        lustre is not None
        and lustre.data_bucket is None
        and cfg.orchestrator == "eks"
        and existing.partition_claim is None
    ):
        add(
            "cluster.existing.partition_claim: not set, and storage.lustre.existing has no data_bucket; without an S3 "
            "link `make attach` creates the Studio partitions with a Kubernetes Job that mounts this claim. Allowed: "
            "a claim (and partition_namespace), or the file system's data_bucket"
        )
    # Features that live on nodes this platform builds, or in the stacks attach mode does not deploy.
    on_nodes = (
        "they run on the nodes this platform's lifecycle scripts build, and the existing cluster's nodes ran none"
    )
    refused = {
        "cluster.accounting.enabled": (cfg.cluster.accounting.enabled, on_nodes),
        # On by default and unused in attach mode: refused only when the config turns them on itself.
        "cluster.login_access.load_balancer": (
            _turned_on(cfg.cluster.login_access, "load_balancer"),
            "its targets are the login group of the platform's own cluster stack",
        ),
        "cluster.login_access.run_as": (_turned_on(cfg.cluster.login_access, "run_as"), on_nodes),
        "cluster.directory.enabled": (cfg.cluster.directory.enabled, on_nodes),
        "cluster.pam_slurm_adopt": (cfg.cluster.pam_slurm_adopt, on_nodes),
        "cluster.budget": (
            cfg.cluster.budget is not None,
            "it counts what carries the platform's tag, which the existing cluster does not",
        ),
        "observability.node_metrics.enabled": (cfg.observability.node_metrics.enabled, on_nodes),
        "observability.grafana.enabled": (
            cfg.observability.grafana.enabled,
            "it lives in the observability stack, which attach mode does not deploy",
        ),
        "eks.task_governance.teams": (
            bool(cfg.eks.task_governance.teams) and cfg.orchestrator == "eks",
            ("team namespaces, quotas and role bindings are made by the platform's own cluster stack"),
        ),
    }
    for key, (on, why) in refused.items():
        if on:
            allowed = (
                "false or unset (unused in attach mode)"
                if key.startswith("cluster.login_access")
                else "off (its default)"
            )
            add(f"{key}: set with cluster.existing; attach mode cannot offer it: {why}. Allowed: {allowed}")
    return errors


def _turned_on(section, key: str) -> bool:
    return key in section.model_fields_set and bool(getattr(section, key))


# Rules about what the platform builds (instance groups, the EKS control plane, node features): attach mode builds
# none of it, so they do not apply; what it refuses outright is in attach_errors.
BUILD_ONLY_RULES = (
    "instance_group_errors",
    "slurm_node_role_errors",
    "eks_errors",
    "task_governance_errors",
    "slurm_config_strategy_errors",
    "container_runtime_errors",
    "login_access_errors",
    "accounting_errors",
    "budget_errors",
    "directory_errors",
    "pam_slurm_adopt_errors",
    "node_metrics_errors",
)
