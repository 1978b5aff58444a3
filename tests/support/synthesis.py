"""Each config variant synthesized once per run and shared by the xdist workers (the `synth` fixture in conftest.py
hands these out): the cloud assembly in a directory every worker sees, under a file lock, its templates read back,
cdk-nag's report beside it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from platform_config import PlatformConfig
from support.variants import cdk_json_context, variant_config

if TYPE_CHECKING:  # aws_cdk starts a Node.js kernel: imported where synthesis needs it, not by every process
    from aws_cdk.assertions import Template
    from stacks.platform import Platform

STACK_ROLES = ("network", "storage", "slurm-login", "eks", "cluster", "studio", "eks-access", "observability")


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Holds an exclusive lock on `lock` (created if missing) across processes: the xdist workers of one run."""
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this run that every xdist worker sees: the parent of the workers' own basetemps (each is
    <run basetemp>/popen-gwN), or the basetemp itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


class Synthesized:
    """One config variant's cloud assembly (`out_dir`, shared by the workers: read only), its templates, and on
    demand the live constructs (`platform`)."""

    def __init__(
        self, variant: str, config: PlatformConfig, out_dir: Path, platform: Platform | None, private_root: Path
    ) -> None:
        self.variant, self.config, self.out_dir = variant, config, out_dir
        self._platform, self._private_root = platform, private_root
        # by stack role: network / storage / slurm-login / eks / cluster / studio / eks-access / observability
        self.templates: dict[str, dict[str, Any]] = {
            role: json.loads((out_dir / f"{config.name}-{role}.template.json").read_text())
            for role in STACK_ROLES
            if (out_dir / f"{config.name}-{role}.template.json").exists()
        }
        # nested stack templates by file name
        self.nested: dict[str, dict[str, Any]] = {
            p.name: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.nested.template.json"))
        }

    @property
    def nag_reports(self) -> dict[str, dict[str, Any]]:
        """cdk-nag's AwsSolutionsChecks().validate_scope report on each stack of the app that wrote `out_dir`, by
        stack name (recorded beside it by the worker that synthesized it)."""
        return json.loads((self.out_dir.parent / f"{self.variant}.nag.json").read_text())

    @property
    def platform(self) -> Platform:
        """The constructs of a synthesized app of this variant: the one that wrote `out_dir` when this worker wrote
        it, else this worker's own synthesis (same config, same code) into a directory of its own."""
        if self._platform is None:
            out_dir = Path(tempfile.mkdtemp(prefix=f"{self.variant}-", dir=self._private_root))
            # The templates of this config and code were validated where `out_dir` was written: only the
            # constructs are wanted here, so aws-cdk-lib does not validate them again (~0.4 s of CPU and more).
            self._platform = synthesize(self.variant, out_dir, stage_assets=False, validate=False)[1]
        return self._platform

    def template(self, role: str) -> Template:
        from aws_cdk.assertions import Template

        return Template.from_json(self.templates[role])

    def template_path(self, role: str) -> Path:
        return self.out_dir / f"{self.config.name}-{role}.template.json"

    def all_template_paths(self) -> list[Path]:
        return [self.template_path(role) for role in self.templates] + [self.out_dir / n for n in self.nested]


def synthesize(
    variant: str, out_dir: Path, *, stage_assets: bool = True, validate: bool = True
) -> tuple[PlatformConfig, Platform]:
    """`validate=False` leaves out aws-cdk-lib's built-in template validation (cdk-nag still runs)."""
    import aws_cdk as cdk
    from stacks.platform import add_security_checks, build_platform

    config = variant_config(variant)
    app = cdk.App(
        outdir=str(out_dir),
        context=cdk_json_context(stage_assets=stage_assets),
        builtin_cloud_formation_validation=validate,
    )
    platform = build_platform(app, config, allow_chart_stand_in=True)
    add_security_checks(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    return config, platform


def nag_reports(platform: Platform) -> dict[str, dict[str, Any]]:
    """AwsSolutionsChecks' report on each synthesized stack, by stack name: success and the violated rules."""
    from cdk_nag import AwsSolutionsChecks

    reports = {}
    for stack in platform.stacks:
        report = AwsSolutionsChecks().validate_scope(stack)
        reports[stack.stack_name] = {"success": report.success, "violations": [v.rule_name for v in report.violations]}
    return reports


@cache
def synthesized(variant: str, shared_root: str, private_root: str) -> Synthesized:
    """Once per run across the workers: the first to take the variant's lock synthesizes into the shared directory
    and marks it done; the others (and later runs of this function) read what it wrote."""
    root = Path(shared_root) / "synth"
    root.mkdir(exist_ok=True)
    out_dir, done = root / variant, root / f"{variant}.done"
    platform = None
    with exclusive(root / f"{variant}.lock"):
        if done.exists():
            config = variant_config(variant)
        else:  # first here, or the worker before failed half-way (its error is this one's too)
            shutil.rmtree(out_dir, ignore_errors=True)
            config, platform = synthesize(variant, out_dir)
            (root / f"{variant}.nag.json").write_text(json.dumps(nag_reports(platform)))
            done.touch()
    return Synthesized(variant, config, out_dir, platform, Path(private_root))
