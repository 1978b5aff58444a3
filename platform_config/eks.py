"""`eks:` HyperPod on an EKS control plane: Kubernetes version, endpoint, control-plane subnets, pinned add-ons and
where each pin's support comes from, the HyperPod dependency chart's components and autoscaling. Task governance
(priority classes, team quotas) is its own module, eks_governance. The rules: versions HyperPod and every add-on pin
support, a private endpoint unless allow-listed, control-plane subnets in two AZs, Neuron taints the chart's plugin
tolerates."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import Field, StrictBool

from platform_config.eks_tolerations import NEURON_PLUGIN_TOLERATIONS, blocking_taints, tolerates
from platform_config.eks_governance import TaskGovernance
from platform_config.facts import ACCELERATORS, NEURON
from platform_config.fields import LOG_RETENTION_DAYS, AddonVersion, AzId, Cidr, PinnedImage, Strict, pattern
from platform_config.network import region_prefix

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

KUBERNETES_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34")  # what HyperPod supports and a kubectl layer exists for
EKS_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
RoleArn = Annotated[str, pattern(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+", "an IAM role ARN")]


class ControlPlaneSubnet(Strict):
    """A small subnet for the EKS control plane's network interfaces."""

    az_id: AzId = Field(description="The subnet's AZ ID.")
    cidr: Cidr = Field(description="The subnet's CIDR: /28 or larger, inside network.vpc_cidr, not overlapping.")


class EksEndpoint(Strict):
    """The API server is reached privately from the VPC; a public endpoint needs an explicit allow-list."""

    public: StrictBool = Field(False, description="A public API endpoint besides the private one, which is always on.")
    public_access_cidrs: list[Cidr] = Field(
        [], description="Who may reach the public endpoint; required with public: true, never 0.0.0.0/0."
    )


# Kubernetes on EKS: "A minor version is under standard support in Amazon EKS for the first 14 months after it's
# released ... extended support for the next 12 months ... at an additional cost per cluster hour"
# (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html). The authoritative answer for an account
# is `aws eks describe-cluster-versions` (make preflight asks it); docs/eks.md shows this table.
EKS_CALENDAR = (
    "AWS's EKS release calendar, awsdocs/amazon-eks-user-guide@8596db85c9ea47d3c692d8c7c0498f616187d44d "
    "latest/ug/versioning/kubernetes-versions.adoc"
)


@dataclass(frozen=True)
class KubernetesSupport:
    end_of_standard: str  # UTC date; extended support (billed extra) starts that day
    end_of_extended: str
    source: str


KUBERNETES_SUPPORT = {
    "1.30": KubernetesSupport("2025-07-23", "2026-07-23", EKS_CALENDAR),
    "1.31": KubernetesSupport("2025-11-26", "2026-11-26", EKS_CALENDAR),
    "1.32": KubernetesSupport("2026-03-23", "2027-03-23", EKS_CALENDAR),
    "1.33": KubernetesSupport("2026-07-29", "2027-07-29", EKS_CALENDAR),
    "1.34": KubernetesSupport(
        "2026-12-02",
        "2027-12-02",
        "https://endoflife.date/amazon-eks (AWS's own row not seen: check with make preflight)",
    ),
}
DEFAULT_KUBERNETES = "1.34"  # the newest HyperPod documents, on standard support until its date above
# The day the table above was last checked. A version whose standard support had ended by then is refused unless
# eks.extended_support accepts the extra cost; make preflight compares every date with today's and asks EKS itself.
KUBERNETES_SUPPORT_CHECKED = "2026-11-25"


def standard_support_ended(minor: str, on: str = KUBERNETES_SUPPORT_CHECKED) -> bool:
    return KUBERNETES_SUPPORT[minor].end_of_standard <= on


# Where each pin and its supported Kubernetes versions come from. AWS publishes per-version tables for some
# add-ons only; the authoritative list for one region is `aws eks describe-addon-versions --addon-name <name>
# --kubernetes-version <v>` (it needs AWS credentials: make preflight checks it, nothing at synth calls it).
# Unpinned add-ons (the default) get the version EKS marks default for the cluster's Kubernetes version, as AWS's own
# HyperPod templates do (awslabs/awsome-distributed-ai@95b939cdc5b24ded03a70da21533964f9354b731
# 1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/eks-cluster-stack.yaml).
HYPERPOD_EKS_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html"
# "SageMaker HyperPod supports Kubernetes versions 1.28, 1.29, 1.30, 1.31, 1.32, 1.33 and 1.34": the newest copy of that
# page seen (https://docs.amazonaws.cn/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.md, 2026-11-25; older
# copies stop at 1.32 or 1.33).
HYPERPOD_KUBERNETES = frozenset({"1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34"})
HYPERPOD_CLI = "aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea"
MIGRATION_SCRIPT = (
    "the version AWS installs on HyperPod clusters (aws/sagemaker-hyperpod-cli@011ca927123e02b35a399935bbb3ab1905fe33c7 "
    "helm_chart/HyperPodHelmChart/charts/inference-operator/migration/helm_to_addon.sh)"
)


@dataclass(frozen=True)
class AddonSupport:
    kubernetes: frozenset[str]  # Kubernetes minor versions this add-on version is known to run on
    source: str


# (config key, add-on version) -> what is known about it. Only a version a source names can be pinned: add one here
# with its source. Where AWS publishes no per-version table, the add-on is bounded by HyperPod's own range, and the
# source says so.
ADDON_SUPPORT: dict[tuple[str, str], AddonSupport] = {
    ("coredns", "v1.13.2-eksbuild.7"): AddonSupport(
        frozenset({"1.34"}),
        "https://docs.amazonaws.cn/en_us/eks/latest/userguide/managing-coredns.md "
        "(latest version per Kubernetes version, copy of 2026)",
    ),
    ("coredns", "v1.12.4-eksbuild.1"): AddonSupport(
        frozenset({"1.33", "1.34"}),
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html (latest version per Kubernetes version)",
    ),
    ("coredns", "v1.11.4-eksbuild.24"): AddonSupport(
        frozenset({"1.29", "1.30", "1.31", "1.32"}),
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html (latest version per Kubernetes version)",
    ),
    ("training_operator", "v1.2.1-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES,
        "the default across Kubernetes 1.28-1.35 (awslabs/awsome-distributed-ai@95b939cdc5b24ded03a70da21533964f9354b731 "
        "1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/hyperpod_training_operator/"
        "main.tf); it rejects inline pod identity associations, which the platform does not use",
    ),
    ("training_operator", "v1.2.0-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES - {"1.34"},
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator.html (supported Kubernetes "
        "1.28-1.33); elastic training from v1.2: "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html",
    ),
    ("fsx_csi_driver", "v1.6.0-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES, f"{MIGRATION_SCRIPT}; bounded by {HYPERPOD_EKS_DOC}"
    ),
    ("cert_manager", "v1.18.2-eksbuild.2"): AddonSupport(
        HYPERPOD_KUBERNETES,
        f"{MIGRATION_SCRIPT}, cert-manager v1.18.2 as in the dependency chart's Chart.yaml; "
        f"bounded by {HYPERPOD_EKS_DOC}",
    ),
    ("task_governance", "v1.6.0-eksbuild.1"): AddonSupport(
        HYPERPOD_KUBERNETES,
        "https://docs.aws.amazon.com/sagemaker/latest/dg/"
        "sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade.html (Kueue v0.19.2); "
        f"bounded by {HYPERPOD_EKS_DOC}",
    ),
}
# kube-proxy's minor version is the cluster's own (checked in eks_errors), within HyperPod's range. No source names a
# vpc-cni or eks-pod-identity-agent build for these versions: leave them to EKS's default.
ELASTIC_TRAINING_OPERATOR = (1, 2)
# Config key under eks.addons -> the EKS add-on name.
ADDON_NAMES = {
    "vpc_cni": "vpc-cni",
    "kube_proxy": "kube-proxy",
    "coredns": "coredns",
    "pod_identity_agent": "eks-pod-identity-agent",
    "fsx_csi_driver": "aws-fsx-csi-driver",
    "cert_manager": "cert-manager",
    "training_operator": "amazon-sagemaker-hyperpod-training-operator",
    "task_governance": "amazon-sagemaker-hyperpod-taskgovernance",
}
OptionalAddonVersion = Optional[AddonVersion]  # noqa: UP045 - an Annotated alias: `| None` cannot follow it
_UNPINNED = " Unset: EKS's default version for eks.kubernetes_version (make preflight shows which)."


class EksAddons(Strict):
    """EKS add-on versions (vX.Y.Z-eksbuild.N). Unset (the default), each add-on gets the version EKS marks default
    for the cluster's Kubernetes version; a pin must be listed in ADDON_SUPPORT (platform_config/eks.py) with the
    Kubernetes versions it supports and where that comes from. make preflight checks either against
    describe-addon-versions in your region."""

    vpc_cni: OptionalAddonVersion = Field(None, description="The vpc-cni add-on." + _UNPINNED)
    kube_proxy: OptionalAddonVersion = Field(
        None, description="The kube-proxy add-on; pinned, its minor version must be eks.kubernetes_version." + _UNPINNED
    )
    coredns: OptionalAddonVersion = Field(None, description="The coredns add-on." + _UNPINNED)
    pod_identity_agent: OptionalAddonVersion = Field(None, description="The eks-pod-identity-agent add-on." + _UNPINNED)
    fsx_csi_driver: OptionalAddonVersion = Field(None, description="The aws-fsx-csi-driver add-on." + _UNPINNED)
    cert_manager: OptionalAddonVersion = Field(None, description="The cert-manager add-on." + _UNPINNED)
    training_operator: OptionalAddonVersion = Field(
        None,
        description="The HyperPod training operator add-on; v1.2 or later, which elastic training "
        "(elasticPolicy) needs." + _UNPINNED,
    )
    task_governance: OptionalAddonVersion = Field(None, description="The HyperPod task governance add-on." + _UNPINNED)


class HyperPodDependencies(Strict):
    """The HyperPod dependency Helm chart, fetched at build time by `make hyperpod-chart` (not committed)."""

    chart_dir: str = Field(
        "build/hyperpod-helm-chart",
        description="Where make hyperpod-chart puts the chart; synth stops with a clear "
        "message if it holds no Chart.yaml or is not the pinned revision.",
    )
    health_monitoring_agent: StrictBool = Field(True, description="The chart's health monitoring agent.")
    deep_health_check: StrictBool = Field(True, description="The chart's deep health checks.")
    job_auto_restart: StrictBool = Field(True, description="The chart's job auto-restart.")
    nvidia_device_plugin: StrictBool = Field(True, description="The NVIDIA device plugin.")
    neuron_device_plugin: StrictBool = Field(False, description="The Neuron device plugin (Trainium).")
    efa_device_plugin: StrictBool = Field(True, description="The EFA device plugin.")
    training_operators: StrictBool = Field(True, description="The chart's Kubeflow training operators.")
    mpi_operator: StrictBool = Field(True, description="The MPI operator.")
    hyperpod_patching: StrictBool = Field(True, description="The chart's HyperPod patching RBAC.")


class Autoscaling(Strict):
    """HyperPod-managed Karpenter: instance groups scale with pending pods."""

    enabled: StrictBool = Field(
        False,
        description="HyperPod-managed Karpenter (AutoScaling, and a cluster role trusted by "
        "hyperpod.sagemaker.amazonaws.com for this account's clusters only).",
    )


class Eks(Strict):
    """HyperPod on an EKS control plane (orchestrator: eks)."""

    kubernetes_version: Literal[KUBERNETES_VERSIONS] = Field(  # type: ignore[valid-type]
        DEFAULT_KUBERNETES,
        description="What HyperPod on EKS supports (1.28-1.34: docs.aws.amazon.com/sagemaker/latest/"
        "dg/sagemaker-hyperpod-eks-prerequisites.html) and a kubectl layer exists for; "
        "refused where an add-on pin does not support it, or where its EKS "
        "standard support has ended (unless eks.extended_support). Each version's "
        "end of standard support is in docs/eks.md.",
    )
    extended_support: StrictBool = Field(
        False,
        description="Accept a Kubernetes version past the end of EKS standard support (1.30-1.33 on "
        "2026-11-25): EKS bills extended support per cluster hour on top of standard.",
    )
    authentication_mode: Literal["API", "API_AND_CONFIG_MAP"] = Field(
        "API", description="The cluster's authentication mode (HyperPod supports both)."
    )
    endpoint: EksEndpoint = Field(EksEndpoint(), description="The API server's endpoints.")
    control_plane_subnets: list[ControlPlaneSubnet] = Field(
        default_factory=lambda: [
            ControlPlaneSubnet(az_id="usw2-az1", cidr="10.0.1.0/28"),
            ControlPlaneSubnet(az_id="usw2-az2", cidr="10.0.1.16/28"),
        ],
        max_length=6,
        description="Small dedicated subnets for the control plane's network interfaces, in at least two AZs; with "
        "network.existing, give network.existing.control_plane_subnets instead.",
    )
    log_types: list[Literal[EKS_LOG_TYPES]] = Field(  # type: ignore[valid-type]
        list(EKS_LOG_TYPES), description="Control-plane log types sent to /aws/eks/<name>/cluster."
    )
    log_retention_days: Literal[LOG_RETENTION_DAYS] = Field(  # type: ignore[valid-type]
        90, description="Retention of /aws/eks/<name>/cluster."
    )
    admin_role_arns: list[RoleArn] = Field(
        [], description="Roles given AmazonEKSClusterAdminPolicy through access entries (deployers, administrators)."
    )
    addons: EksAddons = Field(EksAddons(), description="Add-on versions: EKS's defaults unless pinned.")
    hyperpod_dependencies: HyperPodDependencies = Field(
        HyperPodDependencies(), description="The HyperPod dependency chart and its components."
    )
    node_provisioning_mode: Literal["Continuous"] = Field(
        "Continuous", description="HyperPod's node provisioning mode."
    )
    autoscaling: Autoscaling = Field(Autoscaling(), description="HyperPod-managed Karpenter.")
    training_operator: StrictBool = Field(
        True,
        description="The HyperPod training operator add-on (runs HyperPodPyTorchJobs, elastic scaling) with its "
        "pod identity.",
    )
    task_governance: TaskGovernance = Field(TaskGovernance(), description="Task governance.")
    training_image: PinnedImage | None = Field(
        None,
        description="The training image of the example jobs: examples/finetune/Dockerfile built and pushed to "
        "your registry (it holds hyperpod-elastic-agent, train_elastic.py and the fine-tuning "
        "workflow). tools/render_examples.py writes it into every job of examples/elastic-jobs.yaml "
        "that names no image of its own; pinned by a tag other than latest, or a digest.",
    )


def eks_errors(cfg: PlatformConfig) -> list[str]:
    """Rules that apply when `orchestrator: eks`; Slurm-only keys (controller/login groups, partitions) are unused."""
    if cfg.orchestrator != "eks":
        return []
    eks = cfg.eks
    errors: list[str] = []
    add = errors.append
    compute = [g for g in cfg.cluster.instance_groups if g.role == "compute"]
    if not compute:
        add("cluster.instance_groups: no group with role 'compute'; an EKS cluster needs at least one")

    minor = eks.kubernetes_version
    if minor not in HYPERPOD_KUBERNETES:
        add(
            f"eks.kubernetes_version: {minor!r} is not supported by SageMaker HyperPod on EKS; allowed: "
            f"{', '.join(sorted(HYPERPOD_KUBERNETES, key=lambda v: tuple(map(int, v.split('.')))))} "
            f"({HYPERPOD_EKS_DOC})"
        )
    if standard_support_ended(minor) and not eks.extended_support:
        support = KUBERNETES_SUPPORT[minor]
        add(
            f"eks.kubernetes_version: {minor!r} left EKS standard support on {support.end_of_standard} (extended "
            f"support, billed per cluster hour, ends {support.end_of_extended}); use "
            f"{', '.join(v for v in KUBERNETES_VERSIONS if not standard_support_ended(v))}, or set "
            "eks.extended_support: true to accept the cost"
        )
    if eks.addons.kube_proxy is not None and not eks.addons.kube_proxy.startswith(f"v{minor}."):
        add(
            f"eks.addons.kube_proxy: {eks.addons.kube_proxy!r} does not match eks.kubernetes_version {minor!r}; "
            f"use a v{minor}.x-eksbuild.N version"
        )
    errors.extend(_addon_errors(eks))

    endpoint = eks.endpoint
    if endpoint.public and not endpoint.public_access_cidrs:
        add(
            "eks.endpoint.public_access_cidrs: [] with eks.endpoint.public: true; list the CIDR blocks allowed to "
            "reach the public endpoint"
        )
    if not endpoint.public and endpoint.public_access_cidrs:
        add(
            f"eks.endpoint.public_access_cidrs: {endpoint.public_access_cidrs} with eks.endpoint.public: false; "
            "remove them or set public: true"
        )
    for i, cidr in enumerate(endpoint.public_access_cidrs):
        if ipaddress.ip_network(cidr).prefixlen == 0:
            add(
                f"eks.endpoint.public_access_cidrs[{i}]: {cidr!r} opens the API server to the internet; allowed: "
                "specific CIDR blocks"
            )

    existing = cfg.network.existing
    if existing:
        path, azs = "network.existing.control_plane_subnets", [s.az_id for s in existing.control_plane_subnets]
    else:
        path, azs = "eks.control_plane_subnets", [s.az_id for s in eks.control_plane_subnets]
    if len(set(azs)) < 2:
        add(
            f"{path}: {len(set(azs))} distinct AZ ID(s) {sorted(set(azs))}; the EKS control plane needs subnets in "
            "at least two AZs"
        )
    region = cfg.deployment.region
    for i, az in enumerate(azs):
        if region and not az.startswith(region_prefix(region) + "-"):
            add(
                f"{path}[{i}].az_id: {az!r} is not in region {region}; AZ IDs there start with "
                f"'{region_prefix(region)}-'"
            )
    if not existing:
        for i, subnet in enumerate(eks.control_plane_subnets):
            if ipaddress.ip_network(subnet.cidr).prefixlen > 28:
                add(f"eks.control_plane_subnets[{i}].cidr: {subnet.cidr!r}; EKS needs at least a /28 per subnet")

    if compute and all(blocking_taints(g) for g in compute):
        add(
            "cluster.instance_groups: every compute group carries a NoSchedule or NoExecute taint; the FSx CSI "
            "controller, the training operator and task governance (Kueue) tolerate none, so they could never run; "
            "leave at least one compute group untainted (or use effect PreferNoSchedule)"
        )

    if eks.hyperpod_dependencies.neuron_device_plugin:
        for i, g in enumerate(cfg.cluster.instance_groups):
            if g.role != "compute" or ACCELERATORS.get(g.instance_type, ("",))[0] != NEURON:
                continue
            for j, taint in enumerate(g.kubernetes_taints):
                if taint.effect != "PreferNoSchedule" and not any(
                    tolerates(t, taint) for t in NEURON_PLUGIN_TOLERATIONS
                ):
                    add(
                        f"cluster.instance_groups[{i}].kubernetes_taints[{j}]: {taint.key}={taint.value}:"
                        f"{taint.effect} on a Neuron group; the chart's Neuron device plugin does not tolerate it "
                        "(its tolerations are fixed in its template), so the group would advertise no Neuron "
                        "devices; allowed: taints with key aws.amazon.com/neuron, or effect PreferNoSchedule"
                    )

    return errors


def enabled_addons(eks: Eks) -> list[str]:
    """Config keys of the add-ons this configuration installs (kube-proxy is checked on its own)."""
    keys = ["vpc_cni", "coredns", "pod_identity_agent", "fsx_csi_driver", "cert_manager"]
    keys += ["training_operator"] if eks.training_operator else []
    keys += ["task_governance"] if eks.task_governance.enabled else []
    return keys


def _addon_errors(eks: Eks) -> list[str]:
    errors: list[str] = []
    minor = eks.kubernetes_version
    for key in enabled_addons(eks):
        version = getattr(eks.addons, key)
        if version is None:
            continue
        fact = ADDON_SUPPORT.get((key, version))
        if fact is None:
            known = sorted(v for k, v in ADDON_SUPPORT if k == key)
            errors.append(
                f"eks.addons.{key}: {version!r} has no recorded source; known: "
                f"{', '.join(known) or 'none'} (leave it unset for EKS's default, or add the version to "
                "ADDON_SUPPORT in platform_config/eks.py with its source)"
            )
        elif minor not in fact.kubernetes:
            fits = sorted(v for (k, v), f in ADDON_SUPPORT.items() if k == key and minor in f.kubernetes)
            errors.append(
                f"eks.addons.{key}: {version!r} does not support eks.kubernetes_version {minor!r} (it "
                f"supports {', '.join(sorted(fact.kubernetes))}; {fact.source}); "
                + (f"for {minor} use {', '.join(fits)}" if fits else f"no recorded version supports {minor}")
            )
    operator = re.fullmatch(r"v(\d+)\.(\d+)\..*", eks.addons.training_operator or "")
    if eks.training_operator and operator and tuple(map(int, operator.groups())) < ELASTIC_TRAINING_OPERATOR:
        errors.append(
            f"eks.addons.training_operator: {eks.addons.training_operator!r}; elastic training "
            "(elasticPolicy) needs v1.2 or later "
            "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-elastic-training.html)"
        )
    return errors
