"""The config variants the suite synthesizes (`synth(name)` in conftest.py) and the configs built from the examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from platform_config import PlatformConfig, load_config, parse_config
from support.paths import ROOT

VARIANT_FILES = {
    "default": ROOT / "config" / "default.yaml",
    "multi_az": ROOT / "config" / "examples" / "multi-az-training-plan.yaml",
    "existing_vpc": ROOT / "config" / "examples" / "existing-vpc.yaml",
    "containers": ROOT / "config" / "examples" / "containers-per-user.yaml",
    "eks": ROOT / "config" / "examples" / "eks.yaml",
    "research": ROOT / "config" / "examples" / "research-institution.yaml",
    "attach_slurm": ROOT / "config" / "examples" / "attach-existing-slurm.yaml",
    "attach_eks": ROOT / "config" / "examples" / "attach-existing-eks.yaml",
}
# CI cannot reach GitHub, so EKS variants synthesize against a stand-in generated from the pinned chart's facts
# (tools/hyperpod_chart_facts.py); synth accepts it only with allow_chart_stand_in, and the cluster template then
# fails CloudFormation validation. `make hyperpod-chart` fetches the real chart for deployments.
# The Kubernetes version of config/examples/eks.yaml: its control plane, and the schemas its objects validate against.
EKS_KUBERNETES_VERSION = "1.34"
STAND_IN_CHART = ROOT / "tests" / "fixtures" / "hyperpod-helm-chart"


def eks_config(path: Path, eks: dict | None = None, **overrides) -> PlatformConfig:
    """An EKS example config pointed at the stand-in chart; `eks` keys replace those of its eks section."""
    data = yaml.safe_load(path.read_text())
    data["eks"]["hyperpod_dependencies"]["chart_dir"] = str(STAND_IN_CHART)
    data["eks"].update(eks or {})
    data.update(overrides)
    return parse_config(data, str(path))


def large_config() -> PlatformConfig:
    """The biggest shape in practice: 4 AZs, every endpoint, 20 instance groups, 1,000 users in per-user mode."""
    azs = [f"usw2-az{i}" for i in range(1, 5)]
    groups = [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
        {"name": "login", "role": "login", "instance_type": "ml.m5.xlarge", "instance_count": 1},
    ]
    groups += [
        {
            "name": f"workers-{i}",
            "role": "compute",
            "instance_type": "ml.p5.48xlarge",
            "instance_count": 16,
            "deep_health_checks": ["InstanceStress", "InstanceConnectivity"],
            "az_id": azs[i % len(azs)],
            "partitions": [f"part{i}"],
        }
        for i in range(18)
    ]
    return parse_config(
        {
            "name": "large",
            "shared_fsx": False,
            "network": {
                "az_ids": azs,
                "private_subnet_cidrs": [f"10.0.{64 * i}.0/18" for i in range(1, 4)] + ["10.0.16.0/20"],
                "interface_endpoints": [
                    "ssm",
                    "ssmmessages",
                    "ec2messages",
                    "sts",
                    "logs",
                    "ecr.api",
                    "ecr.dkr",
                    "sagemaker.api",
                ],
                "s3_endpoint_policy": "restricted",
            },
            "cluster": {"instance_groups": groups},
            "users": [{"name": f"user{i}", "uid": 10000 + i} for i in range(1000)],
        },
        "large",
    )


def per_user_data(count: int) -> dict:
    """The default config in per-user mode with `count` generated users whose every name is as long as a POSIX name
    may be (32 characters) and whose uids have the most digits allowed: the largest templates per user."""
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    data.update(shared_fsx=False, users=[{"name": f"u{i:031d}", "uid": 3_990_000 + i} for i in range(count)])
    return data


def per_user_config(count: int) -> PlatformConfig:
    return parse_config(per_user_data(count), f"per_user_{count}")


GRAFANA_VIEWERS = "9067c5ed5d-0b3a8c3e-7f39-4b2e-9b2f-0123456789ab"


# Slurm nodes install the collectors from the operator's mirror (names as observability.node_metrics requires).
METRICS_ARTIFACTS = [
    {
        "name": "prometheus-node-exporter",
        "s3_uri": "s3://mirror/debian/prometheus-node-exporter_1.5.0-1+b6_amd64.deb",
        "sha256": "1" * 64,
    },
    {"name": "prometheus", "s3_uri": "s3://mirror/debian/prometheus_2.42.0+ds-5+deb12u1_amd64.deb", "sha256": "2" * 64},
]


# cluster.directory on the default config: an LDAP directory whose bind password secret has a customer managed key.
DIRECTORY_SECRET_ARN = "arn:aws:secretsmanager:us-west-2:111122223333:secret:hpc/directory-bind-AbCdEf"
DIRECTORY_KEY_ARN = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
DIRECTORY = {
    "enabled": True,
    "uris": ["ldaps://ldap1.example.org", "ldaps://ldap2.example.org:636"],
    "search_base": "dc=example,dc=org",
    "bind_dn": "cn=sssd-bind,ou=services,dc=example,dc=org",
    "bind_password_secret_arn": DIRECTORY_SECRET_ARN,
    "bind_password_kms_key_arn": DIRECTORY_KEY_ARN,
    "ca_certificate": "tests/fixtures/directory-ca.pem",
    "ldap_schema": "rfc2307bis",
    "access_groups": ["hpc-users"],
    "admin_groups": ["hpc admins"],
}


def directory_config() -> PlatformConfig:
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    data["cluster"]["directory"] = DIRECTORY
    return parse_config(data, "directory")


def metrics_config(data: dict, source: str) -> PlatformConfig:
    slurm = data.get("orchestrator", "slurm") == "slurm"
    data.setdefault("observability", {}).update(
        {
            "node_metrics": {"enabled": True, **({"artifacts": METRICS_ARTIFACTS} if slurm else {})},
            "grafana": {"enabled": True, "viewer_group_ids": [GRAFANA_VIEWERS]},
        }
    )
    return parse_config(data, source)


# The context that turns CDK's asset staging off (aws-cdk-lib cx-api DISABLE_ASSET_STAGING_CONTEXT, which its Python
# package does not export).
NO_ASSET_STAGING: dict[str, Any] = {"aws:cdk:disable-asset-staging": True}


def cdk_json_context(*, stage_assets: bool = True) -> dict[str, Any]:
    """cdk.json's context. stage_assets=False is for a synthesis whose assets no test reads: CDK still hashes every
    asset into the templates, which come out the same, but copies none into the cloud assembly
    (NO_ASSET_STAGING). A copy is ~250 MB a synthesis (the Studio tools, the kubectl layer)."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context if stage_assets else {**context, **NO_ASSET_STAGING}


def variant_config(variant: str) -> PlatformConfig:
    if variant == "large":
        return large_config()
    if variant == "eks":
        return eks_config(VARIANT_FILES["eks"])
    if variant == "eks_shared":
        return eks_config(
            VARIANT_FILES["eks"],
            eks={"autoscaling": {"enabled": True}},
            shared_fsx=True,
            studio={"mlflow": {"enabled": True}},
        )
    if variant == "metrics":  # Slurm with node metrics, Grafana (Identity Center groups) and Studio
        return metrics_config(yaml.safe_load(VARIANT_FILES["default"].read_text()), str(VARIANT_FILES["default"]))
    if variant == "directory":
        return directory_config()
    if variant.startswith("per_user_"):  # per_user_<count>: generated, see per_user_config
        return per_user_config(int(variant.removeprefix("per_user_")))
    if variant == "attach_slurm_per_user":  # attach mode, Slurm, per-user: the auth/jwt pieces without a cluster stack
        data = yaml.safe_load(VARIANT_FILES["attach_slurm"].read_text())
        return parse_config({**data, "shared_fsx": False}, "attach_slurm_per_user")
    if variant == "eks_metrics":
        data = yaml.safe_load(VARIANT_FILES["eks"].read_text())
        data["eks"]["hyperpod_dependencies"]["chart_dir"] = str(STAND_IN_CHART)
        return metrics_config(data, str(VARIANT_FILES["eks"]))
    return load_config(VARIANT_FILES[variant])


ALL_VARIANTS = [*VARIANT_FILES, "eks_shared", "large", "metrics", "eks_metrics", "directory"]
