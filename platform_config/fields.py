"""Field types every section shares: the strict base model, checked strings (CIDRs, AZ IDs, names the SageMaker API
constrains, paths that reach a shell), mirrored packages. A check's message says what is allowed; config loading
prefixes it with the key and the value."""

from __future__ import annotations

import difflib
import ipaddress
import re
from typing import Annotated
from collections.abc import Callable, Iterable

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from platform_config.facts import CLUSTER_INSTANCE_TYPES

LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


class Check:
    """A field check that says what it allows: the configuration reference (tools/config_reference.py) shows
    `allowed`, and config/schema.json carries `json_pattern` where there is one (platform_config/model.py), so editors
    flag a value as it is typed."""

    def __init__(self, check: Callable[[str], str], allowed: str, json_pattern: str | None = None) -> None:
        self.check, self.allowed, self.json_pattern = check, allowed, json_pattern

    def __call__(self, value: str) -> str:
        return self.check(value)


def pattern(regex: str, allowed: str):
    """A check that the whole string matches `regex`; its error says it must be `allowed`, which the configuration
    reference (tools/config_reference.py) shows too."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {allowed}")
        return value

    return AfterValidator(Check(check, allowed, json_pattern=f"^(?:{regex})$"))


def api_string(regex: str, max_length: int, allowed: str) -> tuple:
    """A string the SageMaker API constrains: our message, and the API's pattern and length in the JSON Schema
    (tests/test_api_constraints.py compares both with botocore's service model)."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value) or len(value) > max_length:
            raise ValueError(f"must be {allowed}")
        return value

    return (
        AfterValidator(Check(check, allowed)),
        WithJsonSchema({"type": "string", "pattern": f"^{regex}$", "minLength": 1, "maxLength": max_length}),
    )


def _cidr_block(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError("must be an IPv4 CIDR block with no host bits set, e.g. 10.0.0.0/16") from None
    if network.version != 4:
        raise ValueError("must be an IPv4 CIDR block, e.g. 10.0.0.0/16")
    return value


# The shape of an IPv4 CIDR for editors (config/schema.json); host bits are checked at synth only.
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_cidr = Check(
    _cidr_block,
    "an IPv4 CIDR block with no host bits set, e.g. 10.0.0.0/16",
    json_pattern=rf"^{_OCTET}(\.{_OCTET}){{3}}/(3[0-2]|[12]?[0-9])$",
)


# Patterns and lengths of the SageMaker CreateCluster API (botocore's service model: ClusterName,
# ClusterInstanceGroupName, ClusterPartitionName).
_HYPHENATED = r"[a-zA-Z0-9](-*[a-zA-Z0-9])*"
ClusterName = Annotated[
    str, *api_string(_HYPHENATED, 63, "1-63 letters, digits and hyphens, starting and ending with a letter or digit")
]
GroupName = Annotated[
    str, *api_string(_HYPHENATED, 63, "1-63 letters, digits and hyphens, starting and ending with a letter or digit")
]


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """' did you mean 'x'?' (or ' did you mean one of 'x', 'y'?') for the choices closest to a misspelt value; ''
    when none is close."""
    close = difflib.get_close_matches(value, list(choices), n=3, cutoff=0.75)
    if not close:
        return ""
    return (
        f" did you mean {close[0]!r}?"
        if len(close) == 1
        else f" did you mean one of {', '.join(repr(c) for c in close)}?"
    )


_INSTANCE_TYPE_ALLOWED = (
    "one of the types CreateCluster accepts (config/facts/cluster_instance_types.json, "
    "from botocore's ClusterInstanceType), such as ml.g5.8xlarge"
)


def _cluster_instance_type(value: str) -> str:
    if value in CLUSTER_INSTANCE_TYPES:
        return value
    hint = did_you_mean(value, CLUSTER_INSTANCE_TYPES)
    raise ValueError(f"not an instance type HyperPod clusters accept;{hint} allowed: {_INSTANCE_TYPE_ALLOWED}")


InstanceType = Annotated[
    str,
    AfterValidator(Check(_cluster_instance_type, _INSTANCE_TYPE_ALLOWED)),
    WithJsonSchema({"type": "string", "enum": list(CLUSTER_INSTANCE_TYPES)}),
]
AzId = Annotated[str, pattern(r"[a-z]{2,}[0-9]+-az[0-9]{1,2}", "an AZ ID such as use1-az4 (not an AZ name)")]
Cidr = Annotated[str, AfterValidator(_cidr)]
PartitionName = Annotated[
    str,
    *api_string(
        _HYPHENATED,
        1024,
        "a partition name HyperPod accepts: letters, digits "
        "and hyphens, starting and ending with a letter or "
        "digit (no '_')",
    ),
]
PosixName = Annotated[str, pattern(r"[a-z_][a-z0-9_-]{0,31}", "a POSIX user name: lowercase, at most 32 characters")]
Sha256 = Annotated[str, pattern(r"[0-9a-f]{64}", "a SHA-256 digest: 64 lowercase hex characters")]
TrainingPlanArn = Annotated[
    str,
    pattern(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[a-zA-Z0-9-]+", "a SageMaker training plan ARN"),
]
# Paths that reach a shell on the nodes (mount_fsx.sh, create_users.sh: homes under the mount path) and FSx paths of
# Studio's partitions: '/' and components of letters, digits, '.', '_' and '-', never '.' or '..' (which would leave
# the path they name), so no quoting, globbing or command substitution can hide in them.
_PATH_COMPONENT = r"(?!\.\.?(/|$))[A-Za-z0-9._-]+"
_PATH_ALLOWED = (
    "an absolute path such as /fsx: '/' and components of letters, digits, '.', '_' and '-' (no spaces, "
    "quotes, '$', ';', '`', '*' or other shell characters; no '.' or '..' component)"
)
AbsolutePath = Annotated[str, pattern(rf"/|(/{_PATH_COMPONENT})+/?", _PATH_ALLOWED)]
AddonVersion = Annotated[
    str, pattern(r"v\d+\.\d+\.\d+-eksbuild\.\d+", "an EKS add-on version such as v1.20.1-eksbuild.3")
]
# Team and priority-class names become Kubernetes names (hyperpod-ns-<team>, <class>-priority).
GovernanceName = Annotated[
    str,
    pattern(
        r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?",
        "1-40 lowercase letters, digits and '-', starting and ending alphanumeric",
    ),
]
LabelKey = Annotated[
    str,
    pattern(
        r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?",
        "a Kubernetes label key such as team or example.com/pool",
    ),
]
LabelValue = Annotated[
    str,
    pattern(
        r"([a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?)?",
        "a Kubernetes label value: at most 63 letters, digits, '-', '_', '.'",
    ),
]
RoleArn = Annotated[str, pattern(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+", "an IAM role ARN")]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_IMAGE_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._:/-]*")


def _pinned_image(value: str) -> str:
    name, _, digest = value.partition("@")
    colon = name.rfind(":")
    tag = name[colon + 1 :] if colon > name.rfind("/") else ""  # a ':' before the last '/' is a registry port
    pinned = _DIGEST.fullmatch(digest) if digest else tag not in ("", "latest")
    if not (_IMAGE_NAME.fullmatch(name) and pinned):
        raise ValueError(
            "must be pinned: an explicit tag other than 'latest' (repo:1.2.3) or a digest (repo@sha256:<64 hex>)"
        )
    return value


# A container image reference that cannot drift: a tag other than `latest`, or a digest.
PinnedImage = Annotated[
    str,
    AfterValidator(
        Check(
            _pinned_image,
            "a container image pinned by a tag other than latest (repo:1.2.3) or a digest (repo@sha256:...)",
        )
    ),
]


def _resource_id(prefix: str):
    return pattern(rf"{prefix}-[0-9a-f]{{8,17}}", f"an ID such as {prefix}-0123456789abcdef0")


SubnetId = Annotated[str, _resource_id("subnet")]
VpcId = Annotated[str, _resource_id("vpc")]
SecurityGroupId = Annotated[str, _resource_id("sg")]
Email = Annotated[str, pattern(r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address such as hpc-admins@example.edu")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Artifact(Strict):
    """A Debian package mirrored to the operator's S3; on_create.sh verifies the digest before installing."""

    name: Annotated[str, pattern(r"[a-z0-9][a-z0-9._+-]*", "lowercase letters, digits, '.', '_', '+', '-'")] = Field(
        description="The Debian package's name."
    )
    # Nodes pass it to `aws s3 cp`: key characters are limited to what package paths use, none a shell's.
    s3_uri: Annotated[
        str,
        pattern(
            r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([A-Za-z0-9._+~-]+/)*"
            r"[a-z0-9][a-z0-9.+-]*_[A-Za-z0-9.+~-]+_[a-z0-9]+\.deb",
            "an s3:// URI of a Debian package named package_version_arch.deb (key of letters, digits and . _ + ~ - /)",
        ),
    ] = Field(description="Where the package is in your S3 mirror.")
    sha256: Sha256 = Field(description="The package file's SHA-256, checked before it is installed.")
