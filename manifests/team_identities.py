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
  partition's group (every user's group in Studio then).
- Team members cannot change the ConfigMap (their Role reads configmaps only: kubernetes_objects.job_submitter_role).

Teammates are not kept apart: they share the team's IAM role (one Kubernetes identity) and the training operator, not
they, creates the pods, so a pod can be held to the team's uids but not to its submitter's; a member can run a job as
a teammate's uid (docs/eks.md says what closing that takes).

Not covered by admission (said here so nobody relies on it): groups an image's /etc/group gives the uid's name
(supplementalGroupsPolicy Merge, the default; Strict needs a runtime that supports it), which matters for the team
directories (group-writable) but not for the private partitions (mode 0700, owner only). The FSx CSI driver's
CSIDriver has fsGroupPolicy ReadWriteOnceWithFSType (kubernetes-sigs/aws-fsx-csi-driver@05bcb519
charts/aws-fsx-csi-driver/values.yaml), so kubelet never re-owns these ReadWriteMany volumes to an fsGroup.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from manifests.kubernetes_objects import PLATFORM_LABEL
from platform_config.eks_governance import team_gid

if TYPE_CHECKING:
    from platform_config import PlatformConfig
    from platform_config.eks_governance import TeamQuota

POLICY_NAME = "hyperpod-team-identities"
PARAMS_NAME = "hyperpod-team-identities"  # the ConfigMap in each team namespace
UID_KEY, GID_KEY = "uid.", "gid."          # ConfigMap keys: uid.<number> / gid.<number> -> who it is
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


def studio_files(*, user: str, uid: int, gid: int, shared: bool, shared_gid: int, partition_parent: str,
                 cluster_mount_path: str) -> StudioFiles:
    """`user`'s Studio files: their own partition <partition_parent>/<user>, or in shared mode the shared one, which
    Studio mounts for them with the shared gid (stacks/studio_stack.py)."""
    name, claim = ("shared", SHARED_CLAIM) if shared else (user, user_claim(user))
    directory = f"{partition_parent.rstrip('/')}/{name}"
    return StudioFiles(claim=claim, directory=directory, mount_path=f"{cluster_mount_path.rstrip('/')}{directory}",
                       uid=uid, gid=shared_gid if shared else gid)


def team_ids(config: PlatformConfig, team: TeamQuota) -> tuple[dict[int, str], dict[int, str]]:
    """The uids and gids a team's pods may use, each naming whose it is: the members' uids; the team's gid, the
    members' primary groups and, in shared mode, the shared partition's group (the members' group in Studio)."""
    members = [u for u in config.users if u.name in team.members]
    gids = {team_gid(team): f"team {team.name}"}
    if config.shared_fsx and config.studio.enabled:
        gids[config.studio.shared_gid] = "the shared Studio partition"
    gids |= {u.group_id: u.name for u in members}
    return {u.uid: u.name for u in members}, gids


def team_studio_files(config: PlatformConfig, team: TeamQuota) -> dict[str, StudioFiles]:
    """Member name -> their Studio files as the team's pods mount them (one claim per member, or the shared one)."""
    repo = config.storage.lustre.data_repository
    return {u.name: studio_files(
        user=u.name, uid=u.uid, gid=u.group_id, shared=config.shared_fsx, shared_gid=config.studio.shared_gid,
        partition_parent=f"{repo.file_system_path.rstrip('/')}/{config.studio.partition_root}",
        cluster_mount_path=config.storage.lustre.mount_path)
        for u in config.users if u.name in team.members}


def identities(*, namespace: str, uids: Mapping[int, str], gids: Mapping[int, str], platform: str) -> dict:
    """The policy's parameters for one team namespace: the uids and gids its pods may use, each naming who it is."""
    data = {f"{UID_KEY}{uid}": who for uid, who in sorted(uids.items())}
    data |= {f"{GID_KEY}{gid}": who for gid, who in sorted(gids.items())}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": PARAMS_NAME, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
            "data": data}


def _member(kind: str, value: str) -> str:
    return f"('{kind}' + string({value})) in params.data"


def _effective(field: str, containers: str, pod_variable: str, key: str) -> str:
    """Every container of the list `containers` has `field` set to an allowed id, itself or through the pod's."""
    return (f"{containers}.all(c, has(c.securityContext) && has(c.securityContext.{field}) ? "
            f"{_member(key, f'c.securityContext.{field}')} : variables.{pod_variable})")


def _lists() -> list[tuple[str, str]]:
    return [("containers", "object.spec.containers"),
            ("initContainers", "object.spec.initContainers"),
            ("ephemeralContainers", "object.spec.ephemeralContainers")]


def identity_policy(*, platform: str) -> dict:
    """The ValidatingAdmissionPolicy; it applies where identity_binding says (the team namespaces)."""
    sc = "object.spec.securityContext"
    variables = [
        {"name": "podUserAllowed",
         "expression": f"has({sc}) && has({sc}.runAsUser) && {_member(UID_KEY, f'{sc}.runAsUser')}"},
        {"name": "podGroupAllowed",
         "expression": f"has({sc}) && has({sc}.runAsGroup) && {_member(GID_KEY, f'{sc}.runAsGroup')}"},
    ]
    validations = [
        {"expression": f"!has({sc}) || !has({sc}.runAsUser) || variables.podUserAllowed",
         "message": "securityContext.runAsUser must be the uid of a member of this namespace's team "
                    f"(ConfigMap {PARAMS_NAME})", "reason": "Forbidden"},
        {"expression": f"!has({sc}) || !has({sc}.runAsGroup) || variables.podGroupAllowed",
         "message": f"securityContext.runAsGroup must be one of the team's gids (ConfigMap {PARAMS_NAME})",
         "reason": "Forbidden"},
        {"expression": f"!has({sc}) || !has({sc}.fsGroup) || {_member(GID_KEY, f'{sc}.fsGroup')}",
         "message": f"securityContext.fsGroup must be one of the team's gids (ConfigMap {PARAMS_NAME})",
         "reason": "Forbidden"},
        {"expression": f"!has({sc}) || !has({sc}.supplementalGroups) || "
                       f"{sc}.supplementalGroups.all(g, {_member(GID_KEY, 'g')})",
         "message": f"securityContext.supplementalGroups may hold only the team's gids (ConfigMap {PARAMS_NAME})",
         "reason": "Forbidden"},
    ]
    for name, path in _lists():
        guard = "" if name == "containers" else f"!has({path}) || "
        validations += [
            {"expression": guard + _effective("runAsUser", path, "podUserAllowed", UID_KEY),
             "message": f"every one of {name} must run as a team member's uid: set runAsUser (the image's USER is not "
                        "seen at admission)", "reason": "Forbidden"},
            {"expression": guard + _effective("runAsGroup", path, "podGroupAllowed", GID_KEY),
             "message": f"every one of {name} must run with a team gid: set runAsGroup (unset, it is the image's "
                        "group for the uid, or 0)", "reason": "Forbidden"},
        ]
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY_NAME, "labels": {PLATFORM_LABEL: platform}},
            "spec": {"failurePolicy": "Fail",
                     "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                     "matchConstraints": {"resourceRules": [{
                         "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                         "resources": ["pods", "pods/ephemeralcontainers"]}]},
                     "variables": variables,
                     "validations": validations}}


def identity_binding(*, namespaces: Iterable[str], platform: str) -> dict:
    """Binds the policy to the team namespaces, each with its own ConfigMap (paramRef without a namespace)."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY_NAME, "labels": {PLATFORM_LABEL: platform}},
            "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"],
                     "paramRef": {"name": PARAMS_NAME, "parameterNotFoundAction": "Deny"},
                     "matchResources": {"namespaceSelector": {"matchExpressions": [{
                         "key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}]}}}}
