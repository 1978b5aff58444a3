"""`cluster.directory:` people and groups from an LDAP directory or Active Directory on every Slurm node through
SSSD, over encrypted connections only; with the rules on URIs, required keys, the CA file and group names."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import Field, StrictBool

from platform_config.facts import REPO_ROOT
from platform_config.fields import Artifact, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

DIRECTORY_SCHEMAS = ("rfc2307", "rfc2307bis", "ad")
# sssd-ldap(5) ldap_uri: a host name or address, an optional port; nothing else (no path, filter or extensions).
LdapUri = Annotated[str, pattern(r"ldaps?://[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?/?",
                                  "an ldaps://host[:port] or ldap://host[:port] URI (no path or filter)")]
# An RFC 4514 distinguished name of attribute=value pairs; values without the characters that need escaping (and
# that would end a line of sssd.conf), so what the config says is what sssd sends.
DistinguishedName = Annotated[str, pattern(r"[A-Za-z][A-Za-z0-9-]*=[^,=+\\\"<>;#\n\r]+"
                                            r"(, ?[A-Za-z][A-Za-z0-9-]*=[^,=+\\\"<>;#\n\r]+)*",
                                            "a distinguished name such as dc=example,dc=com or "
                                            "cn=sssd-bind,ou=services,dc=example,dc=com (attribute=value pairs "
                                            "separated by commas; values without , = + \\ \" < > ; #)")]
# The full ARN, with Secrets Manager's six-character suffix: the node role is granted exactly this resource, and IAM
# compares secret ARNs literally (a partial ARN would match no secret).
SecretArn = Annotated[str, pattern(r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+"
                                    r"-[A-Za-z0-9]{6}", "a complete Secrets Manager secret ARN, including the "
                                    "six-character suffix (arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf)")]
KmsKeyArn = Annotated[str, pattern(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/(mrk-[0-9a-f]{32}|[0-9a-f-]{36})",
                                    "a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>)")]
# Used in sssd.conf lists (comma-separated) and sudoers (%group, spaces escaped): no commas, quotes or '%'.
DirectoryGroup = Annotated[str, pattern(r"[A-Za-z0-9_]([A-Za-z0-9_. -]{0,62}[A-Za-z0-9_])?",
                                         "a directory group name: at most 64 letters, digits, '_', '.', '-' and "
                                         "inner spaces")]
RepoPath = Annotated[str, pattern(r"[A-Za-z0-9_][A-Za-z0-9._/-]*\.(pem|crt)",
                                   "a .pem or .crt path relative to the repository root, such as config/directory-ca.pem")]


class Directory(Strict):
    """Slurm only, opt-in: people from an LDAP directory or Active Directory on every node through SSSD
    (lifecycle/hyperpod/configure_sssd.sh). Only encrypted connections: ldaps://, or ldap:// with start_tls."""
    enabled: StrictBool = False
    uris: list[LdapUri] = Field(default=[], max_length=10)
    start_tls: StrictBool = False
    search_base: Optional[DistinguishedName] = None
    bind_dn: Optional[DistinguishedName] = None
    # SecretString is the bind password itself. Every node reads it at start (GetSecretValue on exactly this ARN).
    bind_password_secret_arn: Optional[SecretArn] = None
    # Only when the secret is encrypted with a customer managed key: kms:Decrypt on it, through Secrets Manager only.
    bind_password_kms_key_arn: Optional[KmsKeyArn] = None
    # The CA that signed the directory servers' certificates (PEM), shipped with the lifecycle scripts.
    ca_certificate: Optional[RepoPath] = None
    # sssd-ldap(5) ldap_schema (named so, not `schema`, which pydantic models reserve): rfc2307 (memberUid),
    # rfc2307bis (member DNs, nested groups), ad (Active Directory with POSIX attributes: uidNumber, gidNumber).
    ldap_schema: Literal[DIRECTORY_SCHEMAS] = "rfc2307"  # type: ignore[valid-type]
    # Directory groups whose members may log in (sssd's simple access provider); everyone else is refused at PAM's
    # account stage. Required: a directory is usually far larger than the cluster's audience.
    access_groups: list[DirectoryGroup] = Field(default=[], max_length=50)
    # Directory groups whose members get `sudo` on every node (/etc/sudoers.d/91-hyperpod-directory).
    admin_groups: list[DirectoryGroup] = Field(default=[], max_length=50)
    # sssd and its PAM/NSS modules from the operator's S3 mirror when the AMI lacks them (names from
    # DIRECTORY_ARTIFACTS); empty: the node must already have sssd, or configure_sssd.sh stops.
    artifacts: list[Artifact] = []


def directory_errors(cfg: PlatformConfig) -> list[str]:
    directory = cfg.cluster.directory
    path = "cluster.directory"
    if not directory.enabled:
        return []
    if cfg.orchestrator != "slurm":
        return [f"{path}.enabled: true with orchestrator {cfg.orchestrator!r}; SSSD on the nodes is for Slurm "
                "clusters only (EKS pods bring their users in their images): set it to false"]
    errors: list[str] = []
    add = errors.append
    if not directory.uris:
        add(f"{path}.uris: [] with the directory enabled; list at least one ldaps://host URI")
    for i, uri in enumerate(directory.uris):
        if uri.startswith("ldap://") and not directory.start_tls:
            add(f"{path}.uris[{i}]: {uri!r} is plaintext LDAP, which would send the bind password and users' "
                "passwords unencrypted; use ldaps://, or set start_tls: true")
        if uri.startswith("ldaps://") and directory.start_tls:
            add(f"{path}.uris[{i}]: {uri!r} with start_tls: true; StartTLS is for ldap:// URIs, ldaps:// is already "
                "encrypted: set start_tls: false or use ldap://")
    for key in ("search_base", "bind_dn", "bind_password_secret_arn", "ca_certificate"):
        if getattr(directory, key) is None:
            add(f"{path}.{key}: missing; required with the directory enabled")
    if not directory.access_groups:
        add(f"{path}.access_groups: [] with the directory enabled; name the directory groups whose members may log "
            "in (everyone else in the directory is refused)")
    arn, key = directory.bind_password_secret_arn, directory.bind_password_kms_key_arn
    if arn and key and arn.split(":")[3] != key.split(":")[3]:
        add(f"{path}.bind_password_kms_key_arn: {key!r} is in region {key.split(':')[3]}, the secret in "
            f"{arn.split(':')[3]}; a secret is encrypted with a key of its own region")
    if directory.ca_certificate is not None:
        problem = ca_certificate_problem(directory.ca_certificate)
        if problem:
            add(f"{path}.ca_certificate: {directory.ca_certificate!r} — {problem}")
    for i, artifact in enumerate(directory.artifacts):
        package = artifact.s3_uri.rsplit("/", 1)[-1].split("_")[0]
        if package != artifact.name:
            add(f"{path}.artifacts[{i}].s3_uri: {artifact.s3_uri!r} holds package {package!r}, but the artifact is "
                f"named {artifact.name!r}; name it after the package it installs")
    users = {u.name: i for i, u in enumerate(cfg.users)}
    for group in sorted(set(directory.access_groups + directory.admin_groups) & set(users)):
        add(f"{path}: group {group!r} is also users[{users[group]}].name; create_users.sh makes a local group of "
            "that name (unless the directory has the user), which would shadow the directory group: rename one")
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
    return (REPO_ROOT / cfg.cluster.directory.ca_certificate).read_bytes()
