"""Whole-template checks on every variant: cfn-lint clean, CloudFormation limits, cdk-nag clean and strict."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from support.paths import APP_PATH, ROOT
from support.variants import ALL_VARIANTS
from support.synthesis import exclusive, shared_dir
from platform_config.users import User

MAX_RESOURCES = 500
MAX_TEMPLATE_BYTES = 1_000_000


@pytest.fixture(scope="session")
def lint_once(tmp_path_factory):
    """lint_once(paths) -> {path: cfn-lint's findings (errors and warnings, as `cfn-lint path` reports them)}, each
    distinct template content linted once per run across the xdist workers. The templates not yet known to be clean
    are linted in one cfn-lint run, as `cfn-lint a.json b.json ...` does (its ~340 rules load once a run, ~0.5 s);
    a clean result is recorded by the content's sha256, a finding never is (every variant holding that template
    reports it)."""
    import cfnlint.runner
    from cfnlint.config import ConfigMixIn

    clean = shared_dir(tmp_path_factory) / "cfn-lint-clean"
    clean.mkdir(exist_ok=True)

    def lint(paths: list[Path]) -> dict[Path, list[str]]:
        digests = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}
        first = {digest: path for path, digest in reversed(digests.items())}  # one path per distinct content
        with contextlib.ExitStack() as held:
            for digest in sorted(first):  # one order for every worker: no two wait for each other
                held.enter_context(exclusive(clean / f"{digest}.lock"))
            todo = [path for digest, path in first.items() if not (clean / digest).exists()]
            found: dict[str, list[str]] = {}
            if todo:
                for match in cfnlint.runner.Runner(ConfigMixIn(["--template", *map(str, todo)])).run():
                    found.setdefault(match.filename, []).append(str(match))
                for path in todo:
                    if str(path) not in found:
                        (clean / digests[path]).touch()
        return {path: found.get(str(first[digests[path]]), []) for path in paths}

    return lint


def user_shape(text: str, users) -> str:
    """A template's text with the users it holds (config users whose name is one of its string values) replaced by
    their position among them, name and uid alike. Per-user nested templates of one size have one shape: they differ
    only in which users they hold."""
    values: set[str] = set()

    def strings(node) -> None:
        if isinstance(node, str):
            values.add(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                values.add(key)
                strings(value)
        elif isinstance(node, list):
            for value in node:
                strings(value)

    strings(json.loads(text))
    held = [user for user in users if user.name in values]
    ids = {str(i): n for n, user in enumerate(held) for i in (user.uid, user.group_id)}
    text = re.sub(r"(?<!\d)\d+(?!\d)", lambda m: f"\0I#{ids[m[0]]}\0" if m[0] in ids else m[0], text)
    # Then the names, longest first (user81 after user810), as text no name can hold (POSIX names are lowercase).
    for index, user in sorted(enumerate(held), key=lambda pair: -len(pair[1].name)):
        text = text.replace(user.name, f"\0U#{index}\0")
    return text


def lint_by_shape(paths: list[Path], users, lint_once) -> dict[Path, list[str]]:
    """cfn-lint's findings for every template, linting one of each user shape: the longest (its users' names and ids
    are the longest; the only values the others differ in). The 1,000-user variant's eleven full per-user templates
    are one shape, so their ~60 s of linting is ~6 s."""
    shapes: dict[str, list[Path]] = {}
    for path in paths:
        shapes.setdefault(hashlib.sha256(user_shape(path.read_text(), users).encode()).hexdigest(), []).append(path)
    longest = {shape: max(same, key=lambda p: p.stat().st_size) for shape, same in shapes.items()}
    linted = lint_once(list(longest.values()))
    return {path: linted[longest[shape]] for shape, same in shapes.items() for path in same}


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_cfn_lint_has_no_errors_or_warnings(synth, lint_once, variant):
    """Every template of every variant, nested ones included; of the per-user templates that differ only in their
    users, the longest (lint_by_shape)."""
    s = synth(variant)
    paths = s.all_template_paths()
    # Attach mode (cluster.existing) deploys storage, Studio, its users and slurm-login or eks-access: four or more.
    assert len(paths) >= (4 if s.config.cluster.existing else 6) and all(p.exists() for p in paths), paths
    findings = [
        f"{path.name}: {finding}"
        for path, found in lint_by_shape(paths, s.config.users, lint_once).items()
        for finding in found
    ]
    assert findings == [], "\n".join(findings)


def _users(count: int) -> list[User]:
    return [User(name=f"user{i}", uid=10000 + i) for i in range(count)]


def _chunk(tmp_path: Path, users: list[User], bucket_property: str = "BucketName") -> Path:
    """A per-user template in miniature: a bucket per user, named and tagged after the user."""
    path = tmp_path / f"{users[0].name}.nested.template.json"
    path.write_text(
        json.dumps(
            {
                "Description": f"users {users[0].name} .. {users[-1].name}",
                "Resources": {
                    f"Bucket{user.name}": {
                        "Type": "AWS::S3::Bucket",
                        "Properties": {
                            bucket_property: f"data-{user.name}-{user.uid}",
                            "Tags": [{"Key": "owner", "Value": user.name}, {"Key": "uid", "Value": str(user.uid)}],
                        },
                    }
                    for user in users
                },
            },
            indent=1,
        )
    )
    return path


def test_per_user_templates_of_one_size_have_one_shape_and_any_other_difference_makes_another(synth, tmp_path):
    s = synth("large")
    chunks = [p for p in s.all_template_paths() if p.name.endswith(".nested.template.json")]
    shapes = {user_shape(p.read_text(), s.config.users) for p in chunks}
    assert len(chunks) == 12 and len(shapes) == 2  # eleven of 90 users, one of 10
    full = max(chunks, key=lambda p: p.stat().st_size)
    changed = tmp_path / full.name
    changed.write_text(full.read_text().replace('"Mode": "0700"', '"Mode": "0750"', 1))
    assert user_shape(changed.read_text(), s.config.users) not in shapes
    users = _users(200)
    one, other = _chunk(tmp_path, users[:3]), _chunk(tmp_path, users[100:103])
    assert user_shape(one.read_text(), users) == user_shape(other.read_text(), users)
    # A uid that is not the user's own is a difference, not a user token.
    swapped = _chunk(tmp_path, [User(name="user150", uid=10000), *users[151:153]])
    assert user_shape(swapped.read_text(), users) != user_shape(other.read_text(), users)


def test_lint_by_shape_lints_the_longest_of_each_shape_and_reports_its_findings_for_all(lint_once, tmp_path):
    users = _users(200)
    for directory in "abc":
        (tmp_path / directory).mkdir()
    short, long = _chunk(tmp_path / "a", users[1:3], "BucketNam"), _chunk(tmp_path / "b", users[101:103], "BucketNam")
    clean = _chunk(tmp_path / "c", users[5:7])  # another shape: the property is spelled right
    linted = []

    def recording(paths):
        linted.extend(paths)
        return lint_once(paths)

    found = lint_by_shape([short, long, clean], users, recording)
    assert sorted(linted) == sorted([long, clean])  # user101.. is longer than user1..
    assert found[short] == found[long] and any("BucketNam" in f for f in found[short]), found
    assert found[clean] == []


def test_lint_once_reports_a_bad_template_every_time_and_lints_a_clean_one_once(lint_once, tmp_path, monkeypatch):
    bad = tmp_path / "bad.template.json"
    bad.write_text(
        json.dumps({"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketNam": "typo"}}}})
    )
    good = tmp_path / "good.template.json"
    good.write_text(json.dumps({"Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}}}))
    first, second = lint_once([bad, good]), lint_once([bad])
    assert first[bad] == second[bad] and any("BucketNam" in f for f in first[bad]), first
    assert first[good] == []
    # A finding is reported for the template that has it, and for every path with the same content.
    twin = tmp_path / "twin.template.json"
    twin.write_bytes(bad.read_bytes())
    again = lint_once([good, twin, bad])
    assert again[good] == [] and again[twin] == again[bad] and any("BucketNam" in f for f in again[twin]), again
    import cfnlint.runner

    monkeypatch.setattr(cfnlint.runner, "Runner", lambda config: pytest.fail(f"{config.templates} linted again"))
    copy = tmp_path / "same-content.template.json"
    copy.write_bytes(good.read_bytes())
    assert lint_once([copy, good]) == {copy: [], good: []}


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_templates_stay_within_cloudformation_limits(synth, variant):
    s = synth(variant)
    for path in s.all_template_paths():
        resources = len(json.loads(path.read_text())["Resources"])
        assert resources < MAX_RESOURCES, f"{variant}/{path.name}: {resources} resources"
        assert path.stat().st_size < MAX_TEMPLATE_BYTES, f"{variant}/{path.name}: {path.stat().st_size} bytes"


def test_large_variant_really_is_large(synth):
    s = synth("large")
    (cluster,) = [r for r in s.templates["cluster"]["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert len(cluster["Properties"]["InstanceGroups"]) == 20
    assert len(s.config.users) == 1000 and s.config.shared_fsx is False


def test_every_variant_passes_cdk_nag(synth):
    """Synthesis itself raises on an unacknowledged finding; this also checks the report each stack gets
    (AwsSolutionsChecks().validate_scope on every stack of the synthesized app, recorded where it was synthesized)."""
    for variant in ALL_VARIANTS:
        s = synth(variant)
        assert set(s.nag_reports) == {f"{s.config.name}-{role}" for role in s.templates}, variant
        for stack_name, report in s.nag_reports.items():
            assert report["success"], f"{variant}/{stack_name}: {report['violations']}"


def test_unacknowledged_finding_fails_synth(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Probe")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Resource::\*\]"):
        app.synth()


def test_acknowledgments_carry_specific_reasons(synth):
    """Every acknowledgment names a rule and a reason of substance, and lands in the template metadata."""
    reasons = {}
    for stack in synth("default").platform.stacks:
        for construct in stack.node.find_all():
            for entry in construct.node.metadata:
                if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                    # aws-cdk-lib acknowledges some of its own CloudFormation checks; ours are the nag ones.
                    reasons.update({k: v for k, v in entry.data.items() if "AwsSolutions" in k})
    assert reasons, "expected acknowledgments on the BucketDeployment handler and the execution role"
    for rule, reason in reasons.items():
        assert len(reason) > 60, f"{rule}: reason too thin: {reason!r}"


def test_library_and_local_constructs_folder_coexist():
    code = (
        "import aws_cdk, constructs; from constructs.efa_security_group import EfaSecurityGroup; "
        "from constructs import Construct; print(Construct.__module__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "PATH": APP_PATH},
    )
    assert result.returncode == 0, result.stderr
    assert not (ROOT / "constructs" / "__init__.py").exists()


def test_a_synthesis_without_staged_assets_writes_the_same_templates(synth, tmp_path):
    """Tests that read only templates synthesize with cdk_json_context(stage_assets=False) (tests/support/variants.py): the
    assets are hashed into the templates as before, just not copied into the assembly."""
    from support.synthesis import synthesize

    synthesize("eks", tmp_path, stage_assets=False)
    staged = synth("eks").out_dir
    names = sorted(p.name for p in staged.glob("*.template.json"))
    assert names == sorted(p.name for p in tmp_path.glob("*.template.json")) and len(names) >= 6
    for name in names:
        assert (tmp_path / name).read_bytes() == (staged / name).read_bytes(), name
    assert not list(tmp_path.glob("asset.*")) and list(staged.glob("asset.*"))


def test_synth_makes_no_aws_lookups(synth):
    for variant in ALL_VARIANTS:
        manifest = json.loads((synth(variant).out_dir / "manifest.json").read_text())
        assert "missing" not in manifest, f"{variant} asked for context lookups: {manifest.get('missing')}"
