"""`cluster.directory:` people and groups from an LDAP directory or Active Directory on every Slurm node through
SSSD, over encrypted connections only; with the rules on URIs, required keys, the CA file and group names."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictBool

from platform_config.facts import REPO_ROOT
from platform_config.fields import Artifact, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

DIRECTORY_SCHEMAS = ("rfc2307", "rfc2307bis", "ad")
# sssd-ldap(5) ldap_uri: a host name or address, an optional port; nothing else (no path, filter or extensions).
LdapUri = Annotated[
    str,
    pattern(
        r"ldaps?://[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?/?",
        "an ldaps://host[:port] or ldap://host[:port] URI (no path or filter)",
    ),
]
# An RFC 4514 distinguished name of attribute=value pairs; values without the characters that need escaping (and
# that would end a line of sssd.conf), so what the config says is what sssd sends.
DistinguishedName = Annotated[
    str,
    pattern(
        r"[A-Za-z][A-Za-z0-9-]*=[^,=+\\\"<>;#\n\r]+"
        r"(, ?[A-Za-z][A-Za-z0-9-]*=[^,=+\\\"<>;#\n\r]+)*",
        "a distinguished name such as dc=example,dc=com or "
        "cn=sssd-bind,ou=services,dc=example,dc=com (attribute=value pairs "
        'separated by commas; values without , = + \\ " < > ; #)',
    ),
]
# The full ARN, with Secrets Manager's six-character suffix: the node role is granted exactly this resource, and IAM
# compares secret ARNs literally (a partial ARN would match no secret).
SecretArn = Annotated[
    str,
    pattern(
        r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+"
        r"-[A-Za-z0-9]{6}",
        "a complete Secrets Manager secret ARN, including the "
        "six-character suffix (arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf)",
    ),
]
KmsKeyArn = Annotated[
    str,
    pattern(
        r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/(mrk-[0-9a-f]{32}|[0-9a-f-]{36})",
        "a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>)",
    ),
]
# Used in sssd.conf lists (comma-separated) and sudoers (%group, spaces escaped): no commas, quotes or '%'.
DirectoryGroup = Annotated[
    str,
    pattern(
        r"[A-Za-z0-9_]([A-Za-z0-9_. -]{0,62}[A-Za-z0-9_])?",
        "a directory group name: at most 64 letters, digits, '_', '.', '-' and inner spaces",
    ),
]
RepoPath = Annotated[
    str,
    pattern(
        r"[A-Za-z0-9_][A-Za-z0-9._/-]*\.(pem|crt)",
        "a .pem or .crt path relative to the repository root, such as config/directory-ca.pem",
    ),
]


class Directory(Strict):
    """Slurm only, opt-in: people from an LDAP directory or Active Directory on every node through SSSD
    (lifecycle/hyperpod/configure_sssd.sh). Only encrypted connections: ldaps://, or ldap:// with start_tls."""

    enabled: StrictBool = Field(
        False,
        description="Slurm only (refused with orchestrator: eks). People and groups from an LDAP directory or "
        "Active Directory on every node through SSSD (lifecycle/hyperpod/configure_sssd.sh; "
        'docs/slurm-departments.md, "Directory users through SSSD").',
    )
    uris: list[LdapUri] = Field(
        default=[],
        max_length=10,
        description="Required when enabled: ldaps://host[:port] URIs, or ldap:// with start_tls: true; plaintext LDAP "
        "is refused.",
    )
    start_tls: StrictBool = Field(False, description="StartTLS on ldap:// URIs (refused with ldaps://).")
    search_base: DistinguishedName | None = Field(
        None, description="Required when enabled: where users and groups are searched, e.g. dc=example,dc=org."
    )
    bind_dn: DistinguishedName | None = Field(None, description="Required when enabled: the account SSSD binds as.")
    bind_password_secret_arn: SecretArn | None = Field(
        None,
        description="Required when enabled: the complete ARN (with the 6-character suffix) of a Secrets Manager "
        "secret whose SecretString is the bind password. Every node role may GetSecretValue on "
        "exactly this ARN.",
    )
    bind_password_kms_key_arn: KmsKeyArn | None = Field(
        None,
        description="The secret's customer managed key, if any: nodes may kms:Decrypt with it only through "
        "Secrets Manager; same region as the secret.",
    )
    ca_certificate: RepoPath | None = Field(
        None,
        description="Required when enabled: a PEM file of CA certificates (nothing else) relative to the "
        "repository root, e.g. config/directory-ca.pem; shipped with the lifecycle scripts and "
        "checked by sha256 on the node; sssd demands server certificates it signed.",
    )
    # Named ldap_schema, not `schema`, which pydantic models reserve.
    ldap_schema: Literal[DIRECTORY_SCHEMAS] = Field(  # type: ignore[valid-type]
        "rfc2307",
        description="sssd's ldap_schema: rfc2307 (memberUid), rfc2307bis (member DNs, nested groups), ad "
        "(Active Directory with POSIX attributes uidNumber and gidNumber).",
    )
    access_groups: list[DirectoryGroup] = Field(
        default=[],
        max_length=50,
        description="Required when enabled: directory groups whose members may log in (SSSD's simple access "
        "provider); any other directory user is refused at PAM's account stage.",
    )
    admin_groups: list[DirectoryGroup] = Field(
        default=[],
        max_length=50,
        description="Directory groups whose members get passwordless sudo on every node "
        "(/etc/sudoers.d/91-hyperpod-directory) and, with cluster.pam_slurm_adopt, SSH to compute nodes "
        "without a job.",
    )
    artifacts: list[Artifact] = Field(
        [],
        description="sssd's Debian packages (sssd-common, sssd-ldap, libnss-sss, libpam-sss, built for the nodes' "
        "Ubuntu) mirrored to your S3, installed only on a node without sssd; empty: the AMI must have "
        "sssd or the node stops with a message.",
    )


def directory_errors(cfg: PlatformConfig) -> list[str]:
    directory = cfg.cluster.directory
    path = "cluster.directory"
    if not directory.enabled:
        return []
    if cfg.orchestrator != "slurm":
        return [
            (
                f"{path}.enabled: true with orchestrator {cfg.orchestrator!r}; SSSD on the nodes is for Slurm "
                "clusters only (EKS pods bring their users in their images): set it to false"
            )
        ]
    errors: list[str] = []
    add = errors.append
    if not directory.uris:
        add(f"{path}.uris: [] with the directory enabled; list at least one ldaps://host URI")
    for i, uri in enumerate(directory.uris):
        if uri.startswith("ldap://") and not directory.start_tls:
            add(
                f"{path}.uris[{i}]: {uri!r} is plaintext LDAP, which would send the bind password and users' "
                "passwords unencrypted; use ldaps://, or set start_tls: true"
            )
        if uri.startswith("ldaps://") and directory.start_tls:
            add(
                f"{path}.uris[{i}]: {uri!r} with start_tls: true; StartTLS is for ldap:// URIs, ldaps:// is already "
                "encrypted: set start_tls: false or use ldap://"
            )
    for key in ("search_base", "bind_dn", "bind_password_secret_arn", "ca_certificate"):
        if getattr(directory, key) is None:
            add(f"{path}.{key}: missing; required with the directory enabled")
    if not directory.access_groups:
        add(
            f"{path}.access_groups: [] with the directory enabled; name the directory groups whose members may log "
            "in (everyone else in the directory is refused)"
        )
    arn, kms_key = directory.bind_password_secret_arn, directory.bind_password_kms_key_arn
    if arn and kms_key and arn.split(":")[3] != kms_key.split(":")[3]:
        add(
            f"{path}.bind_password_kms_key_arn: {kms_key!r} is in region {kms_key.split(':')[3]}, the secret in "
            f"{arn.split(':')[3]}; a secret is encrypted with a key of its own region"
        )
    if directory.ca_certificate is not None:
        problem = ca_certificate_problem(directory.ca_certificate)
        if problem:
            add(f"{path}.ca_certificate: {directory.ca_certificate!r} — {problem}")
    for i, artifact in enumerate(directory.artifacts):
        package = artifact.s3_uri.rsplit("/", 1)[-1].split("_")[0]
        if package != artifact.name:
            add(
                f"{path}.artifacts[{i}].s3_uri: {artifact.s3_uri!r} holds package {package!r}, but the artifact is "
                f"named {artifact.name!r}; name it after the package it installs"
            )
    users = {u.name: i for i, u in enumerate(cfg.users)}
    for group in sorted(set(directory.access_groups + directory.admin_groups) & set(users)):
        add(
            f"{path}: group {group!r} is also users[{users[group]}].name; create_users.sh makes a local group of "
            "that name (unless the directory has the user), which would shadow the directory group: rename one"
        )
    return errors


def ca_certificate_problem(relative: str) -> str | None:
    """None when the file (relative to the repository root) holds at least one PEM certificate and nothing else."""
    path = REPO_ROOT / relative
    if not path.resolve().is_relative_to(REPO_ROOT):
        return "must stay inside the repository"
    try:
        text = path.read_text()
    except (FileNotFoundError, IsADirectoryError):
        return f"no such file under {REPO_ROOT}"
    except UnicodeDecodeError:
        return "is not a PEM file (binary content; convert DER with openssl x509 -inform der)"
    blocks = re.findall(r"-----BEGIN ([A-Z0-9 ]+)-----\n[A-Za-z0-9+/=\n]+-----END \1-----", text)
    if not blocks:
        return "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    if any(kind != "CERTIFICATE" for kind in blocks):
        return f"holds a {next(k for k in blocks if k != 'CERTIFICATE')} block; only CA certificates belong here"
    return None


def ca_certificate_bytes(cfg: PlatformConfig) -> bytes:
    certificate = cfg.cluster.directory.ca_certificate
    if certificate is None:
        raise ValueError("cluster.directory.ca_certificate is not set")
    return (REPO_ROOT / certificate).read_bytes()
