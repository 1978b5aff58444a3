"""The team-identity ValidatingAdmissionPolicy, run against pods: its CEL evaluated by cel-expr-python (the CEL C++
implementation; like the API server's cel-go it fails on a missing field instead of answering false), with the
admission semantics the policy relies on written out in `admit` (namespace match, the namespace's own ConfigMap as
params, Deny when it is missing, an evaluation error is a refusal under failurePolicy Fail). The rendered objects are
also checked against Kubernetes 1.30's and 1.33's schemas (kubernetes-validate). The evaluator: tests/admission.py."""

from __future__ import annotations

import copy
import re
from typing import Any, Optional

import kubernetes_validate
import pytest

from support import admission
from support.paths import ROOT
from manifests import team_identities as ti
from manifests.kubernetes_objects import MLFLOW_CONFIG_MAP
from support.teams import ALICE, BOB, CAROL, DEVELOPERS, DEVELOPERS_GID, OTHER, PARAMS, PLATFORM, RESEARCH, RESEARCH_GID

POLICY = ti.identity_policy(platform=PLATFORM)
BINDING = ti.identity_binding(namespaces=[RESEARCH, DEVELOPERS], platform=PLATFORM)


def admit(
    pod: dict,
    *,
    namespace: str = RESEARCH,
    params: Optional[dict[str, dict]] = None,
    resource: str = "pods",
    operation: str = "CREATE",
    policy: dict = POLICY,
) -> list[str]:
    return admission.admit(
        pod,
        namespace=namespace,
        policy=policy,
        binding=BINDING,
        params=PARAMS if params is None else params,
        resource=resource,
        operation=operation,
    )


SAFE = {"allowPrivilegeEscalation": False}  # what every container must state (docs/eks.md)


def pod(uid: Optional[int] = ALICE[0], gid: Optional[int] = ALICE[1], **pod_sc) -> dict:
    sc = {k: v for k, v in (("runAsUser", uid), ("runAsGroup", gid)) if v is not None} | pod_sc
    spec: dict[str, Any] = {"containers": [{"name": "train", "image": "repo/train:1.0", "securityContext": dict(SAFE)}]}
    if sc:
        spec["securityContext"] = sc
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": RESEARCH}, "spec": spec}


def with_container(p: dict, where: str = "containers", **sc) -> dict:
    p = copy.deepcopy(p)
    container = {"name": f"c{len(p['spec'].get(where, []))}", "image": "repo/tool:1.0", "securityContext": SAFE | sc}
    p["spec"].setdefault(where, []).append(container)
    return p


def _without_safe(p: dict) -> dict:
    p = copy.deepcopy(p)
    del p["spec"]["containers"][0]["securityContext"]
    return p


# ---------------------------------------------------------------------------------------------- allowed
@pytest.mark.parametrize(
    "case",
    [
        pod(),
        pod(*CAROL),
        pod(fsGroup=RESEARCH_GID, supplementalGroups=[RESEARCH_GID, ALICE[1]]),
        pod(gid=RESEARCH_GID),
        with_container(pod(), runAsUser=CAROL[0], runAsGroup=CAROL[1]),
        with_container(pod(), "initContainers"),
        with_container(pod(), "ephemeralContainers", runAsUser=ALICE[0]),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {
                        "name": "a",
                        "image": "repo/train:1.0",
                        "securityContext": {"runAsUser": ALICE[0], "runAsGroup": ALICE[1], **SAFE},
                    }
                ]
            },
        },
    ],
    ids=[
        "member",
        "other-member",
        "team-fsgroup-and-supplemental",
        "team-gid",
        "container-override",
        "init-inherits",
        "ephemeral-member",
        "only-container-level",
    ],
)
def test_team_members_pods_are_admitted(case):
    assert admit(case) == []


def test_pods_outside_team_namespaces_and_other_operations_are_not_its_business():
    root = pod(0, 0)
    assert admit(root, namespace=OTHER) == []
    assert admit(root, operation="DELETE") == []
    assert admit(root, resource="pods/status", operation="UPDATE") == []


# ---------------------------------------------------------------------------------------------- refused
@pytest.mark.parametrize(
    "case, why",
    [
        (pod(None, None), "runAsUser"),  # the image's USER would decide: refused
        (pod(None), "runAsUser"),
        (pod(gid=None), "runAsGroup"),  # the image's group for the uid, or 0
        (pod(0, 0), "runAsUser"),  # root
        (pod(0, ALICE[1]), "runAsUser"),
        (pod(*BOB), "runAsUser"),  # a member of another team
        (pod(ALICE[0], BOB[1]), "runAsGroup"),  # a member's uid with a foreign gid
        (pod(ALICE[0], DEVELOPERS_GID), "runAsGroup"),  # another team's directory group
        (pod(ALICE[0], 0), "runAsGroup"),
        (pod(fsGroup=DEVELOPERS_GID), "fsGroup"),
        (pod(fsGroup=0), "fsGroup"),
        (pod(supplementalGroups=[RESEARCH_GID, DEVELOPERS_GID]), "supplementalGroups"),
        (pod(supplementalGroups=[0]), "supplementalGroups"),
        (with_container(pod(), runAsUser=0), "containers"),  # a container overriding the pod's member uid
        (with_container(pod(), runAsUser=BOB[0]), "containers"),
        (with_container(pod(), runAsGroup=DEVELOPERS_GID), "containers"),
        (with_container(pod(), "initContainers", runAsUser=0), "initContainers"),
        (with_container(pod(), "initContainers", runAsGroup=BOB[1]), "initContainers"),
        (with_container(pod(), "ephemeralContainers", runAsUser=0), "ephemeralContainers"),
        (with_container(pod(None, None), "initContainers", runAsUser=ALICE[0], runAsGroup=ALICE[1]), "containers"),
        (pod(ALICE[1], ALICE[1]), "runAsUser"),  # alice's gid number as a uid
        (pod(RESEARCH_GID, RESEARCH_GID), "runAsUser"),  # the team's gid number as a uid
        (pod(ALICE[0], ALICE[0]), "runAsGroup"),  # alice's uid number as a gid
        (pod(fsGroup=CAROL[0]), "fsGroup"),  # a member's uid number as a group
        (with_container(pod(), allowPrivilegeEscalation=True), "allowPrivilegeEscalation"),
        (_without_safe(pod()), "allowPrivilegeEscalation"),  # unset is true for a non-root container
        (with_container(pod(), "initContainers", allowPrivilegeEscalation=True), "allowPrivilegeEscalation"),
        (with_container(pod(), "ephemeralContainers", allowPrivilegeEscalation=True), "allowPrivilegeEscalation"),
        (with_container(pod(), capabilities={"add": ["SETUID"]}), "capabilities"),
        (with_container(pod(), "initContainers", capabilities={"add": ["NET_RAW"]}), "capabilities"),
    ],
    ids=[
        "nothing-set",
        "no-uid",
        "no-gid",
        "root",
        "root-uid",
        "other-team-uid",
        "foreign-user-gid",
        "other-team-gid",
        "root-gid",
        "foreign-fsgroup",
        "root-fsgroup",
        "foreign-supplemental",
        "root-supplemental",
        "container-root",
        "container-other-uid",
        "container-foreign-gid",
        "init-root",
        "init-foreign-gid",
        "ephemeral-root",
        "init-set-but-main-not",
        "gid-as-uid",
        "team-gid-as-uid",
        "uid-as-gid",
        "uid-as-fsgroup",
        "escalation",
        "escalation-unset",
        "init-escalation",
        "ephemeral-escalation",
        "added-capability",
        "init-added-capability",
    ],
)
def test_pods_not_running_as_the_team_are_refused(case, why):
    refused = admit(case)
    assert refused, "admitted"
    assert any(why in message for message in refused), refused


@pytest.mark.parametrize("field", ["containers", "initContainers", "ephemeralContainers"])
def test_a_refusal_names_the_container_list_to_fix_as_the_pod_spec_spells_it(field):
    """The message is all a user gets: it names the list holding the offending container by its field in the pod
    spec, so `kubectl explain pod.spec.<field>` and the manifest's key are found from it."""
    refused = admit(with_container(pod(), field, runAsUser=0))
    named = {m.group(1) for m in (re.match(r"every one of (\S+) must run as", r) for r in refused) if m}
    assert named == {field}, refused


def test_the_other_teams_ids_are_refused_in_each_namespace():
    bob = pod(*BOB, fsGroup=DEVELOPERS_GID)
    assert admit(bob, namespace=DEVELOPERS) == []
    assert admit(bob, namespace=RESEARCH)
    assert admit(pod(), namespace=DEVELOPERS)


def test_kubectl_debug_adds_ephemeral_containers_through_the_subresource_and_is_checked():
    debug = with_container(pod(), "ephemeralContainers")  # inherits alice: fine
    assert admit(debug, resource="pods/ephemeralcontainers", operation="UPDATE") == []
    root = with_container(pod(), "ephemeralContainers", runAsUser=0)
    assert admit(root, resource="pods/ephemeralcontainers", operation="UPDATE")


def test_a_team_namespace_without_its_configmap_admits_nothing():
    assert admit(pod(), params={}) == [admission.NO_PARAMS]
    assert BINDING["spec"]["paramRef"] == {"name": ti.PARAMS_NAME, "parameterNotFoundAction": "Deny"}
    assert "namespace" not in BINDING["spec"]["paramRef"]  # each namespace's own ConfigMap


def test_a_policy_that_forgets_init_containers_lets_root_in():
    """The evaluator is not a rubber stamp: without the initContainers rules, a root init container is admitted."""
    weakened = copy.deepcopy(POLICY)
    weakened["spec"]["validations"] = [
        v for v in weakened["spec"]["validations"] if "initContainers" not in v["expression"]
    ]
    assert len(weakened["spec"]["validations"]) < len(POLICY["spec"]["validations"])
    root_init = with_container(pod(), "initContainers", runAsUser=0)
    assert admit(root_init, policy=weakened) == []
    assert admit(root_init)


def test_the_parameters_name_who_each_id_is():
    data = PARAMS[RESEARCH]["data"]
    assert data == {
        "uid.10001": "alice",
        "uid.10003": "carol",
        "gid.20001": "alice",
        "gid.20003": "carol",
        f"gid.{RESEARCH_GID}": "team research",
        "member.alice": "10001",
        "member.carol": "10003",
    }


def test_the_names_the_docs_give_operators_are_the_objects_deployed():
    """docs/eks.md tells an admin to check `kubectl get validatingadmissionpolicy <name>` after the first deploy and
    names the guard policy and the ConfigMap that lists a team's ids (docs/security.md the pod policy): each name
    there is an object the platform deploys, so the command finds it."""
    docs = "\n".join((ROOT / "docs" / page).read_text() for page in ("eks.md", "security.md"))
    objects = ti.team_admission(namespaces=[RESEARCH], platform=PLATFORM)
    policies = {o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    config_maps = {PARAMS[RESEARCH]["metadata"]["name"], MLFLOW_CONFIG_MAP}
    named_policies = set(re.findall(r"kubectl get\s+validatingadmissionpolicy\s+([\w-]+)", docs))
    named_policies |= set(re.findall(r"ValidatingAdmissionPolicy`? \(?`([\w-]+)`", docs))
    named_config_maps = set(re.findall(r"ConfigMap `([\w-]+)`", docs))
    assert len(named_policies) >= 2 and named_policies <= policies, (named_policies, policies)
    assert named_config_maps and named_config_maps <= config_maps, (named_config_maps, config_maps)
    assert PARAMS[RESEARCH]["metadata"]["name"] in named_config_maps


@pytest.mark.parametrize("obj", [POLICY, BINDING, PARAMS[RESEARCH]], ids=["policy", "binding", "params"])
def test_objects_match_the_kubernetes_schemas(obj):
    for version in ("1.30.0", "1.33.0"):
        kubernetes_validate.validate(obj, version, strict=True)


def test_studio_files_are_at_the_clusters_path_of_the_partition():
    own = ti.studio_files(
        user="alice",
        uid=10001,
        gid=10001,
        shared=False,
        shared_gid=5000,
        partition_parent="/data/studio/",
        cluster_mount_path="/fsx/",
    )
    assert own == ti.StudioFiles(
        claim="studio-alice", directory="/data/studio/alice", mount_path="/fsx/data/studio/alice", uid=10001, gid=10001
    )
    shared = ti.studio_files(
        user="alice",
        uid=10001,
        gid=10001,
        shared=True,
        shared_gid=5000,
        partition_parent="/data/studio",
        cluster_mount_path="/fsx",
    )
    assert shared == ti.StudioFiles(
        claim="studio-shared",
        directory="/data/studio/shared",
        mount_path="/fsx/data/studio/shared",
        uid=10001,
        gid=5000,
    )


# ---------------------------------------------------------------------------------------------- each team's ids
def _config(shared: bool, **overrides):
    import yaml as yaml_
    from platform_config.loading import parse_config

    data = yaml_.safe_load((ROOT / "config" / "examples" / "eks.yaml").read_text())
    data["users"] = [
        {"name": "alice", "uid": 10001, "gid": 20001},
        {"name": "bob", "uid": 10002, "gid": 20002},
        {"name": "carol", "uid": 10003, "gid": 20003},
        {"name": "dave", "uid": 10004, "gid": 20004},
    ]
    teams = data["eks"]["task_governance"]["teams"]
    teams[0]["members"] = ["alice", "carol"]
    teams[1]["members"] = []
    data["shared_fsx"] = shared
    return parse_config(data | overrides, "test")


@pytest.mark.parametrize("shared", [False, True], ids=["per-user", "shared"])
def test_each_team_may_use_exactly_its_members_ids_and_its_own_groups(shared):
    """Exactly: the members' uids; the team's gid, the members' primary gids and, in shared mode, the shared
    partition's gid. Not another team's member's gid, not a user in no team, not a uid number as a gid."""
    config = _config(shared)
    research, production, developers = config.eks.task_governance.teams
    uids, gids = ti.team_ids(config, research)
    shared_gid = {config.studio.shared_gid} if shared and config.studio.enabled else set()
    assert set(uids) == {10001, 10003}
    assert set(gids) == {ti.team_gid(research), 20001, 20003} | shared_gid
    assert ti.team_members(config, research) == {"alice": 10001, "carol": 10003}
    uids, gids = ti.team_ids(config, developers)
    assert (set(uids), set(gids)) == ({10002}, {ti.team_gid(developers), 20002} | shared_gid)
    assert ti.team_ids(config, production) == (
        {},
        {
            ti.team_gid(production): "team production",
            **({config.studio.shared_gid: "the shared Studio partition"} if shared_gid else {}),
        },
    )


@pytest.mark.parametrize("shared", [False, True], ids=["per-user", "shared"])
def test_each_member_of_a_team_gets_a_claim_on_their_studio_partition_at_the_clusters_path(shared):
    """What the team's namespace claims for each member (stacks/eks_cluster_stack.py): their own partition
    <data repository path>/<studio.partition_root>/<user>, or in shared mode the shared one with Studio's shared gid,
    at the cluster's path of that directory; only the team's members. Names are kept whole (a partition root and a
    path ending in 'x', which a sloppy strip would eat) and a trailing '/' is not doubled."""
    config = _config(
        shared,
        storage={"lustre": {"mount_path": "/lustre/", "data_repository": {"file_system_path": "/inbox/"}}},
        studio={"partition_root": "sandbox"},
    )
    research, production, developers = config.eks.task_governance.teams

    def files(user: str, uid: int, gid: int) -> ti.StudioFiles:
        name = "shared" if shared else user
        return ti.StudioFiles(
            claim=f"studio-{name}",
            directory=f"/inbox/sandbox/{name}",
            mount_path=f"/lustre/inbox/sandbox/{name}",
            uid=uid,
            gid=config.studio.shared_gid if shared else gid,
        )

    assert ti.team_studio_files(config, research) == {
        "alice": files("alice", 10001, 20001),
        "carol": files("carol", 10003, 20003),
    }
    assert ti.team_studio_files(config, developers) == {"bob": files("bob", 10002, 20002)}
    assert ti.team_studio_files(config, production) == {}
