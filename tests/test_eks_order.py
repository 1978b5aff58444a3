"""What the synthesized EKS templates make CloudFormation do, modelled from the templates themselves: the order in
which resources are created, and whether each Lambda in a VPC can reach the services it calls."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest

from cli.stack_graph import ancestors, stack_dependencies
from support.template import manifest_objects

# EKS add-ons made only of DaemonSets (and their configuration): complete on a cluster without nodes. Every other
# add-on runs a Deployment, whose pods must schedule before EKS reports it ACTIVE.
DAEMONSET_ADDONS = {"vpc-cni", "kube-proxy", "eks-pod-identity-agent"}
# API groups served through an add-on's admission webhook: objects of these groups need its pods ready.
WEBHOOK_GROUPS = {
    "kueue.x-k8s.io": "amazon-sagemaker-hyperpod-taskgovernance",
    "cert-manager.io": "cert-manager",
    "sagemaker.amazonaws.com": "amazon-sagemaker-hyperpod-training-operator",
}


def references(value: Any) -> Iterator[str]:
    """Logical ids a property value refers to (Ref, Fn::GetAtt, Fn::Sub's ${X} and ${X.Attr})."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            yield value["Ref"]
        elif set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            yield target[0] if isinstance(target, list) else target.split(".")[0]
        else:
            if "Fn::Sub" in value:
                body = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
                yield from (m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", body))
            for v in value.values():
                yield from references(v)
    elif isinstance(value, list):
        for v in value:
            yield from references(v)


def creation_graph(template: dict) -> dict[str, set[str]]:
    """Logical id -> ids CloudFormation creates before it (DependsOn and references, transitively)."""
    resources = template["Resources"]
    direct = {}
    for rid, res in resources.items():
        depends = res.get("DependsOn", [])
        depends = [depends] if isinstance(depends, str) else depends
        direct[rid] = {d for d in [*depends, *references(res.get("Properties", {}))] if d in resources}
    before: dict[str, set[str]] = {}

    def visit(rid: str) -> set[str]:
        if rid not in before:
            before[rid] = set()
            for d in direct[rid]:
                before[rid] |= {d} | visit(d)
        return before[rid]

    for rid in resources:
        visit(rid)
    return before


def manifest_groups(resource: dict) -> set[str]:
    manifest = resource["Properties"]["Manifest"]
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    return {
        group
        for group in WEBHOOK_GROUPS
        if f'"apiVersion": "{group}/' in text.replace('\\"', '"')
        or f'"apiVersion":"{group}/' in text.replace('\\"', '"')
    }


def waits_for_pods(template: dict) -> dict[str, str]:
    """Resources whose creation completes only once pods are ready, with the reason."""
    found = {}
    for rid, res in template["Resources"].items():
        props = res.get("Properties", {})
        if res["Type"] == "Custom::AWSCDK-EKS-HelmChart" and props.get("Wait") in (True, "true"):
            found[rid] = f"helm release {props['Release']} waits for its pods"
        elif res["Type"] == "AWS::EKS::Addon" and props["AddonName"] not in DAEMONSET_ADDONS:
            found[rid] = f"add-on {props['AddonName']} runs a Deployment"
    return found


def platform_order(templates: dict[str, dict], deps: dict[str, set[str]]) -> tuple[dict, dict[str, set[str]]]:
    """Every stack's resources as one template (ids prefixed `<stack>/`) and the creation graph across stacks: a
    resource comes after its own stack's predecessors and after every resource of each stack its stack waits for
    (the assembly's stack dependencies, which `cdk deploy` follows)."""
    resources, before = {}, {}
    for stack, template in templates.items():
        local = creation_graph(template)
        earlier = {f"{o}/{r}" for o in ancestors(deps, stack) if o in templates for r in templates[o]["Resources"]}
        for rid, res in template["Resources"].items():
            resources[f"{stack}/{rid}"] = res
            before[f"{stack}/{rid}"] = {f"{stack}/{d}" for d in local[rid]} | earlier
    return {"Resources": resources}, before


def synthesized_order(s) -> tuple[dict, dict[str, set[str]]]:
    return platform_order(
        {f"{s.config.name}-{role}": t for role, t in s.templates.items()}, stack_dependencies(s.out_dir)
    )


def addon_tolerations(resource: dict) -> list[dict]:
    """The tolerations an add-on's pods get from its configurationValues (every component's, which must agree)."""
    values = resource["Properties"].get("ConfigurationValues")
    if not values:
        return []
    values = json.loads(values)
    found = [values.get("tolerations", [])] + [
        v["tolerations"] for v in values.values() if isinstance(v, dict) and "tolerations" in v
    ]
    assert all(f == found[0] for f in found), f"components tolerate different taints: {found}"
    return found[0]


def node_wait_problems(template: dict, before: dict[str, set[str]], hyperpod: str) -> dict[str, str]:
    """Custom::SchedulableNode waits (lambda/node_readiness) by id, each None if sound, else why not: it must come after
    the HyperPod cluster, and the API access it reads nodes with (an access entry whose group a ClusterRoleBinding lets
    list nodes) must exist before it."""
    resources = template["Resources"]
    bindings = {
        s["name"]
        for rid, res in resources.items()
        if res["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        for obj in manifest_objects(res)
        if obj["kind"] == "ClusterRoleBinding"
        for s in obj["subjects"]
    }
    readers = {
        rid
        for rid, res in resources.items()
        if res["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        and any(
            o["kind"] == "ClusterRole"
            and {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]} in o["rules"]
            for o in manifest_objects(res)
        )
    }
    found = {}
    for rid, res in resources.items():
        if res["Type"] != "Custom::SchedulableNode":
            continue
        entries = [
            e
            for e in before[rid]
            if resources[e]["Type"] == "AWS::EKS::AccessEntry"
            and set(resources[e]["Properties"].get("KubernetesGroups", [])) & bindings
        ]
        if hyperpod not in before[rid]:
            found[rid] = f"it may be checked before the HyperPod cluster {hyperpod} exists"
        elif not entries or not readers & before[rid]:
            found[rid] = "its access entry and node-reading RBAC may not exist yet"
        else:
            found[rid] = None
    return found


def ordering_problems(template: dict, before: dict[str, set[str]] | None = None) -> list[str]:
    """Every add-on or chart whose creation needs running pods comes after a node-readiness wait whose tolerated
    taints its pods tolerate too (an add-on without tolerations after a wait for an untainted node), and every wait
    after the HyperPod cluster and its API access."""
    before = before if before is not None else creation_graph(template)
    resources = template["Resources"]
    (hyperpod,) = [r for r, v in resources.items() if v["Type"] == "AWS::SageMaker::Cluster"]
    waits = node_wait_problems(template, before, hyperpod)
    problems = [f"{rid}: {why}" for rid, why in waits.items() if why]
    for rid, why in waits_for_pods(template).items():
        if hyperpod not in before[rid]:
            problems.append(f"{rid}: {why}, but it may be created before the HyperPod cluster {hyperpod} has nodes")
            continue
        if resources[rid]["Type"] != "AWS::EKS::Addon":
            continue
        own = addon_tolerations(resources[rid])
        fitting = [
            w
            for w in waits
            if w in before[rid]
            and waits[w] is None
            and all(t in own for t in json.loads(resources[w]["Properties"]["ToleratedTaints"]))
        ]
        if not fitting:
            problems.append(
                f"{rid}: {why}, but no wait for a node its pods tolerate comes before it (it tolerates "
                f"{own or 'no taint'})"
            )
    addons = {
        v["Properties"]["AddonName"]: r for r, v in template["Resources"].items() if v["Type"] == "AWS::EKS::Addon"
    }
    for rid, res in template["Resources"].items():
        if res["Type"] != "Custom::AWSCDK-EKS-KubernetesResource":
            continue
        for group in manifest_groups(res):
            addon = addons.get(WEBHOOK_GROUPS[group])
            if addon is None or addon not in before[rid]:
                problems.append(
                    f"{rid}: applies {group} objects before the {WEBHOOK_GROUPS[group]} add-on that "
                    "serves their webhook"
                )
    charts = [r for r, v in template["Resources"].items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"]
    problems += [
        f"{c}: the dependency chart (device plugins, health agent) must exist before nodes join"
        for c in charts
        if c not in before[hyperpod]
    ]
    return problems


@pytest.mark.parametrize("variant", ["eks", "eks_shared"])
def test_nothing_that_waits_for_pods_is_created_before_the_hyperpod_nodes(synth, variant):
    template, before = synthesized_order(synth(variant))
    assert waits_for_pods(template)  # the model sees the add-ons that need nodes
    # and the chart (EKS stack) and the HyperPod cluster (cluster stack), across the stack boundary
    assert [r for r, v in template["Resources"].items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"]
    assert ordering_problems(template, before) == []


def test_the_order_model_catches_a_waiting_chart_and_an_early_addon(synth):
    s = synth("eks")
    templates = json.loads(json.dumps(s.templates))
    (chart,) = [r for r, v in templates["eks"]["Resources"].items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"]
    templates["eks"]["Resources"][chart]["Properties"]["Wait"] = True
    (coredns,) = [
        r
        for r, v in templates["cluster"]["Resources"].items()
        if v["Type"] == "AWS::EKS::Addon" and v["Properties"]["AddonName"] == "coredns"
    ]
    templates["cluster"]["Resources"][coredns]["DependsOn"] = []
    chart, coredns = f"ml-eks-eks/{chart}", f"ml-eks-cluster/{coredns}"
    problems = ordering_problems(
        *platform_order({f"ml-eks-{r}": t for r, t in templates.items()}, stack_dependencies(s.out_dir))
    )
    assert any(p.startswith(f"{chart}: helm release") for p in problems)
    assert any(p.startswith(f"{coredns}: add-on coredns") for p in problems)


def test_addons_wait_for_a_node_their_pods_tolerate(synth):
    """The two waits of the example (g5 tainted dedicated=development, p5 under deep health checks): coredns and
    cert-manager tolerate the platform's taint and wait for any node without other taints; the rest wait for an
    untainted node."""
    s = synth("eks")
    template, before = synthesized_order(s)
    resources = template["Resources"]
    waits = {
        rid: json.loads(r["Properties"]["ToleratedTaints"])
        for rid, r in resources.items()
        if r["Type"] == "Custom::SchedulableNode"
    }
    dedicated = [{"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "development"}]
    assert sorted(waits.values(), key=len) == [[], dedicated]
    by_name = {r["Properties"]["AddonName"]: rid for rid, r in resources.items() if r["Type"] == "AWS::EKS::Addon"}
    for name in ("coredns", "cert-manager"):
        assert addon_tolerations(resources[by_name[name]]) == [
            {k: t[k] for k in ("key", "operator", "value", "effect")} for t in dedicated
        ]
    untainted = next(w for w, t in waits.items() if t == [])
    for name in (
        "aws-fsx-csi-driver",
        "amazon-sagemaker-hyperpod-training-operator",
        "amazon-sagemaker-hyperpod-taskgovernance",
    ):
        assert untainted in before[by_name[name]], name


def _break(templates: dict, addon: str, depends_on: list[str]) -> list[str]:
    (rid,) = [
        r
        for r, v in templates["cluster"]["Resources"].items()
        if v["Type"] == "AWS::EKS::Addon" and v["Properties"]["AddonName"] == addon
    ]
    templates["cluster"]["Resources"][rid]["DependsOn"] = depends_on
    return rid


def test_the_order_model_catches_an_addon_waiting_for_a_node_it_cannot_use(synth):
    s = synth("eks")
    resources = s.templates["cluster"]["Resources"]
    (hyperpod,) = [r for r, v in resources.items() if v["Type"] == "AWS::SageMaker::Cluster"]
    tolerable = next(
        r
        for r, v in resources.items()
        if v["Type"] == "Custom::SchedulableNode" and v["Properties"]["ToleratedTaints"] != "[]"
    )

    def problems_with(change) -> list[str]:
        templates = json.loads(json.dumps(s.templates))
        change(templates)
        return ordering_problems(
            *platform_order({f"ml-eks-{r}": t for r, t in templates.items()}, stack_dependencies(s.out_dir))
        )

    # the FSx CSI controller tolerates no NoSchedule taint: a node tainted dedicated=development is no use to it
    fsx = []
    assert any(
        p.startswith(f"ml-eks-cluster/{r}: add-on aws-fsx-csi-driver") and "no wait for a node" in p
        for p in problems_with(lambda t: fsx.append(_break(t, "aws-fsx-csi-driver", [tolerable])))
        for r in fsx
    )
    # what the stack did before: coredns after the HyperPod cluster only, which is in service before any node
    assert any(
        p.startswith("ml-eks-cluster/") and "add-on coredns" in p and "no wait for a node" in p
        for p in problems_with(lambda t: _break(t, "coredns", [hyperpod]))
    )

    def no_access(templates):
        for res in templates["cluster"]["Resources"].values():
            if res["Type"] == "Custom::SchedulableNode":
                res["DependsOn"] = [hyperpod]

    assert any("its access entry and node-reading RBAC may not exist yet" in p for p in problems_with(no_access))


# ---------------------------------------------------------------------------------------------- Lambdas in a VPC
def stack_output(templates: dict[str, dict], value: Any) -> Any:
    """Follows a weak cross-stack reference (Fn::GetStackOutput) to the producing template's output value."""
    if isinstance(value, dict) and "Fn::GetStackOutput" in value:
        ref = value["Fn::GetStackOutput"]
        producer = next(t for name, t in templates.items() if ref["StackName"].endswith(f"-{name}"))
        return producer["Outputs"][ref["OutputName"]]["Value"], producer
    return value, None


def subnet_routes(network: dict, subnet_id: str) -> tuple[set[str], bool]:
    """(destinations routed through a NAT gateway, whether the S3 gateway endpoint serves the subnet's table)."""
    resources = network["Resources"]
    (table,) = [
        v["Properties"]["RouteTableId"]["Ref"]
        for v in resources.values()
        if v["Type"] == "AWS::EC2::SubnetRouteTableAssociation" and v["Properties"]["SubnetId"] == {"Ref": subnet_id}
    ]
    nat = {
        v["Properties"]["DestinationCidrBlock"]
        for v in resources.values()
        if v["Type"] == "AWS::EC2::Route"
        and v["Properties"]["RouteTableId"] == {"Ref": table}
        and "NatGatewayId" in v["Properties"]
    }
    s3 = any(
        v["Type"] == "AWS::EC2::VPCEndpoint"
        and v["Properties"].get("VpcEndpointType", "Gateway") == "Gateway"
        and {"Ref": table} in v["Properties"].get("RouteTableIds", [])
        for v in resources.values()
    )
    return nat, s3


def vpc_lambda_problems(templates: dict[str, dict]) -> list[str]:
    """Every Lambda in a VPC calls AWS APIs (EKS, STS, Lambda, SageMaker ...) and answers CloudFormation on a
    pre-signed S3 URL: each of its subnets needs a default route through NAT and the S3 gateway endpoint."""
    problems = []
    for stack, template in templates.items():
        for rid, res in template["Resources"].items():
            if res["Type"] != "AWS::Lambda::Function" or "VpcConfig" not in res["Properties"]:
                continue
            for subnet in res["Properties"]["VpcConfig"]["SubnetIds"]:
                value, producer = stack_output(templates, subnet)
                if producer is None or not isinstance(value, dict) or "Ref" not in value:
                    problems.append(f"{stack}/{rid}: subnet {subnet} is not one this app creates; cannot check")
                    continue
                nat, s3 = subnet_routes(producer, value["Ref"])
                if "0.0.0.0/0" not in nat:
                    problems.append(
                        f"{stack}/{rid}: subnet {value['Ref']} has no default route through NAT; "
                        "the function cannot call AWS APIs or answer CloudFormation"
                    )
                if not s3:
                    problems.append(f"{stack}/{rid}: subnet {value['Ref']} has no S3 gateway endpoint route")
    return problems


@pytest.mark.parametrize("variant", ["eks", "eks_shared"])
def test_every_vpc_lambda_routes_to_what_it_calls(synth, variant):
    templates = synth(variant).templates
    vpc_functions = [
        r
        for t in templates.values()
        for r, v in t["Resources"].items()
        if v["Type"] == "AWS::Lambda::Function" and "VpcConfig" in v["Properties"]
    ]
    assert len(vpc_functions) >= 2  # the kubectl/helm handler and its provider framework
    assert vpc_lambda_problems(templates) == []


def test_the_routing_check_rejects_the_control_plane_subnets(synth):
    templates = json.loads(json.dumps(synth("eks").templates))
    network = templates["network"]
    control = [o for o in network["Outputs"] if "ControlPlane" in o]
    assert control
    for res in templates["eks"]["Resources"].values():  # the kubectl/helm handler lives with the control plane
        if res["Type"] == "AWS::Lambda::Function" and "VpcConfig" in res["Properties"]:
            res["Properties"]["VpcConfig"]["SubnetIds"] = [
                {"Fn::GetStackOutput": {"StackName": "ml-eks-network", "OutputName": control[0]}}
            ]
    problems = vpc_lambda_problems(templates)
    assert problems and all("no default route through NAT" in p or "S3 gateway" in p for p in problems)
