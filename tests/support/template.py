"""Queries of a synthesized CloudFormation template (the dict; `Template.to_json()` gives one from CDK's)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from support.intrinsics import flatten


class Synthesized(Protocol):
    templates: dict[str, dict[str, Any]]
    nested: dict[str, dict[str, Any]]


def resources(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    """The template's resources of one type, by logical id."""
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == type_}


def properties(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    """The Properties of each resource of one type, in template order."""
    return [r.get("Properties", {}) for r in resources(template, type_).values()]


def only(template: dict[str, Any], type_: str) -> dict[str, Any]:
    """The one resource of this type (fails if there are none or several)."""
    found = list(resources(template, type_).values())
    assert len(found) == 1, f"{len(found)} resources of type {type_}"
    return found[0]


def cluster_properties(synthesized: Synthesized) -> dict[str, Any]:
    """The Properties of the variant's one AWS::SageMaker::Cluster, in its cluster stack."""
    return only(synthesized.templates["cluster"], "AWS::SageMaker::Cluster")["Properties"]


def all_resources(synthesized: Synthesized) -> list[tuple[str, str, dict[str, Any]]]:
    """(template, logical id, resource) of every stack and nested stack of a synthesized variant."""
    templates = [*synthesized.templates.items(), *synthesized.nested.items()]
    return [(where, lid, r) for where, t in templates for lid, r in t["Resources"].items()]


def manifest_objects(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """The Kubernetes objects a Custom::AWSCDK-EKS-KubernetesResource applies; a value known only at deploy time
    reads "TOKEN"."""
    return json.loads(flatten(resource["Properties"]["Manifest"], token="TOKEN"))


def kubernetes_manifests(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The Kubernetes objects of each Custom::AWSCDK-EKS-KubernetesResource of the template, by logical id."""
    return {lid: manifest_objects(r) for lid, r in resources(template, "Custom::AWSCDK-EKS-KubernetesResource").items()}


def kubernetes_objects(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Kubernetes object the template applies, in template order."""
    return [obj for objects in kubernetes_manifests(template).values() for obj in objects]


def kubernetes_patches(template: dict[str, Any], name_prefix: str) -> list[str]:
    """The logical ids of the Custom::AWSCDK-EKS-KubernetesPatch resources patching objects whose ResourceName
    (kind/name) starts with `name_prefix`."""
    return [
        lid
        for lid, r in resources(template, "Custom::AWSCDK-EKS-KubernetesPatch").items()
        if r["Properties"]["ResourceName"].startswith(name_prefix)
    ]
