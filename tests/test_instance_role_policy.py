"""The node roles against what AWS grants HyperPod instances, action by action.

The platform does not attach AmazonSageMakerClusterInstanceRolePolicy (it reads every sagemaker-* bucket in the
account); its execution roles carry a narrowed inline copy. The committed facts (config/facts/, written by
tools/instance_role_facts.py from AWS's managed policy reference and awslabs/awsome-distributed-ai's reference roles)
say what AWS grants. Every action there must be granted by the roles the cluster's instance groups run as, on
resources no wider than AWS's and with AWS's conditions, or be listed in constructs.hyperpod_cluster.NOT_GRANTED with
a reason. Refreshing the facts after AWS changes the policy makes this test name every new action.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.iam import listed, statements_of
from support.intrinsics import flatten
from support.paths import ROOT

from constructs.hyperpod_cluster import NOT_GRANTED
import instance_role_facts
import execution_role_network_facts

MANAGED = json.loads((ROOT / "config" / "facts" / "cluster_instance_role_policy.json").read_text())
REFERENCE = json.loads((ROOT / "config" / "facts" / "hyperpod_reference_roles.json").read_text())
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-west-2",
    "AWS::AccountId": "123456789012",
    "AWS::URLSuffix": "amazonaws.com",
}
# Conditions AWS needs because its resources are wildcards; the roles here name their own resources instead.
ACCOUNT_CONDITIONS = {"aws:ResourceAccount"}


def resolve(value) -> str:
    """A template value as a string: pseudo parameters filled in, anything the stack only knows at deploy time
    (a resource's Ref or attribute) left as <token>, which matches no AWS pattern but a wildcard."""
    return flatten(value, PSEUDO, token="<token>")


def iam_match(pattern: str, value: str) -> bool:
    """IAM's ARN matching: * any run of characters, ? one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value) is not None


def node_roles(template: dict) -> dict[str, str]:
    """{logical id of each role the cluster's instance groups run as: 'controller' or 'node'}."""
    cluster = next(r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster")
    roles = {}
    for group in cluster["Properties"]["InstanceGroups"]:
        role = group["ExecutionRole"]["Fn::GetAtt"][0]
        controller = group.get("SlurmConfig", {}).get("NodeType") == "Controller"
        roles[role] = "controller" if controller else roles.get(role, "node")
    return roles


def allowed_to(template: dict, role: str) -> list[dict]:
    return [s for s in statements_of(template, role) if s.get("Effect") == "Allow"]


def actions_of(statements: list[dict]) -> set[str]:
    return {a for s in statements for a in listed(s["Action"])}


def managed_policy_problems(facts: dict, statements: list[dict], not_granted: dict[str, str]) -> list[str]:
    """Every action of the managed policy: granted, on resources inside AWS's, with AWS's conditions; or listed."""
    problems = []
    for upstream in facts["document"]["Statement"]:
        conditions = {
            (op, key): listed(values)
            for op, keys in upstream.get("Condition", {}).items()
            for key, values in keys.items()
            if key not in ACCOUNT_CONDITIONS
        }
        for action in upstream["Action"]:
            if action in not_granted:
                continue
            ours = [s for s in statements if action in listed(s["Action"])]
            if not ours:
                problems.append(
                    f"{action}: {facts['policy']} {facts['default_version']} grants it (statement "
                    f"{upstream.get('Sid')}); the role neither grants it nor lists it in NOT_GRANTED"
                )
            for s in ours:
                wider = [
                    r
                    for r in map(resolve, listed(s["Resource"]))
                    if not any(iam_match(p, r) for p in upstream["Resource"])
                ]
                if wider:
                    problems.append(f"{action} ({s.get('Sid')}): {wider} is outside {upstream['Resource']}")
                for (op, key), values in conditions.items():
                    theirs = s.get("Condition", {}).get(op, {}).get(key)
                    if theirs is None or not set(listed(theirs)) <= set(values):
                        problems.append(f"{action} ({s.get('Sid')}): lacks {op} {key} {values}")
    return problems


def reference_problems(
    reference: dict, orchestrator: str, nodes: set[str], granted: set[str], not_granted: dict[str, str]
) -> list[str]:
    return [
        f"{action}: AWS's reference role ({source['path']}@{reference['commit'][:8]}) grants it; the role "
        "neither grants it nor lists it in NOT_GRANTED"
        for source in reference["sources"]
        if source["orchestrator"] == orchestrator and source["nodes"] in nodes
        for action in source["actions"]
        if action not in granted and action not in not_granted
    ]


# ---------------------------------------------------------------------------------------------- the facts
def test_facts_are_dated_and_cited():
    assert MANAGED["policy"] == "AmazonSageMakerClusterInstanceRolePolicy"
    assert re.fullmatch(r"v\d+", MANAGED["default_version"])
    assert MANAGED["source"].startswith("https://docs.aws.amazon.com/") or MANAGED["source"].startswith("iam:")
    assert dt.date.fromisoformat(MANAGED["retrieved"]) >= dt.date.fromisoformat(MANAGED["edited"][:10])
    assert re.fullmatch(r"[0-9a-f]{40}", REFERENCE["commit"]) and REFERENCE["repository"]
    assert {s["orchestrator"] for s in REFERENCE["sources"]} == {"slurm", "eks"}
    assert all(s["actions"] for s in REFERENCE["sources"])


AWSOME = Path(os.environ.get("UPSTREAM_MIRRORS", "/work/.mirror")) / "awslabs+awsome-distributed-ai" / "repo"


def test_reference_facts_are_what_the_pinned_commit_says():
    """Re-derived from the reference repository when a clone is at hand (CI cannot reach GitHub)."""
    if not AWSOME.exists():
        pytest.skip(f"no clone at {AWSOME} (set UPSTREAM_MIRRORS; CI cannot reach GitHub)")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "instance_role_facts.py"),
            "reference-roles",
            "--git-dir",
            str(AWSOME),
            "--commit",
            REFERENCE["commit"],
            "--check",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_page_parser_reads_the_reference_page_format(tmp_path):
    """tools/instance_role_facts.py --from-page on a page laid out as the AWS Managed Policy Reference's .md."""
    stamp = dt.datetime.strptime(MANAGED["edited"], "%Y-%m-%dT%H:%M:%SZ").strftime("%B %d, %Y, %H:%M UTC")
    page = (
        f"# {MANAGED['policy']}\n\n## Policy details\n\n- **Type**: AWS managed policy\n"
        f"- **Creation time**: {stamp}\n- **Edited time:** {stamp}\n- **ARN**: `{MANAGED['arn']}`\n\n"
        f"## Policy version\n\n**Policy version:** {MANAGED['default_version']} (default)\n\n"
        f"## JSON policy document\n\n```\n{json.dumps(MANAGED['document'], indent=2)}\n```\n"
    )
    version, created, edited, document = instance_role_facts.parse_reference_page(page)
    assert (version, edited, document) == (MANAGED["default_version"], MANAGED["edited"], MANAGED["document"])


def test_not_granted_lists_only_what_aws_grants_each_with_a_reason():
    upstream = {a for s in MANAGED["document"]["Statement"] for a in s["Action"]}
    upstream |= {a for source in REFERENCE["sources"] for a in source["actions"]}
    assert set(NOT_GRANTED) <= upstream, set(NOT_GRANTED) - upstream
    assert all(len(reason) > 40 for reason in NOT_GRANTED.values())


# ---------------------------------------------------------------------------------------------- the comparison
def test_an_action_aws_adds_fails_until_granted_or_listed():
    statements = [{"Effect": "Allow", "Action": a, "Resource": "*"} for a in ("logs:PutLogEvents",)]
    newer = copy.deepcopy(MANAGED)
    newer["document"]["Statement"] = [
        {"Sid": "New", "Effect": "Allow", "Action": ["sagemaker:NewNodeAction"], "Resource": ["*"]}
    ]
    assert managed_policy_problems(newer, statements, {}) == [
        "sagemaker:NewNodeAction: AmazonSageMakerClusterInstanceRolePolicy v1 grants it (statement New); the role "
        "neither grants it nor lists it in NOT_GRANTED"
    ]
    assert managed_policy_problems(newer, statements, {"sagemaker:NewNodeAction": "a reason"}) == []
    reference = {
        "commit": "0" * 40,
        "sources": [{"orchestrator": "eks", "nodes": "every node", "path": "x.yaml", "actions": ["ec2:NewCniAction"]}],
    }
    assert reference_problems(reference, "eks", {"every node"}, set(), {}) == [
        "ec2:NewCniAction: AWS's reference role (x.yaml@00000000) grants it; the role neither grants it nor lists "
        "it in NOT_GRANTED"
    ]


def test_a_grant_wider_than_aws_or_without_its_condition_fails():
    log_streams = next(s for s in MANAGED["document"]["Statement"] if "logs:PutLogEvents" in s["Action"])
    metrics = next(s for s in MANAGED["document"]["Statement"] if "cloudwatch:PutMetricData" in s["Action"])
    only = copy.deepcopy(MANAGED)
    only["document"]["Statement"] = [log_streams, metrics]
    ours = [
        {
            "Sid": "Logs",
            "Effect": "Allow",
            "Action": log_streams["Action"],
            "Resource": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":logs:*:*:log-group:*"]]},
        },
        {"Sid": "Metrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"},
    ]
    problems = managed_policy_problems(only, ours, {})
    assert [p.split(":")[0] + ":" + p.split(":")[1].split(" ")[0] for p in problems] == [
        "logs:PutLogEvents",
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "cloudwatch:PutMetricData",
    ]
    assert "outside" in problems[0] and "lacks StringEquals cloudwatch:namespace" in problems[3]


# ---------------------------------------------------------------------------------------------- the roles
@pytest.fixture(scope="module")
def slurm_template(synth):
    return synth("default").templates["cluster"]


@pytest.fixture(scope="module")
def eks_template(synth):
    return synth("eks").templates["cluster"]


def test_every_slurm_node_role_grants_the_managed_policy_narrowed(slurm_template):
    roles = node_roles(slurm_template)
    assert sorted(roles.values()) == ["controller", "node"]  # the controller runs as a role of its own
    for role in roles:
        assert managed_policy_problems(MANAGED, allowed_to(slurm_template, role), NOT_GRANTED) == [], role


def test_slurm_node_roles_grant_what_aws_reference_roles_add(slurm_template):
    for role, kind in node_roles(slurm_template).items():
        nodes = {"every node", "controller"} if kind == "controller" else {"every node"}
        granted = actions_of(allowed_to(slurm_template, role))
        assert reference_problems(REFERENCE, "slurm", nodes, granted, NOT_GRANTED) == [], role
        assert "fsx:DescribeFileSystems" in granted


def test_the_eks_node_role_grants_the_managed_policy_and_the_eks_reference_role(eks_template):
    roles = node_roles(eks_template)
    assert len(roles) == 1
    role = next(iter(roles))
    statements = allowed_to(eks_template, role)
    assert managed_policy_problems(MANAGED, statements, NOT_GRANTED) == []
    assert reference_problems(REFERENCE, "eks", {"every node"}, actions_of(statements), NOT_GRANTED) == []
    # The VPC CNI's actions AWS's EKS reference role adds (the list), each on what AWS scopes it to or less.
    assert {
        "ec2:DescribeInstances",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeTags",
        "ec2:AttachNetworkInterface",
    } <= actions_of(statements)
    attach = next(s for s in statements if "ec2:AttachNetworkInterface" in listed(s["Action"]))
    assert sorted(map(resolve, attach["Resource"])) == [
        "arn:aws:ec2:us-west-2:123456789012:instance/*",
        "arn:aws:ec2:us-west-2:123456789012:network-interface/*",
    ]


# ---------------------------------------------------------------------------------------------- EC2 and FSx, derived

NETWORK = json.loads((ROOT / "config" / "facts" / "execution_role_network.json").read_text())
# What each EC2 resource type's ARN looks like once the stack's placeholders are filled in (resolve()).
TYPE_ARNS = {
    "network-interface": "arn:aws:ec2:us-west-2:*:network-interface/*",
    "instance": "arn:aws:ec2:us-west-2:*:instance/*",
    "subnet": "arn:aws:ec2:us-west-2:*:subnet/*",
    "security-group": "arn:aws:ec2:us-west-2:*:security-group/*",
}


def ungrantable(statements: list[dict], authorization: dict[str, dict], reference: list[dict]) -> list[str]:
    """Every (action, resource type) that AWS's reference grants and the Service Authorization Reference says the
    action authorizes, which no statement allows: none names a resource of that type with a condition whose keys that
    type (or the action) accepts. IAM authorizes each resource of a request on its own, so one such gap denies the
    action every time."""
    problems = []
    for upstream in reference:
        named = execution_role_network_facts._named_types(upstream["Resource"])
        for action in listed(upstream["Action"]):
            facts = authorization[action]
            types = [t for t in facts["resource_types"] if named is None or t in named] or [None]
            for resource_type in types:
                accepted = set(facts["condition_keys"])
                if resource_type:
                    accepted |= set(facts["resource_types"][resource_type]["condition_keys"])
                shape = TYPE_ARNS.get(resource_type, "*") if resource_type else "*"
                if not any(
                    action in listed(s["Action"])
                    and any(
                        r == "*"
                        or iam_match(r.replace("<token>", "*"), shape)
                        or iam_match(shape, r.replace("<token>", "x"))
                        for r in map(resolve, listed(s["Resource"]))
                    )
                    and {k for keys in s.get("Condition", {}).values() for k in keys} <= accepted
                    for s in statements
                ):
                    problems.append(f"{action} on {resource_type or '*'}")
    return problems


def test_network_statements_are_derived_from_the_committed_reference_and_authorization():
    reference, authorization = NETWORK["reference"]["statements"], NETWORK["authorization"]["actions"]
    assert execution_role_network_facts.derive(reference, authorization) == NETWORK["statements"]
    assert NETWORK["reference"]["commit"] == REFERENCE["commit"]
    assert {a for s in reference for a in listed(s["Action"])} == set(authorization)


def test_network_reference_statements_are_what_the_pinned_commit_says():
    if not AWSOME.exists():
        pytest.skip(f"no clone at {AWSOME} (set UPSTREAM_MIRRORS; CI cannot reach GitHub)")
    git_dir = AWSOME / ".git" if (AWSOME / ".git").exists() else AWSOME
    assert (
        execution_role_network_facts.reference_statements(git_dir, NETWORK["reference"]["commit"])
        == NETWORK["reference"]["statements"]
    )


def test_a_vpc_condition_on_detach_is_ungrantable_and_the_derived_statements_are_not():
    """The statement the roles had before: DetachNetworkInterface on network-interface/* only, under ec2:Vpc. It
    authorizes the instance too, which carries no ec2:Vpc, so it could never be allowed; CreateTags only on create."""
    reference, authorization = NETWORK["reference"]["statements"], NETWORK["authorization"]["actions"]
    eni = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":ec2:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":network-interface/*",
            ],
        ]
    }
    before = [
        {
            "Action": [
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeVpcs",
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeSubnets",
                "ec2:DescribeSecurityGroups",
                "fsx:DescribeFileSystems",
            ],
            "Resource": "*",
        },
        {
            "Action": "ec2:CreateNetworkInterface",
            "Resource": ["arn:aws:ec2:us-west-2:1:subnet/s", "arn:aws:ec2:us-west-2:1:security-group/g", eni],
        },
        {
            "Action": [
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
                "ec2:DetachNetworkInterface",
            ],
            "Resource": eni,
            "Condition": {"ArnEquals": {"ec2:Vpc": "arn:aws:ec2:us-west-2:1:vpc/v"}},
        },
        {
            "Action": "ec2:CreateTags",
            "Resource": eni,
            "Condition": {"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}},
        },
    ]
    assert ungrantable(before, authorization, reference) == ["ec2:DetachNetworkInterface on instance"]
    vpc_only = copy.deepcopy(before)
    vpc_only[2]["Action"].append("ec2:DetachNetworkInterface")
    vpc_only.append(
        {
            "Action": "ec2:DetachNetworkInterface",
            "Resource": "arn:aws:ec2:us-west-2:*:instance/*",
            "Condition": {"ArnEquals": {"ec2:Vpc": "arn:aws:ec2:us-west-2:1:vpc/v"}},
        }
    )
    assert ungrantable(vpc_only, authorization, reference) == ["ec2:DetachNetworkInterface on instance"]


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_every_node_role_grants_the_derived_network_statements_exactly(synth, variant):
    template = synth(variant).templates["cluster"]
    reference, authorization = NETWORK["reference"]["statements"], NETWORK["authorization"]["actions"]
    sids = {s["sid"] for s in NETWORK["statements"]}
    for role in node_roles(template):
        statements = allowed_to(template, role)
        assert ungrantable(statements, authorization, reference) == [], role
        ours = {s["Sid"]: s for s in statements if s.get("Sid") in sids}
        assert set(ours) == sids, role
        for fact in NETWORK["statements"]:
            granted = ours[fact["sid"]]
            assert sorted(listed(granted["Action"])) == fact["actions"]
            shape = (
                fact["resource"]
                .replace("${Partition}", "aws")
                .replace("${Region}", "us-west-2")
                .replace("${Account}", "123456789012")
                .replace("${SubnetId}", "<token>")
                .replace("${SecurityGroupId}", "<token>")
            )
            assert {resolve(r) for r in listed(granted["Resource"])} == {shape}, fact["sid"]
            assert {op: set(keys) for op, keys in granted.get("Condition", {}).items()} == {
                op: set(keys) for op, keys in fact.get("condition", {}).items()
            }, fact["sid"]
        # Every role that mounts FSx for Lustre (EFA-enabled clients) can describe it (ADA#1202).
        assert "fsx:DescribeFileSystems" in actions_of(statements), role
