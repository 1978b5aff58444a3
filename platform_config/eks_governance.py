"""`eks.task_governance:` SageMaker HyperPod task governance on EKS: priority classes and one compute quota per team
(what it is guaranteed, lends and borrows), each team's namespace, FSx directory and Studio members. The rules:
unique names, quotas that fit the compute groups, gids of their own, caps with autoscaling, one team per member."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, StrictBool

from platform_config.cluster import InstanceGroup
from platform_config.facts import ACCELERATORS
from platform_config.fields import InstanceType, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

# The EKS stack's team directories live under this directory of the data repository (stacks/eks_cluster_stack.py);
# Studio's partition root must differ: the data bucket closes Studio's prefix to everyone but its own handlers.
EKS_TEAM_DIRECTORY_ROOT = "eks"
# Team and priority-class names become Kubernetes names (hyperpod-ns-<team>, <class>-priority).
GovernanceName = Annotated[
    str,
    pattern(
        r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?",
        "1-40 lowercase letters, digits and '-', starting and ending alphanumeric",
    ),
]


class PriorityClass(Strict):
    """A priority class of the cluster's scheduler policy (Kubernetes: <name>-priority)."""

    name: GovernanceName = Field(description="The class's name, unique.")
    weight: int = Field(ge=0, le=100, description="Its weight in the scheduler policy: higher runs first.")


class TeamQuota(Strict):
    """A team's guaranteed compute, what it lends and borrows, and whether it preempts lower-priority work."""

    name: GovernanceName = Field(description="The team's name, unique; its namespace is hyperpod-ns-<name>.")
    instance_type: InstanceType = Field(description="The instance type of the quota: one of the compute groups'.")
    instance_count: int | None = Field(
        default=None,
        ge=0,
        description="Guaranteed instances; give this or accelerators. The guaranteed counts of all "
        "teams must fit in the compute groups.",
    )
    accelerators: int | None = Field(
        default=None, ge=0, description="Guaranteed accelerators, instead of instance_count."
    )
    sharing: Literal["LendAndBorrow", "Lend", "DontLend"] = Field(
        "LendAndBorrow",
        description="Whether idle guaranteed compute is lent to other teams and whether the team borrows.",
    )
    borrow_limit_percent: int = Field(
        default=50,
        ge=0,
        le=10000,
        description="How much the team may borrow on top, percent of its guarantee (LendAndBorrow only).",
    )
    preempt_team_tasks: Literal["LowerPriority", "Never"] = Field(
        "LowerPriority", description="Whether the team's work preempts its lower-priority tasks."
    )
    fair_share_weight: int = Field(default=0, ge=0, le=100, description="The team's fair-share weight.")
    resource_quota: StrictBool = Field(
        True,
        description="A ResourceQuota on the namespace's accelerator requests sized to what its quota could ever "
        "be admitted for (guarantee plus borrow limit), with max_vcpu and max_memory_gib caps.",
    )
    members: list[str] = Field(
        [],
        description="Studio users (names from users) whose profiles run as this team's role: they may submit jobs "
        "in the team's namespace only. A user is a member of one team at most.",
    )
    gid: int | None = Field(
        default=None,
        ge=1001,
        le=4000000,
        description="The POSIX group owning the team's FSx directory; its pods run with it as fsGroup. Unset: derived "
        "from the name (stable when teams are reordered). Not a user's gid or studio.shared_gid.",
    )
    max_vcpu: int | None = Field(
        default=None,
        ge=1,
        description="CPUs the team's namespace may request in total. Required with "
        "eks.autoscaling: Karpenter adds nodes for pending pods, so without a cap a "
        "runaway job provisions instances.",
    )
    max_memory_gib: int | None = Field(
        default=None,
        ge=1,
        description="Memory the team's namespace may request in total, GiB; required with eks.autoscaling.",
    )


def team_gid(team: TeamQuota) -> int:
    return team.gid if team.gid is not None else 1_000_000 + zlib.crc32(team.name.encode()) % 1_000_000


def guaranteed_accelerators(team: TeamQuota) -> int | None:
    """The accelerators a team's quota guarantees; None on an instance type without known accelerators."""
    per_instance = ACCELERATORS.get(team.instance_type)
    if per_instance is None:
        return None
    return team.accelerators if team.accelerators is not None else (team.instance_count or 0) * per_instance[1]


def reachable_accelerators(gov: TaskGovernance, compute: list[InstanceGroup], team: TeamQuota) -> int | None:
    """The most accelerators of the team's instance type that Kueue can ever admit for it at once: its guarantee,
    plus what it may borrow (LendAndBorrow only: borrow_limit_percent of the guarantee) bounded by what the other
    teams lend on that type (their guarantees, unless DontLend), all bounded by the cluster's instances of that type.
    A workload asking for more is never admitted. None on an instance type without known accelerators."""
    own = guaranteed_accelerators(team)
    if own is None:
        return None
    borrow = own * team.borrow_limit_percent // 100 if team.sharing == "LendAndBorrow" else 0
    lent = sum(
        guaranteed_accelerators(t) or 0
        for t in gov.teams
        if t is not team and t.instance_type == team.instance_type and t.sharing != "DontLend"
    )
    capacity = (
        sum(g.instance_count for g in compute if g.instance_type == team.instance_type)
        * ACCELERATORS[team.instance_type][1]
    )
    return min(own + min(borrow, lent), capacity)


def _default_priority_classes() -> list[PriorityClass]:
    return [
        PriorityClass(name="inference", weight=90),
        PriorityClass(name="training", weight=70),
        PriorityClass(name="experimentation", weight=30),
    ]


class TaskGovernance(Strict):
    """SageMaker HyperPod task governance: the cluster's scheduler policy and one compute quota per team."""

    enabled: StrictBool = Field(True, description="The task governance add-on (Kueue) and the scheduler policy.")
    fair_share: Literal["Enabled", "Disabled"] = Field("Enabled", description="Fair share in the scheduler policy.")
    priority_classes: list[PriorityClass] = Field(
        default_factory=_default_priority_classes,
        max_length=10,
        description="Priority classes with weights, at most 10, unique.",
    )
    teams: list[TeamQuota] = Field([], description="One compute quota, namespace and FSx directory per team.")


def task_governance_errors(cfg: PlatformConfig) -> list[str]:
    """Rules of task governance on an EKS cluster; the studio and users sections it must not collide with."""
    if cfg.orchestrator != "eks":
        return []
    errors: list[str] = []
    add = errors.append
    compute = [g for g in cfg.cluster.instance_groups if g.role == "compute"]
    eks = cfg.eks
    gov = eks.task_governance
    if gov.enabled:
        errors.extend(_governance_errors(gov, compute))
        if cfg.studio.enabled and cfg.studio.partition_root == EKS_TEAM_DIRECTORY_ROOT:
            add(
                f"studio.partition_root: {cfg.studio.partition_root!r} is where the EKS team directories live; "
                f"allowed: any other directory name (the default is 'studio')"
            )
        lustre = cfg.storage.lustre.existing
        if gov.teams and cfg.cluster.existing is None and lustre is not None and lustre.data_bucket is None:
            add(
                "storage.lustre.existing.data_bucket: not set with eks.task_governance.teams; the teams' directories "
                "on the file system are made through its S3 link. Allowed: the bucket the file system's data "
                "repository association links, or no teams"
            )
        users = {u.name for u in cfg.users}
        taken = {
            cfg.studio.shared_gid: "studio.shared_gid",
            **{u.group_id: f"the group of user {u.name!r}" for u in cfg.users},
        }
        for i, team in enumerate(gov.teams):
            gid = team_gid(team)
            if gid in taken:
                add(
                    f"eks.task_governance.teams[{i}].gid: {gid} is already {taken[gid]}; give the team a gid of "
                    "its own (it owns the team's FSx directory)"
                )
            taken.setdefault(gid, f"the gid of team {team.name!r}")
        if eks.autoscaling.enabled:
            for i, team in enumerate(gov.teams):
                for key in ("max_vcpu", "max_memory_gib"):
                    if getattr(team, key) is None:
                        add(
                            f"eks.task_governance.teams[{i}].{key}: not set with eks.autoscaling.enabled: true; "
                            "give the team a CPU and memory cap, or nodes are added for whatever it requests"
                        )
        member_of: dict[str, str] = {}
        for i, team in enumerate(gov.teams):
            for j, member in enumerate(team.members):
                path = f"eks.task_governance.teams[{i}].members[{j}]"
                if member not in users:
                    add(f"{path}: {member!r} is not a user; allowed: {', '.join(sorted(users)) or '(no users)'}")
                elif member in member_of:
                    add(
                        f"{path}: {member!r} is already a member of team {member_of[member]!r}; a Studio profile "
                        "runs as one team's role"
                    )
                member_of.setdefault(member, team.name)
    elif gov.teams:
        add(
            f"eks.task_governance.teams: {len(gov.teams)} team(s) with task governance disabled; enable it or "
            "remove the teams"
        )
    return errors


def _governance_errors(gov: TaskGovernance, compute: list[InstanceGroup]) -> list[str]:
    errors: list[str] = []
    add = errors.append
    classes = [c.name for c in gov.priority_classes]
    for i, name in enumerate(classes):
        if name in classes[:i]:
            add(f"eks.task_governance.priority_classes[{i}].name: {name!r} is listed twice; names must be unique")
    capacity: dict[str, int] = {}
    for g in compute:
        capacity[g.instance_type] = capacity.get(g.instance_type, 0) + g.instance_count
    guaranteed: dict[str, int] = {}
    names: list[str] = []
    for i, team in enumerate(gov.teams):
        path = f"eks.task_governance.teams[{i}]"
        if team.name in names:
            add(
                f"{path}.name: {team.name!r} is already used by eks.task_governance.teams[{names.index(team.name)}]; "
                "team names must be unique"
            )
        names.append(team.name)
        if (team.instance_count is None) == (team.accelerators is None):
            add(
                f"{path}: instance_count={team.instance_count!r}, accelerators={team.accelerators!r}; give exactly "
                "one of them"
            )
        if team.instance_type not in capacity:
            add(
                f"{path}.instance_type: {team.instance_type!r} is not the type of any compute group; allowed: "
                f"{', '.join(sorted(capacity)) or 'none (add a compute group)'}"
            )
            continue
        per_instance = ACCELERATORS.get(team.instance_type)
        count = team.instance_count
        if count is None and team.accelerators is not None and per_instance:
            count = -(-team.accelerators // per_instance[1])
        guaranteed[team.instance_type] = guaranteed.get(team.instance_type, 0) + (count or 0)
        if team.accelerators is not None and per_instance is None:
            add(
                f"{path}.accelerators: {team.accelerators} on {team.instance_type!r}, which has no accelerators this "
                "platform knows; use instance_count"
            )
        elif (
            team.accelerators is not None
            and per_instance is not None
            and team.accelerators > per_instance[1] * capacity[team.instance_type]
        ):
            add(
                f"{path}.accelerators: {team.accelerators}; the cluster has "
                f"{per_instance[1] * capacity[team.instance_type]} on {team.instance_type}"
            )
        if team.resource_quota and per_instance is None:
            add(
                f"{path}.resource_quota: true on {team.instance_type!r}, whose accelerators are unknown; set "
                f"resource_quota: false or use one of {', '.join(sorted(ACCELERATORS))}"
            )
        if team.sharing != "LendAndBorrow" and team.borrow_limit_percent != 50:
            add(
                f"{path}.borrow_limit_percent: {team.borrow_limit_percent} with sharing {team.sharing!r}; a borrow "
                "limit applies only to LendAndBorrow"
            )
    for instance_type, count in guaranteed.items():
        if count > capacity[instance_type]:
            add(
                f"eks.task_governance.teams: {count} guaranteed {instance_type} instance(s) across teams; the "
                f"compute groups have {capacity[instance_type]}"
            )
    return errors


def compute_quota_properties(team: TeamQuota, *, cluster_name: str, cluster_arn: str) -> dict[str, Any]:
    """A team's AWS::SageMaker::ComputeQuota properties."""
    resource: dict[str, Any] = {"InstanceType": team.instance_type}
    if team.instance_count is not None:
        resource["Count"] = team.instance_count
    else:
        resource["Accelerators"] = team.accelerators
    sharing: dict[str, Any] = {"Strategy": team.sharing}
    if team.sharing == "LendAndBorrow":
        sharing["BorrowLimit"] = team.borrow_limit_percent
    return {
        "Name": f"{cluster_name}-{team.name}"[:63],
        "ClusterArn": cluster_arn,
        "ComputeQuotaTarget": {"TeamName": team.name, "FairShareWeight": team.fair_share_weight},
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [resource],
            "ResourceSharingConfig": sharing,
            "PreemptTeamTasks": team.preempt_team_tasks,
        },
        "ActivationState": "Enabled",
    }


def borrowable_accelerators(team: TeamQuota) -> int:
    """Guaranteed accelerators plus what the team may borrow on top (its borrow limit is a percentage)."""
    per_instance = ACCELERATORS[team.instance_type][1]
    # A team quota is either accelerators or an instance count (TeamQuota's own check).
    guaranteed = team.accelerators if team.accelerators is not None else (team.instance_count or 0) * per_instance
    if team.sharing != "LendAndBorrow":
        return guaranteed
    return guaranteed + guaranteed * team.borrow_limit_percent // 100
