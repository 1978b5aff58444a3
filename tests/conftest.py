"""Shared fixtures: each config variant is synthesized once per test session (synthesis costs seconds)."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

from platform_config import PlatformConfig, load_config, parse_config  # noqa: E402
from stacks.platform import Platform, add_security_checks, build_platform  # noqa: E402

VARIANT_FILES = {
    "default": ROOT / "config" / "default.yaml",
    "multi_az": ROOT / "config" / "examples" / "multi-az-training-plan.yaml",
    "existing_vpc": ROOT / "config" / "examples" / "existing-vpc.yaml",
    "containers": ROOT / "config" / "examples" / "containers-per-user.yaml",
    "eks": ROOT / "config" / "examples" / "eks.yaml",
    "research": ROOT / "config" / "examples" / "research-institution.yaml",
}
# CI cannot reach GitHub, so EKS variants synthesize against a stand-in generated from the pinned chart's facts
# (tools/hyperpod_chart_facts.py); synth accepts it only with allow_chart_stand_in, and the cluster template then
# fails CloudFormation validation. `make hyperpod-chart` fetches the real chart for deployments.
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
    groups = [{"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
              {"name": "login", "role": "login", "instance_type": "ml.m5.xlarge", "instance_count": 1}]
    groups += [{"name": f"workers-{i}", "role": "compute", "instance_type": "ml.p5.48xlarge", "instance_count": 16,
                "deep_health_checks": ["InstanceStress", "InstanceConnectivity"], "az_id": azs[i % len(azs)],
                "partitions": [f"part{i}"]} for i in range(18)]
    return parse_config({
        "name": "large", "shared_fsx": False,
        "network": {"az_ids": azs, "private_subnet_cidrs": [f"10.0.{64 * i}.0/18" for i in range(1, 4)] + ["10.0.16.0/20"],
                    "interface_endpoints": ["ssm", "ssmmessages", "ec2messages", "sts", "logs", "ecr.api", "ecr.dkr",
                                            "sagemaker.api"], "s3_endpoint_policy": "restricted"},
        "cluster": {"instance_groups": groups},
        "users": [{"name": f"user{i}", "uid": 10000 + i} for i in range(1000)],
    }, "large")


GRAFANA_VIEWERS = "9067c5ed5d-0b3a8c3e-7f39-4b2e-9b2f-0123456789ab"


# Slurm nodes install the collectors from the operator's mirror (names as observability.node_metrics requires).
METRICS_ARTIFACTS = [
    {"name": "prometheus-node-exporter", "s3_uri": "s3://mirror/debian/prometheus-node-exporter_1.5.0-1+b6_amd64.deb",
     "sha256": "1" * 64},
    {"name": "prometheus", "s3_uri": "s3://mirror/debian/prometheus_2.42.0+ds-5+deb12u1_amd64.deb", "sha256": "2" * 64}]


# cluster.directory on the default config: an LDAP directory whose bind password secret has a customer managed key.
DIRECTORY_SECRET_ARN = "arn:aws:secretsmanager:us-west-2:111122223333:secret:hpc/directory-bind-AbCdEf"
DIRECTORY_KEY_ARN = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
DIRECTORY = {"enabled": True, "uris": ["ldaps://ldap1.example.org", "ldaps://ldap2.example.org:636"],
             "search_base": "dc=example,dc=org", "bind_dn": "cn=sssd-bind,ou=services,dc=example,dc=org",
             "bind_password_secret_arn": DIRECTORY_SECRET_ARN, "bind_password_kms_key_arn": DIRECTORY_KEY_ARN,
             "ca_certificate": "tests/fixtures/directory-ca.pem", "ldap_schema": "rfc2307bis",
             "access_groups": ["hpc-users"], "admin_groups": ["hpc admins"]}


def directory_config() -> PlatformConfig:
    data = yaml.safe_load(VARIANT_FILES["default"].read_text())
    data["cluster"]["directory"] = DIRECTORY
    return parse_config(data, "directory")


def metrics_config(data: dict, source: str) -> PlatformConfig:
    slurm = data.get("orchestrator", "slurm") == "slurm"
    data.setdefault("observability", {}).update({
        "node_metrics": {"enabled": True, **({"artifacts": METRICS_ARTIFACTS} if slurm else {})},
        "grafana": {"enabled": True, "viewer_group_ids": [GRAFANA_VIEWERS]}})
    return parse_config(data, source)


STACK_ROLES = ("network", "storage", "slurm-login", "eks", "cluster", "studio", "eks-access", "observability")


@dataclass
class Synthesized:
    config: PlatformConfig
    platform: Platform
    out_dir: Path
    templates: dict[str, dict[str, Any]]  # by stack role: network / storage / slurm-login / eks / cluster / studio / eks-access
    nested: dict[str, dict[str, Any]]     # nested stack templates by file name

    def template(self, role: str) -> Template:
        return Template.from_json(self.templates[role])

    def template_path(self, role: str) -> Path:
        return self.out_dir / f"{self.config.name}-{role}.template.json"

    def all_template_paths(self) -> list[Path]:
        return [self.template_path(role) for role in self.templates] + [self.out_dir / n for n in self.nested]


def cdk_json_context() -> dict[str, Any]:
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@cache
def _synth(variant: str, out_root: str) -> Synthesized:
    if variant == "large":
        config = large_config()
    elif variant == "eks":
        config = eks_config(VARIANT_FILES["eks"])
    elif variant == "eks_shared":
        config = eks_config(VARIANT_FILES["eks"], eks={"autoscaling": {"enabled": True}}, shared_fsx=True,
                            studio={"mlflow": {"enabled": True}})
    elif variant == "metrics":  # Slurm with node metrics, Grafana (Identity Center groups) and Studio
        config = metrics_config(yaml.safe_load(VARIANT_FILES["default"].read_text()), str(VARIANT_FILES["default"]))
    elif variant == "directory":
        config = directory_config()
    elif variant == "eks_metrics":
        data = yaml.safe_load(VARIANT_FILES["eks"].read_text())
        data["eks"]["hyperpod_dependencies"]["chart_dir"] = str(STAND_IN_CHART)
        config = metrics_config(data, str(VARIANT_FILES["eks"]))
    else:
        config = load_config(VARIANT_FILES[variant])
    out_dir = Path(out_root) / variant
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context())
    platform = build_platform(app, config, allow_chart_stand_in=True)
    add_security_checks(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    templates = {role: json.loads((out_dir / f"{config.name}-{role}.template.json").read_text())
                 for role in STACK_ROLES
                 if (out_dir / f"{config.name}-{role}.template.json").exists()}
    nested = {p.name: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.nested.template.json"))}
    return Synthesized(config=config, platform=platform, out_dir=out_dir, templates=templates, nested=nested)


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("cdk-out"))


@pytest.fixture(scope="session")
def synth(synth_root):
    """synth("default") -> Synthesized; cached for the whole session."""
    return lambda variant: _synth(variant, synth_root)


ALL_VARIANTS = [*VARIANT_FILES, "eks_shared", "large", "metrics", "eks_metrics", "directory"]
