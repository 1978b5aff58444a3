"""EKS access entries for the Studio apps' roles. They need both the EKS cluster (EKS stack) and the roles (Studio
stack), and nothing waits for them: on their own, neither the control plane nor Studio waits for the other."""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct
from constructs.studio_access_entries import namespace_view_entry

from manifests import kubernetes_objects as k8s
from manifests import team_identities


class EksAccessStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        eks_cluster_name: str,
        studio_role: iam.IRole,
        member_roles: Mapping[str, tuple[str, iam.IRole]],
        **kwargs,
    ) -> None:
        """Nobody from Studio edits anything directly. Users outside a team read `default`; a team's members
        read their team's namespace and, through the team's Kubernetes group and the RoleBinding the cluster
        stack creates there, submit and delete jobs in it. No cluster-wide rights, no secrets.
        `member_roles`: user -> (their team, their own Studio role). Each member's access entry gives them their own
        Kubernetes username (team_identities.member_username), which the job policies match to their uid."""
        super().__init__(scope, id_, **kwargs)

        def entry(id_: str, role: iam.IRole, namespace: str, groups: list[str], username: str | None = None) -> None:
            namespace_view_entry(
                self,
                id_,
                cluster_name=eks_cluster_name,
                role=role,
                namespace=namespace,
                groups=groups,
                username=username,
            )

        entry("StudioAccessEntry", studio_role, "default", [])
        for user, (team, role) in member_roles.items():
            entry(
                f"MemberAccessEntry-{user}",
                role,
                k8s.team_namespace(team),
                [k8s.team_group(team)],
                username=team_identities.member_username(user),
            )
