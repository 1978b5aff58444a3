"""EKS, as synthesized: each team's namespace claims its members' Studio partitions (or the shared one), and the
team-identity admission policy (manifests/team_identities.py) lets pods there run only as the team's members. The
committed job examples are run through that synthesized policy (tests/support/admission.py evaluates its CEL)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from support import admission
from support.paths import ROOT
from manifests import team_identities as ti
from support.template import kubernetes_manifests, kubernetes_objects, kubernetes_patches, resources

EXAMPLES = sorted((ROOT / "examples" / "manifests").glob("*.yaml")) + sorted(
    p for p in (ROOT / "examples" / "finetune" / "manifests").glob("*.yaml") if not p.stem.endswith("-evaluate")
)


def identity_objects(template: dict) -> tuple[dict, dict, dict[str, dict]]:
    """The pod policy, its binding, and each team namespace's parameters, as synthesized."""
    policies, bindings, params = admission_objects(template)
    return policies[ti.POLICY_NAME], bindings[ti.POLICY_NAME], params


def admission_objects(template: dict) -> tuple[dict[str, dict], dict[str, dict], dict[str, dict]]:
    objects = kubernetes_objects(template)
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {o["spec"]["policyName"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    params = {
        o["metadata"]["namespace"]: o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == ti.PARAMS_NAME
    }
    return policies, bindings, params


def admit_all(obj, *, template: dict, namespace: str, resource: str, user: dict) -> list[str]:
    policies, bindings, params = admission_objects(template)
    return [
        m
        for name, policy in policies.items()
        for m in admission.admit(
            obj,
            namespace=namespace,
            policy=policy,
            binding=bindings[name],
            params=params,
            resource=resource,
            user=user,
        )
    ]


def member(user: str, team: str) -> dict:
    return {"username": ti.member_username(user), "groups": [f"hyperpod-team-{team}", "system:authenticated"]}


@pytest.mark.parametrize("variant", ["eks", "eks_shared"])
def test_every_team_namespace_is_bound_with_its_members_as_parameters(synth, variant):
    s = synth(variant)
    policy, binding, params = identity_objects(s.templates["cluster"])
    teams = s.config.eks.task_governance.teams
    namespaces = {f"hyperpod-ns-{t.name}" for t in teams}
    assert set(binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"]) == namespaces
    assert set(params) == namespaces
    users = {u.name: u for u in s.config.users}
    for team in teams:
        data = params[f"hyperpod-ns-{team.name}"]["data"]
        assert {k for k in data if k.startswith("uid.")} == {f"uid.{users[m].uid}" for m in team.members}
        assert {k: v for k, v in data.items() if k.startswith("member.")} == {
            f"member.{m}": str(users[m].uid) for m in team.members
        }
        assert f"gid.{ti.team_gid(team)}" in data
        assert (f"gid.{s.config.studio.shared_gid}" in data) is s.config.shared_fsx
    # Applied in order: the binding after the policy and the namespaces, the parameters after the namespaces.
    applied = kubernetes_manifests(s.templates["cluster"])
    (policy_id,) = [k for k, objs in applied.items() if any(o["kind"] == "ValidatingAdmissionPolicy" for o in objs)]
    (binding_id,) = [
        k for k, objs in applied.items() if any(o["kind"] == "ValidatingAdmissionPolicyBinding" for o in objs)
    ]
    bound = {o["spec"]["policyName"] for o in applied[binding_id]}
    assert bound == {ti.POLICY_NAME, ti.CONFIG_GUARD_NAME, *(ti.job_policy_name(r) for r in ti.JOB_KINDS)}
    assert {o["metadata"]["name"] for o in applied[policy_id]} == bound
    namespaces_ids = set(kubernetes_patches(s.templates["cluster"], "namespace/hyperpod-ns-"))
    (params_id,) = [
        k
        for k, objs in applied.items()
        if any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == ti.PARAMS_NAME for o in objs)
    ]
    resources_ = s.templates["cluster"]["Resources"]
    assert {policy_id, *namespaces_ids} <= set(resources_[binding_id]["DependsOn"])
    assert namespaces_ids <= set(resources_[params_id]["DependsOn"])


def test_per_user_mode_claims_each_members_partition_in_their_team_namespace(synth):
    s = synth("eks")
    assert not s.config.shared_fsx
    objects = kubernetes_objects(s.templates["cluster"])
    claims = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"].startswith("studio-")
    }
    assert claims == {
        (f"hyperpod-ns-{t.name}", f"studio-{m}") for t in s.config.eks.task_governance.teams for m in t.members
    }
    volumes = {o["spec"]["claimRef"]["name"]: o["spec"] for o in objects if o["kind"] == "PersistentVolume"}
    for _, claim in claims:
        user = claim.removeprefix("studio-")
        spec = volumes[claim]
        assert spec["csi"]["volumeAttributes"]["mountname"] == f"TOKEN/data/studio/{user}"  # only that partition
        assert spec["accessModes"] == ["ReadWriteMany"] and spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["mountOptions"] == ["flock", "nosuid", "nodev"]


def test_shared_mode_claims_the_shared_partition_once_per_team(synth):
    s = synth("eks_shared")
    objects = kubernetes_objects(s.templates["cluster"])
    claims = [
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"].startswith("studio-")
    ]
    with_members = {f"hyperpod-ns-{t.name}" for t in s.config.eks.task_governance.teams if t.members}
    assert sorted(claims) == sorted((ns, "studio-shared") for ns in with_members)
    for o in objects:
        if o["kind"] == "PersistentVolume" and o["spec"]["claimRef"]["name"] == "studio-shared":
            assert o["spec"]["csi"]["volumeAttributes"]["mountname"] == "TOKEN/data/studio/shared"


def _pod(manifest: dict) -> dict:
    (replica,) = manifest["spec"]["replicaSpecs"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worker-0", "namespace": manifest["metadata"]["namespace"]},
        "spec": replica["template"]["spec"],
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_jobs_are_admitted_in_their_team_namespace_only(synth, path: Path):
    policy, binding, params = identity_objects(synth("eks").templates["cluster"])
    (job,) = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == "HyperPodPyTorchJob"]
    pod = _pod(job)
    own = pod["metadata"]["namespace"]
    assert admission.admit(pod, namespace=own, policy=policy, binding=binding, params=params) == []
    for other in set(params) - {own}:
        assert admission.admit(pod, namespace=other, policy=policy, binding=binding, params=params), other
    as_root = copy.deepcopy(pod)
    as_root["spec"]["securityContext"]["runAsUser"] = 0
    assert admission.admit(as_root, namespace=own, policy=policy, binding=binding, params=params)


EVERY_EXAMPLE = EXAMPLES + sorted((ROOT / "examples" / "finetune" / "manifests").glob("*-evaluate.yaml"))
JOB_RESOURCES = {"HyperPodPyTorchJob": "hyperpodpytorchjobs", "Job": "jobs", "ConfigMap": "configmaps"}


@pytest.mark.parametrize("path", sorted(set(EVERY_EXAMPLE)), ids=[p.name for p in sorted(set(EVERY_EXAMPLE))])
def test_every_shipped_example_is_created_by_its_user_and_by_nobody_else(synth, path: Path):
    """As its user applies it (kubectl apply -f), every object of the example is admitted by every synthesized policy;
    a teammate applying it (a job running as someone else) and another team's member are refused."""
    template = synth("eks").templates["cluster"]
    config = synth("eks").config
    teams = {t.name: t for t in config.eks.task_governance.teams}
    uid_owner = {u.uid: u.name for u in config.users}
    for doc in yaml.safe_load_all(path.read_text()):
        namespace = doc["metadata"]["namespace"]
        team = teams[namespace.removeprefix("hyperpod-ns-")]
        resource = JOB_RESOURCES[doc["kind"]]
        if doc["kind"] == "ConfigMap":
            assert (
                admit_all(
                    doc,
                    template=template,
                    namespace=namespace,
                    resource=resource,
                    user=member(team.members[0], team.name),
                )
                == []
            )
            continue
        spec = (
            doc["spec"]["replicaSpecs"][0]["template"]["spec"]
            if "replicaSpecs" in doc["spec"]
            else doc["spec"]["template"]["spec"]
        )
        owner = uid_owner[spec["securityContext"]["runAsUser"]]
        assert (
            admit_all(
                doc,
                template=template,
                namespace=namespace,
                resource=resource,
                user=member(owner, team.name),
            )
            == []
        ), path
        for other in config.users:
            if other.name == owner:
                continue
            other_team = next((t.name for t in teams.values() if other.name in t.members), team.name)
            assert admit_all(
                doc,
                template=template,
                namespace=namespace,
                resource=resource,
                user=member(other.name, other_team),
            ), (path, other.name)


def test_the_policy_is_applied_by_the_stack_not_a_controller(synth):
    t = synth("eks").templates["cluster"]
    kinds = {o["kind"] for o in kubernetes_objects(t)}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds
    assert "ValidatingWebhookConfiguration" not in kinds and "Deployment" not in kinds
    assert resources(t, "Custom::AWSCDK-EKS-KubernetesResource")
