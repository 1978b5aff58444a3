"""Who a pod in a team's namespace may run as, enforced by Kubernetes itself, and the Studio files it may mount.

A team's namespace holds a claim on each member's private FSx partition (per-user mode) or on the shared partition
(shared mode), so a job sees the files its user works on in Studio, at the path the cluster gives them
(<lustre mount path><partition>, e.g. /fsx/data/studio/alice: lifecycle/studio/fsx_paths.sh links that same path to
Studio's mount in the space). A claim is visible to every pod of the namespace; what keeps alice's partition (owner
alice, mode 0700) hers is that no pod there can run as anyone but a team member, with the team's groups:

- A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, stable since Kubernetes 1.30:
  https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/) evaluated by the API server
  itself, no controller or webhook to run. Its parameters are a ConfigMap in each team namespace (paramKind ConfigMap,
  paramRef without a namespace: "the namespace of the object being evaluated for admission will be used"; the
  admissionregistration v1 schema, kubernetes-validate 1.37.0). parameterNotFoundAction Deny: a team namespace without
  its ConfigMap admits no pod.
- Every container (init and ephemeral ones too: pods/ephemeralcontainers is matched, `kubectl debug` goes through
  it) must run as a member's uid and a team gid, stated in the pod (the image's USER is invisible to admission, and an
  unset runAsGroup means the image's group for that uid, or 0); fsGroup and supplementalGroups only team gids.
  Team gids: the team's own (its FSx directory's group), each member's primary group and, in shared mode, the shared
  partition's group (every user's group in Studio then). Every container states allowPrivilegeEscalation: false and
  adds no capabilities, so a setuid binary in the image cannot leave the admitted uid.
- Team members may write their own ConfigMaps (their jobs mount them) but not the platform's: platform_config_guard.

Teammates are kept apart at the job: the training operator, not the member, creates the pods, so a pod is held to the
team's uids; each member has a Kubernetes username of their own (member_username, set by their access entry), and
job_identity_policy holds every job object a member creates or changes, of every kind their Role allows, to that
member's own uid (the ConfigMap's member.<name>). A job that states no user is refused at creation with the fix.

Not covered by admission (said here so nobody relies on it): groups an image's /etc/group gives the uid's name
(supplementalGroupsPolicy Merge, the default; Strict needs a runtime that supports it), which matters for the team
directories (group-writable) but not for the private partitions (mode 0700, owner only). The FSx CSI driver's
CSIDriver has fsGroupPolicy ReadWriteOnceWithFSType (kubernetes-sigs/aws-fsx-csi-driver@05bcb519
charts/aws-fsx-csi-driver/values.yaml), so kubelet never re-owns these ReadWriteMany volumes to an fsGroup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Iterable, Mapping

from manifests.kubernetes_objects import MLFLOW_CONFIG_MAP, PLATFORM_LABEL
from platform_config.eks_governance import team_gid

if TYPE_CHECKING:
    from platform_config import PlatformConfig
    from platform_config.eks_governance import TeamQuota

POLICY_NAME = "hyperpod-team-identities"
PARAMS_NAME = "hyperpod-team-identities"  # the ConfigMap in each team namespace
UID_KEY, GID_KEY = "uid.", "gid."  # ConfigMap keys: uid.<number> / gid.<number> -> who it is
MEMBER_KEY = "member."  # member.<name> -> that member's uid
# A member's Kubernetes username: set by their access entry; no Kubernetes or EKS reserved prefix (system:, eks:,
# aws:, amazon:, iam:; EKS user guide, access entries).
MEMBER_USERNAME_PREFIX = "hyperpod-user:"
CONFIG_GUARD_NAME = "hyperpod-platform-configmaps"
STATE_YOUR_USER = "every pod template must state who it runs as"
HYP_FIX = "with hyp: hyp init hyp-pytorch-job, add them to k8s.jinja, hyp create; docs/eks.md, Jobs from hyp"
PROTECTED_CONFIG_MAPS = (PARAMS_NAME, MLFLOW_CONFIG_MAP)
SHARED_CLAIM = "studio-shared"


def user_claim(user: str) -> str:
    return f"studio-{user}"


@dataclass(frozen=True)
class StudioFiles:
    """A Studio partition as a team's pods see it: the claim, the directory on the file system, the path in the pod
    (the cluster's path of the directory), and the identity Studio gives its user there."""

    claim: str
    directory: str
    mount_path: str
    uid: int
    gid: int


def studio_files(
    *, user: str, uid: int, gid: int, shared: bool, shared_gid: int, partition_parent: str, cluster_mount_path: str
) -> StudioFiles:
    """`user`'s Studio files: their own partition <partition_parent>/<user>, or in shared mode the shared one, which
    Studio mounts for them with the shared gid (stacks/studio_stack.py)."""
    name, claim = ("shared", SHARED_CLAIM) if shared else (user, user_claim(user))
    directory = f"{partition_parent.rstrip('/')}/{name}"
    return StudioFiles(
        claim=claim,
        directory=directory,
        mount_path=f"{cluster_mount_path.rstrip('/')}{directory}",
        uid=uid,
        gid=shared_gid if shared else gid,
    )


def team_ids(config: PlatformConfig, team: TeamQuota) -> tuple[dict[int, str], dict[int, str]]:
    """The uids and gids a team's pods may use, each naming whose it is: the members' uids; the team's gid, the
    members' primary groups and, in shared mode, the shared partition's group (the members' group in Studio)."""
    members = [u for u in config.users if u.name in team.members]
    gids = {team_gid(team): f"team {team.name}"}
    if config.shared_fsx and config.studio.enabled:
        gids[config.studio.shared_gid] = "the shared Studio partition"
    gids |= {u.group_id: u.name for u in members}
    return {u.uid: u.name for u in members}, gids


def team_members(config: PlatformConfig, team: TeamQuota) -> dict[str, int]:
    """Member name -> uid: what the job policies match a requester's username (member_username) to."""
    return {u.name: u.uid for u in config.users if u.name in team.members}


def team_studio_files(config: PlatformConfig, team: TeamQuota) -> dict[str, StudioFiles]:
    """Member name -> their Studio files as the team's pods mount them (one claim per member, or the shared one)."""
    repo = config.storage.lustre.data_repository
    return {
        u.name: studio_files(
            user=u.name,
            uid=u.uid,
            gid=u.group_id,
            shared=config.shared_fsx,
            shared_gid=config.studio.shared_gid,
            partition_parent=f"{repo.file_system_path.rstrip('/')}/{config.studio.partition_root}",
            cluster_mount_path=config.storage.lustre.mount_path,
        )
        for u in config.users
        if u.name in team.members
    }


def identities(
    *,
    namespace: str,
    uids: Mapping[int, str],
    gids: Mapping[int, str],
    platform: str,
    members: Mapping[str, int] | None = None,
) -> dict:
    """The policies' parameters for one team namespace: the uids and gids its pods may use, each naming who it is,
    and each member's uid under their name (`member.<name>`), which the job policy matches to the requester."""
    data = {f"{UID_KEY}{uid}": who for uid, who in sorted(uids.items())}
    data |= {f"{GID_KEY}{gid}": who for gid, who in sorted(gids.items())}
    data |= {f"{MEMBER_KEY}{name}": str(uid) for name, uid in sorted((members or {}).items())}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PARAMS_NAME, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "data": data,
    }


def member_username(user: str) -> str:
    """The Kubernetes username of a member's Studio role (its EKS access entry sets it: stacks/eks_access_stack.py)."""
    return f"{MEMBER_USERNAME_PREFIX}{user}"


def _member(kind: str, value: str) -> str:
    return f"('{kind}' + string({value})) in params.data"


def _set(obj: str, field: str) -> str:
    return f"has({obj}.securityContext) && has({obj}.securityContext.{field})"


def _containers(spec: str, ephemeral: bool) -> list[tuple[str, str, bool]]:
    """(name, path, always present) of the container lists of a pod spec."""
    lists = [("containers", f"{spec}.containers", True), ("initContainers", f"{spec}.initContainers", False)]
    return lists + ([("ephemeralContainers", f"{spec}.ephemeralContainers", False)] if ephemeral else [])


def _every(path: str, always: bool, body: str) -> str:
    return f"{path}.all(c, {body})" if always else f"(!has({path}) || {path}.all(c, {body}))"


def _effective(spec: str, field: str) -> str:
    """The container `c`'s `field`: its own, else the pod's; -1 when neither states it (never an allowed id)."""
    own, pod = f"c.securityContext.{field}", f"{spec}.securityContext.{field}"
    return f"({_set('c', field)} ? {own} : ({_set(spec, field)} ? {pod} : -1))"


def _spec_checks(spec: str, *, uid_allowed: str, whose: str, ephemeral: bool) -> list[tuple[str, str]]:
    """(expression, what to fix) for one pod spec: every container runs as an allowed uid (`uid_allowed`, an
    expression of `u`; `whose` uid, for the message) and a team gid, stated in the pod; fsGroup and
    supplementalGroups only team gids; no privilege escalation (a setuid binary in the image would otherwise undo the
    uid) and no added capabilities."""
    sc = f"{spec}.securityContext"
    checks = [
        (
            f"!({_set(spec, 'fsGroup')}) || {_member(GID_KEY, f'{sc}.fsGroup')}",
            f"securityContext.fsGroup must be one of the team's gids (ConfigMap {PARAMS_NAME})",
        ),
        (
            f"!({_set(spec, 'supplementalGroups')}) || {sc}.supplementalGroups.all(g, {_member(GID_KEY, 'g')})",
            f"securityContext.supplementalGroups may hold only the team's gids (ConfigMap {PARAMS_NAME})",
        ),
    ]
    for name, path, always in _containers(spec, ephemeral):
        uid = _effective(spec, "runAsUser")
        checks += [
            (
                _every(path, always, f"[{uid}].all(u, {uid_allowed})"),
                (
                    f"every one of {name} must run as {whose} uid: set securityContext.runAsUser (the image's USER is not "
                    "seen at admission)"
                ),
            ),
            (
                _every(path, always, _member(GID_KEY, _effective(spec, "runAsGroup"))),
                (
                    f"every one of {name} must run with a team gid: set securityContext.runAsGroup (unset, it is the "
                    "image's group for the uid, or 0)"
                ),
            ),
            (
                _every(
                    path,
                    always,
                    f"{_set('c', 'allowPrivilegeEscalation')} && c.securityContext.allowPrivilegeEscalation == false",
                ),
                (
                    f"every one of {name} must set securityContext.allowPrivilegeEscalation: false (a setuid binary in "
                    "the image would otherwise run as another user)"
                ),
            ),
            (
                _every(
                    path,
                    always,
                    f"!({_set('c', 'capabilities')} && has(c.securityContext.capabilities.add) && "
                    "size(c.securityContext.capabilities.add) > 0)",
                ),
                f"{name} may add no capabilities (securityContext.capabilities.add)",
            ),
        ]
    return checks


def identity_policy(*, platform: str) -> dict:
    """The pod ValidatingAdmissionPolicy; it applies where identity_binding says (the team namespaces). Pods are
    created by the training operator, not the member, so a pod is held to the team's uids; the job policies
    (job_identity_policy) hold each job to its submitter's."""
    checks = _spec_checks("object.spec", uid_allowed=_member(UID_KEY, "u"), whose="a team member's", ephemeral=True)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": {PLATFORM_LABEL: platform}},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pods", "pods/ephemeralcontainers"],
                    }
                ]
            },
            "validations": [{"expression": e, "message": m, "reason": "Forbidden"} for e, m in checks],
        },
    }


@dataclass(frozen=True)
class JobKind:
    """A job API a member may create (kubernetes_objects.job_submitter_role) and where its pod templates are."""

    api_group: str
    version: str
    resource: str
    templates: str  # a CEL list of the object's pod templates


# Where each kind keeps its pod templates: HyperPodPyTorchJob spec.replicaSpecs[].template (the HyperPod CLI's model,
# aws/sagemaker-hyperpod-cli@a00b22d src/sagemaker/hyperpod/training/config/hyperpod_pytorch_job_unified_config.py);
# Kubeflow PyTorchJob spec.pytorchReplicaSpecs.<Master|Worker>.template (kubeflow.org/v1, the CRD in the same
# revision's helm_chart/HyperPodHelmChart/charts/training-operators/crds/); MPIJob spec.mpiReplicaSpecs.<role>.template
# (kubeflow.org/v2beta1, charts/mpi-operator/templates/mpijob-crd.yaml); batch/v1 Job spec.template.
JOB_KINDS = {
    "hyperpodpytorchjobs": JobKind(
        "sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", "object.spec.replicaSpecs.map(r, r.template)"
    ),
    "pytorchjobs": JobKind(
        "kubeflow.org",
        "v1",
        "pytorchjobs",
        "object.spec.pytorchReplicaSpecs.map(k, object.spec.pytorchReplicaSpecs[k].template)",
    ),
    "mpijobs": JobKind(
        "kubeflow.org",
        "v2beta1",
        "mpijobs",
        "object.spec.mpiReplicaSpecs.map(k, object.spec.mpiReplicaSpecs[k].template)",
    ),
    "jobs": JobKind("batch", "v1", "jobs", "[object.spec.template]"),
}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TEAM_GROUP_PREFIX = "hyperpod-team-"  # kubernetes_objects.team_group


def job_policy_name(resource: str) -> str:
    return f"hyperpod-job-identities-{resource}"


def job_identity_policy(*, resource: str, platform: str) -> dict:
    """Jobs a team member creates or changes: every pod template runs as the requester's own uid (their username
    is member_username(<name>), the ConfigMap maps the name to the uid), with the team's gids, no privilege
    escalation, and the job's Kueue queue label on every template (Kueue admits the job by its label; HyperPod task
    governance admits pods by theirs, so a template without it would hold quota and never run). Refused at creation,
    with what to set; never a job whose pods are all refused later. Only requests of a team's members are matched:
    the training operator's own updates (elastic scaling) and administrators' pass."""
    kind = JOB_KINDS[resource]
    user = "request.userInfo.username"
    variables = [
        {
            "name": "memberKey",
            "expression": f"{user}.startsWith('{MEMBER_USERNAME_PREFIX}') ? "
            f"'{MEMBER_KEY}' + {user}.substring({len(MEMBER_USERNAME_PREFIX)}) : ''",
        },
        {
            "name": "uid",
            "expression": "variables.memberKey in params.data ? int(params.data[variables.memberKey]) : -1",
        },
        {"name": "templates", "expression": kind.templates},
    ]
    queue = f"'{QUEUE_LABEL}'"
    labels = "object.metadata.labels"
    validations = [
        {
            "expression": "variables.memberKey in params.data",
            "messageExpression": f"'you (' + {user} + ') are not a member of the team of this namespace: submit in "
            f"your own team namespace (ConfigMap {PARAMS_NAME} lists its members)'",
            "message": "you are not a member of this namespace's team",
            "reason": "Forbidden",
        },
        {
            "expression": f"has({labels}) && {queue} in {labels} && variables.templates.all(t, has(t.metadata) && "
            f"has(t.metadata.labels) && {queue} in t.metadata.labels && "
            f"t.metadata.labels[{queue}] == {labels}[{queue}])",
            "message": f"label the job and every pod template with {QUEUE_LABEL}: <namespace>-localqueue (task "
            "governance admits pods by it)",
            "reason": "Invalid",
        },
    ]
    # First, and alone when nothing is stated (the job `hyp create hyp-pytorch-job` renders): the whole fix, with
    # the requester's own uid and the team's gids in it.
    stated = " && ".join(
        _every(
            path,
            always,
            f"({_set('c', 'runAsUser')} || {_set('t.spec', 'runAsUser')}) && "
            f"({_set('c', 'runAsGroup')} || {_set('t.spec', 'runAsGroup')}) && "
            f"{_set('c', 'allowPrivilegeEscalation')}",
        )
        for _, path, always in _containers("t.spec", ephemeral=False)
    )
    gids = f"params.data.filter(k, k.startsWith('{GID_KEY}')).map(k, k.substring({len(GID_KEY)})).join(', ')"
    validations.append(
        {
            "expression": f"variables.templates.all(t, {stated})",
            "reason": "Forbidden",
            "message": f"{STATE_YOUR_USER}: securityContext runAsUser (your uid), runAsGroup (a team gid) and, on every "
            f"container, allowPrivilegeEscalation: false ({HYP_FIX})",
            "messageExpression": f"'{STATE_YOUR_USER}: securityContext.runAsUser: ' + string(variables.uid) + "
            f"', runAsGroup: one of ' + {gids} + ' and, on every container, "
            f"allowPrivilegeEscalation: false ({HYP_FIX})'",
        }
    )
    for expression, fix in _spec_checks("t.spec", uid_allowed="u == variables.uid", whose="your", ephemeral=False):
        entry = {"expression": f"variables.templates.all(t, {expression})", "message": fix, "reason": "Forbidden"}
        if "runAsUser" in fix:
            entry["messageExpression"] = f"'{fix.split(':')[0]}: runAsUser ' + string(variables.uid) + ' (yours)'"
        validations.append(entry)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": job_policy_name(resource), "labels": {PLATFORM_LABEL: platform}},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [kind.api_group],
                        "apiVersions": [kind.version],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [resource],
                    }
                ]
            },
            "matchConditions": [_from_a_member()],
            "variables": variables,
            "validations": validations,
        },
    }


def _from_a_member() -> dict:
    return {
        "name": "from-a-team-member",
        "expression": f"request.userInfo.groups.exists(g, g.startsWith('{TEAM_GROUP_PREFIX}'))",
    }


def platform_config_guard(*, platform: str) -> dict:
    """Team members may create, change and delete the ConfigMaps their jobs mount, but not the platform's own in their
    namespace (the policies' parameters, the MLflow pointer): by name, or by the platform's label on the old or the
    new object, so none can be relabelled out of the guard or made in its place."""
    names = ", ".join(f"'{n}'" for n in sorted(PROTECTED_CONFIG_MAPS))
    touches = (
        f"[object, oldObject].exists(o, o != null && (o.metadata.name in [{names}] || "
        f"(has(o.metadata.labels) && '{PLATFORM_LABEL}' in o.metadata.labels)))"
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": CONFIG_GUARD_NAME, "labels": {PLATFORM_LABEL: platform}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["configmaps"],
                    }
                ]
            },
            "matchConditions": [_from_a_member()],
            "validations": [
                {
                    "expression": f"!({touches})",
                    "reason": "Forbidden",
                    "message": f"this ConfigMap is the platform's ({PLATFORM_LABEL}); create your "
                    "own under another name, without that label",
                }
            ],
        },
    }


def policy_binding(*, policy: str, namespaces: Iterable[str], platform: str, params: bool = True) -> dict:
    """Binds `policy` to the team namespaces, each with its own ConfigMap (paramRef without a namespace)."""
    spec: dict = {
        "policyName": policy,
        "validationActions": ["Deny"],
        "matchResources": {
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}
                ]
            }
        },
    }
    if params:
        spec["paramRef"] = {"name": PARAMS_NAME, "parameterNotFoundAction": "Deny"}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": {PLATFORM_LABEL: platform}},
        "spec": spec,
    }


def team_admission(*, namespaces: Iterable[str], platform: str) -> list[dict]:
    """Every policy of the team namespaces and its binding: pods, each job kind, the platform's ConfigMaps."""
    namespaces = sorted(namespaces)
    objects = [identity_policy(platform=platform), identity_binding(namespaces=namespaces, platform=platform)]
    for resource in JOB_KINDS:
        objects += [
            job_identity_policy(resource=resource, platform=platform),
            policy_binding(policy=job_policy_name(resource), namespaces=namespaces, platform=platform),
        ]
    return objects + [
        platform_config_guard(platform=platform),
        policy_binding(policy=CONFIG_GUARD_NAME, namespaces=namespaces, platform=platform, params=False),
    ]


def identity_binding(*, namespaces: Iterable[str], platform: str) -> dict:
    """Binds the pod policy to the team namespaces, each with its own ConfigMap (paramRef without a namespace)."""
    return policy_binding(policy=POLICY_NAME, namespaces=namespaces, platform=platform)
