"""Fixed names for the roles another stack's resource policy must name before the role exists.

A name CloudFormation generates when none is given (a unique physical ID,
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-name.html) cannot be named in
advance, and a cross-stack reference would run the wrong way (the storage and slurm-login stacks deploy first).
IAM role names are account-wide, hence the region; each name is at most 56 characters.
"""

from __future__ import annotations

from constructs.pseudo_parameters import ACCOUNT_ID, PARTITION, REGION


def upload_role_name(cluster_name: str, stack_kind: str) -> str:
    """The role of the function that uploads lifecycle scripts from `stack_kind` (cluster | studio): the lifecycle
    bucket's policy lets only these and CDK's deploy roles write."""
    return f"{cluster_name.lower()[:20]}-{stack_kind}-lc-upload-{REGION}"


def studio_execution_role_name(cluster_name: str) -> str:
    """The Studio domain's execution role: the Slurm login secret and its key name it as their only reader."""
    return f"{cluster_name.lower()[:20]}-studio-execution-{REGION}"


def cluster_execution_role_name(cluster_name: str) -> str:
    """The Slurm controller group's execution role (the name predates the split: keeping it keeps the role, so an
    upgrade replaces nothing): the login secret and its key (their own stack, deployed before the cluster) name it as
    their only writer. Login and compute groups run as a separate role with a generated name and no secret access
    (constructs/hyperpod_cluster.py `worker_role`)."""
    return f"{cluster_name.lower()[:20]}-cluster-execution-{REGION}"


def slurm_job_role_name(cluster_name: str) -> str:
    """The role a Slurm job's processes get credentials of (constructs/slurm_job_role.py): named, so the nodes'
    parameters name it before it exists (the parameters are uploaded before the cluster and its roles)."""
    return f"{cluster_name.lower()[:20]}-slurm-job-{REGION}"


def slurm_token_issuer_role_name(cluster_name: str) -> str:
    """The Slurm token issuer (per-user mode): the only reader of the cluster's auth/jwt signing key."""
    return f"{cluster_name.lower()[:20]}-slurm-tokens-{REGION}"


def studio_user_role_path(cluster_name: str) -> str:
    """Per-user mode gives each Studio user profile its own execution role under this IAM path; the Slurm login
    secret and its key name the path (aws:PrincipalArn of a role carries its path), since the roles are created
    after the cluster stack."""
    return f"/hyperpod/{cluster_name.lower()[:20]}-{REGION}/studio-users/"


def slurm_token_secret_prefix(cluster_name: str) -> str:
    """User U's current Slurm token lives in the secret named PREFIX + U (per-user mode)."""
    return f"{cluster_name}/slurm-token/"


def slurm_jwt_key_secret_name(cluster_name: str) -> str:
    """The cluster stack's auth/jwt signing key secret (per-user mode). Named, so the Studio stack's token issuer
    addresses it without a reference to the cluster stack (Studio is created while the cluster is)."""
    return f"{cluster_name}/slurm-jwt-key"


PARTITION_HANDLERS = ("OnEvent", "IsComplete", "ProfileEvents")


def partition_handler_role_name(cluster_name: str, handler: str) -> str:
    """The Studio partition handlers (`handler` in PARTITION_HANDLERS): with FSx itself, the only principals the data
    bucket lets read or write objects under the Studio partitions' prefix (constructs/data_repository.py)."""
    short = {"OnEvent": "event", "IsComplete": "done", "ProfileEvents": "profile"}[handler]
    return f"{cluster_name.lower()[:20]}-fsx-part-{short}-{REGION}"


def role_arn(name: str) -> str:
    """A role of this account by its name (with its path, if any)."""
    return f"arn:{PARTITION}:iam::{ACCOUNT_ID}:role/{name}"
