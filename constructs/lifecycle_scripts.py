"""Ships `lifecycle/hyperpod/` and the generated platform_parameters.json to the lifecycle bucket (and, for Studio,
the scripts and the prebuilt tools zip)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, cast
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from constructs.cdk_bootstrap_roles import cloudformation_execution_role_arn
from constructs.nag_acknowledgments import Rule, acknowledge, acknowledge_rules
from constructs.node_parameters import LifecycleRecordRef, NodeParameters
from constructs.studio_tools import link_keeping_digest, sha256_once, unlink_keeping_digest
from constructs.pseudo_parameters import ACCOUNT_ID, REGION

HYPERPOD_SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "lifecycle" / "hyperpod"
STUDIO_SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "lifecycle" / "studio"
ON_CREATE = "on_create.sh"  # EKS groups: LifeCycleConfig.OnCreate
ON_INIT_COMPLETE = "on_init_complete.sh"  # Slurm groups: LifeCycleConfig.OnInitComplete, after HyperPod's own set-up
# The node-side contract the scripts read (lifecycle/hyperpod/README.md).
PARAMETERS_FILE = "platform_parameters.json"
# HyperPod's legacy Slurm configuration file. With the API-driven configuration (SlurmConfig on the instance groups)
# HyperPod refuses a lifecycle prefix holding a file of this name: "The LifeCycleConfig cannot include both a SLURM
# Orchestrator Config and a provisioning_parameters.json file simultaneously."
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-slurm-api-config-migration.html)
HYPERPOD_RESERVED_FILE = "provisioning_parameters.json"
# The lifecycle bucket's prefix where the Slurm controller uploads its client bundle for Studio
# (lifecycle/hyperpod/build_slurm_client_bundle.sh): the only place in that bucket the cluster's own role may write.
SLURM_CLIENT_PREFIX = "slurm-client"


# The lifecycle record (lifecycle/hyperpod/lib/verify.sh): the only Secrets Manager actions anyone but CloudFormation's
# execution role may take on it. Everything else (PutSecretValue, UpdateSecret, UpdateSecretVersionStage, which could
# make an older version current, PutResourcePolicy, DeleteSecret, replication, rotation, and any action added later)
# is denied by NotAction.
RECORD_READ_ACTIONS = (
    "secretsmanager:GetSecretValue",
    "secretsmanager:DescribeSecret",
    "secretsmanager:ListSecretVersionIds",
    "secretsmanager:GetResourcePolicy",
)
# Secrets Manager's limit on a secret value
# (https://docs.aws.amazon.com/secretsmanager/latest/userguide/reference_limits.html).
SECRET_VALUE_LIMIT = 65536
# A token's value can be longer than its placeholder at synth: ARNs and DNS names stay well within this.
TOKEN_ALLOWANCE = 256


def lifecycle_record_name(cluster_name: str) -> str:
    """The Secrets Manager name of a cluster's lifecycle record."""
    return f"hyperpod-platform/{cluster_name}/lifecycle-record"


def shipped_digests(directories: Sequence[Path]) -> dict[str, str]:
    """SHA-256 of every file a scripts asset ships (the asset's exclusions applied), by relative path. Each file is
    hashed once per process for as long as it is unchanged (sha256_once): the EKS Studio prefix ships kubectl and helm
    (~118 MB), and tests synthesize dozens of apps in one process."""
    digests = {}
    for directory in directories:
        for path in sorted(directory.rglob("*")):
            relative = path.relative_to(directory)
            if path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".md":
                digests[relative.as_posix()] = sha256_once(path)
    return digests


def _record_size(record: Mapping[str, Any]) -> int:
    """The record's size once CloudFormation resolved its tokens, bounded from above."""
    rendered = json.dumps(record, default=str)
    return len(rendered) + TOKEN_ALLOWANCE * rendered.count("${Token[")


def canonical_sha256(value: Any) -> str:
    """The sha256 a node computes for a parameter value (lifecycle/hyperpod/lib/verify.py canonical_sha256)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def record_value(scripts: Mapping[str, str], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The lifecycle record: the scripts' digests and the parameters verbatim, so a node names the very key that
    differs. When that would not fit a secret (a long users list), the largest parameters without a token go in as the
    sha256 of their canonical JSON instead (`parameter_digests`), largest first, until it fits."""
    verbatim, digests = dict(parameters), dict[str, str]()
    record = {"version": 1, "scripts": dict(scripts), "parameters": verbatim, "parameter_digests": digests}
    while _record_size(record) > SECRET_VALUE_LIMIT:
        static = [k for k, v in verbatim.items() if "${Token[" not in json.dumps(v, default=str)]
        if not static:
            raise ValueError(
                f"the lifecycle record would be over Secrets Manager's {SECRET_VALUE_LIMIT}-byte limit "
                "on a secret value even with every parameter as a digest"
            )
        largest = max(static, key=lambda k: len(json.dumps(verbatim[k])))
        digests[largest] = canonical_sha256(verbatim.pop(largest))
    return record


def lifecycle_bucket_name(cluster_name: str) -> str:
    """Deterministic, so the cluster stack can address the bucket without a cross-stack reference.

    The `sagemaker-` prefix is the convention HyperPod's managed instance policy recognised; the execution role
    no longer uses that policy (it reads this prefix by an inline statement), but renaming would replace the
    retained bucket. The name is
    at most 61 characters (20 of the cluster name, a 12-digit account, the longest region name).
    """
    return f"sagemaker-lc-{cluster_name.lower()[:20]}-{ACCOUNT_ID}-{REGION}"


def data_bucket_name(cluster_name: str) -> str:
    """Deterministic for the same reason: Studio's partition handlers are granted a prefix of it."""
    return f"{cluster_name.lower()[:22]}-data-{ACCOUNT_ID}-{REGION}"


def assets_bucket_name(stack: cdk.Stack) -> str:
    """The CDK bootstrap assets bucket, as the default synthesizer names it (for cdk-nag findings)."""
    qualifier = (
        stack.node.try_get_context("@aws-cdk/core:bootstrapQualifier") or cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER
    )
    return (
        cdk.DefaultStackSynthesizer.DEFAULT_FILE_ASSETS_BUCKET_NAME.replace("${Qualifier}", qualifier)
        .replace("${AWS::AccountId}", ACCOUNT_ID)
        .replace("${AWS::Region}", stack.region)
    )


def _staged_zip(scope: Construct, archive_sha256: str) -> Path:
    """Where CDK stages a .zip file asset whose custom hash is `archive_sha256`: `asset.<h>.zip` in the assembly, h
    the sha256 of that custom hash (aws-cdk-lib core AssetStaging: calculateHash, renderAssetFilename)."""
    staged_hash = hashlib.sha256(archive_sha256.encode()).hexdigest()
    stage = cdk.Stage.of(scope)
    if stage is None:
        raise ValueError(f"{scope.node.path} is not in a CDK app: no assembly to stage assets in")
    return Path(stage.asset_outdir) / f"asset.{staged_hash}.zip"


def prebuilt_zip_source(scope: Construct, archive: Path, archive_sha256: str) -> s3deploy.ISource:
    """A zip built before synth (tools/pack_studio_tools.py), as a BucketDeployment source, which extracts it into
    the destination prefix. A file asset hashed by the zip's sha256, which the caller has checked
    (AssetHashType.CUSTOM): CDK neither fingerprints nor walks anything.

    CDK stages a file asset by copying it into the cloud assembly, unless a file of the staged name is already there
    (as after an earlier synth into the same cdk.out). The zip is 115 MB and the tests synthesize dozens of
    assemblies, so it is hard-linked there first: the same bytes, none written. The packer replaces the zip by
    rename, never in place, so a link keeps the bytes this synth checked. Where no link can be made (cdk.out on
    another file system) CDK copies, as for any asset; keep_link_only_if_staged removes a link CDK did not use."""
    staged = _staged_zip(scope, archive_sha256)
    try:
        staged.parent.mkdir(parents=True, exist_ok=True)
        link_keeping_digest(archive, staged)
    except OSError:  # already staged (same name: same hash, same bytes), or another file system: CDK copies
        pass
    return s3deploy.Source.asset(str(archive), asset_hash=archive_sha256, asset_hash_type=cdk.AssetHashType.CUSTOM)


def keep_link_only_if_staged(deployment: s3deploy.BucketDeployment, archive: Path, archive_sha256: str) -> None:
    """After the deployment has bound its sources: if CDK staged the zip under another name (a future aws-cdk-lib
    naming assets differently) or staged nothing (asset staging off), the link prebuilt_zip_source made is unused;
    remove it."""
    staged = _staged_zip(deployment, archive_sha256)
    used = {Path(child.asset_path).name for child in deployment.node.children if isinstance(child, s3_assets.Asset)}
    if staged.name not in used and staged.exists() and staged.stat().st_nlink > 1:
        unlink_keeping_digest(staged, archive)


class LifecycleScripts(Construct):
    """The scripts travel as a CDK asset (never fetched from GitHub at deploy time); parameters carry tokens.
    `source_dir=None` ships only `extra_sources` (the Studio tools: prebuilt_zip_source, constructs/studio_tools.py).
    `record_name`: with parameters, the lifecycle record (a secret of that name) the nodes check both against; the
    parameters then name it (`lifecycle_record`)."""

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        bucket: s3.IBucket,
        prefix: str,
        upload_role_name: str,
        parameters: NodeParameters | None = None,
        source_dir: Path | None = HYPERPOD_SCRIPTS_DIR,
        extra_sources: Sequence[s3deploy.ISource] = (),
        record_name: str | None = None,
    ) -> None:
        super().__init__(scope, id_)
        sources = []
        if source_dir is not None:
            reserved = sorted(str(p.relative_to(source_dir)) for p in source_dir.rglob(HYPERPOD_RESERVED_FILE))
            if reserved:
                raise ValueError(
                    f"{source_dir}: {', '.join(reserved)} would make HyperPod refuse the API-driven "
                    "Slurm configuration; the platform's own parameters go in " + PARAMETERS_FILE
                )
            # constructs/studio_lifecycle_configs.py digests exactly what this ships: keep the exclusions in step.
            sources.append(s3deploy.Source.asset(str(source_dir), exclude=["**/__pycache__", "*.md"]))
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.record: secretsmanager.CfnSecret | None = None
        if parameters is not None and record_name is not None and source_dir is not None:
            parameters = parameters.model_copy(
                update={"lifecycle_record": LifecycleRecordRef(secret_name=record_name, region=REGION)}
            )
            self.record = self._record(record_name, shipped_digests([source_dir]), parameters.model_dump())
        if parameters is not None:
            sources.append(s3deploy.Source.json_data(PARAMETERS_FILE, parameters.model_dump()))
        sources.extend(extra_sources)
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Upload",
            destination_bucket=bucket,
            destination_key_prefix=self.prefix + "/",
            sources=sources,
            prune=True,
            retain_on_delete=True,
        )
        self.source_s3_uri = f"s3://{bucket.bucket_name}/{self.prefix}/"
        # aws-cdk-lib's singleton upload function (one per stack) gets a name the lifecycle bucket policy allows.
        # jsii types default_child as IConstruct | None; a Role's is its CfnRole.
        role = cast(iam.CfnRole, self.deployment.handler_role.node.default_child)
        role.add_property_override("RoleName", upload_role_name)
        self.upload_role_name = upload_role_name
        if self.record is not None:
            # The record changes first: a node's users sync that sees the new parameters finds them recorded.
            self.deployment.node.add_dependency(self.record)
        self._acknowledge_deployment_handler()

    def _record(self, name: str, scripts: Mapping[str, str], parameters: dict[str, Any]) -> secretsmanager.CfnSecret:
        """The lifecycle record: what this deploy ships, in a secret only CloudFormation's execution role may change
        (docs/security.md, "The lifecycle record"). Nodes check their scripts and parameters against it before running
        them as root (lifecycle/hyperpod/lib/verify.sh)."""
        stack = cdk.Stack.of(self)
        record = record_value(scripts, parameters)
        secret = secretsmanager.CfnSecret(
            self,
            "Record",
            name=name,
            secret_string=stack.to_json_string(record),
            description=f"{name}: sha256 of the lifecycle scripts and the parameters of this deploy; nodes refuse "
            "anything else (written by CloudFormation only)",
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "the value is the deploy's record of the lifecycle scripts' digests and parameters, written by "
            "CloudFormation at every deploy; it is no credential, and a rotation would only break it",
        )
        writer = cloudformation_execution_role_arn(stack)
        secretsmanager.CfnResourcePolicy(
            self,
            "RecordPolicy",
            secret_id=secret.ref,
            block_public_policy=True,
            resource_policy=iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        sid="OnlyCloudFormationChangesTheRecord",
                        effect=iam.Effect.DENY,
                        principals=[iam.AnyPrincipal()],
                        not_actions=list(RECORD_READ_ACTIONS),
                        resources=["*"],
                        conditions={"ArnNotEquals": {"aws:PrincipalArn": writer}},
                    )
                ]
            ).to_json(),
        )
        return secret

    def grant_read_record(self, role: iam.IRole) -> None:
        """A node role reads its cluster's record, and nothing else of Secrets Manager through this grant."""
        if self.record is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="ReadLifecycleRecord", actions=["secretsmanager:GetSecretValue"], resources=[self.record.ref]
                )
            )

    def _acknowledge_deployment_handler(self) -> None:
        # The handler is aws-cdk-lib's BucketDeployment singleton; its role and runtime are not ours to shape.
        handler = self.deployment.handler_role.node.scope
        if handler is None:  # only the app, the tree's root, has no scope
            raise ValueError("BucketDeployment's handler role is the root of the construct tree")
        stack = cdk.Stack.of(self)
        assets_bucket = assets_bucket_name(stack)
        acknowledge_rules(
            handler,
            [
                Rule(
                    "AwsSolutions-IAM4",
                    "BucketDeployment's upload function logs to CloudWatch through the AWS-managed basic execution "
                    "policy that aws-cdk-lib attaches",
                    findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
                ),
                Rule(
                    "AwsSolutions-IAM5",
                    "BucketDeployment's upload function copies the lifecycle-script asset from the CDK assets bucket "
                    "into this cluster's lifecycle bucket; aws-cdk-lib grants object-level wildcards on exactly those "
                    "two buckets",
                    findings=[
                        "Action::s3:GetBucket*",
                        "Action::s3:GetObject*",
                        "Action::s3:List*",
                        "Action::s3:Abort*",
                        "Action::s3:DeleteObject*",
                        f"Resource::arn:{stack.partition}:s3:::{assets_bucket}/*",
                        f"Resource::{self.bucket.arn_for_objects('*')}",
                    ],
                ),
                Rule(
                    "AwsSolutions-L1",
                    "BucketDeployment's runtime is pinned by aws-cdk-lib together with its bundled AWS CLI layer",
                ),
            ],
        )
