"""What a user command needs before it starts, checked up front so that a command that cannot do its job says why
in one line (and exits non-zero) instead of half-running, reporting every check as skipped, or ending in a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

# How the AWS CLI and boto3 find credentials (environment, config and credentials files, SSO, instance metadata).
CREDENTIALS_DOC = "https://docs.aws.amazon.com/cli/latest/userguide/cli-chap-authentication.html"


def missing_credentials(profile: str | None = None) -> str | None:
    """Why boto3 has no credentials to call AWS with, in one line; None when it has some. Looks them up the way every
    AWS SDK does, locally: no AWS call (expired or refused credentials show up at the first call instead)."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        credentials = boto3.Session(profile_name=profile).get_credentials()
    except BotoCoreError as error:  # an unknown profile, an unreadable config file
        return f"{error}".replace("\n", " ")
    if credentials is None:
        where = f"profile {profile!r}" if profile else "the environment, the AWS config and credentials files or SSO"
        return (
            f"no AWS credentials in {where}: sign in (e.g. `aws sso login --profile NAME` and `export "
            f"AWS_PROFILE=NAME`) and run again ({CREDENTIALS_DOC})"
        )
    return None


def missing_assembly(out_dir: Path) -> str | None:
    """Why `out_dir` is not a synthesized cloud assembly, in one line; None when it is one."""
    if not (Path(out_dir) / "manifest.json").is_file():
        return f"{out_dir}/manifest.json not found: no synthesized assembly there; run `make synth` first"
    return None


def one_line(error: BaseException) -> str:
    """An exception's message on one line (botocore's can span several)."""
    return " ".join(str(error).split())


def loaded_config(path: str):
    """The validated config at `path`, or None after printing why it is refused (key, value, what is allowed)."""
    from platform_config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return None
