"""What a synthesized platform costs at on-demand list prices: per hour while it runs (every instance group at its
configured count) and per month with every group at 0 (what keeps billing: FSx, NAT gateways, load balancers,
interface endpoints, KMS keys, alarms, an EKS control plane). Quantities come from the templates, prices from
config/facts/prices.json (cli/prices.py); nothing is priced that the table does not hold.

Left out, because they depend on use rather than on the templates: data processed by NAT gateways, load balancers
and endpoints, log ingestion and storage, S3 storage and requests, EBS volumes, Studio spaces while they run, data
transfer, and discounts (savings plans, training plans, reserved capacity).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# AWS's pricing pages and calculator count a month as 730 hours.
HOURS_PER_MONTH = 730


@dataclass
class Quantities:
    groups: list[tuple[str, str, int]] = field(default_factory=list)  # (group, ml. type, count)
    fsx: list[tuple[int, int]] = field(default_factory=list)  # (GiB, MB/s/TiB) per file system
    standing: Counter = field(default_factory=Counter)  # price key -> units
    unpriced_groups: list[str] = field(default_factory=list)  # groups whose type or count is set at deploy


# Template resource -> (price key, label) of what bills per unit whatever the groups do.
STANDING = {
    "AWS::EC2::NatGateway": ("nat_gateway_hour", "NAT gateway"),
    "AWS::KMS::Key": ("kms_key_month", "KMS key"),
    "AWS::CloudWatch::Alarm": ("cloudwatch_alarm_month", "CloudWatch alarm"),
    "AWS::EKS::Cluster": ("eks_cluster_hour", "EKS control plane"),
}
LABELS = dict(STANDING.values()) | {
    "network_load_balancer_hour": "Network Load Balancer",
    "interface_endpoint_hour": "interface endpoint x AZ",
}


def quantities(templates: dict[str, dict]) -> Quantities:
    q = Quantities()
    for template in templates.values():
        for resource in template.get("Resources", {}).values():
            kind, props = resource["Type"], resource.get("Properties", {})
            if kind == "AWS::SageMaker::Cluster":
                for g in props.get("InstanceGroups", []):
                    name, kind_, count = g.get("InstanceGroupName"), g.get("InstanceType"), g.get("InstanceCount")
                    if isinstance(name, str) and isinstance(kind_, str) and isinstance(count, int):
                        q.groups.append((name, kind_, count))
                    else:
                        q.unpriced_groups.append(str(name))
            elif kind == "AWS::FSx::FileSystem" and props.get("FileSystemType") == "LUSTRE":
                lustre = props.get("LustreConfiguration", {})
                capacity, tier = props.get("StorageCapacity"), lustre.get("PerUnitStorageThroughput")
                if isinstance(capacity, int) and isinstance(tier, int):
                    q.fsx.append((capacity, tier))
            elif kind in STANDING:
                q.standing[STANDING[kind][0]] += 1
            elif kind == "AWS::ElasticLoadBalancingV2::LoadBalancer" and props.get("Type") == "network":
                q.standing["network_load_balancer_hour"] += 1
            elif kind == "AWS::EC2::VPCEndpoint" and props.get("VpcEndpointType") == "Interface":
                # billed per endpoint per AZ: one network interface in each of its subnets
                q.standing["interface_endpoint_hour"] += max(1, len(props.get("SubnetIds", [])))
    return q


def _hourly(key: str, usd: float) -> float:
    return usd / HOURS_PER_MONTH if key.split(":")[0].endswith("_month") else usd


def _money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:,.3f}"


def estimate(q: Quantities, region: str, table: dict) -> list[str]:
    """The summary's cost lines for `region` from the price table (cli/prices.py's format)."""
    regional = table.get("regions", {}).get(region)
    items = (regional or {}).get("items", {})
    missing: list[str] = []
    running: list[tuple[str, float]] = []  # (line, $/hour) that bill while the groups run
    floor: list[tuple[str, float]] = []  # (line, $/hour) that bill with every group at 0

    def price(key: str, what: str) -> float | None:
        entry = items.get(key)
        if entry is None:
            missing.append(what)
            return None
        return _hourly(key, entry["usd"])

    for name, kind, count in q.groups:
        each = price(f"hyperpod_instance_hour:{kind}", kind)
        if each is not None:
            running.append((f"{name:<24} {count:>3} x {kind:<18} {_money(each)}/h each", count * each))
    for capacity, tier in q.fsx:
        per_gb = price(f"fsx_lustre_ssd_gb_month:{tier}", f"FSx for Lustre SSD {tier} MB/s/TiB")
        if per_gb is not None:
            floor.append((f"{'FSx for Lustre':<24} {capacity} GiB at {tier} MB/s/TiB", capacity * per_gb))
    for key, units in sorted(q.standing.items()):
        each = price(key, LABELS[key])
        if each is not None:
            floor.append((f"{LABELS[key]:<24} {units:>3} x", units * each))

    if regional is None:
        lines = [
            (
                f"What it costs: no price on record for {region} (config/facts/prices.json has "
                f"{', '.join(sorted(table.get('regions', {}))) or 'no region'}); `make preflight` with AWS "
                "credentials fetches it from the AWS Price List API"
            )
        ]
        lines.append(
            "  bills while running: " + ", ".join(f"{count} x {kind} ({name})" for name, kind, count in q.groups)
        )
        lines.append(
            "  bills with every group at 0: "
            + ", ".join(
                [f"FSx for Lustre {capacity} GiB at {tier} MB/s/TiB" for capacity, tier in q.fsx]
                + [f"{units} x {LABELS[key]}" for key, units in sorted(q.standing.items())]
            )
        )
        return lines
    lines = [
        (
            f"What it costs at on-demand list prices in {region} (price table fetched {regional['fetched']} from the "
            f"{regional['source']}; config/facts/prices.json):"
        )
    ]
    partial = " (partial: see 'no price on record')" if missing or q.unpriced_groups else ""
    total_running = sum(h for _, h in running) + sum(h for _, h in floor)
    lines.append(f"  while running: {_money(total_running)}/hour{partial}")
    lines += [f"    {line:<58} {_money(h)}/h" for line, h in running + floor]
    total_floor = sum(h for _, h in floor) * HOURS_PER_MONTH
    lines.append(f"  idle floor, every group at 0: {_money(total_floor)}/month{partial}")
    lines += [f"    {line:<58} {_money(h * HOURS_PER_MONTH)}/month" for line, h in floor]
    for what in dict.fromkeys(missing):
        lines.append(f"  no price on record for {what} in {region}")
    for name in q.unpriced_groups:
        lines.append(f"  no price for group {name}: its type or count is set at deploy time")
    lines.append(
        "  not counted: data processed (NAT, load balancer, endpoints), logs, S3, EBS, Studio spaces while "
        f"they run, data transfer, discounts; a month is {HOURS_PER_MONTH} hours"
    )
    return lines
