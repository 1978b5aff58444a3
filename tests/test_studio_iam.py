"""Studio's IAM: the execution and per-user roles against what AWS documents for Studio and HyperPod's pages."""

import json

import pytest

from support import iam_facts
from support.paths import ROOT

from support.iam import listed, statements_of
from support.intrinsics import flatten
from support.template import resources


STUDIO_ACCESS = json.loads((ROOT / "config" / "facts" / "studio_access_policy.json").read_text())
# The one place the platform grants less than AWS's page: apps of spaces without an owner in this domain only.
PAGE_REFS = {"AWS::Partition": "aws", "AWS::AccountId": "${Account}", "AWS::Region": "${Region}"}
NARROWED = {
    "arn:aws:sagemaker:${Region}:${Account}:app/*": "arn:aws:sagemaker:${Region}:${Account}:app/${sagemaker:DomainId}/*"
}


def _rendered(value, region):
    """A policy value with CloudFormation's pseudo parameters as the page writes them."""
    if isinstance(value, list):
        return [_rendered(v, region) for v in value]
    if isinstance(value, dict) and not value.keys() & {"Fn::Join", "Ref"}:
        return {k: _rendered(v, region) for k, v in value.items()}
    if not isinstance(value, (str, dict)):
        return value
    return flatten(value, PAGE_REFS).replace(f":{region}:", ":${Region}:")


def _role_statements(template, region, role_prefix):
    return [_rendered(s, region) for s in statements_of(template, role_prefix, prefix=True)]


def test_studio_role_is_least_privilege(synth):
    t = synth("multi_az").templates["studio"]
    roles = {k: v for k, v in resources(t, "AWS::IAM::Role").items() if k.startswith("ExecutionRole")}
    (role,) = roles.values()
    assert "ManagedPolicyArns" not in role["Properties"]
    policy = [
        p for p in resources(t, "AWS::IAM::Policy").values() if "ExecutionRole" in json.dumps(p["Properties"]["Roles"])
    ][0]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    own_spaces = {st.get("Sid") for st in STUDIO_ACCESS["own_spaces"]["policy"]["Statement"]} - {None}
    assert set(statements) == {
        "DescribeCluster",
        "ReadSlurmLoginSecret",
        "LifecycleConfigLogs",
        "UseMlflow",
        "ReadStudioScripts",
        "ListStudioScripts",
        "ReadStudioTools",
        "ListStudioTools",
        "ReadSlurmClientBundle",
        "ListClusters",
        "SharedSpaceApps",
        *own_spaces,
    }
    # The controller's client bundle: GetObject on the lifecycle bucket's slurm-client/ prefix, nothing more.
    bundle = statements["ReadSlurmClientBundle"]
    assert bundle["Action"] == "s3:GetObject"
    assert "/slurm-client/*" in json.dumps(bundle["Resource"]) and "Condition" not in bundle
    assert "MlflowTrackingServerArn" in json.dumps(statements["UseMlflow"]["Resource"]) or "Mlflow" in json.dumps(
        statements["UseMlflow"]["Resource"]
    )
    rendered = json.dumps(t)
    assert "FullAccess" not in rendered and '"ssm:*"' not in rendered and '"iam:' not in rendered


@pytest.mark.parametrize(
    "variant,role_prefix", [("multi_az", "ExecutionRole"), ("eks", "ExecutionRole"), ("eks", "MemberRolealice")]
)
def test_studio_roles_grant_what_aws_documents_for_own_spaces_and_hyperpod_pages(synth, variant, role_prefix):
    s = synth(variant)
    granted = _role_statements(s.templates["studio"], s.config.deployment.region, role_prefix)
    assert granted, role_prefix
    for documented in STUDIO_ACCESS["own_spaces"]["policy"]["Statement"]:
        want_resource = NARROWED.get(documented["Resource"], documented["Resource"])
        matches = [
            g
            for g in granted
            if set(listed(g["Action"])) == set(documented["Action"])
            and g.get("Condition") == documented.get("Condition")
            and g["Resource"] == want_resource
        ]
        assert len(matches) == 1, (documented, [g for g in granted if "sagemaker:" in json.dumps(g["Action"])])
        if "Sid" in documented:
            assert matches[0]["Sid"] == documented["Sid"]
    # Nothing else may create, change or delete spaces and apps, or tag.
    writes = {
        "sagemaker:CreateSpace",
        "sagemaker:UpdateSpace",
        "sagemaker:DeleteSpace",
        "sagemaker:CreateApp",
        "sagemaker:DeleteApp",
        "sagemaker:AddTags",
        "sagemaker:CreatePresignedDomainUrl",
    }
    documented_writes = sum(1 for d in STUDIO_ACCESS["own_spaces"]["policy"]["Statement"] if set(d["Action"]) & writes)
    assert sum(1 for g in granted if set(listed(g["Action"])) & writes) == documented_writes
    # Studio's HyperPod pages: the reference template's actions on this platform's clusters, and the cluster list.
    (pages,) = [g for g in granted if g.get("Sid") == "DescribeCluster"]
    assert set(listed(pages["Action"])) == set(STUDIO_ACCESS["hyperpod_pages"]["actions"])
    assert pages["Resource"] == "arn:aws:sagemaker:${Region}:${Account}:cluster/*"
    assert pages["Condition"] == {"StringEquals": {"aws:ResourceTag/hyperpod-platform": s.config.name}}
    (listing,) = [g for g in granted if g.get("Sid") == "ListClusters"]
    assert listing["Action"] == "sagemaker:ListClusters" and listing["Resource"] == "*"
    assert iam_facts.scoping_errors(s.templates["studio"]) == []


def test_per_user_roles_get_the_same_studio_access(synth):
    """Per-user mode on Slurm: each profile's own role gets the shared execution role's document (StudioUserPolicy)."""
    s = synth("large")
    (policy,) = resources(s.templates["studio"], "AWS::IAM::ManagedPolicy").values()
    sids = {st.get("Sid") for st in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert {
        "SMStudioRestrictSpacesToOwnerUserProfile",
        "SMStudioRestrictCreatePrivateSpaceAppsToOwnerUserProfile",
        "ListClusters",
        "DescribeCluster",
    } <= sids
