"""cfn-lint on every template of every variant, clean of errors and warnings, and how it is linted: each distinct
template once, the per-user templates and the users inside them by shape. CloudFormation's limits and what else a
synthesis writes: test_templates_synthesis.py; cdk-nag: test_templates_nag.py."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import string
from collections.abc import Callable
from pathlib import Path

import pytest

from support import cfn_lint
from support.variants import ALL_VARIANTS
from support.synthesis import exclusive, shared_dir
from platform_config.users import User


@pytest.fixture(scope="session")
def lint_once(tmp_path_factory):
    """lint_once(paths) -> {path: cfn-lint's findings (errors and warnings, as `cfn-lint path` reports them)}, each
    distinct template content linted once per run across the xdist workers. The templates not yet known to be clean
    are linted together, as `cfn-lint a.json b.json ...` does, with the rules this process loaded once
    (support.cfn_lint); a clean result is recorded by the content's sha256, a finding never is (every variant holding
    that template reports it)."""
    clean = shared_dir(tmp_path_factory) / "cfn-lint-clean"
    clean.mkdir(exist_ok=True)

    def lint(paths: list[Path]) -> dict[Path, list[str]]:
        digests = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}
        first = {digest: path for path, digest in reversed(digests.items())}  # one path per distinct content
        with contextlib.ExitStack() as held:
            for digest in sorted(first):  # one order for every worker: no two wait for each other
                held.enter_context(exclusive(clean / f"{digest}.lock"))
            todo = [path for digest, path in first.items() if not (clean / digest).exists()]
            found = cfn_lint.lint(todo) if todo else {}
            for path in todo:
                if not found[path]:
                    (clean / digests[path]).touch()
        return {path: found.get(first[digests[path]], []) for path in paths}

    return lint


def held_users(template: dict, users) -> list:
    """The config users a template holds: those whose name is one of its string values or keys."""
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

    strings(template)
    return [user for user in users if user.name in values]


def _tokenizer(held: list) -> Callable[[str], str]:
    """A function of a text: the text with each held user's ids and name replaced by tokens: I#<position> and
    U#<position><the name's characters other than lowercase letters and digits> (a name's punctuation can matter to
    a property's pattern). A token text and a user's position give back the text: users of one shape differ in
    nothing else."""
    ids = {str(i): n for n, user in enumerate(held) for i in (user.uid, user.group_id)}
    tokens = {
        user.name: f"\0U#{n}{''.join(sorted(set(user.name) - set(string.ascii_lowercase + string.digits)))}\0"
        for n, user in enumerate(held)
    }
    # The names after the ids, longest first (user810 before user81), as text no name can hold (POSIX names are
    # lowercase).
    names = re.compile("|".join(map(re.escape, sorted(tokens, key=len, reverse=True)))) if tokens else None

    def tokenized(text: str) -> str:
        text = re.sub(r"(?<!\d)\d+(?!\d)", lambda m: f"\0I#{ids[m[0]]}\0" if m[0] in ids else m[0], text)
        return names.sub(lambda m: tokens[m[0]], text) if names else text

    return tokenized


def _mentioned(tokenized: str) -> set[int]:
    return {int(index) for index in re.findall(r"\0[UI]#(\d+)", tokenized)}


def user_shape(text: str, users) -> str:
    """A template's text with the users it holds (config users whose name is one of its string values) replaced by
    their position among them, name and uid alike. Per-user nested templates of one size have one shape: they differ
    only in which users they hold."""
    return _tokenizer(held_users(json.loads(text), users))(text)


def _references(node) -> set[str]:
    """The logical ids `node` names: Ref, Fn::GetAtt, DependsOn, Fn::Sub's ${...}."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("Ref", "DependsOn") and isinstance(value, str):
                found.add(value)
            elif key == "DependsOn" and isinstance(value, list):
                found.update(v for v in value if isinstance(v, str))
            elif key == "Fn::GetAtt":
                target = value[0] if isinstance(value, list) and value else value
                if isinstance(target, str):
                    found.add(target.split(".")[0])
            elif key == "Fn::Sub":
                text = value[0] if isinstance(value, list) and value else value
                if isinstance(text, str):
                    found.update(m.split(".")[0] for m in re.findall(r"\$\{(?!!)([^}]+)\}", text))
            found |= _references(value)
    elif isinstance(node, list):
        for value in node:
            found |= _references(value)
    return found


def without_repeated_users(template: dict, users) -> dict:
    """The template with the resources of only three users of each user shape (the two shortest and the longest; a
    user's resources: those that name that user, by name or id, and no other; their shape: their text with the user's
    name and ids replaced), every other resource, and every resource those and the Outputs reference (Ref,
    Fn::GetAtt, DependsOn, Fn::Sub), so the template is whole. A resource naming several users (a schedule over all
    of them, a DependsOn chain) is kept, and so is what it references. What cfn-lint finds in one user's resources it
    finds in every user of that shape, but for their names' and ids' lengths (hence the shortest and the longest); two
    of a shape show what only a pair can (E3019: a primary identifier that does not name its user is the same for
    every user). The whole template's resource count and size are test_templates_stay_within_cloudformation_limits'."""
    tokenized = _tokenizer(held_users(template, users))
    resources = template.get("Resources", {})
    owner: dict[str, int] = {}
    own_text: dict[str, str] = {}
    for logical_id, body in resources.items():
        text = tokenized(json.dumps({logical_id: body}, sort_keys=True))
        if len(mentioned := _mentioned(text)) == 1:
            (owner[logical_id],) = mentioned
            own_text[logical_id] = text
    shapes: dict[str, list[int]] = {}
    for index in sorted(set(owner.values())):
        texts = [own_text[logical_id] for logical_id, user in owner.items() if user == index]
        shape = "\n".join(sorted(re.sub(rf"\0([UI])#{index}(?!\d)", r"\0\1#", text) for text in texts))
        shapes.setdefault(shape, []).append(index)

    def length(index: int) -> int:
        return sum(len(json.dumps(resources[lid])) + len(lid) for lid, user in owner.items() if user == index)

    kept_users = set()
    for same in shapes.values():
        kept_users |= {*sorted(same, key=length)[:2], max(same, key=length)}
    kept = {logical_id for logical_id in resources if owner.get(logical_id, -1) in kept_users | {-1}}
    todo = [*kept, *_references({k: v for k, v in template.items() if k != "Resources"})]
    while todo:
        for reference in _references(resources.get(todo.pop(), {})):
            if reference in resources and reference not in kept:
                kept.add(reference)
                todo.append(reference)
    return {**template, "Resources": {k: v for k, v in resources.items() if k in kept}}


def lint_by_shape(paths: list[Path], users, lint_once, reduced_dir: Path) -> dict[Path, list[str]]:
    """cfn-lint's findings for every template, linting one of each user shape: the longest (its users' names and ids
    are the longest; the only values the others differ in), and of that one, when it holds more than two users of one
    shape, the template without_repeated_users gives (written under `reduced_dir`, with the same name). The
    1,000-user variant's eleven full per-user templates are one shape, of 90 users of one shape: ~60 s of linting
    became ~6 s, then well under 1 s."""
    shapes: dict[str, list[Path]] = {}
    for path in paths:
        shapes.setdefault(hashlib.sha256(user_shape(path.read_text(), users).encode()).hexdigest(), []).append(path)
    longest = {shape: max(same, key=lambda p: p.stat().st_size) for shape, same in shapes.items()}
    linted_as = {}
    for shape, path in longest.items():
        template = json.loads(path.read_text())
        reduced = without_repeated_users(template, users)
        linted_as[shape] = path
        if len(reduced["Resources"]) < len(template.get("Resources", {})):
            linted_as[shape] = reduced_dir / shape / path.name
            linted_as[shape].parent.mkdir(parents=True, exist_ok=True)
            linted_as[shape].write_text(json.dumps(reduced, indent=1))
    linted = lint_once(list(linted_as.values()))
    return {path: linted[linted_as[shape]] for shape, same in shapes.items() for path in same}


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_cfn_lint_has_no_errors_or_warnings(synth, lint_once, variant, tmp_path):
    """Every template of every variant, nested ones included; of the per-user templates that differ only in their
    users, the longest, and of the users in it, those of each user shape that show all a user of that shape can
    (lint_by_shape, without_repeated_users)."""
    s = synth(variant)
    paths = s.all_template_paths()
    # Attach mode (cluster.existing) deploys storage, Studio, its users and slurm-login or eks-access: four or more.
    assert len(paths) >= (4 if s.config.cluster.existing else 6) and all(p.exists() for p in paths), paths
    findings = [
        f"{path.name}: {finding}"
        for path, found in lint_by_shape(paths, s.config.users, lint_once, tmp_path).items()
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

    found = lint_by_shape([short, long, clean], users, recording, tmp_path / "reduced")
    assert sorted(linted) == sorted([long, clean])  # user101.. is longer than user1..
    assert found[short] == found[long] and any("BucketNam" in f for f in found[short]), found
    assert found[clean] == []


def _users_template(users: list[User], bucket=lambda user: {"BucketName": f"data-{user.name}-{user.uid}"}) -> dict:
    """Per-user resources in miniature: a bucket (tagged with its user's name) and its policy per user, their logical
    ids made of the uid, and a topic all of them share."""
    resources: dict = {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": "shared"}}}
    for user in users:
        tags = [{"Key": "owner", "Value": user.name}]
        resources[f"Bucket{user.uid}"] = {"Type": "AWS::S3::Bucket", "Properties": {**bucket(user), "Tags": tags}}
        resources[f"Policy{user.uid}"] = {
            "Type": "AWS::S3::BucketPolicy",
            "Properties": {
                "Bucket": {"Ref": f"Bucket{user.uid}"},
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "s3:*",
                            "Resource": {"Fn::Sub": f"${{Bucket{user.uid}.Arn}}/*"},
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        }
                    ],
                },
            },
        }
    return {"Resources": resources}


def _lint_users(template: dict, users, lint_once, tmp_path: Path) -> tuple[list[str], dict]:
    path = tmp_path / "users.nested.template.json"
    path.write_text(json.dumps(template, indent=1))
    linted = []

    def recording(paths):
        linted.extend(paths)
        return lint_once(paths)

    found = lint_by_shape([path], users, recording, tmp_path / "reduced")[path]
    (linted_path,) = linted
    return found, json.loads(linted_path.read_text())


def test_the_users_of_a_large_template_are_linted_by_shape_and_each_left_out_user_has_a_linted_twin(synth):
    """The 1,000-user variant's 90-user templates lose most of their resources; every resource left out is, but for
    its user's name and uid, one that is linted; everything kept is the template's own text."""
    s = synth("large")
    path = max(s.all_template_paths(), key=lambda p: p.stat().st_size)
    template = json.loads(path.read_text())
    reduced = without_repeated_users(template, s.config.users)
    kept, full = reduced["Resources"], template["Resources"]
    assert len(full) == 452 and len(kept) < len(full) / 3, len(kept)
    assert all(full[logical_id] == body for logical_id, body in kept.items())
    assert {k: v for k, v in reduced.items() if k != "Resources"} == {
        k: v for k, v in template.items() if k != "Resources"
    }
    held = held_users(template, s.config.users)
    kept_users = [user for user in held if any(logical_id.endswith(user.name) for logical_id in kept)]
    for logical_id, body in full.items():
        if logical_id in kept:
            continue
        (user,) = [user for user in held if logical_id.endswith(user.name)]
        text = json.dumps(body)
        assert any(
            (twin := logical_id.removesuffix(user.name) + other.name) in kept
            and json.dumps(kept[twin]) == text.replace(user.name, other.name).replace(str(user.uid), str(other.uid))
            for other in kept_users
        ), logical_id


def test_a_finding_in_any_user_is_reported(lint_once, tmp_path):
    users = _users(12)
    odd = users[6]  # neither among the shortest nor the longest of the users (user10 and user11 are longer)
    template = _users_template(
        users, lambda user: {"BucketNames" if user is odd else "BucketName": f"data-{user.name}-{user.uid}"}
    )
    found, linted = _lint_users(template, users, lint_once, tmp_path)
    assert len(linted["Resources"]) < len(template["Resources"]) and f"Bucket{odd.uid}" in linted["Resources"]
    assert any("BucketNames" in finding for finding in found), found


def test_a_finding_every_user_of_a_shape_has_is_reported(lint_once, tmp_path):
    users = _users(12)
    template = _users_template(users, lambda user: {"BucketNam": f"data-{user.name}-{user.uid}"})
    found, linted = _lint_users(template, users, lint_once, tmp_path)
    assert len(linted["Resources"]) < len(template["Resources"])
    assert any("BucketNam" in finding for finding in found), found


def test_a_name_every_user_shares_is_reported(lint_once, tmp_path):
    """Only a pair of a shape shows a primary identifier that does not name its user (E3019)."""
    users = _users(12)
    template = _users_template(
        users, lambda user: {"BucketName": "data-shared", "Tags": [{"Key": "u", "Value": user.name}]}
    )
    found, linted = _lint_users(template, users, lint_once, tmp_path)
    assert len(linted["Resources"]) < len(template["Resources"])
    assert any("E3019" in finding for finding in found), found


def test_a_name_a_property_pattern_refuses_is_reported(lint_once, tmp_path):
    """A user whose name has other characters is another shape: an S3 bucket name cannot hold an underscore."""
    # Two short names take the shortest places; the longest is the first of the 7-character names.
    users = [User(name=f"user{i}", uid=10000 + i) for i in (1, 2, *range(100, 105))]
    users += [User(name="user_66", uid=10066), *(User(name=f"user{i}", uid=10000 + i) for i in range(106, 110))]
    template = _users_template(users)
    found, linted = _lint_users(template, users, lint_once, tmp_path)
    assert len(linted["Resources"]) < len(template["Resources"]) and "Bucket10066" in linted["Resources"]
    assert any("data-user_66-10066" in finding for finding in found), found


def test_what_a_kept_resource_references_is_kept(lint_once, tmp_path):
    """References stay whole: a resource naming two users (a chain, a list) is kept, and so are the resources of
    theirs it depends on, though they are not of the users kept; cfn-lint finds nothing missing."""
    users = _users(12)
    template = _users_template(users)
    template["Resources"]["Topic"]["DependsOn"] = ["Policy10005", "Policy10006"]
    found, linted = _lint_users(template, users, lint_once, tmp_path)
    assert len(linted["Resources"]) < len(template["Resources"]), linted["Resources"].keys()
    assert {"Policy10005", "Bucket10005", "Policy10006", "Bucket10006"} <= set(linted["Resources"])
    assert found == []


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
    monkeypatch.setattr(cfn_lint, "lint", lambda paths: pytest.fail(f"{paths} linted again"))
    copy = tmp_path / "same-content.template.json"
    copy.write_bytes(good.read_bytes())
    assert lint_once([copy, good]) == {copy: [], good: []}
