"""cli/preflight.py's EKS checks: the add-on versions it asks EKS about (DescribeAddonVersions) and the Kubernetes
version's support dates (DescribeClusterVersions), both through botocore Stubber (moto has neither)."""

from __future__ import annotations

import copy
import datetime

import pytest

from support.preflight_harness import Harness, by_check
from platform_config import parse_config
from cli.preflight import FAILED, OK, UNKNOWN, WARNING, Preflight, render

# moto 5.2 has no EKS DescribeAddonVersions or DescribeClusterVersions (moto/eks/responses.py): botocore Stubber, whose
# answers botocore checks against the EKS service model. Versions as AWS documents them for 1.34 (the coredns table in
# the EKS user guide, the training operator default in AWS's HyperPod Terraform): platform_config/eks.py.
EKS_GROUPS = [{"name": "gpu", "role": "compute", "instance_type": "ml.g5.8xlarge", "instance_count": 2}]
TODAY = datetime.date(2026, 11, 25)
UTC = datetime.timezone.utc


def eks_config(**eks):
    return parse_config(
        {"name": "mine", "orchestrator": "eks", "eks": eks, "cluster": {"instance_groups": copy.deepcopy(EKS_GROUPS)}}
    )


def addon_answer(name: str, versions: list[tuple[str, bool]], minor: str = "1.34") -> dict:
    return {
        "addons": [
            {
                "addonName": name,
                "type": "networking",
                "addonVersions": [
                    {
                        "addonVersion": v,
                        "architecture": ["amd64", "arm64"],
                        "requiresConfiguration": False,
                        "compatibilities": [
                            {"clusterVersion": minor, "platformVersions": ["*"], "defaultVersion": default}
                        ],
                    }
                    for v, default in versions
                ],
            }
        ]
    }


DEFAULTS = {
    "kube-proxy": "v1.34.6-eksbuild.13",
    "vpc-cni": "v1.20.4-eksbuild.2",
    "coredns": "v1.13.2-eksbuild.7",
    "eks-pod-identity-agent": "v1.3.10-eksbuild.3",
    "aws-fsx-csi-driver": "v1.6.0-eksbuild.1",
    "cert-manager": "v1.18.2-eksbuild.2",
    "amazon-sagemaker-hyperpod-training-operator": "v1.2.1-eksbuild.1",
    "amazon-sagemaker-hyperpod-taskgovernance": "v1.6.0-eksbuild.1",
}


def eks_harness(cfg, answers: dict[str, dict] | None = None, versions: dict | None = None):
    """Every add-on the config installs answered (`answers` replaces some), in the order preflight asks, each request
    checked: the config's Kubernetes version and that add-on's name."""
    h = Harness(None)
    cluster_versions = h.stub("eks", "cluster-versions")
    cluster_versions.add_response(
        "describe_cluster_versions",
        versions
        if versions is not None
        else {
            "clusterVersions": [
                {
                    "clusterVersion": "1.34",
                    "status": "STANDARD_SUPPORT",
                    "versionStatus": "STANDARD_SUPPORT",
                    "endOfStandardSupportDate": datetime.datetime(2026, 12, 2, tzinfo=UTC),
                    "endOfExtendedSupportDate": datetime.datetime(2027, 12, 2, tzinfo=UTC),
                }
            ]
        },
        {"clusterVersions": [cfg.eks.kubernetes_version], "includeAll": True},
    )
    addons = h.stub("eks", "addon-versions")
    for _, name, _ in Preflight(cfg, h.client).eks_addons():
        answer = (answers or {}).get(name) or addon_answer(name, [(DEFAULTS[name], True), ("v0.0.1-eksbuild.1", False)])
        addons.add_response(
            "describe_addon_versions", answer, {"kubernetesVersion": cfg.eks.kubernetes_version, "addonName": name}
        )
    return h


def eks_results(cfg, h, today=TODAY):
    results = by_check(Preflight(cfg, h.client, today=today).eks_checks())
    for client, stubber in h.stubbed.values():
        stubber.assert_no_pending_responses()  # every add-on was asked about
    return results


def test_preflight_asks_about_every_addon_the_stacks_install(synth):
    s = synth("eks")
    installed = {
        r["Properties"]["AddonName"]
        for t in s.templates.values()
        for r in t["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon"
    }
    asked = {name for _, name, _ in Preflight(s.config, lambda *_: None).eks_addons()}
    assert asked == installed and len(asked) >= 8


def test_unpinned_addons_pass_with_the_eks_default():
    cfg = eks_config()
    results = eks_results(cfg, eks_harness(cfg))
    addons = {c: r for c, r in results.items() if c.startswith("eks-addon ")}
    assert len(addons) == 8 and {r.status for r in addons.values()} == {OK}, render(list(results.values()))
    assert results["eks-addon coredns"].detail == "v1.13.2-eksbuild.7 (EKS default for Kubernetes 1.34)"


def test_a_pin_eks_does_not_offer_fails_and_says_what_is_offered():
    cfg = eks_config(addons={"coredns": "v1.12.4-eksbuild.1", "cert_manager": "v1.18.2-eksbuild.2"})
    results = eks_results(cfg, eks_harness(cfg))
    assert results["eks-addon coredns"].status == FAILED
    assert results["eks-addon coredns"].detail == (
        "eks.addons.coredns: 'v1.12.4-eksbuild.1' is not offered for Kubernetes 1.34 in us-west-2; offered: "
        "v1.13.2-eksbuild.7, v0.0.1-eksbuild.1 (default v1.13.2-eksbuild.7); pin one of them or leave it unset"
    )
    assert results["eks-addon cert-manager"].status == OK
    assert results["eks-addon cert-manager"].detail == "v1.18.2-eksbuild.2 (pinned, offered for Kubernetes 1.34)"


def test_no_default_no_addon_and_an_old_training_operator_fail():
    cfg = eks_config()
    operator = "amazon-sagemaker-hyperpod-training-operator"
    h = eks_harness(
        cfg,
        {
            "coredns": addon_answer("coredns", [("v1.13.2-eksbuild.7", False)]),
            "cert-manager": {"addons": []},
            operator: addon_answer(operator, [("v1.1.0-eksbuild.1", True)]),
        },
    )
    results = eks_results(cfg, h)
    assert results["eks-addon coredns"].status == FAILED
    assert "unset, and EKS marks no default coredns version for Kubernetes 1.34" in results["eks-addon coredns"].detail
    assert results["eks-addon cert-manager"].detail == "us-west-2 offers no cert-manager add-on for Kubernetes 1.34"
    assert results[f"eks-addon {operator}"].status == FAILED
    assert "v1.1.0-eksbuild.1 (EKS default); elastic training needs v1.2" in results[f"eks-addon {operator}"].detail


def test_addon_versions_denied_is_cannot_check():
    cfg = eks_config()
    h = Harness(None)
    h.stub("eks", "cluster-versions").add_client_error("describe_cluster_versions", "AccessDeniedException", "no", 403)
    addons = h.stub("eks", "addon-versions")
    for _ in Preflight(cfg, h.client).eks_addons():
        addons.add_client_error("describe_addon_versions", "AccessDeniedException", "not allowed", 403)
    results = eks_results(cfg, h)
    assert {r.status for r in results.values()} == {UNKNOWN}
    assert "AccessDeniedException on DescribeAddonVersions" in results["eks-addon coredns"].detail


@pytest.mark.parametrize(
    "today, eks, status, detail",
    [
        (
            datetime.date(2026, 10, 1),
            {},
            OK,
            "1.34 on EKS standard support until 2026-12-02 (EKS DescribeClusterVersions)",
        ),
        (TODAY, {}, WARNING, "1.34 leaves EKS standard support on 2026-12-02, in 7 day(s)"),
        (datetime.date(2026, 12, 2), {}, FAILED, "eks.kubernetes_version 1.34 left EKS standard support on 2026-12-02"),
        (datetime.date(2026, 12, 2), {"extended_support": True}, WARNING, "1.34 is on extended support"),
    ],
)
def test_kubernetes_version_support_against_today(today, eks, status, detail):
    cfg = eks_config(**eks)
    result = eks_results(cfg, eks_harness(cfg), today=today)["eks-kubernetes-version"]
    assert (result.status, detail in result.detail) == (status, True), result.detail


def test_kubernetes_dates_fall_back_to_the_recorded_table():
    cfg = eks_config(kubernetes_version="1.33", extended_support=True)
    h = eks_harness(
        cfg,
        {
            name: addon_answer(name, [(DEFAULTS[name].replace("v1.34.6", "v1.33.10"), True)], "1.33")
            for name in DEFAULTS
        },
        versions={"clusterVersions": []},
    )
    result = eks_results(cfg, h)["eks-kubernetes-version"]
    assert result.status == WARNING
    assert result.detail == (
        "1.33 is on extended support (eks.extended_support: true) since 2026-07-29, until "
        "2027-07-29 (the recorded table (EKS did not list the version))"
    )
