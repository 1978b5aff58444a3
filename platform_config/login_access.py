"""`cluster.login_access:` how people reach the login group (an SSH load balancer, Session Manager as themselves),
and its rules."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from pydantic import Field, StrictBool

from platform_config.fields import Cidr, PosixName, Strict

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig


class LoginAccess(Strict):
    """How people reach the login group: an internal Network Load Balancer for SSH whose targets follow HyperPod's
    login nodes (constructs/login_load_balancer.py), and a Session Manager document that runs sessions as the
    person's own POSIX user (SSMSessionRunAs principal tag) instead of ssm-user."""

    load_balancer: StrictBool = Field(
        True,
        description="With a login group of at least one instance (Slurm): an internal Network Load Balancer for "
        "SSH whose targets follow the login nodes (docs/slurm-departments.md); ignored otherwise.",
    )
    ssh_allowed_cidrs: list[Cidr] = Field(
        default=[],
        max_length=50,
        description="Who may reach port 22 of the load balancer; empty: network.vpc_cidr. 0.0.0.0/0 is refused. "
        "Required with network.existing (the platform cannot know that VPC's CIDR without calling AWS).",
    )
    run_as: StrictBool = Field(
        True,
        description="A Session Manager document <name>-RunAsShell (Slurm) that starts sessions as the user in "
        "the caller's SSMSessionRunAs IAM tag.",
    )
    run_as_default_user: PosixName = Field(
        "nobody",
        description="The user of a session whose IAM principal has no SSMSessionRunAs tag: nobody (no login "
        "shell, so the session fails to start: only tagged people get in, each as themselves) or "
        "one of users, never ssm-user or root.",
    )


def login_load_balancer(cfg: PlatformConfig) -> bool:
    """An SSH load balancer in front of the login group: Slurm, a login group with instances, and not turned off."""
    logins = cfg.group("login") if cfg.orchestrator == "slurm" and cfg.cluster.existing is None else []
    return bool(logins) and logins[0].instance_count >= 1 and cfg.cluster.login_access.load_balancer


def session_run_as(cfg: PlatformConfig) -> bool:
    return cfg.orchestrator == "slurm" and cfg.cluster.login_access.run_as and cfg.cluster.existing is None


def login_access_errors(cfg: PlatformConfig) -> list[str]:
    access = cfg.cluster.login_access
    errors: list[str] = []
    path = "cluster.login_access"
    for i, cidr in enumerate(access.ssh_allowed_cidrs):
        if ipaddress.ip_network(cidr).prefixlen == 0:
            errors.append(
                f"{path}.ssh_allowed_cidrs[{i}]: {cidr!r} would let every address that routes into the VPC "
                "reach the login nodes' SSH; list the networks people connect from, e.g. 10.0.0.0/16"
            )
    if login_load_balancer(cfg) and cfg.network.existing is not None and not access.ssh_allowed_cidrs:
        errors.append(
            f"{path}.ssh_allowed_cidrs: [] with network.existing; the default is the VPC's CIDR, which the "
            "platform cannot know for an existing VPC: list the networks people connect from, or set "
            f"{path}.load_balancer: false"
        )
    if session_run_as(cfg):
        users = sorted(u.name for u in cfg.users)
        if access.run_as_default_user not in ["nobody", *users]:
            errors.append(
                f"{path}.run_as_default_user: {access.run_as_default_user!r}; Session Manager starts a "
                "session only as a user that exists on the node: allowed: nobody (untagged principals are "
                f"refused) or one of users ({', '.join(users) or 'none defined'}); never ssm-user or root"
            )
    return errors


def slurm_auth(config: PlatformConfig) -> str:
    """How Studio users authenticate to slurmctld, fixed at synth from the config: `jwt` (their own token, no munge
    key in Studio) when Studio partitions are per user (`shared_fsx: false`), else `munge` (the cluster's key).
    The Studio stack's SharedFSx parameter only switches partitions; it does not change this (docs/security.md)."""
    return "jwt" if config.orchestrator == "slurm" and config.studio.enabled and not config.shared_fsx else "munge"
