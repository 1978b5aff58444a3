"""Facts about what AWS grants HyperPod instances, which the platform's inline node roles are compared with.

    python tools/instance_role_facts.py managed-policy --from-iam [--check]
    python tools/instance_role_facts.py managed-policy --from-page PAGE --retrieved YYYY-MM-DD [--check]
    python tools/instance_role_facts.py reference-roles --git-dir DIR [--commit SHA] [--check]

managed-policy writes config/facts/cluster_instance_role_policy.json: the default version of the AWS managed policy
AmazonSageMakerClusterInstanceRolePolicy (its number, creation and edit times, and the policy document), from IAM
itself (`--from-iam`: iam:GetPolicy and iam:GetPolicyVersion, needs credentials) or from a saved copy of its page in
the AWS Managed Policy Reference (`--from-page`, the .md or the .html of MANAGED_POLICY_PAGE).

reference-roles writes config/facts/hyperpod_reference_roles.json: the actions AWS's reference templates in
awslabs/awsome-distributed-ai grant HyperPod execution roles besides the managed policy (REFERENCE_SOURCES), read
from a git directory of that repository (e.g. the one `fetch` brings to /work/.mirror/) at the given commit.

tests/test_instance_role_policy.py compares the node roles the stacks synthesize with both, action by action; --check
exits 1 when the committed file differs from what the source says now, so refreshing the facts means rerunning this.
Nothing here runs at synth time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from committed_file import write_or_check

ROOT = Path(__file__).resolve().parent.parent
MANAGED_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"
MANAGED_POLICY_ARN = f"arn:aws:iam::aws:policy/{MANAGED_POLICY}"
MANAGED_POLICY_PAGE = f"https://docs.aws.amazon.com/aws-managed-policy/latest/reference/{MANAGED_POLICY}.html"
MANAGED_POLICY_GUIDE = f"https://docs.aws.amazon.com/sagemaker/latest/dg/security-iam-awsmanpol-{MANAGED_POLICY}.html"
MANAGED_FACTS = ROOT / "config" / "facts" / "cluster_instance_role_policy.json"
REFERENCE_FACTS = ROOT / "config" / "facts" / "hyperpod_reference_roles.json"
REFERENCE_REPO = "awslabs/awsome-distributed-ai"
REFERENCE_COMMIT = "95b939cdc5b24ded03a70da21533964f9354b731"
_SLURM = "1.architectures/5.sagemaker-hyperpod"
_EKS = "1.architectures/7.sagemaker-hyperpod-eks"
# (orchestrator, path, what to read there). Each is a role AWS attaches to HyperPod instance groups together with the
# managed policy; the Karpenter role and the restricted-instance-group ("rig_mode") policy are not instance roles of
# the groups this platform creates, so they are left out.
# `nodes`: which of this platform's node roles the source stands for: every node, or the Slurm controller (the
# multi-head template's role adds the accounting database's secret and fail-over notices, controller work).
REFERENCE_SOURCES = (
    ("slurm", "every node", f"{_SLURM}/1.AmazonSageMakerClustersExecutionRolePolicy.json", "policy document"),
    (
        "slurm",
        "every node",
        f"{_SLURM}/sagemaker-hyperpod.yaml",
        "CloudFormation role AmazonSagemakerClusterExecutionRole",
    ),
    (
        "slurm",
        "controller",
        f"{_SLURM}/sagemaker-hyperpod-slurm-multi-headnode.yaml",
        "CloudFormation role SlurmExecutionRole",
    ),
    (
        "eks",
        "every node",
        f"{_EKS}/cfn-templates/nested-stacks/sagemaker-iam-role-stack.yaml",
        "CloudFormation role ExecutionRole",
    ),
    (
        "eks",
        "every node",
        f"{_EKS}/terraform-modules/hyperpod-eks-tf/modules/sagemaker_iam_role/main.tf",
        "Terraform policies attached to aws_iam_role.sagemaker_execution_role, except rig_policy",
    ),
)


# ---------------------------------------------------------------------------------------------- managed policy
def _normalize(document: dict[str, Any]) -> dict[str, Any]:
    """The document with Action and Resource always lists (IAM accepts a string for either)."""
    statements = []
    for s in document["Statement"]:
        s = dict(s)
        for key in ("Action", "Resource"):
            if isinstance(s.get(key), str):
                s[key] = [s[key]]
        statements.append(s)
    return {**document, "Statement": statements}


def _facts(version: str, created: str, edited: str, document: dict, source: str, retrieved: str) -> dict[str, Any]:
    return {
        "policy": MANAGED_POLICY,
        "arn": MANAGED_POLICY_ARN,
        "default_version": version,
        "created": created,
        "edited": edited,
        "retrieved": retrieved,
        "source": source,
        "see_also": MANAGED_POLICY_GUIDE,
        "document": _normalize(document),
    }


def _utc(value: str) -> str:
    """'November 29, 2023, 15:11 UTC' (the reference page) -> '2023-11-29T15:11:00Z'."""
    return dt.datetime.strptime(value.strip(), "%B %d, %Y, %H:%M UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_reference_page(text: str) -> tuple[str, str, str, dict]:
    """(default version, created, edited, document) from the policy's AWS Managed Policy Reference page, saved as
    the .md the site offers or as its .html."""
    text = re.sub(r"<[^>]+>", " ", html.unescape(text)) if "<html" in text.lower() else text
    plain = text.replace("**", " ").replace("`", " ")  # markdown emphasis, for the labelled fields only

    def field(label: str) -> str:
        m = re.search(rf"{label}\s*:?\s*:?\s*([A-Z][a-z]+ \d{{1,2}}, \d{{4}}, \d{{2}}:\d{{2}} UTC)", plain)
        if not m:
            raise SystemExit(f"the page has no '{label}' date")
        return _utc(m.group(1))

    version = re.search(r"Policy version\s*:?\s*(v\d+)\s*\(default\)", plain)
    if not version:
        raise SystemExit("the page names no default policy version")
    start = text.index("{", text.index("JSON policy document"))
    document, _ = json.JSONDecoder().raw_decode(text[start:])
    return version.group(1), field("Creation time"), field("Edited time"), document


def from_iam() -> tuple[str, str, str, dict]:
    import boto3  # a maintainer's tool: never imported at synth time

    iam = boto3.client("iam")
    policy = iam.get_policy(PolicyArn=MANAGED_POLICY_ARN)["Policy"]
    version = iam.get_policy_version(PolicyArn=MANAGED_POLICY_ARN, VersionId=policy["DefaultVersionId"])
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return (
        policy["DefaultVersionId"],
        policy["CreateDate"].strftime(stamp),
        policy["UpdateDate"].strftime(stamp),
        version["PolicyVersion"]["Document"],
    )


# ---------------------------------------------------------------------------------------------- reference roles
class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation YAML: the short-form intrinsics (!Sub, !Ref, !If, ...) become plain values."""


def _intrinsic(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    assert isinstance(node, yaml.MappingNode)  # YAML has scalars, sequences and mappings
    return loader.construct_mapping(node, deep=True)


_CfnLoader.add_multi_constructor("!", _intrinsic)


def _actions_of(statements: list[dict]) -> set[str]:
    found: set[str] = set()
    for s in statements:
        if s.get("Effect", "Allow") != "Allow":
            continue
        action = s.get("Action", [])
        found.update([action] if isinstance(action, str) else action)
    return found


def _cfn_role(text: str, role: str) -> tuple[set[str], list[str]]:
    template = yaml.load(text, Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass
    props = template["Resources"][role]["Properties"]
    actions = set()
    for policy in props.get("Policies", []):
        actions |= _actions_of(policy["PolicyDocument"]["Statement"])
    return actions, sorted(props.get("ManagedPolicyArns", []))


def _terraform_block(text: str, kind: str, name: str) -> str:
    m = re.search(rf'resource\s+"{kind}"\s+"{name}"\s*{{', text)
    if not m:
        raise SystemExit(f"no resource {kind}.{name}")
    depth, i = 0, m.end() - 1
    for i in range(m.end() - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            break
    return text[m.end() : i]


def _terraform_role(text: str) -> tuple[set[str], list[str]]:
    """The actions of every aws_iam_policy attached to aws_iam_role.sagemaker_execution_role, except rig_policy
    (restricted instance groups only), and the managed policies attached to it by ARN."""
    actions: set[str] = set()
    managed: list[str] = []
    for m in re.finditer(r'resource\s+"aws_iam_role_policy_attachment"\s+"(\w+)"', text):
        block = _terraform_block(text, "aws_iam_role_policy_attachment", m.group(1))
        if "aws_iam_role.sagemaker_execution_role" not in block:
            continue
        arn = _group(re.search(r"policy_arn\s*=\s*(\S+)", block), block)
        if arn.startswith('"'):
            managed.append(arn.strip('"'))
            continue
        policy = _group(re.fullmatch(r"aws_iam_policy\.(\w+)(?:\[0\])?\.arn", arn), arn)
        if policy == "rig_policy":
            continue
        body = _terraform_block(text, "aws_iam_policy", policy)
        for lst in re.finditer(r"Action\s*=\s*\[(.*?)\]", body, re.DOTALL):
            actions.update(re.findall(r'"([a-z0-9-]+:[A-Za-z0-9*]+)"', lst.group(1)))
    return actions, sorted(managed)


def _group(match: re.Match[str] | None, text: str) -> str:
    """The first group of a match the upstream Terraform must give; the upstream changed when it does not."""
    if match is None:
        raise SystemExit(f"unexpected upstream Terraform, read it again: {text[:200]!r}")
    return match.group(1)


def reference_roles(git_dir: Path, commit: str) -> dict[str, Any]:
    sources = []
    for orchestrator, nodes, path, what in REFERENCE_SOURCES:
        text = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
        ).stdout
        if path.endswith(".json"):
            actions, managed = _actions_of(json.loads(text)["Statement"]), list[str]()
        elif path.endswith(".tf"):
            actions, managed = _terraform_role(text)
        else:
            actions, managed = _cfn_role(text, what.rsplit(" ", 1)[-1])
        sources.append(
            {
                "orchestrator": orchestrator,
                "nodes": nodes,
                "path": path,
                "what": what,
                "managed_policies": managed,
                "actions": sorted(actions),
            }
        )
    return {"repository": REFERENCE_REPO, "commit": commit, "sources": sources}


# ---------------------------------------------------------------------------------------------- main
def _write(path: Path, facts: dict[str, Any], check: bool) -> int:
    return write_or_check(path, json.dumps(facts, indent=2, sort_keys=True) + "\n", check=check, source="its source")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    managed = sub.add_parser("managed-policy")
    origin = managed.add_mutually_exclusive_group(required=True)
    origin.add_argument("--from-iam", action="store_true")
    origin.add_argument("--from-page", type=Path)
    managed.add_argument("--retrieved", help="the day the page was saved (YYYY-MM-DD); default today")
    managed.add_argument("--check", action="store_true")
    refs = sub.add_parser("reference-roles")
    refs.add_argument("--git-dir", type=Path, required=True)
    refs.add_argument("--commit", default=REFERENCE_COMMIT)
    refs.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "managed-policy":
        retrieved = args.retrieved or dt.date.today().isoformat()
        if args.from_iam:
            facts = _facts(*from_iam(), source=f"iam:GetPolicyVersion {MANAGED_POLICY_ARN}", retrieved=retrieved)
        else:
            facts = _facts(
                *parse_reference_page(args.from_page.read_text()), source=MANAGED_POLICY_PAGE, retrieved=retrieved
            )
        if args.check:  # the retrieval day is not a fact about the policy
            facts["retrieved"] = json.loads(MANAGED_FACTS.read_text()).get("retrieved", retrieved)
        return _write(MANAGED_FACTS, facts, args.check)
    return _write(REFERENCE_FACTS, reference_roles(args.git_dir, args.commit), args.check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
