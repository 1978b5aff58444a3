"""What one stack hands the next, typed by what the consumer reads rather than by the stack that made it: stack
modules import these, never each other (stacks/platform.py composes them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aws_cdk import aws_ec2 as ec2

from constructs.hyperpod_vpc import PrivateSubnet

if TYPE_CHECKING:
    from constructs.metrics_workspace import MetricsWorkspace


@dataclass(frozen=True)
class NetworkRefs:
    """What the other stacks need from the network, whoever created it."""

    vpc_id: str
    private_subnets: tuple[PrivateSubnet, ...]
    security_group_id: str
    control_plane_subnets: tuple[PrivateSubnet, ...] = ()  # EKS only
    studio_subnet: PrivateSubnet | None = None  # Studio's own; None: Studio uses the primary subnet

    @property
    def studio_subnet_id(self) -> str:
        return (self.studio_subnet or self.primary_subnet).subnet_id

    @property
    def primary_subnet(self) -> PrivateSubnet:
        """FSx and the cluster's default placement live here (FSx for Lustre is single-AZ)."""
        return self.private_subnets[0]

    def subnet_in(self, az_id: str) -> str:
        return next(s.subnet_id for s in self.private_subnets if s.az_id == az_id)


class LustreRefs(Protocol):
    """The platform's file system (constructs/lustre_file_system.py) or one you brought."""

    @property
    def file_system_id(self) -> str: ...
    @property
    def dns_name(self) -> str: ...
    @property
    def mount_name(self) -> str: ...


@dataclass(frozen=True)
class ExistingLustreRefs:
    """A file system the platform does not own (storage.lustre.existing)."""

    file_system_id: str
    dns_name: str
    mount_name: str


class StorageRefs(Protocol):
    """What the cluster, Studio and observability stacks read of the storage stack."""

    lustre: LustreRefs
    mount_path: str
    data_bucket_name: str | None
    lustre_access_group: ec2.CfnSecurityGroup | None
    metrics_workspace: MetricsWorkspace | None
