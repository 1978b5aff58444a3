"""EKS teams kept apart on the nodes: network policies (egress to the nodes' instance metadata, ingress between
team namespaces, checked by an evaluator of NetworkPolicy semantics), what waits for a team's namespace objects, and
FSx volumes mounted nosuid."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from support.template import kubernetes_manifests, kubernetes_objects, kubernetes_patches, resources
from support.variants import EKS_KUBERNETES_VERSION


# ---------------------------------------------------------------------------------------------- node credentials
def egress_allowed(policies: list[dict], namespace: str, address: str) -> bool:
    """NetworkPolicy semantics for an egress to `address` from a pod of `namespace` (not another pod's IP): with no
    policy selecting the pod everything is allowed; otherwise only what some rule's ipBlock admits."""
    import ipaddress

    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == namespace
        and p["spec"]["podSelector"] == {}
        and "Egress" in p["spec"]["policyTypes"]
    ]
    if not selecting:
        return True
    ip = ipaddress.ip_address(address)
    for policy in selecting:
        for rule in policy["spec"].get("egress", []):
            for peer in rule.get("to", []):
                block = peer.get("ipBlock")
                if (
                    block
                    and ip in ipaddress.ip_network(block["cidr"])
                    and not any(ip in ipaddress.ip_network(e) for e in block.get("except", []))
                ):
                    return True
    return False


def test_vpc_cni_enforces_network_policies(synth):
    (cni,) = [
        a["Properties"]
        for a in resources(synth("eks").templates["eks"], "AWS::EKS::Addon").values()
        if a["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert json.loads(cni["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}


@pytest.mark.parametrize("variant", ["eks", "eks_shared"])
def test_pods_of_teams_and_default_cannot_reach_the_nodes_instance_metadata(synth, variant):
    """Every namespace a Studio user can run pods in (their team's, and default) carries the egress policy: the
    instance metadata address (and every other IPv4 link-local address a node serves, such as a credential proxy) is
    closed, the Pod Identity Agent, other pods, the VPC and the internet stay open. Namespaces of the platform's own
    components (kube-system, aws-hyperpod, ...) carry none."""
    s = synth(variant)
    objects = kubernetes_objects(s.templates["cluster"])
    policies = [o for o in objects if o["kind"] == "NetworkPolicy" and "Egress" in o["spec"]["policyTypes"]]
    writable = {"default"} | {f"hyperpod-ns-{t.name}" for t in s.config.eks.task_governance.teams}
    assert {p["metadata"]["namespace"] for p in policies} == writable
    assert len(writable) == 1 + len(s.config.eks.task_governance.teams)
    for namespace in writable:
        for closed in ("169.254.169.254", "169.254.169.253", "169.254.169.123", "169.254.170.2", "169.254.0.1"):
            assert not egress_allowed(policies, namespace, closed), (namespace, closed)
        for open_ in ("169.254.170.23", "10.0.64.17", "172.20.0.10", "52.94.1.1"):
            assert egress_allowed(policies, namespace, open_), (namespace, open_)
        (policy,) = [p for p in policies if p["metadata"]["namespace"] == namespace]
        assert {"namespaceSelector": {}} in policy["spec"]["egress"][0]["to"]  # every pod, in any namespace
        kubernetes_validate.validate(policy, EKS_KUBERNETES_VERSION, strict=True)
    assert egress_allowed(policies, "kube-system", "169.254.169.254")  # the platform's own: not selected
    # The guard is applied once the team namespaces exist.
    (guard_id,) = [
        k
        for k, v in kubernetes_manifests(s.templates["cluster"]).items()
        if any(o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "deny-node-credentials" for o in v)
    ]
    assert set(namespace_labels(s.templates["cluster"])) <= set(
        s.templates["cluster"]["Resources"][guard_id]["DependsOn"]
    )


def namespace_labels(template: dict) -> list[str]:
    """The ids of the patches that label each team namespace once task governance has created it."""
    return kubernetes_patches(template, "namespace/hyperpod-ns-")


def ingress_allowed(policies: list[dict], namespace: str, source_namespace: str) -> bool:
    """NetworkPolicy semantics for a connection into a pod of `namespace` from a pod of `source_namespace`: with no
    policy selecting the pod for Ingress everything is allowed; otherwise only what some rule's peer admits (a
    podSelector alone means the policy's own namespace; a namespaceSelector matches the namespace's name label)."""
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == namespace
        and p["spec"]["podSelector"] == {}
        and "Ingress" in p["spec"]["policyTypes"]
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                assert set(peer) <= {"podSelector", "namespaceSelector"}, peer
                if "namespaceSelector" not in peer:
                    assert peer["podSelector"] == {}
                    if source_namespace == namespace:
                        return True
                    continue
                selector = peer["namespaceSelector"]
                assert set(selector) == {"matchExpressions"}, selector
                if all(
                    e["key"] == "kubernetes.io/metadata.name"
                    and e["operator"] == "In"
                    and source_namespace in e["values"]
                    for e in selector["matchExpressions"]
                ):
                    return True
    return False


@pytest.mark.parametrize("variant", ["eks", "eks_shared"])
def test_team_namespaces_accept_connections_only_from_their_own_pods_and_the_platform(synth, variant):
    """Another team's pod (or default's) cannot reach a job's rendezvous (c10d TCPStore: unauthenticated); the
    training operator and the observability collector can."""
    s = synth(variant)
    objects = kubernetes_objects(s.templates["cluster"])
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    teams = [f"hyperpod-ns-{t.name}" for t in s.config.eks.task_governance.teams]
    for namespace in teams:
        assert ingress_allowed(policies, namespace, namespace)
        for other in {"default", "kube-system", "kueue-system", *teams} - {namespace}:
            assert not ingress_allowed(policies, namespace, other), (namespace, other)
        for platform in ("aws-hyperpod", "hyperpod-observability"):
            assert ingress_allowed(policies, namespace, platform), (namespace, platform)
        for policy in (p for p in policies if p["metadata"]["namespace"] == namespace):
            kubernetes_validate.validate(policy, EKS_KUBERNETES_VERSION, strict=True)
    applied = kubernetes_manifests(s.templates["cluster"])
    (ingress_id,) = [k for k, v in applied.items() if any(o["metadata"]["name"] == "team-ingress-only" for o in v)]
    assert set(namespace_labels(s.templates["cluster"])) <= set(
        s.templates["cluster"]["Resources"][ingress_id]["DependsOn"]
    )


def test_the_ingress_evaluator_is_not_a_rubber_stamp():
    from manifests.kubernetes_objects import team_ingress

    open_to_all = team_ingress(namespace="hyperpod-ns-a", platform_namespaces=["aws-hyperpod"], platform="p")
    open_to_all["spec"]["ingress"][0]["from"][1]["namespaceSelector"]["matchExpressions"][0]["values"].append(
        "hyperpod-ns-b"
    )
    assert ingress_allowed([open_to_all], "hyperpod-ns-a", "hyperpod-ns-b")
    assert not ingress_allowed(
        [team_ingress(namespace="hyperpod-ns-a", platform_namespaces=["aws-hyperpod"], platform="p")],
        "hyperpod-ns-a",
        "hyperpod-ns-b",
    )
    assert ingress_allowed([], "hyperpod-ns-a", "hyperpod-ns-b")


def test_quotas_and_the_scheduler_policy_wait_for_kueue_and_team_objects_for_their_namespace(synth):
    """As AWS's Terraform: quotas only once deployment/kueue-controller-manager (kueue-system) is available. Each
    quota makes task governance create the team's namespace; the stack waits for it, labels it, and only then puts
    its objects there."""
    t = synth("eks").templates["cluster"]
    res = t["Resources"]
    values = {k: r["Properties"] for k, r in resources(t, "Custom::AWSCDK-EKS-KubernetesObjectValue").items()}
    (kueue,) = [k for k, v in values.items() if v["ObjectType"] == "deployment"]
    assert (values[kueue]["ObjectName"], values[kueue]["ObjectNamespace"]) == (
        "kueue-controller-manager",
        "kueue-system",
    )
    assert values[kueue]["JsonPath"] == ".status.availableReplicas"
    (addon,) = [
        k
        for k, r in res.items()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-taskgovernance"
    ]
    assert addon in res[kueue]["DependsOn"]
    governance = {k: r for k, r in res.items() if r["Type"].endswith(("ComputeQuota", "ClusterSchedulerConfig"))}
    assert len(governance) == 1 + len(synth("eks").config.eks.task_governance.teams)
    for rid, r in governance.items():
        assert kueue in r["DependsOn"], rid
    for team in synth("eks").config.eks.task_governance.teams:
        (wait,) = [
            k
            for k, v in values.items()
            if v["ObjectType"] == "namespace" and v["ObjectName"] == f"hyperpod-ns-{team.name}"
        ]
        (quota,) = [
            k
            for k, r in governance.items()
            if r["Properties"].get("ComputeQuotaTarget", {}).get("TeamName") == team.name
        ]
        assert quota in res[wait]["DependsOn"]
        (label,) = [k for k in namespace_labels(t) if res[k]["Properties"]["ResourceName"].endswith(f"-{team.name}")]
        assert wait in res[label]["DependsOn"]
    for rid, objects in kubernetes_manifests(t).items():
        if any(o.get("metadata", {}).get("namespace", "").startswith("hyperpod-ns-") for o in objects):
            assert set(namespace_labels(t)) <= set(res[rid]["DependsOn"]), rid


def test_fsx_volumes_of_pods_are_mounted_nosuid_nodev(synth):
    for volume in (o for o in kubernetes_objects(synth("eks").templates["cluster"]) if o["kind"] == "PersistentVolume"):
        assert {"nosuid", "nodev", "flock"} <= set(volume["spec"]["mountOptions"])
        assert not {"suid", "dev"} & set(volume["spec"]["mountOptions"])
