"""The Slurm token issuer against Secrets Manager on moto server. That slurmctld accepts its tokens, refuses expired
and foreign-key ones, and runs the job as the token's user: tests/e2e/test_slurm_jwt.py, with real Slurm."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os

import boto3
import pytest

from support.paths import ROOT


import issuer

PREFIX = "ml/slurm-token/"
KEY = os.urandom(32)
# What constructs/slurm_token_issuer.py puts in the function's environment: the facts config validation reads too.
FACTS = json.loads((ROOT / "config" / "facts" / "reserved-users.json").read_text())
ENVIRONMENT = {
    "RESERVED_USERS": ",".join(sorted(FACTS["names"])),
    "RESERVED_USER_PREFIXES": ",".join(FACTS["prefixes"]),
}
RESERVED = issuer.Reserved.from_environment(ENVIRONMENT)


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@pytest.fixture
def sm():
    return boto3.client("secretsmanager")


@pytest.fixture
def key_secret(sm):
    return sm.create_secret(
        Name="ml/slurm-jwt-key", SecretString=json.dumps({"jwt_hs256_key_b64": base64.b64encode(KEY).decode()})
    )["ARN"]


def token_of(sm, user: str) -> dict:
    return json.loads(sm.get_secret_value(SecretId=PREFIX + user)["SecretString"])


def test_handler_writes_each_user_a_token_naming_only_them(sm, key_secret, monkeypatch):
    for user in ("alice", "bob"):
        sm.create_secret(Name=PREFIX + user)
    monkeypatch.setenv("KEY_SECRET_ID", key_secret)
    monkeypatch.setenv("TOKEN_SECRET_PREFIX", PREFIX)
    monkeypatch.setenv("TOKEN_LIFETIME", "7200")  # not the default: the token lasts what the construct says
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    assert issuer.handler({"users": ["alice", "bob"]}, None) == {"tokens_issued": 2}
    for user in ("alice", "bob"):
        value = token_of(sm, user)
        header, claims, signature = value["token"].split(".")
        assert json.loads(b64url_decode(header)) == {"alg": "HS256", "typ": "JWT"}
        body = json.loads(b64url_decode(claims))
        assert body["sun"] == user and body["exp"] - body["iat"] == 7200 and value["expires"] == body["exp"]
        expected = hmac.new(KEY, f"{header}.{claims}".encode(), hashlib.sha256).digest()
        assert b64url_decode(signature) == expected


def test_a_second_run_replaces_the_token(sm, key_secret):
    sm.create_secret(Name=PREFIX + "alice")
    issuer.issue(
        sm, key_secret_id=key_secret, prefix=PREFIX, users=["alice"], lifetime=3600, reserved=RESERVED, now=1_000
    )
    issuer.issue(
        sm, key_secret_id=key_secret, prefix=PREFIX, users=["alice"], lifetime=3600, reserved=RESERVED, now=2_000
    )
    assert token_of(sm, "alice")["expires"] == 5_600


def test_a_key_not_in_standard_base64_fails_the_run_and_writes_no_token(sm):
    """The controller writes the key in standard base64 (cli/attach.py checks it so). A value in another alphabet
    (here the URL-safe one, whose '-' standard base64 lacks) is refused, not decoded by skipping the characters it
    does not know: that would sign tokens with another key, which slurmctld rejects, while the run reports success."""
    key = bytes(45) + b"\xfb\xef\xbe"  # standard base64: 'A' * 60 + '++++'; URL-safe: 'A' * 60 + '----'
    secret = sm.create_secret(
        Name="ml/slurm-jwt-key", SecretString=json.dumps({"jwt_hs256_key_b64": base64.urlsafe_b64encode(key).decode()})
    )["ARN"]
    sm.create_secret(Name=PREFIX + "alice", SecretString="{}")
    with pytest.raises(ValueError):
        issuer.issue(sm, key_secret_id=secret, prefix=PREFIX, users=["alice"], lifetime=3600, reserved=RESERVED)
    assert token_of(sm, "alice") == {}


def test_one_missing_secret_does_not_stop_the_others_but_fails_the_run(sm, key_secret):
    sm.create_secret(Name=PREFIX + "bob")
    with pytest.raises(RuntimeError, match=r'no new token for 1 user\(s\).*"alice": "ResourceNotFoundException'):
        issuer.issue(
            sm, key_secret_id=key_secret, prefix=PREFIX, users=["alice", "bob"], lifetime=3600, reserved=RESERVED
        )
    assert token_of(sm, "bob")["user"] == "bob"


@pytest.mark.parametrize(
    "user",
    [
        "root",
        "slurm",
        "ubuntu",
        "munge",
        "daemon",
        "nobody",
        "syslog",
        "_apt",
        "systemd-network",
        "docker",
        "ssm-user",
        "Alice",
        "a/b",
        "",
        "x" * 33,
    ],
)
def test_never_mints_for_system_accounts_or_malformed_names(user):
    with pytest.raises(ValueError, match="refusing to mint"):
        issuer.mint(KEY, user, now=0, lifetime=3600, reserved=RESERVED)


def test_a_reserved_user_in_the_event_gets_no_token_and_fails_the_run(sm, key_secret, monkeypatch):
    """The rule's input is the template's; should a system name ever reach it, the issuer writes no token for it."""
    for user in ("alice", "ubuntu"):
        sm.create_secret(Name=PREFIX + user, SecretString="{}")
    monkeypatch.setenv("KEY_SECRET_ID", key_secret)
    monkeypatch.setenv("TOKEN_SECRET_PREFIX", PREFIX)
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match=r'"ubuntu": "ValueError: refusing to mint'):
        issuer.handler({"users": ["alice", "ubuntu"]}, None)
    assert token_of(sm, "alice")["user"] == "alice"
    assert token_of(sm, "ubuntu") == {}


@pytest.mark.parametrize("environment", [{}, {"RESERVED_USERS": ""}, {"RESERVED_USERS": "ubuntu"}])
def test_without_the_reserved_list_the_handler_mints_nothing(sm, key_secret, monkeypatch, environment):
    sm.create_secret(Name=PREFIX + "alice", SecretString="{}")
    monkeypatch.setenv("KEY_SECRET_ID", key_secret)
    monkeypatch.setenv("TOKEN_SECRET_PREFIX", PREFIX)
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match="refusing to mint any token"):
        issuer.handler({"users": ["alice"]}, None)
    assert token_of(sm, "alice") == {}


def test_with_only_root_and_slurm_listed_the_handler_mints_for_everyone_else(sm, key_secret, monkeypatch):
    """root and slurm are the least the list must hold (fail closed below that), and RESERVED_USER_PREFIXES is
    optional: a list of exactly those two names mints, and without prefixes no name is refused for how it begins."""
    users = ["alice", "xavier", "zoe"]
    for user in users:
        sm.create_secret(Name=PREFIX + user, SecretString="{}")
    monkeypatch.setenv("KEY_SECRET_ID", key_secret)
    monkeypatch.setenv("TOKEN_SECRET_PREFIX", PREFIX)
    monkeypatch.setenv("RESERVED_USERS", "root,slurm")
    monkeypatch.delenv("RESERVED_USER_PREFIXES", raising=False)
    assert issuer.handler({"users": users}, None) == {"tokens_issued": 3}
    assert {user: token_of(sm, user)["user"] for user in users} == {user: user for user in users}
    with pytest.raises(ValueError, match="refusing to mint"):
        issuer.mint(KEY, "slurm", now=0, lifetime=3600, reserved=issuer.Reserved.from_environment(os.environ))


@pytest.mark.parametrize("lifetime", [0, 299, 86401])
def test_lifetime_bounds(lifetime):
    with pytest.raises(ValueError, match="lifetime"):
        issuer.mint(KEY, "alice", now=0, lifetime=lifetime, reserved=RESERVED)


@pytest.mark.parametrize("lifetime", [300, 86400])
def test_lifetime_bounds_are_inclusive(lifetime):
    claims = issuer.mint(KEY, "alice", now=1_000, lifetime=lifetime, reserved=RESERVED).split(".")[1]
    assert json.loads(b64url_decode(claims)) == {"sun": "alice", "iat": 1_000, "exp": 1_000 + lifetime}


def test_short_keys_are_refused():
    with pytest.raises(ValueError, match="at least 32"):
        issuer.mint(b"short", "alice", now=0, lifetime=3600, reserved=RESERVED)


@pytest.mark.parametrize("event", [{}, {"users": "alice"}, {"users": [1]}, {"users": ["alice", 1]}, None])
def test_handler_rejects_events_without_a_user_list(event):
    with pytest.raises(ValueError, match="expected an event"):
        issuer.handler(event, None)
