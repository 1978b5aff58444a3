"""Mints Slurm auth/jwt tokens (HS256) for the platform's users and hands each user's token to that user alone.

slurmctld's auth/jwt plugin verifies the HS256 signature with the key named by `AuthAltParameters=jwt_key=`, refuses
a token whose `exp` has passed, and takes the user from the `sun` claim (`username` if there is no `sun`)
(SchedMD/slurm src/plugins/auth/jwt/auth_jwt.c, auth_p_verify). A token for root or for SlurmUser may name another
user in the request, so this module never mints one for those names.

Invoked by EventBridge schedules, one per nested Studio user stack, whose fixed input names that stack's users:
  event                {"users": ["alice", ...]}   (a template's input, never a caller's: only the rules invoke it)
  KEY_SECRET_ID        the secret the controller wrote ({"jwt_hs256_key_b64": ...}); only this function may read it
  TOKEN_SECRET_PREFIX  user U's token goes to the secret named PREFIX + U, readable only by U's execution role
  TOKEN_LIFETIME       seconds a token is valid (default 3600)
  RESERVED_USERS       comma-separated names never to mint for: system accounts (root, slurm, ubuntu, ...), the list
                       config validation refuses too (config/facts/reserved-users.json, passed in by
                       constructs/slurm_token_issuer.py); without it the function mints nothing
  RESERVED_USER_PREFIXES  comma-separated prefixes of such names (systemd-, _)
Each token secret's value: {"user", "token", "expires"}. Standard library and boto3 only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import time
from dataclasses import dataclass
from collections.abc import Sequence

from aws_clients import client

USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
MIN_LIFETIME, MAX_LIFETIME = 300, 24 * 3600


@dataclass(frozen=True)
class Reserved:
    """Names never to mint for. A token whose user is root or SlurmUser may act as any other user (auth_jwt.c); the
    other system accounts (ubuntu has sudo on the HyperPod AMI) are no person's either."""

    names: frozenset[str]
    prefixes: tuple[str, ...] = ()

    def __contains__(self, user: str) -> bool:
        return user in self.names or any(user.startswith(p) for p in self.prefixes)

    @classmethod
    def from_environment(cls, environ=os.environ) -> Reserved:
        names = frozenset(n for n in environ.get("RESERVED_USERS", "").split(",") if n)
        if not {"root", "slurm"} <= names:  # the list is the construct's to give: fail closed without it
            raise RuntimeError("RESERVED_USERS is missing or lacks root and slurm; refusing to mint any token")
        return cls(names, tuple(p for p in environ.get("RESERVED_USER_PREFIXES", "").split(",") if p))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint(key: bytes, user: str, *, now: int, lifetime: int, reserved: Reserved) -> str:
    """A compact HS256 JWT with the claims auth/jwt reads: sun (user), iat, exp."""
    if not USER_NAME.fullmatch(user) or user in reserved:
        raise ValueError(f"refusing to mint a Slurm token for {user!r}")
    if not MIN_LIFETIME <= lifetime <= MAX_LIFETIME:
        raise ValueError(f"token lifetime {lifetime}s is outside {MIN_LIFETIME}-{MAX_LIFETIME}s")
    if len(key) < 32:
        raise ValueError(f"the HS256 key has {len(key)} bytes; at least 32 are needed")
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = _b64url(
        json.dumps({"exp": now + lifetime, "iat": now, "sun": user}, separators=(",", ":"), sort_keys=True).encode()
    )
    signature = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{_b64url(signature)}"


def read_key(client, key_secret_id: str) -> bytes:
    value = json.loads(client.get_secret_value(SecretId=key_secret_id)["SecretString"])
    return base64.b64decode(value["jwt_hs256_key_b64"], validate=True)


def issue(
    client,
    *,
    key_secret_id: str,
    prefix: str,
    users: Sequence[str],
    lifetime: int,
    reserved: Reserved,
    now: int | None = None,
) -> dict[str, int]:
    """Writes a fresh token for every user to their secret; returns {user: exp}. Raises if any user got none."""
    key = read_key(client, key_secret_id)
    now = int(time.time()) if now is None else now
    issued, failed = {}, {}
    for user in sorted(set(users)):
        try:
            token = mint(key, user, now=now, lifetime=lifetime, reserved=reserved)
            client.put_secret_value(
                SecretId=prefix + user,
                SecretString=json.dumps({"user": user, "token": token, "expires": now + lifetime}, sort_keys=True),
            )
            issued[user] = now + lifetime
        except Exception as e:  # noqa: BLE001 - one user's secret must not stop the others' tokens
            failed[user] = f"{type(e).__name__}: {e}"
    if failed:
        raise RuntimeError(f"no new token for {len(failed)} user(s): {json.dumps(failed, sort_keys=True)}")
    return issued


def handler(event, _context):
    users = event.get("users") if isinstance(event, dict) else None
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise ValueError(f"expected an event {{'users': [names]}}, got {event!r}")
    issued = issue(
        client("secretsmanager"),
        key_secret_id=os.environ["KEY_SECRET_ID"],
        prefix=os.environ["TOKEN_SECRET_PREFIX"],
        users=users,
        lifetime=int(os.environ.get("TOKEN_LIFETIME", "3600")),
        reserved=Reserved.from_environment(),
    )
    print(json.dumps({"tokens_issued": len(issued)}))
    return {"tokens_issued": len(issued)}
