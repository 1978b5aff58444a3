"""The `aws` stand-in the scripts under test call (tests/e2e/aws_shim.py, written by slurm_root.write_aws_command):
one warm server per process does each call in a fork that becomes its caller. A call made as a user, in a mount
namespace of its own, from a directory there, with a umask, groups and environment of its own, does what it would do
in its own process: it reads and writes the caller's files as the caller, at the caller's paths, and reaches the
endpoint the caller's environment names; output and status reach the caller.

Needs root and the Slurm root (tools/build_slurm_root.sh), whose Python and boto3 the server runs on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_root import in_root, skip_reason, write_aws_command
from slurm_root import missing as missing_in_root

from support.moto_server import client, environment

REGION = "us-east-1"
BUCKET = "shim-bucket"
UID, GID, GROUP = 10031, 10131, 10231  # no account needed: the numbers are what the kernel checks

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or bool(missing_in_root(["python3", "setpriv"])),
    reason=skip_reason(["python3", "setpriv"]) if os.geteuid() == 0 else "needs root",
)


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="aws-shim-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_call_acts_as_its_caller_in_the_caller_s_namespace(moto_url: str, base: Path):
    s3 = client(moto_url, "s3", REGION)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="object", Body=b"payload")
    secrets = client(moto_url, "secretsmanager", REGION)
    arn = secrets.create_secret(Name="shim-secret", SecretString="before")["ARN"]
    # Mounted at /srv/private only in the caller's namespace: the group may write there, nobody else.
    private = base / "private"
    (private / "group-only").mkdir(parents=True)
    os.chown(private / "group-only", 0, GROUP)
    (private / "group-only").chmod(0o770)
    (private / "value").write_text("from-the-callers-file")
    os.chown(private / "value", UID, GID)
    (private / "value").chmod(0o600)
    (private / "roots-only").write_text("root's")
    (private / "roots-only").chmod(0o600)
    script = f"""
cd /srv/private/group-only
umask 027
aws s3 cp --only-show-errors s3://{BUCKET}/object fetched
aws secretsmanager put-secret-value --secret-id {arn} --secret-string file:///srv/private/value >/dev/null
aws secretsmanager get-secret-value --secret-id {arn} --query SecretString --output text
if aws secretsmanager put-secret-value --secret-id {arn} --secret-string file://../roots-only; then exit 9; fi
"""
    # The server's own environment names no endpoint: only the caller's does.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **environment(moto_url, REGION)}
    env["PATH"] = f"{write_aws_command(base / 'bin')}:{env['PATH']}"
    result = subprocess.run(
        in_root(
            "setpriv",
            f"--reuid={UID}",
            f"--regid={GID}",
            f"--groups={GROUP}",
            "--",
            "sh",
            "-eu",
            "-c",
            script,
            binds=[(private, "/srv/private")],
        ),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    fetched = private / "group-only" / "fetched"
    assert fetched.read_bytes() == b"payload"
    stat = fetched.stat()
    assert (stat.st_uid, stat.st_gid, stat.st_mode & 0o777) == (UID, GID, 0o640)
    assert result.stdout == "from-the-callers-file\n"  # the caller's file, read as the caller, printed to its stdout
    assert "Permission denied" in result.stderr  # root's file is not the caller's to read
    assert secrets.get_secret_value(SecretId=arn)["SecretString"] == "from-the-callers-file"
