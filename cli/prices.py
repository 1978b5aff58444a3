"""The price table behind the synth summary's cost estimate (config/facts/prices.json): on-demand list prices per
region, read from the AWS Price List Query API (`pricing:GetProducts`, served from the us-east-1 endpoint,
https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html).

Nothing here is typed by hand: `make preflight` (cli/preflight.py) and `python tools/price_facts.py` fetch the
answers with the caller's credentials and `table_from_answers` derives the entries from them; each entry keeps the
SKU and usage type it came from. A price the answers do not settle (none, or two different ones) stays off the
table, and the summary says "no price on record" for it rather than guessing.

What is priced, by Price List service code, product family and usage type (the usage type carries a region
prefix such as `USW2-`, `EU-` or, for KMS, `us-west-2-`; absent in some regions):
- HyperPod instances: AmazonSageMaker, usage type `<prefix>-Cluster:ml.<type>` (HyperPod's own line items, not
  training's or Studio's).
- FSx for Lustre SSD storage: AmazonFSx, fileSystemType Lustre, storageType SSD, throughputCapacity = the tier, per
  GB-month (the 125/250/500/1000 MB/s/TiB tiers are PERSISTENT_2's).
- NAT gateway hours: AmazonEC2, product family "NAT Gateway", usage type `NatGateway-Hours`.
- Network Load Balancer hours: AWSELB, "Load Balancer-Network", `LoadBalancerUsage`.
- Interface endpoint hours (per endpoint and AZ): AmazonVPC, "VpcEndpoint", `VpcEndpoint-Hours`.
- KMS keys per month: awskms, "Encryption Key", `KMS-Keys`.
- CloudWatch alarms per month: AmazonCloudWatch, "Alarm", `CW:AlarmMonitorUsage` (standard resolution).
- EKS control plane hours: AmazonEKS, `AmazonEKS-Hours:perCluster` (standard support).
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable

PRICES_FACTS = Path(__file__).resolve().parent.parent / "config" / "facts" / "prices.json"
PRICING_REGION = "us-east-1"  # the Price List Query API's endpoint that lists every region's prices
API_SOURCE = "AWS Price List Query API (pricing:GetProducts, us-east-1 endpoint)"


@dataclass(frozen=True)
class Query:
    """One GetProducts question and how to pick the answer's entries: `usage` matches the usage type after the
    region prefix; `unit` is the price dimension's unit; `key` names the entry (`{0}` is the usage match's group)."""

    key: str
    service: str
    filters: tuple[tuple[str, str, str], ...]  # (Type, Field, Value); regionCode is added per region
    usage: str
    unit: str


def queries(fsx_tiers: Iterable[int] = (125, 250, 500, 1000)) -> list[Query]:
    # A usage type is filtered with CONTAINS, not TERM_MATCH: its region prefix (USW2-, none in some regions) would
    # make an exact match miss; `usage` then picks the exact entries from the answers.
    found = [
        Query(
            "hyperpod_instance_hour:{0}",
            "AmazonSageMaker",
            (("CONTAINS", "usagetype", "Cluster:ml."),),
            r"Cluster:(ml\.[a-z0-9-]+\.[a-z0-9]+)",
            "Hrs",
        ),
        Query(
            "nat_gateway_hour",
            "AmazonEC2",
            (("TERM_MATCH", "productFamily", "NAT Gateway"),),
            r"NatGateway-Hours",
            "Hrs",
        ),
        Query(
            "network_load_balancer_hour",
            "AWSELB",
            (("TERM_MATCH", "productFamily", "Load Balancer-Network"),),
            r"LoadBalancerUsage",
            "Hrs",
        ),
        Query(
            "interface_endpoint_hour",
            "AmazonVPC",
            (("TERM_MATCH", "productFamily", "VpcEndpoint"),),
            r"VpcEndpoint-Hours",
            "Hrs",
        ),
        Query("kms_key_month", "awskms", (("TERM_MATCH", "productFamily", "Encryption Key"),), r"KMS-Keys", "Keys"),
        Query(
            "cloudwatch_alarm_month",
            "AmazonCloudWatch",
            (("TERM_MATCH", "productFamily", "Alarm"),),
            r"CW:AlarmMonitorUsage",
            "Alarms",
        ),
        Query(
            "eks_cluster_hour",
            "AmazonEKS",
            (("CONTAINS", "usagetype", "AmazonEKS-Hours:perCluster"),),
            r"AmazonEKS-Hours:perCluster",
            "Hours",
        ),
    ]
    for tier in fsx_tiers:
        found.append(
            Query(
                f"fsx_lustre_ssd_gb_month:{tier}",
                "AmazonFSx",
                (
                    ("TERM_MATCH", "fileSystemType", "Lustre"),
                    ("TERM_MATCH", "storageType", "SSD"),
                    ("TERM_MATCH", "throughputCapacity", str(tier)),
                ),
                r".+",
                "GB-Mo",
            )
        )
    return found


def request(query: Query, region: str) -> dict:
    """GetProducts' parameters for one query in one region (regionCode is a Price List product attribute)."""
    filters = [{"Type": t, "Field": f, "Value": v} for t, f, v in query.filters]
    filters.append({"Type": "TERM_MATCH", "Field": "regionCode", "Value": region})
    return {"ServiceCode": query.service, "Filters": filters, "FormatVersion": "aws_v1", "MaxResults": 100}


def _usage(usagetype: str, pattern: str) -> re.Match | None:
    """Match the usage type after its optional region prefix: the Region's billing code (USW2-, USE1-, EUC1-, and
    EU- without a digit for eu-west-1, per https://docs.aws.amazon.com/global-infrastructure/latest/regions/
    aws-region-billing-codes.html), or for KMS the Region's name (us-west-2-KMS-Keys: AWS documents no list of
    usage types; this form is what published KMS bills and price rows show). Which region it is, GetProducts'
    regionCode filter has already fixed."""
    return re.fullmatch(rf"(?:(?:[A-Z]{{2,4}}[0-9]?|[a-z]{{2}}(?:-[a-z]+)+-[0-9])-)?{pattern}", usagetype or "")


def _on_demand(item: dict, unit: str) -> list[float]:
    prices = []
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            if dim.get("unit") != unit or dim.get("beginRange", "0") != "0":
                continue
            usd = dim.get("pricePerUnit", {}).get("USD")
            if usd is not None and float(usd) > 0:
                prices.append(float(usd))
    return prices


def entries(query: Query, price_list: Iterable[str]) -> tuple[dict[str, dict], list[str]]:
    """The table entries one query's answers give, and why any candidate was left out."""
    by_key: dict[str, list[dict]] = {}
    for text in price_list:
        item = json.loads(text)
        attributes = item.get("product", {}).get("attributes", {})
        match = _usage(attributes.get("usagetype", ""), query.usage)
        if not match:
            continue
        key = query.key.format(*match.groups())
        for price in _on_demand(item, query.unit):
            by_key.setdefault(key, []).append(
                {
                    "usd": price,
                    "unit": query.unit,
                    "sku": item["product"].get("sku"),
                    "usagetype": attributes["usagetype"],
                }
            )
    found, dropped = {}, []
    for key, candidates in sorted(by_key.items()):
        if len({c["usd"] for c in candidates}) == 1:
            found[key] = candidates[0]
        else:
            dropped.append(
                f"{key}: {len(candidates)} different prices "
                f"({', '.join(sorted(c['usagetype'] + '=' + str(c['usd']) for c in candidates))})"
            )
    return found, dropped


def fetch(pricing_client, regions: Iterable[str], today: datetime.date | None = None) -> tuple[dict, list[str]]:
    """Ask GetProducts every query for every region (following NextToken); the regions' tables and what was left
    out."""
    today = today or datetime.datetime.now(datetime.UTC).date()
    tables, notes = {}, []
    for region in regions:
        items: dict[str, dict] = {}
        for query in queries():
            price_list, token = [], None
            while True:
                params = request(query, region) | ({"NextToken": token} if token else {})
                answer = pricing_client.get_products(**params)
                price_list += answer.get("PriceList", [])
                token = answer.get("NextToken")
                if not token:
                    break
            found, dropped = entries(query, price_list)
            items.update(found)
            notes += [f"{region} {d}" for d in dropped]
        tables[region] = {"fetched": today.isoformat(), "source": API_SOURCE, "items": items}
    return tables, notes


def merged(current: dict, tables: dict) -> str:
    """The facts file with `tables` replacing those regions' entries (other regions keep theirs and their dates)."""
    regions = dict(current.get("regions", {}))
    regions.update(tables)
    return (
        json.dumps(
            {"about": current.get("about", ABOUT), "regions": dict(sorted(regions.items()))}, indent=2, sort_keys=False
        )
        + "\n"
    )


ABOUT = (
    "On-demand list prices in USD per region for the synth summary's cost estimate (cli/costs.py), derived by "
    "cli/prices.py from the AWS Price List Query API's answers; refreshed by `make preflight` or "
    "`python tools/price_facts.py` with AWS credentials. A region or item missing here is printed as "
    "'no price on record'."
)


def load(path: Path = PRICES_FACTS) -> dict:
    if not path.exists():
        return {"about": ABOUT, "regions": {}}
    return json.loads(path.read_text())
