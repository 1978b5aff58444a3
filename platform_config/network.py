"""`network:` the VPC the platform builds (CIDRs, AZ IDs, endpoints, flow logs) or the one you bring, and its rules:
AZ IDs in the deployment's region, subnets inside the VPC and apart, Studio's own subnet while root squash exempts
the cluster's."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Literal

from pydantic import Field, StrictBool

from platform_config.fields import LOG_RETENTION_DAYS, AzId, Cidr, SecurityGroupId, Strict, SubnetId, VpcId
from platform_config.storage import root_squash_exempts_cluster_subnets

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

INTERFACE_ENDPOINT_SERVICES = (
    "ssm",
    "ssmmessages",
    "ec2messages",
    "sts",
    "logs",
    "ecr.api",
    "ecr.dkr",
    "sagemaker.api",
)


class FlowLogs(Strict):
    """VPC flow logs of all traffic to CloudWatch Logs (encrypted log group)."""

    enabled: StrictBool = Field(True, description="Send VPC flow logs (traffic type ALL) to CloudWatch Logs.")
    retention_days: Literal[LOG_RETENTION_DAYS] = Field(  # type: ignore[valid-type]
        90, description="Days CloudWatch keeps the flow logs: one of CloudWatch Logs' retention values."
    )


class ExistingSubnet(Strict):
    id: SubnetId = Field(description="The subnet's ID.")
    az_id: AzId = Field(description="The AZ ID the subnet is in (an AZ ID such as usw2-az2, not an AZ name).")


class ExistingNetwork(Strict):
    """Bring-your-own VPC: the security group must already allow all traffic to and from itself."""

    vpc_id: VpcId = Field(description="Bring your own network: the VPC to use. No network stack is created.")
    private_subnets: list[ExistingSubnet] = Field(
        min_length=1, description="The private subnets the cluster uses, at least one; the first holds FSx."
    )
    security_group_id: SecurityGroupId = Field(
        description="The cluster's security group: it must allow all traffic to and from itself and Lustre (TCP 988 "
        "and 1018-1023)."
    )
    control_plane_subnets: list[ExistingSubnet] = Field(
        [],
        description="EKS only: subnets in at least two AZs for the EKS control plane's network interfaces (instead "
        "of eks.control_plane_subnets).",
    )
    studio_subnet: ExistingSubnet | None = Field(
        None,
        description="Studio's own subnet (the VpcOnly domain), not one of private_subnets. Required with Studio "
        "and root squash on a Slurm platform with a platform-owned FSx: the cluster's subnets keep "
        "root on FSx, so Studio must not share them.",
    )


class Network(Strict):
    """The VPC the platform builds, or the one you bring (`existing`)."""

    vpc_cidr: Cidr = Field("10.0.0.0/16", description="The VPC's IPv4 CIDR block, /16 to /28.")
    az_ids: list[AzId] = Field(
        default=["usw2-az2"],
        min_length=1,
        max_length=6,
        description="1-6 distinct AZ IDs (not AZ names) in deployment.region, one private subnet each. FSx and the "
        "default cluster placement use the first.",
    )
    public_subnet_cidr: Cidr = Field(
        "10.0.0.0/24", description="The public subnet, inside vpc_cidr and not overlapping; holds only the NAT gateway."
    )
    private_subnet_cidrs: list[Cidr] = Field(
        default=["10.0.64.0/18"],
        min_length=1,
        max_length=6,
        description="One private subnet CIDR per AZ ID, inside vpc_cidr, not overlapping. Size them for EFA: each EFA "
        "interface takes an IP.",
    )
    studio_subnet_cidr: Cidr | None = Field(
        "10.0.4.0/22",
        description="Studio's own subnet (in the first AZ, beside FSx), inside vpc_cidr, not "
        "overlapping, so its addresses are not the cluster's: the cluster's subnets keep "
        "root on FSx (storage.lustre.root_squash). null puts Studio in the first private "
        "subnet, refused while root squash exempts the cluster's subnets (Slurm, "
        "platform-owned FSx).",
    )
    s3_endpoint_policy: Literal["open", "restricted"] = Field(
        "open",
        description="The S3 gateway endpoint's policy: open (AWS's default full-access policy, as AWS's "
        "templates use) or restricted (this account's buckets and the AWS-owned buckets nodes "
        'read; see docs/configuration.md, "Restricted S3 endpoint policy").',
    )
    interface_endpoints: list[Literal[INTERFACE_ENDPOINT_SERVICES]] = Field(  # type: ignore[valid-type]
        [], description="Interface endpoints to create: private DNS, HTTPS from the VPC only."
    )
    flow_logs: FlowLogs = Field(FlowLogs(), description="VPC flow logs.")
    allow_http_egress: StrictBool = Field(
        True,
        description="Allow TCP 80 out from the nodes: HyperPod's Ubuntu images read apt mirrors over plain HTTP. "
        "Turn off where a proxy or mirror serves HTTPS.",
    )
    existing: ExistingNetwork | None = Field(
        None, description="Bring your own VPC, subnets and security group instead of the network stack."
    )


_DIRECTION_CODES = {"northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}


def region_prefix(region: str) -> str:
    """us-east-1 -> use1, ap-northeast-2 -> apne2, us-gov-west-1 -> usgw1 (the AZ ID naming scheme)."""
    country, *middle, number = region.split("-")
    return country + "".join(_DIRECTION_CODES.get(word, word[0]) for word in middle) + number


def private_subnet_az_ids(cfg: PlatformConfig) -> list[str]:
    existing = cfg.network.existing
    return [s.az_id for s in existing.private_subnets] if existing else list(cfg.network.az_ids)


def network_errors(cfg: PlatformConfig) -> list[str]:
    net = cfg.network
    errors: list[str] = []
    region = cfg.deployment.region
    for i, az in enumerate(private_subnet_az_ids(cfg)):
        path = f"network.existing.private_subnets[{i}].az_id" if net.existing else f"network.az_ids[{i}]"
        if region and not az.startswith(region_prefix(region) + "-"):
            errors.append(
                f"{path}: {az!r} is not in region {region}; AZ IDs there start with '{region_prefix(region)}-'"
            )
    if net.existing and net.existing.control_plane_subnets and cfg.orchestrator != "eks":
        errors.append("network.existing.control_plane_subnets: set, but only the EKS orchestrator uses them")
    if len(set(private_subnet_az_ids(cfg))) != len(private_subnet_az_ids(cfg)):
        errors.append(f"network.az_ids: {private_subnet_az_ids(cfg)} repeats an AZ ID; list each at most once")
    if root_squash_exempts_cluster_subnets(cfg) and cfg.studio.enabled:
        key = "network.existing.studio_subnet" if net.existing else "network.studio_subnet_cidr"
        if (net.existing.studio_subnet if net.existing else net.studio_subnet_cidr) is None:
            errors.append(
                f"{key}: not set, but storage.lustre.root_squash exempts the cluster's subnets (their nodes "
                "keep root on FSx) and Studio would share the first of them; give Studio a subnet of its "
                "own (e.g. network.studio_subnet_cidr: 10.0.4.0/22) or set "
                "storage.lustre.root_squash.enabled: false"
            )
    if net.existing and net.existing.studio_subnet:
        studio = net.existing.studio_subnet
        if studio.id in {s.id for s in net.existing.private_subnets}:
            errors.append(
                f"network.existing.studio_subnet.id: {studio.id!r} is also in network.existing."
                "private_subnets; Studio needs a subnet the cluster does not use"
            )
        if region and not studio.az_id.startswith(region_prefix(region) + "-"):
            errors.append(f"network.existing.studio_subnet.az_id: {studio.az_id!r} is not in region {region}")
    if net.existing:
        return errors

    if len(net.private_subnet_cidrs) != len(net.az_ids):
        errors.append(
            f"network.private_subnet_cidrs: {len(net.private_subnet_cidrs)} CIDR(s) for "
            f"{len(net.az_ids)} AZ ID(s); give exactly one private subnet CIDR per AZ ID"
        )
    vpc = ipaddress.IPv4Network(net.vpc_cidr)
    if not 16 <= vpc.prefixlen <= 28:
        errors.append(f"network.vpc_cidr: {net.vpc_cidr!r}; VPC CIDRs must be between /16 and /28")
    subnets = [("network.public_subnet_cidr", net.public_subnet_cidr)] + [
        (f"network.private_subnet_cidrs[{i}]", c) for i, c in enumerate(net.private_subnet_cidrs)
    ]
    if cfg.orchestrator == "eks":
        subnets += [
            (f"eks.control_plane_subnets[{i}].cidr", s.cidr) for i, s in enumerate(cfg.eks.control_plane_subnets)
        ]
    if net.studio_subnet_cidr:
        subnets.append(("network.studio_subnet_cidr", net.studio_subnet_cidr))
    for path, cidr in subnets:
        if not ipaddress.IPv4Network(cidr).subnet_of(vpc):
            errors.append(f"{path}: {cidr!r} is not inside network.vpc_cidr {net.vpc_cidr!r}")
    for a in range(len(subnets)):
        for b in range(a + 1, len(subnets)):
            if ipaddress.ip_network(subnets[a][1]).overlaps(ipaddress.ip_network(subnets[b][1])):
                errors.append(f"{subnets[b][0]}: {subnets[b][1]!r} overlaps {subnets[a][0]} {subnets[a][1]!r}")
    return errors
