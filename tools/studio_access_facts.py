"""What AWS documents a Studio user's role needs for its own spaces, and what AWS's own Studio + HyperPod template grants
for the HyperPod pages; the Studio stack's roles are compared with both, statement by statement.

    python tools/studio_access_facts.py --page PAGE --retrieved YYYY-MM-DD --git-dir DIR [--commit SHA] [--check]

own_spaces: the permissions policy of the SageMaker Developer Guide page "Give your users access to spaces" (PAGE: a
saved copy, .md or .html; the policy is its one JSON block with a "Statement"). Its example region and account become
${Region} and ${Account}; the page's policy variables (${sagemaker:DomainId}, ${sagemaker:UserProfileName}, which a
markdown copy may show as `sagemaker:DomainId`) are kept as policy variables.

hyperpod_pages: no AWS page lists what Studio's HyperPod pages call, so the reference is AWS's Studio + HyperPod template
in awslabs/awsome-distributed-ai (REFERENCE, read from a git directory, e.g. the one `fetch` brings to /work/.mirror/):
the sagemaker:*Cluster* actions its Studio execution role grants.

Writes config/facts/studio_access_policy.json; --check exits 1 when the committed file differs. Nothing at synth time
reads it: tests/test_studio_iam.py compares the synthesized roles with it.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from committed_file import write_or_check

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "studio_access_policy.json"
PAGE_TITLE = "Give your users access to spaces (Amazon SageMaker AI Developer Guide)"
REFERENCE = "1.architectures/5.sagemaker-hyperpod/slurm-studio/studio-slurm.yaml"
REFERENCE_REPO = "awslabs/awsome-distributed-ai"
EXAMPLE_REGION, EXAMPLE_ACCOUNT = "us-east-2", "111122223333"


def policy_from_page(text: str) -> dict:
    """The page's permissions policy, with ${Region}/${Account} for the example values."""
    text = html.unescape(re.sub(r"<[^>]+>", "", text)) if "<html" in text.lower() else text
    start = text.find('{\n "Version"') if '{\n "Version"' in text else text.find('"Version"')
    if start < 0:
        raise SystemExit('the page has no policy (no "Version")')
    start = text.rfind("{", 0, start + 1)
    depth, end = 0, start
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    block = text[start : end + 1]
    block = re.sub(r"`(sagemaker:[A-Za-z]+)`", r"${\1}", block)  # markdown copies lose ${...} to backticks
    block = block.replace("`", "")
    block = block.replace(f":{EXAMPLE_REGION}:", ":${Region}:").replace(f":{EXAMPLE_ACCOUNT}:", ":${Account}:")
    policy = json.loads(block)
    if "Statement" not in policy:
        raise SystemExit("the page's JSON block has no Statement")
    return policy


def hyperpod_actions(git_dir: Path, commit: str) -> list[str]:
    text = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{REFERENCE}"], check=True, capture_output=True, text=True
    ).stdout

    class Loader(yaml.SafeLoader):
        pass

    def any_tag(loader, suffix, node):  # CloudFormation's !Sub, !Ref, !GetAtt ...: their values do not matter here
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node)
        return loader.construct_mapping(node)

    Loader.add_multi_constructor("!", any_tag)
    template = yaml.load(text, Loader=Loader)  # noqa: S506 - SafeLoader subclass
    actions = set()
    for resource in template["Resources"].values():
        if resource.get("Type") != "AWS::IAM::Role":
            continue
        for policy in resource["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                listed = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                actions |= {a for a in listed if re.fullmatch(r"sagemaker:\w*Cluster\w*", a)}
    if not actions:
        raise SystemExit(f"{REFERENCE} at {commit} grants no sagemaker:*Cluster* action")
    return sorted(actions)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--page", type=Path, required=True, help="saved copy of the page (.md or .html)")
    parser.add_argument("--retrieved", required=True, help="when the copy was taken, YYYY-MM-DD")
    parser.add_argument("--git-dir", type=Path, required=True, help=f"a git directory of {REFERENCE_REPO}")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed facts differ")
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", f"--git-dir={args.git_dir}", "rev-parse", args.commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    facts = {
        "own_spaces": {
            "source": {
                "page": PAGE_TITLE,
                "retrieved": args.retrieved,
                "copy": "the page's text as the search tool's code index holds it; its "
                "docs.aws.amazon.com address was not reachable from where this was made",
            },
            "policy": policy_from_page(args.page.read_text()),
        },
        "hyperpod_pages": {
            "source": {
                "repository": REFERENCE_REPO,
                "commit": commit,
                "path": REFERENCE,
                "note": "no AWS page lists what Studio's HyperPod pages call; AWS's own Studio "
                "+ HyperPod template grants these to the Studio execution role",
            },
            "actions": hyperpod_actions(args.git_dir, commit),
        },
    }
    return write_or_check(FACTS, json.dumps(facts, indent=1) + "\n", check=args.check, source="the sources")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
