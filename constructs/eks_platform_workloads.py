"""What the platform runs on an EKS-orchestrated HyperPod cluster beside the jobs, each with the pod role it needs and
that role's statements and cdk-nag acknowledgments: the FSx CSI controller's identity, the HyperPod training operator,
the HyperPod observability add-on. Created in `scope` (the cluster stack), through the control plane's helpers,
where they have always been: their logical ids are those of deployed stacks."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks_v2
from aws_cdk import aws_iam as iam
from constructs import Construct

from constructs.eks_control_plane import Addon, EksControlPlane
from constructs.metrics_workspace import MetricsWorkspace
from constructs.nag_acknowledgments import acknowledge

TRAINING_OPERATOR = ("aws-hyperpod", "hp-training-operator-controller-manager")  # namespace, service account
# The HyperPod observability add-on's collector (namespace, service account) and its configuration schema
# (ampWorkspace.prometheusEndpoint/arn) as AWS documents and its own Terraform module passes them:
# docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html and
# aws-samples/awsome-distributed-training@9a3f50891c5c4eac68cc865d986ec4bc0d9439a2
# 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/observability/main.tf.
HYPERPOD_OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"
HYPERPOD_OBSERVABILITY = ("hyperpod-observability", "hyperpod-observability-operator-otel-collector")
FSX_CSI_CONTROLLER = ("kube-system", "fsx-csi-controller-sa")


def observability_addon_values(workspace: MetricsWorkspace) -> dict:
    """The add-on's configurationValues: where to remote-write. No amgWorkspace: the platform provisions its own
    Grafana dashboards (observability/grafana/) in the observability stack, which deploys after this one."""
    return {"ampWorkspace": {"prometheusEndpoint": workspace.prometheus_endpoint, "arn": workspace.workspace_arn}}


def fsx_csi_identity(scope: Construct, plane: EksControlPlane) -> iam.Role:
    namespace, account = FSX_CSI_CONTROLLER
    role = plane.pod_role(
        scope,
        "FsxCsiRole",
        "FSx CSI controller: describe file systems, nothing else",
        namespace=namespace,
        service_account=account,
    )
    # DescribeFileSystems authorizes no resource type (Service Authorization Reference, config/facts/iam_actions.json):
    # a file-system ARN here would match nothing and the call would be denied. It only reads.
    role.add_to_policy(
        iam.PolicyStatement(sid="DescribeFileSystems", actions=["fsx:DescribeFileSystems"], resources=["*"])
    )
    acknowledge(
        role,
        "AwsSolutions-IAM5",
        "fsx:DescribeFileSystems authorizes no resource type, so it takes only '*'; the role may do nothing else",
        findings=["Resource::*"],
    )
    plane.pod_identity(
        "FsxCsiIdentity",
        namespace=namespace,
        service_account=account,
        role=role,
        after=plane.addons["aws-fsx-csi-driver"],
        scope=scope,
    )
    return role


def training_operator(
    scope: Construct, plane: EksControlPlane, *, version: str | None, cluster_arn: str, after: Sequence[Construct]
) -> None:
    """The HyperPod training operator, reading this cluster's nodes. It runs on HyperPod nodes (`after` one it can
    run on) and needs cert-manager's webhook certificates. `version`: pinned, or None for EKS's default."""
    namespace, account = TRAINING_OPERATOR
    role = plane.pod_role(
        scope,
        "TrainingOperatorRole",
        "HyperPod training operator: read this cluster's nodes",
        namespace=namespace,
        service_account=account,
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="DescribeClusterNodes",
            actions=["sagemaker:DescribeClusterNode", "sagemaker:ListClusterNodes"],
            resources=[cluster_arn],
        )
    )
    # Its pod identity is a standalone association, never the add-on's inline PodIdentityAssociations:
    # v1.2.1-eksbuild.1, EKS's default, rejects those ("Pod Identity feature is not supported for addon version";
    # awslabs/awsome-distributed-ai@95b939cd .../hyperpod-eks-tf/modules/hyperpod_training_operator/main.tf).
    plane.addon(
        Addon("amazon-sagemaker-hyperpod-training-operator", version),
        after=[*after, plane.addons["cert-manager"]],
        scope=scope,
    )
    plane.pod_identity(
        "TrainingOperatorIdentity",
        namespace=namespace,
        service_account=account,
        role=role,
        after=plane.addons["eks-pod-identity-agent"],
        scope=scope,
    )


def observability_addon(
    scope: Construct,
    plane: EksControlPlane,
    *,
    workspace: MetricsWorkspace,
    cluster_name: str,
    addon_version: str | None,
    after: Construct,
) -> eks_v2.Addon:
    """The HyperPod observability add-on (node, DCGM, EFA and kube-state exporters and an OpenTelemetry collector)
    remote-writing to the platform's Prometheus workspace. Its collector's service account and the rights it needs
    (aps:RemoteWrite on the workspace, CloudWatch Logs on the cluster's log groups) are the ones AWS documents in
    docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html; here the logs are
    narrowed from /aws/sagemaker/Clusters/* to this cluster's. Its collectors run on HyperPod nodes (`after` one)."""
    namespace, account = HYPERPOD_OBSERVABILITY
    role = plane.pod_role(
        scope,
        "ObservabilityCollectorRole",
        "HyperPod observability collector: remote-write to this platform's Prometheus workspace",
        namespace=namespace,
        service_account=account,
    )
    workspace.grant_remote_write(role)
    log_group = cdk.Stack.of(scope).format_arn(
        service="logs",
        resource="log-group",
        resource_name=f"/aws/sagemaker/Clusters/{cluster_name}/*",
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="ClusterLogs",
            resources=[log_group, f"{log_group}:log-stream:*"],
            actions=[
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:DescribeLogStreams",
                "logs:PutLogEvents",
                "logs:GetLogEvents",
                "logs:FilterLogEvents",
                "logs:StartQuery",
                "logs:StopQuery",
                "logs:GetQueryResults",
                "logs:GetLogRecord",
            ],
        )
    )
    # DescribeLogGroups authorizes only against '*' (service authorization reference, CloudWatch Logs).
    role.add_to_policy(
        iam.PolicyStatement(sid="FindClusterLogGroup", actions=["logs:DescribeLogGroups"], resources=["*"])
    )
    acknowledge(
        role,
        "AwsSolutions-IAM5",
        "the collector writes and queries the HyperPod cluster's log groups, named by HyperPod after the "
        "cluster ID it assigns (/aws/sagemaker/Clusters/<name>/<id>); logs:DescribeLogGroups has no "
        "resource-level permission",
        findings=["Resource::*", f"Resource::{log_group}", f"Resource::{log_group}:log-stream:*"],
    )
    association = plane.pod_identity(
        "ObservabilityCollectorIdentity",
        namespace=namespace,
        service_account=account,
        role=role,
        after=plane.addons["eks-pod-identity-agent"],
        scope=scope,
    )
    # Its collectors need the pod identity before they first write.
    addon = eks_v2.Addon(
        scope,
        f"Addon-{HYPERPOD_OBSERVABILITY_ADDON}",
        cluster=plane.icluster,
        addon_name=HYPERPOD_OBSERVABILITY_ADDON,
        addon_version=addon_version,
        configuration_values=observability_addon_values(workspace),
        preserve_on_delete=False,
    )
    addon.node.add_dependency(after, association, plane.addons["cert-manager"])
    plane.addons[HYPERPOD_OBSERVABILITY_ADDON] = addon
    return addon


def guard_default_namespace(
    scope: Construct, plane: EksControlPlane, *, pod_security_labels: dict[str, str], zero_accelerator_quota: dict
) -> None:
    """`default` exists before the stack, so it is patched (and restored on delete), not applied: Pod Security
    labels, and a quota of no accelerators, so nothing there takes GPUs outside the team queues."""
    eks_v2.KubernetesPatch(
        scope,
        "DefaultPodSecurity",
        cluster=plane.icluster,
        resource_name="namespace/default",
        apply_patch={"metadata": {"labels": pod_security_labels}},
        restore_patch={"metadata": {"labels": dict.fromkeys(pod_security_labels)}},
    )
    plane.manifest("DefaultNoAccelerators", zero_accelerator_quota, scope=scope)
