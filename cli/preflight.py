"""Pre-flight: the online checks `cdk synth` cannot make, read-only, with the caller's credentials.

    make preflight CONFIG=config/default.yaml            # one line per check
    .venv/bin/python -m cli.preflight --config ... --json

Last, it refreshes the config's region in the price table behind the synth summary's cost estimate
(config/facts/prices.json, or --prices; cli/prices.py) from the Price List Query API (pricing:GetProducts): the only
file it writes, and it changes nothing in AWS.

Each check ends ok, warning, failed (with what to do) or cannot-check (AccessDenied, throttling, an API the region
does not offer): a check that could not run is never reported as a pass. Exit status: 1 when any check failed
(also, with --strict, when any could not run), else 0. Without usable credentials (none found, or STS refuses
them) nothing can be checked: one line says so and the exit status is 2, as for an invalid config.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import ipaddress
import re
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from cli import prices
from cli.preconditions import loaded_config, missing_credentials, one_line
from platform_config import PlatformConfig
from platform_config.attach import ExistingCluster
from platform_config.network import ExistingNetwork
from platform_config.storage import ExistingLustre
from platform_config.eks import ADDON_NAMES, ELASTIC_TRAINING_OPERATOR, KUBERNETES_SUPPORT, enabled_addons

OK, WARNING, FAILED, UNKNOWN = "ok", "warning", "failed", "cannot-check"
ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
THROTTLED = {"Throttling", "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded"}

# Service-linked roles. HyperPod: "SageMaker HyperPod creates and uses a service-linked role named
# AWSServiceRoleForSageMakerHyperPod" (https://docs.aws.amazon.com/sagemaker/latest/dg/
# security-iam-awsmanpol-AmazonSageMakerHyperPodServiceRolePolicy.html). FSx: AWSServiceRoleForAmazonFSx
# (https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-service-linked-roles.html). Both are created on first
# use when the deploying principal may call iam:CreateServiceLinkedRole.
SERVICE_LINKED_ROLES = {
    "AWSServiceRoleForSageMakerHyperPod": "sagemaker.amazonaws.com",
    "AWSServiceRoleForAmazonFSx": "fsx.amazonaws.com",
}
# HyperPod instance quotas are per instance type, named "<type> for cluster usage" in Service Quotas
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html#sagemaker-hyperpod-prerequisites-quotas).
CLUSTER_QUOTA = "{} for cluster usage"
# What the platform always creates; with --templates, the types come from the synthesized templates instead.
CORE_TYPES = (
    "AWS::SageMaker::Cluster",
    "AWS::FSx::FileSystem",
    "AWS::FSx::DataRepositoryAssociation",
    "AWS::SageMaker::Domain",
    "AWS::SageMaker::UserProfile",
    "AWS::SageMaker::StudioLifecycleConfig",
)
# Attach mode (cluster.existing) creates only Studio's side; with --templates, the templates' types instead.
ATTACH_TYPES = ("AWS::SageMaker::Domain", "AWS::SageMaker::UserProfile", "AWS::SageMaker::StudioLifecycleConfig")
# A network interface takes at most five security groups by default (Amazon VPC quotas, "Security groups per network
# interface"); the platform adds one to each of the file system's interfaces.
GROUPS_PER_INTERFACE = 5
# What `make attach` does with the caller's credentials (cli/attach.py), per resource it acts on.
ATTACH_ACTIONS = ("sagemaker:DescribeCluster", "sagemaker:ListClusterNodes", "ssm:StartSession")
# An IPv4 subnet loses five addresses to AWS (https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html).
AWS_RESERVED_IPS = 5
# Warn this many days before a Kubernetes version leaves EKS standard support.
SUPPORT_NOTICE_DAYS = 30


@dataclass(frozen=True)
class Result:
    check: str
    status: str
    detail: str


class CannotCheck(Exception):
    pass


T = TypeVar("T")


def _required(section: T | None, key: str) -> T:
    """A config section a check reads only when it is set; CannotCheck (reported as UNKNOWN) otherwise."""
    if section is None:
        raise CannotCheck(f"{key}: not set")
    return section


class Preflight:
    def __init__(
        self,
        cfg: PlatformConfig,
        client: Callable[[str, str], Any],
        templates: Path | None = None,
        today: datetime.date | None = None,
    ):
        """`client(service, purpose)` returns a boto3 client; purpose only lets tests stub one API of a service."""
        self.cfg = cfg
        self.today = today or datetime.datetime.now(datetime.UTC).date()
        self.client = client
        self.templates = templates
        self.results: list[Result] = []

    def add(self, check: str, status: str, detail: str) -> None:
        self.results.append(Result(check, status, detail))

    def guarded(self, check: str, fn: Callable[[], None]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            fn()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            op = exc.operation_name
            if code in ACCESS_DENIED:
                self.add(check, UNKNOWN, f"cannot check: {code} on {op}; allow that read-only action to the caller")
            elif code in THROTTLED:
                self.add(check, UNKNOWN, f"cannot check: {op} was throttled ({code}) after retries; run again later")
            else:
                self.add(
                    check,
                    UNKNOWN,
                    f"cannot check: {op} failed with {code}: {exc.response.get('Error', {}).get('Message', '')}",
                )
        except CannotCheck as exc:
            self.add(check, UNKNOWN, f"cannot check: {exc}")
        except BotoCoreError as exc:
            self.add(check, UNKNOWN, f"cannot check: {exc}")

    # The sections the attach and existing-resource checks read: run() calls those checks only when the config sets
    # them (and the attach rules require the network and the file system with cluster.existing).
    @property
    def _existing_cluster(self) -> ExistingCluster:
        return _required(self.cfg.cluster.existing, "cluster.existing")

    @property
    def _existing_network(self) -> ExistingNetwork:
        return _required(self.cfg.network.existing, "network.existing")

    @property
    def _existing_lustre(self) -> ExistingLustre:
        return _required(self.cfg.storage.lustre.existing, "storage.lustre.existing")

    def run(self) -> list[Result]:
        if self.cfg.cluster.existing is not None:
            return self.attach_checks()
        net = self.cfg.network
        self.guarded("region-resource-types", self.resource_types)
        self.guarded("availability-zones", self.availability_zones)
        self.guarded("instance-quotas", self.instance_quotas)
        self.guarded("subnet-addresses", self.subnet_addresses)
        if net.existing:
            self.guarded("existing-network", self.existing_network)
        lustre = self.cfg.storage.lustre
        if lustre.existing:
            self.guarded("existing-fsx", self.existing_fsx)
        else:
            self.guarded("fsx-quota", self.fsx_quota)
        self.guarded("service-linked-roles", self.service_linked_roles)
        if any(g.training_plan_arn for g in self.cfg.cluster.instance_groups):
            self.guarded("training-plans", self.training_plans)
        if self.cfg.orchestrator == "eks":
            self.eks_checks()
        return self.results

    def eks_checks(self) -> list[Result]:
        self.guarded("eks-kubernetes-version", self.kubernetes_version)
        for key, name, version in self.eks_addons():
            self.guarded(f"eks-addon {name}", functools.partial(self.addon_version, key, name, version))
        return self.results

    # ------------------------------------------------------------------------------------------ checks
    def attach_checks(self) -> list[Result]:
        """Attach mode: the existing cluster, network and file system as the config names them, Lustre between Studio's
        subnet and the file system, room for the platform's group on the file system's interfaces, and (Slurm) the
        controller `make attach` reaches and what the caller may do there."""
        self.guarded("region-resource-types", self.resource_types)
        self.guarded("existing-network", self.existing_network)
        self.guarded("existing-fsx", self.existing_fsx)
        self.guarded("attach-cluster", self.attach_cluster)
        self.guarded("attach-lustre-path", self.attach_lustre_path)
        self.guarded("attach-fsx-interfaces", self.attach_fsx_interfaces)
        if self.cfg.orchestrator == "slurm":
            self.guarded("attach-controller", self.attach_controller)
            self.guarded("attach-caller", self.attach_caller)
        return self.results

    def attach_cluster(self) -> None:
        existing = self._existing_cluster
        sagemaker = self.client("sagemaker", "cluster")
        try:
            cluster = sagemaker.describe_cluster(ClusterName=existing.name)
        except Exception as exc:  # ResourceNotFound is modelled per client
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("ResourceNotFound", "ValidationException"):
                self.add(
                    "attach-cluster",
                    FAILED,
                    f"cluster.existing.name: no HyperPod cluster {existing.name!r} in {self.cfg.deployment.region}",
                )
                return
            raise
        problems = []
        if cluster["ClusterArn"] != existing.arn:
            problems.append(f"cluster.existing.arn: {existing.arn!r}, the cluster is {cluster['ClusterArn']!r}")
        if cluster.get("ClusterStatus") != "InService":
            problems.append(f"the cluster is {cluster.get('ClusterStatus')}, not InService: attach once it is")
        eks_arn = cluster.get("Orchestrator", {}).get("Eks", {}).get("ClusterArn")
        actual = "eks" if eks_arn else "slurm"
        if actual != self.cfg.orchestrator:
            problems.append(f"orchestrator: {self.cfg.orchestrator}, the cluster is orchestrated by {actual}")
        elif eks_arn and eks_arn.rsplit("/", 1)[-1] != existing.eks_cluster_name:
            problems.append(
                f"cluster.existing.eks_cluster_name: {existing.eks_cluster_name!r}, the cluster's EKS "
                f"cluster is {eks_arn.rsplit('/', 1)[-1]!r}"
            )
        groups = [g["InstanceGroupName"] for g in cluster.get("InstanceGroups", [])]
        if actual == "slurm" and existing.controller_group and existing.controller_group not in groups:
            problems.append(
                f"cluster.existing.controller_group: {existing.controller_group!r} is not a group of the "
                f"cluster ({', '.join(groups)})"
            )
        vpc = cluster.get("VpcConfig", {})
        net = self._existing_network
        if vpc and net.security_group_id not in vpc.get("SecurityGroupIds", []):
            problems.append(
                f"network.existing.security_group_id: {net.security_group_id} is not the cluster's "
                f"({', '.join(vpc.get('SecurityGroupIds', []))})"
            )
        if vpc and not {s.id for s in net.private_subnets} & set(vpc.get("Subnets", [])):
            problems.append(
                f"network.existing.private_subnets: none is a subnet of the cluster "
                f"({', '.join(vpc.get('Subnets', []))})"
            )
        if problems:
            self.add("attach-cluster", FAILED, "; ".join(problems))
        else:
            self.add("attach-cluster", OK, f"{existing.name} InService, {actual}, as configured")

    def _studio_subnet(self) -> str:
        net = self._existing_network
        return (net.studio_subnet or net.private_subnets[0]).id

    def attach_lustre_path(self) -> None:
        """Studio's subnet and the file system's: the same VPC (the local route), and network ACLs that let Lustre
        through both ways. The ports are imported here only, where they are used: importing anything of constructs/
        loads the constructs library, which starts the CDK's Node.js process (~0.4 s of CPU)."""
        from constructs.lustre_ports import LUSTRE_PORTS

        existing = self._existing_lustre
        fs = self.client("fsx", "file-systems").describe_file_systems(FileSystemIds=[existing.file_system_id])[
            "FileSystems"
        ][0]
        ec2 = self.client("ec2", "network")
        studio = self._studio_subnet()
        subnets = {s["SubnetId"]: s for s in ec2.describe_subnets(SubnetIds=[studio, *fs["SubnetIds"]])["Subnets"]}
        if subnets[studio]["VpcId"] != fs.get("VpcId"):
            self.add(
                "attach-lustre-path",
                FAILED,
                f"Studio's subnet {studio} is in {subnets[studio]['VpcId']}, the "
                f"file system in {fs.get('VpcId')}; give Studio a subnet of the "
                "file system's VPC (network.existing.studio_subnet)",
            )
            return
        acls = ec2.describe_network_acls(
            Filters=[{"Name": "association.subnet-id", "Values": sorted({studio, *fs["SubnetIds"]})}]
        )["NetworkAcls"]
        problems = []
        for acl in acls:
            for egress in (False, True):
                for low, high in LUSTRE_PORTS:
                    if not _acl_allows(acl, egress, low, high):
                        problems.append(
                            f"network ACL {acl['NetworkAclId']} denies Lustre TCP {low}-{high} "
                            f"{'out' if egress else 'in'}"
                        )
        if problems:
            self.add(
                "attach-lustre-path",
                FAILED,
                "; ".join(problems) + "; allow it between Studio's subnet and the file system's",
            )
        else:
            self.add(
                "attach-lustre-path",
                OK,
                f"Studio's subnet {studio} and the file system share "
                f"{fs.get('VpcId')}; network ACLs let Lustre through both ways",
            )

    def attach_fsx_interfaces(self) -> None:
        """The platform attaches its Lustre group to every network interface of the file system: each needs room."""
        existing = self._existing_lustre
        fs = self.client("fsx", "file-system-interfaces").describe_file_systems(
            FileSystemIds=[existing.file_system_id]
        )["FileSystems"][0]
        ids = fs.get("NetworkInterfaceIds", [])
        if not ids:
            raise CannotCheck(f"FSx names no network interfaces of {existing.file_system_id}")
        interfaces = self.client("ec2", "network").describe_network_interfaces(NetworkInterfaceIds=ids)[
            "NetworkInterfaces"
        ]
        full = [i["NetworkInterfaceId"] for i in interfaces if len(i.get("Groups", [])) >= GROUPS_PER_INTERFACE]
        if full:
            self.add(
                "attach-fsx-interfaces",
                FAILED,
                f"{', '.join(full)} of {existing.file_system_id} already have "
                f"{GROUPS_PER_INTERFACE} security groups; the platform adds its "
                "Lustre group: remove one, or raise the quota 'Security groups "
                "per network interface'",
            )
        else:
            self.add(
                "attach-fsx-interfaces",
                OK,
                f"{len(interfaces)} interface(s) of {existing.file_system_id} with "
                "room for the platform's Lustre group",
            )

    def attach_controller(self) -> None:
        existing = self._existing_cluster
        nodes = [
            n
            for n in self.client("sagemaker", "nodes").list_cluster_nodes(
                ClusterName=existing.name, InstanceGroupNameContains=existing.controller_group
            )["ClusterNodeSummaries"]
            if n["InstanceGroupName"] == existing.controller_group
        ]
        running = [n for n in nodes if n["InstanceStatus"]["Status"] == "Running"]
        if not running:
            self.add(
                "attach-controller",
                FAILED,
                f"cluster.existing.controller_group: no running node in "
                f"{existing.controller_group!r} ({len(nodes)} node(s)); make attach "
                "reaches the controller through Session Manager",
            )
            return
        target = (
            f"sagemaker-cluster:{existing.arn.rsplit('/', 1)[1]}_{existing.controller_group}-{running[0]['InstanceId']}"
        )
        self.add("attach-controller", OK, f"Session Manager target {target}")

    def attach_caller(self) -> None:
        """The caller is the config's attach role (the lifecycle bucket and the login secret admit only it) and IAM
        lets it describe the cluster, list its nodes and start a session on it."""
        existing = self._existing_cluster
        # The attach rules require cluster.existing.attach_role_arn on Slurm, the only orchestrator this runs for.
        attach_role_arn = _required(existing.attach_role_arn, "cluster.existing.attach_role_arn")
        caller = self.client("sts", "identity").get_caller_identity()["Arn"]
        role = _role_of(caller)
        if (
            role.rsplit("/", 1)[-1] != attach_role_arn.rsplit("/", 1)[-1]
            or role.split(":")[4] != attach_role_arn.split(":")[4]
        ):
            self.add(
                "attach-caller",
                FAILED,
                f"you are {caller}; cluster.existing.attach_role_arn "
                f"{existing.attach_role_arn} is the only role the login secret and the "
                "client bundle prefix admit: run make attach as it, or name your role",
            )
            return
        evaluations = self.client("iam", "simulate").simulate_principal_policy(
            PolicySourceArn=existing.attach_role_arn, ActionNames=list(ATTACH_ACTIONS), ResourceArns=[existing.arn]
        )["EvaluationResults"]
        denied = [e["EvalActionName"] for e in evaluations if e["EvalDecision"] != "allowed"]
        if denied:
            self.add(
                "attach-caller",
                FAILED,
                f"{role} may not {', '.join(denied)} on {existing.arn}; allow them (make attach needs them)",
            )
        else:
            self.add("attach-caller", OK, f"{role} may {', '.join(ATTACH_ACTIONS)} on the cluster")

    def resource_types(self) -> None:
        types = set(ATTACH_TYPES if self.cfg.cluster.existing else CORE_TYPES)
        if self.templates and self.templates.is_dir():
            types = {
                r["Type"]
                for t in self.templates.glob("*.template.json")
                for r in json.loads(t.read_text()).get("Resources", {}).values()
                if not r["Type"].startswith("Custom::") and r["Type"] != "AWS::CDK::Metadata"
            }
        cfn = self.client("cloudformation", "types")
        missing = []
        for name in sorted(types):
            try:
                cfn.describe_type(Type="RESOURCE", TypeName=name)
            except Exception as exc:  # TypeNotFound is modelled per client
                if getattr(exc, "response", {}).get("Error", {}).get("Code") == "TypeNotFoundException":
                    missing.append(name)
                else:
                    raise
        region = self.cfg.deployment.region
        if missing:
            self.add(
                "region-resource-types",
                FAILED,
                f"{region} does not offer {', '.join(missing)}; deploy to a region that does (deployment.region)",
            )
        else:
            self.add("region-resource-types", OK, f"{region} offers all {len(types)} resource types used")

    def availability_zones(self) -> None:
        wanted = sorted({*self._az_ids(), *(g.az_id for g in self.cfg.cluster.instance_groups if g.az_id)})
        zones = self.client("ec2", "zones").describe_availability_zones(
            Filters=[{"Name": "zone-id", "Values": wanted}]
        )["AvailabilityZones"]
        found = {z["ZoneId"]: z for z in zones}
        missing = [z for z in wanted if z not in found]
        down = [z for z in wanted if z in found and found[z].get("State") != "available"]
        if missing:
            self.add(
                "availability-zones",
                FAILED,
                f"{', '.join(missing)} not in {self.cfg.deployment.region}; "
                "list them with `aws ec2 describe-availability-zones`",
            )
        elif down:
            self.add("availability-zones", FAILED, f"{', '.join(down)} not available")
        else:
            self.add("availability-zones", OK, ", ".join(f"{z} ({found[z]['ZoneName']})" for z in wanted))

    def instance_quotas(self) -> None:
        wanted: Counter[str] = Counter()
        for g in self.cfg.cluster.instance_groups:
            wanted[g.instance_type] += g.instance_count
        quotas = {}
        sq = self.client("service-quotas", "sagemaker")
        for page in sq.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker"):
            quotas.update({q["QuotaName"]: q["Value"] for q in page["Quotas"]})
        used = self._cluster_usage()
        for instance_type, count in sorted(wanted.items()):
            name = CLUSTER_QUOTA.format(instance_type)
            check = f"quota {instance_type}"
            if name not in quotas:
                self.add(check, UNKNOWN, f"cannot check: no quota named {name!r} in Service Quotas for sagemaker")
                continue
            limit, in_use = int(quotas[name]), used.get(instance_type, 0)
            if count + in_use > limit:
                self.add(
                    check,
                    FAILED,
                    f"needs {count}, other clusters use {in_use}, quota {name!r} is {limit}; "
                    "request an increase in Service Quotas (SageMaker) or lower instance_count",
                )
            else:
                self.add(check, OK, f"needs {count}, other clusters use {in_use}, quota {limit}")

    def _cluster_usage(self) -> Counter:
        sm = self.client("sagemaker", "clusters")
        used: Counter = Counter()
        for page in sm.get_paginator("list_clusters").paginate():
            for summary in page["ClusterSummaries"]:
                if summary["ClusterName"] == self.cfg.name:
                    continue  # an update of this cluster reuses its own nodes
                for nodes in sm.get_paginator("list_cluster_nodes").paginate(ClusterName=summary["ClusterName"]):
                    used.update(n["InstanceType"] for n in nodes["ClusterNodeSummaries"])
        return used

    def subnet_addresses(self) -> None:
        """Each instance takes one address, plus one per EFA interface (EC2's MaximumEfaInterfaces)."""
        types = sorted({g.instance_type for g in self.cfg.cluster.instance_groups})
        ec2 = self.client("ec2", "instance-types")
        efa = {}
        from botocore.exceptions import ClientError

        unknown = []
        for t in types:
            try:
                info = ec2.describe_instance_types(InstanceTypes=[t.removeprefix("ml.")])["InstanceTypes"]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "InvalidInstanceType":
                    raise
                unknown.append(t)
                continue
            efa[t] = info[0].get("NetworkInfo", {}).get("EfaInfo", {}).get("MaximumEfaInterfaces", 0) if info else 0
        if unknown:  # EC2 does not offer the type here: the cluster cannot get it, whatever the quota says
            keys = [
                f"cluster.instance_groups[{i}].instance_type ({g.name}: {g.instance_type})"
                for i, g in enumerate(self.cfg.cluster.instance_groups)
                if g.instance_type in unknown
            ]
            self.add(
                "subnet-addresses",
                FAILED,
                f"EC2 answers InvalidInstanceType in {self.cfg.deployment.region} "
                f"for {', '.join(keys)}: choose a type offered in the region",
            )
            return
        need: Counter = Counter()
        floating = 0
        for g in self.cfg.cluster.instance_groups:
            ips = g.instance_count * (1 + efa[g.instance_type])
            if g.az_id:
                need[g.az_id] += ips
            else:
                floating += ips
        free = self._free_addresses()
        problems = [f"{az}: needs {n}, {free.get(az, 0)} free" for az, n in sorted(need.items()) if n > free.get(az, 0)]
        total_need, total_free = sum(need.values()) + floating, sum(free.values())
        if total_need > total_free:
            problems.append(f"all subnets: need {total_need}, {total_free} free")
        efa_note = ", ".join(f"{t}: {n} EFA" for t, n in efa.items() if n)
        detail = f"{total_need} addresses needed ({efa_note or 'no EFA'}), {total_free} free"
        if problems:
            self.add("subnet-addresses", FAILED, "; ".join(problems) + " — use larger private subnets")
        else:
            self.add("subnet-addresses", OK, detail)

    def _free_addresses(self) -> dict[str, int]:
        net = self.cfg.network
        if not net.existing:  # subnets are created from the config's CIDRs
            return {
                az: ipaddress.ip_network(c).num_addresses - AWS_RESERVED_IPS
                for az, c in zip(net.az_ids, net.private_subnet_cidrs, strict=True)
            }
        subnets = self.client("ec2", "subnets").describe_subnets(
            SubnetIds=[s.id for s in net.existing.private_subnets]
        )["Subnets"]
        return {s["AvailabilityZoneId"]: s["AvailableIpAddressCount"] for s in subnets}

    def existing_network(self) -> None:
        existing = self._existing_network
        ec2 = self.client("ec2", "network")
        problems = []
        subnets = {
            s["SubnetId"]: s
            for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [existing.vpc_id]}])["Subnets"]
        }
        for i, s in enumerate(existing.private_subnets):
            found = subnets.get(s.id)
            if not found:
                problems.append(f"network.existing.private_subnets[{i}]: {s.id} is not in {existing.vpc_id}")
            elif found["AvailabilityZoneId"] != s.az_id:
                problems.append(
                    f"network.existing.private_subnets[{i}].az_id: {s.az_id!r}, the subnet is in "
                    f"{found['AvailabilityZoneId']}"
                )
        groups = ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [existing.security_group_id]}])[
            "SecurityGroups"
        ]
        if not groups or groups[0]["VpcId"] != existing.vpc_id:
            problems.append(
                f"network.existing.security_group_id: {existing.security_group_id} is not in {existing.vpc_id}"
            )
        elif not _allows_self(groups[0]):
            problems.append(
                f"network.existing.security_group_id: {existing.security_group_id} does not allow all "
                "traffic from itself (EFA and Lustre need it), in and out"
            )
        if problems:
            self.add("existing-network", FAILED, "; ".join(problems))
        else:
            self.add(
                "existing-network",
                OK,
                f"{existing.vpc_id}: {len(existing.private_subnets)} subnet(s) and "
                f"{existing.security_group_id} as configured",
            )

    def existing_fsx(self) -> None:
        existing = self._existing_lustre
        fs = self.client("fsx", "file-systems").describe_file_systems(FileSystemIds=[existing.file_system_id])[
            "FileSystems"
        ][0]
        problems = []
        if fs["FileSystemType"] != "LUSTRE":
            problems.append(f"is {fs['FileSystemType']}, not LUSTRE")
        if fs.get("Lifecycle") != "AVAILABLE":
            problems.append(f"lifecycle {fs.get('Lifecycle')}")
        if fs.get("DNSName") != existing.dns_name:
            problems.append(f"dns_name is {fs.get('DNSName')!r}")
        mount_name = fs.get("LustreConfiguration", {}).get("MountName")
        if mount_name != existing.mount_name:
            problems.append(f"mount_name is {mount_name!r}")
        if self.cfg.network.existing and fs.get("VpcId") != self.cfg.network.existing.vpc_id:
            problems.append(f"is in {fs.get('VpcId')}, not network.existing.vpc_id")
        if problems:
            self.add(
                "existing-fsx", FAILED, f"storage.lustre.existing {existing.file_system_id}: " + "; ".join(problems)
            )
        else:
            self.add("existing-fsx", OK, f"{existing.file_system_id} available, {fs.get('StorageCapacity')} GiB")

    def fsx_quota(self) -> None:
        quotas = {}
        sq = self.client("service-quotas", "fsx")
        for page in sq.get_paginator("list_service_quotas").paginate(ServiceCode="fsx"):
            quotas.update({q["QuotaName"]: q["Value"] for q in page["Quotas"]})
        names = [
            n for n in quotas if "lustre" in n.lower() and "storage capacity" in n.lower() and "backup" not in n.lower()
        ]
        if not names:
            raise CannotCheck("no Lustre storage-capacity quota listed in Service Quotas for fsx")
        used = 0
        for page in self.client("fsx", "file-systems").get_paginator("describe_file_systems").paginate():
            used += sum(f["StorageCapacity"] for f in page["FileSystems"] if f["FileSystemType"] == "LUSTRE")
        want = self.cfg.storage.lustre.storage_capacity_gib
        for name in sorted(names):
            limit = int(quotas[name])
            if used + want > limit:
                self.add(
                    "fsx-quota",
                    FAILED,
                    f"{want} GiB new + {used} GiB in use > {name!r} {limit} GiB; request an "
                    "increase in Service Quotas (Amazon FSx)",
                )
                return
        self.add("fsx-quota", OK, f"{want} GiB new + {used} GiB in use within {', '.join(names)}")

    def service_linked_roles(self) -> None:
        iam = self.client("iam", "roles")
        missing = []
        for role, service in SERVICE_LINKED_ROLES.items():
            try:
                iam.get_role(RoleName=role)
            except iam.exceptions.NoSuchEntityException:
                missing.append((role, service))
        if missing:
            self.add(
                "service-linked-roles",
                WARNING,
                "; ".join(
                    f"{r} missing: created on first use if the deployer may iam:CreateServiceLinkedRole, else run `aws iam "
                    f"create-service-linked-role --aws-service-name {s}`"
                    for r, s in missing
                ),
            )
        else:
            self.add("service-linked-roles", OK, ", ".join(SERVICE_LINKED_ROLES))

    def training_plans(self) -> None:
        sm = self.client("sagemaker", "training-plans")
        by_plan: dict[str, list] = {}
        for g in self.cfg.cluster.instance_groups:
            if g.training_plan_arn:
                by_plan.setdefault(g.training_plan_arn, []).append(g)
        for arn, groups in by_plan.items():
            name = arn.rsplit("/", 1)[1]
            plan = sm.describe_training_plan(TrainingPlanName=name)
            check = f"training-plan {name}"
            status = plan["Status"]
            types = {c["InstanceType"] for c in plan.get("ReservedCapacitySummaries", [])}
            need = sum(g.instance_count for g in groups)
            available = plan.get("AvailableInstanceCount", 0)
            problems = []
            if status not in ("Active", "Scheduled"):
                problems.append(f"status {status}; a cluster can use an Active or Scheduled plan")
            wrong = [g.name for g in groups if types and g.instance_type not in types]
            if wrong:
                problems.append(f"reserves {', '.join(sorted(types))}, not the type of {', '.join(wrong)}")
            if need > available:
                problems.append(f"{available} instance(s) available, the groups need {need}")
            if problems:
                self.add(check, FAILED, "; ".join(problems))
            elif status == "Scheduled":
                self.add(check, WARNING, f"Scheduled (starts {plan.get('StartTime')}); nodes come when it starts")
            else:
                self.add(
                    check,
                    OK,
                    f"Active, {available} of {plan.get('TotalInstanceCount')} instance(s) available, "
                    f"ends {plan.get('EndTime')}",
                )

    def kubernetes_version(self) -> None:
        """EKS's own calendar for the version (DescribeClusterVersions), else the recorded table, against today."""
        eks, minor = self.cfg.eks, self.cfg.eks.kubernetes_version
        found = (
            self.client("eks", "cluster-versions")
            .describe_cluster_versions(clusterVersions=[minor], includeAll=True)
            .get("clusterVersions", [])
        )
        if found and found[0].get("endOfStandardSupportDate"):
            end = found[0]["endOfStandardSupportDate"].date()
            extended = found[0].get("endOfExtendedSupportDate")
            source = "EKS DescribeClusterVersions"
        elif minor in KUBERNETES_SUPPORT:
            end = datetime.date.fromisoformat(KUBERNETES_SUPPORT[minor].end_of_standard)
            extended = datetime.date.fromisoformat(KUBERNETES_SUPPORT[minor].end_of_extended)
            source = "the recorded table (EKS did not list the version)"
        else:
            raise CannotCheck(f"EKS lists no Kubernetes {minor} and the platform records no dates for it")
        extended = extended.date() if isinstance(extended, datetime.datetime) else extended
        check, days = "eks-kubernetes-version", (end - self.today).days
        if days <= 0 and not eks.extended_support:
            self.add(
                check,
                FAILED,
                f"eks.kubernetes_version {minor} left EKS standard support on {end} ({source}); "
                f"extended support, billed per cluster hour, ends {extended}: choose a newer "
                "version, or set eks.extended_support: true to accept the cost",
            )
        elif days <= 0:
            self.add(
                check,
                WARNING,
                f"{minor} is on extended support (eks.extended_support: true) since {end}, until {extended} ({source})",
            )
        elif days <= SUPPORT_NOTICE_DAYS:
            self.add(
                check,
                WARNING,
                f"{minor} leaves EKS standard support on {end}, in {days} day(s) ({source}); "
                "plan the upgrade, extended support is billed per cluster hour",
            )
        else:
            self.add(check, OK, f"{minor} on EKS standard support until {end} ({source})")

    def eks_addons(self) -> list[tuple[str, str, str | None]]:
        """(config path, EKS add-on name, pinned version or None) for every add-on this config installs."""
        eks = self.cfg.eks
        found = [
            (f"eks.addons.{k}", ADDON_NAMES[k], getattr(eks.addons, k)) for k in ["kube_proxy", *enabled_addons(eks)]
        ]
        metrics = self.cfg.observability.node_metrics
        if metrics.enabled:
            found.append(
                (
                    "observability.node_metrics.eks_addon_version",
                    "amazon-sagemaker-hyperpod-observability",
                    metrics.eks_addon_version,
                )
            )
        return found

    def addon_version(self, key: str, name: str, pinned: str | None) -> None:
        """The pin must be one EKS offers for the cluster's Kubernetes version here ("The version must match one of
        the versions returned by DescribeAddonVersions", eks create-addon); unpinned, EKS must mark a default."""
        minor, check = self.cfg.eks.kubernetes_version, f"eks-addon {name}"
        eks = self.client("eks", "addon-versions")
        versions: list[dict] = []
        for page in eks.get_paginator("describe_addon_versions").paginate(kubernetesVersion=minor, addonName=name):
            versions += [
                v for a in page.get("addons", []) if a.get("addonName") == name for v in a.get("addonVersions", [])
            ]
        if not versions:
            self.add(check, FAILED, f"{self.cfg.deployment.region} offers no {name} add-on for Kubernetes {minor}")
            return
        offered = [v["addonVersion"] for v in versions]
        default = next(
            (
                v["addonVersion"]
                for v in versions
                for c in v.get("compatibilities", [])
                if c.get("clusterVersion") == minor and c.get("defaultVersion")
            ),
            None,
        )
        newest = ", ".join(offered[:4])
        if pinned is not None and pinned not in offered:
            self.add(
                check,
                FAILED,
                f"{key}: {pinned!r} is not offered for Kubernetes {minor} in "
                f"{self.cfg.deployment.region}; offered: {newest}{' ...' if len(offered) > 4 else ''}"
                f" (default {default or 'none'}); pin one of them or leave it unset",
            )
            return
        if pinned is None and default is None:
            self.add(
                check,
                FAILED,
                f"{key}: unset, and EKS marks no default {name} version for Kubernetes {minor}; pin one of {newest}",
            )
            return
        version = pinned or default
        assert version is not None  # one of them is set: returned above otherwise
        operator = re.fullmatch(r"v(\d+)\.(\d+)\..*", version)
        if (
            name == ADDON_NAMES["training_operator"]
            and operator
            and tuple(map(int, operator.groups())) < ELASTIC_TRAINING_OPERATOR
        ):
            self.add(
                check,
                FAILED,
                f"{key}: {version} ({'pinned' if pinned else 'EKS default'}); elastic training "
                "needs v1.2 or later: pin one",
            )
            return
        self.add(check, OK, f"{version} ({'pinned, offered' if pinned else 'EKS default'} for Kubernetes {minor})")

    def _az_ids(self) -> list[str]:
        existing = self.cfg.network.existing
        return [s.az_id for s in existing.private_subnets] if existing else list(self.cfg.network.az_ids)


def _allows_self(group: dict) -> bool:
    def has(perms: Iterable[dict]) -> bool:
        return any(
            p.get("IpProtocol") == "-1"
            and any(pair.get("GroupId") == group["GroupId"] for pair in p.get("UserIdGroupPairs", []))
            for p in perms
        )

    return has(group.get("IpPermissions", [])) and has(group.get("IpPermissionsEgress", []))


def _acl_allows(acl: dict, egress: bool, low: int, high: int) -> bool:
    """The first matching rule by number decides (Amazon VPC, network ACL rules); a rule matches when its protocol is
    all or TCP and its ports cover the range. Any CIDR counts: Studio and the file system share the VPC."""
    for entry in sorted(
        (e for e in acl.get("Entries", []) if e.get("Egress") == egress), key=lambda e: e["RuleNumber"]
    ):
        if entry.get("Protocol") not in ("-1", "6"):
            continue
        ports = entry.get("PortRange")
        if ports and not (ports["From"] <= low and high <= ports["To"]):
            continue
        return entry["RuleAction"] == "allow"
    return False


def _role_of(arn: str) -> str:
    """arn:aws:sts::123:assumed-role/Name/session -> arn:aws:iam::123:role/Name (a session ARN carries no role path,
    so callers compare the role's name and account)."""
    parts = arn.split(":")
    if len(parts) == 6 and parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        return f"arn:{parts[1]}:iam::{parts[4]}:role/{parts[5].split('/')[1]}"
    return arn


def refresh_prices(client: Callable[[str, str], Any], region: str, path: Path) -> Result:
    """Fetch `region`'s prices from the Price List Query API into the price table (cli/prices.py) for the synth
    summary's cost estimate; the table's other regions keep theirs. Nothing is written when no price came back."""
    from botocore.exceptions import BotoCoreError, ClientError

    check = "price-table"
    try:
        tables, left_out = prices.fetch(client("pricing", "prices"), [region])
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return Result(
            check,
            UNKNOWN,
            f"cannot refresh: {error.get('Code', '')} on {exc.operation_name}; the cost "
            f"estimate keeps the table's prices ({path})",
        )
    except BotoCoreError as exc:
        return Result(check, UNKNOWN, f"cannot refresh: {one_line(exc)}; the cost estimate keeps the table's prices")
    items = tables[region]["items"]
    if not items:
        return Result(check, UNKNOWN, f"the Price List API returned no price for {region}; {path} left as it was")
    text = prices.merged(prices.load(path), tables)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    detail = f"{len(items)} prices for {region} written to {path}"
    if left_out:
        return Result(check, WARNING, f"{detail}; left out (ambiguous): {'; '.join(left_out)}")
    return Result(check, OK, detail)


def exit_code(results: list[Result], strict: bool = False) -> int:
    bad = {FAILED, UNKNOWN} if strict else {FAILED}
    return 1 if any(r.status in bad for r in results) else 0


def render(results: list[Result]) -> str:
    label = {OK: "ok", WARNING: "WARNING", FAILED: "FAILED", UNKNOWN: "CANNOT CHECK"}
    return "\n".join(f"{label[r.status]:<13} {r.check}: {r.detail}" for r in results)


def boto3_clients(region: str, profile: str | None = None) -> Callable[[str, str], Any]:
    import boto3
    from botocore.config import Config

    session = boto3.Session(profile_name=profile, region_name=region)
    config = Config(retries={"mode": "standard", "max_attempts": 5})
    cache: dict[str, object] = {}

    def client(service: str, _purpose: str) -> object:
        if service not in cache:
            # the Price List Query API answers for every region from its own endpoints (us-east-1 among them)
            endpoint_region = prices.PRICING_REGION if service == "pricing" else None
            cache[service] = session.client(service, config=config, region_name=endpoint_region)
        return cache[service]

    return client


def caller_problem(client: Callable[[str, str], Any]) -> str | None:
    """Why these credentials cannot check anything (expired, refused, no network), in one line; None when STS
    GetCallerIdentity, which needs no permission, answers."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client("sts", "identity").get_caller_identity()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return f"{error.get('Code', '')} on GetCallerIdentity: {one_line(error.get('Message', ''))}"
    except BotoCoreError as exc:
        return one_line(exc)
    return None


def main(argv: list[str] | None = None, client: Callable[[str, str], Any] | None = None) -> int:
    """`client` (tests) replaces the boto3 clients built from the caller's credentials."""
    parser = argparse.ArgumentParser(
        prog="python -m cli.preflight", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="config/default.yaml")
    parser.add_argument("--profile")
    parser.add_argument("--templates", type=Path, help="cdk.out: check every resource type it uses")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true", help="a check that cannot run fails too")
    parser.add_argument(
        "--prices",
        type=Path,
        default=prices.PRICES_FACTS,
        help="the price table to refresh for the config's region (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    cfg = loaded_config(args.config)
    if cfg is None:
        return 2
    problem = missing_credentials(args.profile) if client is None else None
    if problem is None:
        client = client or boto3_clients(cfg.deployment.region, args.profile)
        problem = caller_problem(client)
    if problem:
        print(f"preflight: nothing checked for {args.config}: {problem}", file=sys.stderr)
        return 2
    assert client is not None  # made above unless a problem stopped the run
    results = Preflight(cfg, client, args.templates).run()
    results.append(refresh_prices(client, cfg.deployment.region, args.prices))
    code = exit_code(results, args.strict)
    if args.json:
        print(
            json.dumps(
                {
                    "config": args.config,
                    "region": cfg.deployment.region,
                    "exit_code": code,
                    "results": [asdict(r) for r in results],
                },
                indent=2,
            )
        )
    else:
        print(render(results))
    return code


if __name__ == "__main__":
    sys.exit(main())
