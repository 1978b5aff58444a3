"""Fetch on-demand prices into config/facts/prices.json for the regions the shipped configs use (or --regions), from
the AWS Price List Query API with the caller's AWS credentials (any principal allowed pricing:GetProducts).

    python tools/price_facts.py [--regions us-west-2 eu-west-1] [--profile NAME]

What is asked and how an entry is picked is cli/prices.py's (the same code `make preflight` refreshes the config's
region with); each entry keeps its SKU and usage type, each region the date it was fetched. Nothing here runs in CI
or at synth time: CI cannot reach AWS, and synth never calls it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cli import prices  # noqa: E402


def shipped_regions() -> list[str]:
    """deployment.region of config/default.yaml and every example (us-west-2 when a file leaves it unset)."""
    regions = set()
    for path in [ROOT / "config" / "default.yaml", *sorted((ROOT / "config" / "examples").glob("*.yaml"))]:
        data = yaml.safe_load(path.read_text()) or {}
        regions.add((data.get("deployment") or {}).get("region", "us-west-2"))
    return sorted(regions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regions", nargs="+", help="default: the regions of config/default.yaml and the examples")
    parser.add_argument("--profile")
    args = parser.parse_args(argv)
    import boto3

    client = boto3.Session(profile_name=args.profile).client("pricing", region_name=prices.PRICING_REGION)
    regions = args.regions or shipped_regions()
    tables, left_out = prices.fetch(client, regions)
    prices.PRICES_FACTS.write_text(prices.merged(prices.load(), tables))
    for region, table in tables.items():
        print(f"{region}: {len(table['items'])} prices")
    for note in left_out:
        print(f"left out (ambiguous): {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
