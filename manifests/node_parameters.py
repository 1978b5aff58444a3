"""platform_parameters.json's content from the config (its typed definition and schema: constructs/node_parameters.py,
beside the construct that ships it). Values known only at deploy time (ARNs, the file system's names, the region)
come in as arguments: the stacks pass their tokens."""

from __future__ import annotations

import hashlib
from typing import Any

from platform_config import PlatformConfig
from platform_config.accounting_plan import accounting_parameters, worker_groups
from platform_config.directory import ca_certificate_bytes
from platform_config.login_access import slurm_auth
from platform_config.storage import checkpoint_dir
from platform_config.studio import SHARED_GROUP_NAME

# Beside the scripts in the lifecycle prefix (HyperPod copies the prefix to every node); configure_sssd.sh checks its
# sha256 against the parameters before sssd trusts it.
DIRECTORY_CA_FILE = "directory/ca.pem"


def slurm_node_parameters(
    config: PlatformConfig,
    *,
    lustre: Any,
    region: str,
    slurm_login_secret_arn: str | None,
    jwt_key_secret_arn: str | None,
    parameters_s3_uri: str | None,
    client_bundle_s3_prefix: str | None,
    node_metrics_remote_write_url: str | None,
    job_role_arn: str | None,
) -> dict[str, Any]:
    """What lifecycle/hyperpod/on_init_complete.sh reads (see lifecycle/hyperpod/README.md). `lustre`: the file
    system's dns_name and mount_name; `job_role_arn`: the Slurm job role, when jobs get credentials
    (job_credentials_enabled)."""
    logins = config.group("login")
    lustre_config = config.storage.lustre
    runtime = config.cluster.container_runtime
    return {
        "version": 1,
        "cluster_name": config.name,
        "controller_group": config.group("controller")[0].name,
        "login_group": logins[0].name if logins else None,
        "worker_groups": worker_groups(config),
        "fsx": {
            "mount": lustre_config.mount_by == "lifecycle",
            "dns_name": lustre.dns_name,
            "mount_name": lustre.mount_name,
            "mount_path": lustre_config.mount_path,
            "checkpoint_dir": checkpoint_dir(config.storage),
        },
        "users": [{"name": u.name, "uid": u.uid, "gid": u.group_id, "sudo": u.sudo} for u in config.users],
        "slurm": {
            "auto_resume": config.cluster.slurm_auto_resume,
            "login_secret_arn": slurm_login_secret_arn,
            "auth": slurm_auth(config),
            "jwt_key_secret_arn": jwt_key_secret_arn,
            "pam_slurm_adopt": config.cluster.pam_slurm_adopt,
            "controller_ssh": config.cluster.controller_ssh,
            # The controller uploads its Slurm client bundle here for Studio (publish_slurm_login.sh).
            "client_bundle_s3_prefix": client_bundle_s3_prefix if slurm_login_secret_arn else None,
        },
        "users_sync": {"parameters_s3_uri": parameters_s3_uri},
        "shared_group": {"name": SHARED_GROUP_NAME, "gid": config.studio.shared_gid} if config.studio.enabled else None,
        "container_runtime": {
            "enabled": runtime.enabled,
            "ubuntu_release": runtime.ubuntu_release,
            "docker_apt_version": runtime.docker_apt_version,
            "artifacts": [a.model_dump() for a in runtime.artifacts],
        },
        "accounting": accounting_parameters(config),
        "node_metrics": node_metrics_parameters(config, node_metrics_remote_write_url, region),
        "directory": directory_parameters(config),
        # configure_pam_adopt.sh installs these on a compute node without pam_slurm_adopt.so
        "pam_slurm_adopt": {"artifacts": [a.model_dump() for a in config.cluster.pam_slurm_adopt_artifacts]},
        # lifecycle/hyperpod/install_job_credentials.sh: the role the job credential broker gives jobs credentials of.
        "job_credentials": {"role_arn": job_role_arn, "region": region} if job_credentials_enabled(config) else None,
    }


def eks_node_parameters(config: PlatformConfig) -> dict[str, Any]:
    """What lifecycle/hyperpod/on_create.sh reads on EKS nodes (no Slurm, no FSx mount: pods mount FSx through
    the CSI driver)."""
    return {
        "version": 1,
        "orchestrator": "eks",
        "cluster_name": config.name,
        "worker_groups": [{"instance_group_name": g.name} for g in config.group("compute")],
    }


def directory_parameters(config: PlatformConfig) -> dict[str, Any] | None:
    """What lifecycle/hyperpod/configure_sssd.sh reads; None when the directory is off. Never the password: nodes read
    it from the secret at start."""
    directory = config.cluster.directory
    if not directory.enabled:
        return None
    # platform_config/directory.py's rules refuse an enabled directory without its bind password's secret.
    assert directory.bind_password_secret_arn is not None
    return {
        "uris": list(directory.uris),
        "start_tls": directory.start_tls,
        "search_base": directory.search_base,
        "bind_dn": directory.bind_dn,
        "bind_password_secret_arn": directory.bind_password_secret_arn,
        "region": directory.bind_password_secret_arn.split(":")[3],
        "ldap_schema": directory.ldap_schema,
        "access_groups": list(directory.access_groups),
        "admin_groups": list(directory.admin_groups),
        "ca_certificate": {
            "file": DIRECTORY_CA_FILE,
            "sha256": hashlib.sha256(ca_certificate_bytes(config)).hexdigest(),
        },
        "artifacts": [a.model_dump() for a in directory.artifacts],
    }


def node_metrics_parameters(config: PlatformConfig, remote_write_url: str | None, region: str) -> dict[str, Any] | None:
    """What lifecycle/hyperpod/install_node_metrics.sh reads; None (nothing installed) when node metrics are off."""
    metrics = config.observability.node_metrics
    if not metrics.enabled:
        return None
    if not remote_write_url:
        raise ValueError(
            "observability.node_metrics.enabled is true but the Slurm cluster stack got no "
            "node_metrics_remote_write_url (the Amazon Managed Service for Prometheus workspace)"
        )
    return {
        "remote_write_url": remote_write_url,
        "region": region,
        "scrape_interval_seconds": metrics.scrape_interval_seconds,
        "artifacts": [a.model_dump() for a in metrics.artifacts],
    }


def artifact_s3_uris(config: PlatformConfig) -> list[str]:
    """Every package a node downloads from the operator's mirror (the node role reads exactly these objects)."""
    runtime, metrics = config.cluster.container_runtime, config.observability.node_metrics
    directory = config.cluster.directory
    return (
        ([a.s3_uri for a in runtime.artifacts] if runtime.enabled else [])
        + ([a.s3_uri for a in metrics.artifacts] if metrics.enabled else [])
        + ([a.s3_uri for a in directory.artifacts] if directory.enabled else [])
        + ([a.s3_uri for a in config.cluster.pam_slurm_adopt_artifacts] if config.cluster.pam_slurm_adopt else [])
    )


def job_credentials_enabled(config: PlatformConfig) -> bool:
    """Jobs get AWS credentials (of the Slurm job role) when there is something for them to reach: MLflow."""
    return config.studio.enabled and config.studio.mlflow.enabled
