"""Job objects a team member creates, through the platform's admission policies (manifests/team_identities.py)
evaluated by tests/admission.py: every job kind the team Role lets a member write runs only as that member's own
uid, a job that states no user is refused at creation with the whole fix, the training operator's own updates pass,
and the platform's ConfigMaps are out of members' reach while their own are not. The jobs AWS's tools produce come
from the pinned upstream revisions (tests/fixtures/upstream-jobs/, tools/upstream_job_fixtures.py)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import kubernetes_validate
import pytest
import yaml

from support import admission
from support.paths import ROOT
from manifests import kubernetes_objects as k8s
from manifests import team_identities as ti
from support.teams import ALICE, BOB, CAROL, DEVELOPERS, PARAMS, PLATFORM, RESEARCH, RESEARCH_GID

UPSTREAM = ROOT / "tests" / "fixtures" / "upstream-jobs"
MIRRORS = Path(os.environ.get("UPSTREAM_MIRRORS", "/work/.mirror"))
NAMESPACES = [RESEARCH, DEVELOPERS]
OBJECTS = ti.team_admission(namespaces=NAMESPACES, platform=PLATFORM)
POLICIES = {o["metadata"]["name"]: o for o in OBJECTS if o["kind"] == "ValidatingAdmissionPolicy"}
BINDINGS = {o["spec"]["policyName"]: o for o in OBJECTS if o["kind"] == "ValidatingAdmissionPolicyBinding"}
ROLE = k8s.job_submitter_role(namespace=RESEARCH, platform=PLATFORM)
QUEUE = {ti.QUEUE_LABEL: f"{RESEARCH}-localqueue"}


def member(name: str, team: str) -> dict:
    """The userInfo of a member's request: their own username (access entry) and their team's group."""
    return {"username": ti.member_username(name), "groups": [k8s.team_group(team), "system:authenticated"]}


AS_ALICE, AS_CAROL, AS_BOB = member("alice", "research"), member("carol", "research"), member("bob", "developers")


def admit(
    obj: Optional[dict],
    resource: str,
    *,
    user: dict = AS_ALICE,
    namespace: str = RESEARCH,
    operation: str = "CREATE",
    old: Optional[dict] = None,
    params: Optional[dict] = None,
) -> list[str]:
    """Every policy bound in the team namespaces, as the API server would run them for this request."""
    refused = []
    for name, policy in POLICIES.items():
        refused += admission.admit(
            obj,
            namespace=namespace,
            policy=policy,
            binding=BINDINGS[name],
            params=PARAMS if params is None else params,
            resource=resource,
            operation=operation,
            user=user,
            old=old,
        )
    return refused


def template(uid: Optional[int] = ALICE[0], gid: Optional[int] = ALICE[1], labels: Optional[dict] = None) -> dict:
    sc = {k: v for k, v in (("runAsUser", uid), ("runAsGroup", gid)) if v is not None}
    spec: dict[str, Any] = {
        "containers": [
            {"name": "train", "image": "repo/train:1.0", "securityContext": {"allowPrivilegeEscalation": False}}
        ]
    }
    if sc:
        spec["securityContext"] = sc
    return {"metadata": {"labels": dict(QUEUE if labels is None else labels)}, "spec": spec}


def job(resource: str, *templates: dict) -> dict:
    """A job of `resource`'s kind with these pod templates (one per replica spec)."""
    templates = templates or (template(),)
    meta = {"name": "j", "namespace": RESEARCH, "labels": dict(QUEUE)}
    if resource == "hyperpodpytorchjobs":
        spec = {"replicaSpecs": [{"name": f"r{i}", "replicas": 1, "template": t} for i, t in enumerate(templates)]}
        return {
            "apiVersion": "sagemaker.amazonaws.com/v1",
            "kind": "HyperPodPyTorchJob",
            "metadata": meta,
            "spec": spec,
        }
    if resource == "pytorchjobs":
        roles = ["Master", "Worker"]
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": meta,
            "spec": {
                "pytorchReplicaSpecs": {roles[i]: {"replicas": 1, "template": t} for i, t in enumerate(templates)}
            },
        }
    if resource == "mpijobs":
        roles = ["Launcher", "Worker"]
        return {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": meta,
            "spec": {"mpiReplicaSpecs": {roles[i]: {"replicas": 1, "template": t} for i, t in enumerate(templates)}},
        }
    assert resource == "jobs" and len(templates) == 1
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": templates[0]}}


KINDS = list(ti.JOB_KINDS)
MULTI = ["hyperpodpytorchjobs", "pytorchjobs", "mpijobs"]


# ---------------------------------------------------------------------------------------------- the Role and the kinds
def test_every_object_kind_the_role_lets_a_member_write_is_a_guarded_job_or_a_configmap():
    """Through any kind the Role allows, a member's object reaches a job policy: adding a writable kind (a Deployment,
    bare pods, a CronJob) without a policy for it fails here."""
    writable = {
        (group, resource)
        for rule in ROLE["rules"]
        if {"create", "update", "patch"} & set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    guarded = {(kind.api_group, kind.resource) for kind in ti.JOB_KINDS.values()}
    assert writable == guarded | {("", "configmaps")}
    for policy in POLICIES.values():
        assert policy["spec"]["failurePolicy"] == "Fail"
    for kind in ti.JOB_KINDS.values():
        (rule,) = POLICIES[ti.job_policy_name(kind.resource)]["spec"]["matchConstraints"]["resourceRules"]
        assert rule == {
            "apiGroups": [kind.api_group],
            "apiVersions": [kind.version],
            "operations": ["CREATE", "UPDATE"],
            "resources": [kind.resource],
        }
    assert not any(r["resources"] == ["secrets"] for r in ROLE["rules"])


# ---------------------------------------------------------------------------------------------- one identity per member
@pytest.mark.parametrize("resource", KINDS)
def test_a_member_may_run_a_job_as_themself(resource):
    assert admit(job(resource), resource) == []
    carol = job(resource, template(*CAROL))
    assert admit(carol, resource, user=AS_CAROL) == []


@pytest.mark.parametrize("resource", KINDS)
def test_a_member_cannot_run_a_job_as_a_teammate(resource):
    """carol and alice share a team (so its pods may run as either), but carol's job may not run as alice."""
    refused = admit(job(resource), resource, user=AS_CAROL)
    assert f"every one of containers must run as your uid: runAsUser {CAROL[0]} (yours)" in refused, refused
    assert admit(job(resource), resource, user=AS_CAROL, operation="UPDATE", old=job(resource))


@pytest.mark.parametrize("resource", KINDS)
def test_a_job_may_state_its_user_on_each_container_instead_of_the_pod(resource):
    """runAsUser and runAsGroup on the container alone (the pod's securityContext unset) are a stated user: a job
    written that way runs as its member, and the same stated as a teammate is refused."""

    def per_container(uid: int, gid: int) -> dict:
        t = template(None, None)
        t["spec"]["containers"][0]["securityContext"] |= {"runAsUser": uid, "runAsGroup": gid}
        return t

    assert "securityContext" not in per_container(*ALICE)["spec"]
    assert admit(job(resource, per_container(*ALICE)), resource) == []
    assert admit(job(resource, per_container(*CAROL)), resource)


@pytest.mark.parametrize("resource", MULTI)
def test_every_replica_template_must_run_as_the_requester(resource):
    mixed = job(resource, template(), template(*CAROL))
    assert admit(mixed, resource) and admit(mixed, resource, user=AS_CAROL)
    init = job(resource, template())
    init_spec = init["spec"]
    tpl = (
        init_spec["replicaSpecs"][0]
        if resource == "hyperpodpytorchjobs"
        else next(iter(init_spec[f"{'pytorch' if resource == 'pytorchjobs' else 'mpi'}ReplicaSpecs"].values()))
    )
    tpl["template"]["spec"]["initContainers"] = [
        {"name": "i", "image": "x", "securityContext": {"runAsUser": CAROL[0], "allowPrivilegeEscalation": False}}
    ]
    assert any("initContainers" in m for m in admit(init, resource))


@pytest.mark.parametrize("resource", KINDS)
def test_another_teams_member_cannot_submit_in_the_namespace(resource):
    bob = job(resource, template(*BOB))
    refused = admit(bob, resource, user=AS_BOB)
    assert any("are not a member" in m and "hyperpod-user:bob" in m for m in refused), refused
    in_own_namespace = job(resource, template(*BOB, labels={ti.QUEUE_LABEL: f"{DEVELOPERS}-localqueue"}))
    in_own_namespace["metadata"] |= {"namespace": DEVELOPERS, "labels": {ti.QUEUE_LABEL: f"{DEVELOPERS}-localqueue"}}
    assert admit(in_own_namespace, resource, user=AS_BOB, namespace=DEVELOPERS) == []


@pytest.mark.parametrize("resource", KINDS)
def test_the_operators_own_updates_and_administrators_are_not_held_to_a_member(resource):
    """Elastic scaling: the training operator changes replica counts on a job that runs as alice; it is no member."""
    scaled = job(resource)
    assert admit(scaled, resource, user=admission.OPERATOR, operation="UPDATE", old=job(resource)) == []
    assert admit(scaled, resource, user={"username": "kubernetes-admin", "groups": ["system:masters"]}) == []


@pytest.mark.parametrize("resource", KINDS)
@pytest.mark.parametrize(
    "case, why",
    [
        (template(uid=None), "runAsUser"),
        (template(gid=None), "runAsGroup"),
        (template(gid=BOB[1]), "runAsGroup"),
        (template(gid=ALICE[0]), "runAsGroup"),  # alice's uid number is not a gid of the team
        (template(uid=ALICE[1]), "runAsUser"),  # nor is her gid number her uid
        (template(labels={}), ti.QUEUE_LABEL),
        (template(labels={ti.QUEUE_LABEL: f"{DEVELOPERS}-localqueue"}), ti.QUEUE_LABEL),
    ],
    ids=["no-uid", "no-gid", "foreign-gid", "uid-as-gid", "gid-as-uid", "no-template-queue", "other-queue"],
)
def test_jobs_whose_pods_would_be_refused_are_refused_at_creation(resource, case, why):
    refused = admit(job(resource, case), resource)
    assert any(why in m for m in refused), refused


@pytest.mark.parametrize("resource", KINDS)
def test_privilege_escalation_and_added_capabilities_are_refused_in_job_templates(resource):
    escalating = template()
    escalating["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": True}
    assert any("allowPrivilegeEscalation" in m for m in admit(job(resource, escalating), resource))
    caps = template()
    caps["spec"]["containers"][0]["securityContext"]["capabilities"] = {"add": ["SETUID"]}
    assert any("capabilities" in m for m in admit(job(resource, caps), resource))


@pytest.mark.parametrize("resource", KINDS)
def test_a_job_template_without_its_containers_list_is_refused_at_creation(resource):
    """A template whose `containers` key is misspelt (`container:`) states no container the policy can hold to a
    uid; every pod it would make is refused (a pod needs a container), so the job is refused now, not accepted with
    nothing that can ever run."""
    misspelt = template()
    misspelt["spec"]["container"] = misspelt["spec"].pop("containers")
    assert admit(job(resource, misspelt), resource)


def test_a_job_with_no_queue_label_is_refused():
    unlabelled = job("hyperpodpytorchjobs")
    del unlabelled["metadata"]["labels"]
    assert any(ti.QUEUE_LABEL in m for m in admit(unlabelled, "hyperpodpytorchjobs"))


# ---------------------------------------------------------------------------------------------- AWS's own jobs
def _upstream(name: str) -> dict:
    (doc,) = [d for d in yaml.safe_load_all((UPSTREAM / name).read_text()) if d]
    return doc


def _state_the_user(spec: dict, uid: int, gid: int) -> None:
    """What docs/eks.md ('Jobs from hyp') tells a member to add to the template."""
    spec["securityContext"] = {"runAsUser": uid, "runAsGroup": gid}
    for container in spec["containers"]:
        container.setdefault("securityContext", {})["allowPrivilegeEscalation"] = False


def test_the_job_hyp_renders_is_refused_at_creation_with_the_whole_fix_and_runs_once_fixed():
    """`hyp create hyp-pytorch-job` has no security-context option: its job is refused at once (never accepted and
    left with every pod refused), and the first message says what to set, with alice's uid and the team's gids."""
    hyp = _upstream("hyp-pytorch-job.yaml")
    assert hyp["metadata"]["namespace"] == RESEARCH
    refused = admit(hyp, "hyperpodpytorchjobs")
    assert refused and refused[0].startswith(ti.STATE_YOUR_USER), refused
    assert f"runAsUser: {ALICE[0]}," in refused[0] and str(RESEARCH_GID) in refused[0] and str(ALICE[1]) in refused[0]
    assert "hyp init hyp-pytorch-job" in refused[0]
    fixed = copy.deepcopy(hyp)
    (replica,) = fixed["spec"]["replicaSpecs"]
    _state_the_user(replica["template"]["spec"], *ALICE)
    assert admit(fixed, "hyperpodpytorchjobs") == []
    assert admit(fixed, "hyperpodpytorchjobs", user=AS_CAROL)  # still alice's, not carol's
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "finetune-pod-0", "namespace": RESEARCH},
        "spec": replica["template"]["spec"],
    }
    assert admit(pod, "pods", user=admission.OPERATOR) == []  # and its pods are admitted


def test_the_task_governance_pytorchjob_is_refused_at_creation_and_runs_once_it_states_its_user():
    tg = _upstream("task-governance-pytorchjob.yaml")
    tg["metadata"]["namespace"] = RESEARCH
    for labels in (
        tg["metadata"]["labels"],
        tg["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"],
    ):
        labels[ti.QUEUE_LABEL] = f"{RESEARCH}-localqueue"
    refused = admit(tg, "pytorchjobs")
    assert refused and refused[0].startswith(ti.STATE_YOUR_USER), refused
    _state_the_user(tg["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"], *ALICE)
    assert admit(tg, "pytorchjobs") == []
    assert admit(tg, "pytorchjobs", user=AS_CAROL)


def test_upstream_job_fixtures_are_generated_from_the_pinned_revisions():
    if (
        not (MIRRORS / "aws+sagemaker-hyperpod-cli" / "repo").exists()
        or not (MIRRORS / "awslabs+awsome-distributed-ai" / "repo").exists()
    ):
        pytest.skip(f"no clones under {MIRRORS} (set UPSTREAM_MIRRORS; CI cannot reach GitHub)")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "upstream_job_fixtures.py"), "--mirrors", str(MIRRORS), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------------------------- ConfigMaps
def config_map(name: str, labels: Optional[dict] = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": RESEARCH}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"args.yaml": "x: 1"}}


def test_members_may_write_the_configmaps_their_jobs_mount():
    mine = config_map("qwen-dolly-lora-args")
    assert admit(mine, "configmaps") == []
    assert admit(mine, "configmaps", operation="UPDATE", old=mine) == []
    assert admit(None, "configmaps", operation="DELETE", old=mine) == []
    verbs = {v for r in ROLE["rules"] if r["resources"] == ["configmaps"] for v in r["verbs"]}
    assert {"create", "update", "patch", "delete"} <= verbs


@pytest.mark.parametrize("name", ti.PROTECTED_CONFIG_MAPS)
def test_members_cannot_touch_the_platforms_configmaps(name):
    platform = PARAMS[RESEARCH] if name == ti.PARAMS_NAME else config_map(name, {k8s.PLATFORM_LABEL: PLATFORM})
    widened = copy.deepcopy(platform)
    widened["data"][f"uid.{BOB[0]}"] = "bob"
    assert admit(widened, "configmaps", operation="UPDATE", old=platform)
    assert admit(None, "configmaps", operation="DELETE", old=platform)
    assert admit(config_map(name), "configmaps")  # in its place, unlabelled
    relabelled = copy.deepcopy(widened)
    relabelled["metadata"]["labels"] = {}
    assert admit(relabelled, "configmaps", operation="UPDATE", old=platform)
    assert admit(widened, "configmaps", operation="UPDATE", old=platform, user=admission.OPERATOR) == []


def test_members_cannot_make_a_configmap_look_like_the_platforms():
    assert admit(config_map("x", {k8s.PLATFORM_LABEL: PLATFORM}), "configmaps")
    labelled = config_map("x", {k8s.PLATFORM_LABEL: PLATFORM})
    assert admit(config_map("x"), "configmaps", operation="UPDATE", old=labelled)


@pytest.mark.parametrize("obj", OBJECTS, ids=[o["metadata"]["name"] + "-" + o["kind"] for o in OBJECTS])
def test_admission_objects_match_the_kubernetes_schemas(obj):
    for version in ("1.30.0", "1.33.0"):
        kubernetes_validate.validate(obj, version, strict=True)
