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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

from stacks.config import PlatformConfig, load_config, parse_config  # noqa: E402
from stacks.platform import Platform, add_security_checks, build_platform  # noqa: E402

VARIANT_FILES = {
    "default": ROOT / "config" / "default.yaml",
    "multi_az": ROOT / "config" / "examples" / "multi-az-training-plan.yaml",
    "existing_vpc": ROOT / "config" / "examples" / "existing-vpc.yaml",
    "containers": ROOT / "config" / "examples" / "containers-per-user.yaml",
}


def large_config() -> PlatformConfig:
    """The biggest shape the config allows in practice: 6 AZs, every endpoint, 20 instance groups, many users."""
    azs = [f"usw2-az{i}" for i in range(1, 5)]
    groups = [{"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "instance_count": 1},
              {"name": "login", "role": "login", "instance_type": "ml.m5.xlarge", "instance_count": 1}]
    groups += [{"name": f"workers-{i}", "role": "compute", "instance_type": "ml.p5.48xlarge", "instance_count": 16,
                "deep_health_checks": ["InstanceStress", "InstanceConnectivity"], "az_id": azs[i % len(azs)],
                "partitions": [f"part{i}"]} for i in range(18)]
    return parse_config({
        "name": "large",
        "network": {"az_ids": azs, "private_subnet_cidrs": [f"10.0.{64 * i}.0/18" for i in range(1, 4)] + ["10.0.16.0/20"],
                    "interface_endpoints": ["ssm", "ssmmessages", "ec2messages", "sts", "logs", "ecr.api", "ecr.dkr",
                                            "sagemaker.api"], "s3_endpoint_policy": "restricted"},
        "cluster": {"instance_groups": groups},
        "users": [{"name": f"user{i}", "uid": 3000 + i} for i in range(500)],
    }, "large")


@dataclass
class Synthesized:
    config: PlatformConfig
    platform: Platform
    out_dir: Path
    templates: dict[str, dict[str, Any]]  # by stack role: network / storage / cluster

    def template(self, role: str) -> Template:
        return Template.from_json(self.templates[role])

    def template_path(self, role: str) -> Path:
        return self.out_dir / f"{self.config.name}-{role}.template.json"


def cdk_json_context() -> dict[str, Any]:
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@cache
def _synth(variant: str, out_root: str) -> Synthesized:
    config = large_config() if variant == "large" else load_config(VARIANT_FILES[variant])
    out_dir = Path(out_root) / variant
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context())
    platform = build_platform(app, config)
    add_security_checks(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    templates = {role: json.loads((out_dir / f"{config.name}-{role}.template.json").read_text())
                 for role in ("network", "storage", "cluster")
                 if (out_dir / f"{config.name}-{role}.template.json").exists()}
    return Synthesized(config=config, platform=platform, out_dir=out_dir, templates=templates)


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("cdk-out"))


@pytest.fixture(scope="session")
def synth(synth_root):
    """synth("default") -> Synthesized; cached for the whole session."""
    return lambda variant: _synth(variant, synth_root)


ALL_VARIANTS = [*VARIANT_FILES, "large"]
