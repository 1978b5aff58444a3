"""EKS access entries for Studio apps' roles: read-only (AmazonEKSViewPolicy) in one namespace, with the Kubernetes
groups and username the cluster's RBAC and admission policies match."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct
from constructs.pseudo_parameters import PARTITION


def namespace_view_entry(
    scope: Construct,
    id_: str,
    *,
    cluster_name: str,
    role: iam.IRole,
    namespace: str,
    groups: Sequence[str],
    username: str | None = None,
) -> eks.CfnAccessEntry:
    view = f"arn:{PARTITION}:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
    return eks.CfnAccessEntry(
        scope,
        id_,
        cluster_name=cluster_name,
        principal_arn=role.role_arn,
        type="STANDARD",
        kubernetes_groups=list(groups) or None,
        username=username,
        access_policies=[
            eks.CfnAccessEntry.AccessPolicyProperty(
                policy_arn=view,
                access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="namespace", namespaces=[namespace]),
            )
        ],
    )
