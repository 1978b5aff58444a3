"""Storage stack: the buckets (private, versioned, encrypted with their own keys, retained) and their policies: who
writes the lifecycle scripts, and the data bucket's denies on every prefix that mirrors a private FSx directory."""

import fnmatch
import json
from pathlib import Path

import pytest

from constructs.s3_object_actions import OBJECT_WRITE_ACTIONS
from support.intrinsics import flatten


def _buckets(t):
    return {logical: r for logical, r in t.find_resources("AWS::S3::Bucket").items()}


def test_every_bucket_is_private_versioned_encrypted_and_retained(synth):
    for variant in ("default", "multi_az"):
        buckets = _buckets(synth(variant).template("storage"))
        assert len(buckets) == 3
        for logical, bucket in buckets.items():
            props = bucket["Properties"]
            assert bucket["DeletionPolicy"] == "Retain", logical
            assert props["VersioningConfiguration"] == {"Status": "Enabled"}, logical
            assert props["PublicAccessBlockConfiguration"] == {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }, logical
            assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"], logical
            if not logical.startswith("AccessLogs"):
                assert props["LoggingConfiguration"]["DestinationBucketName"]["Ref"].startswith("AccessLogs")


def test_buckets_deny_plain_http(synth):
    policies = synth("default").template("storage").find_resources("AWS::S3::BucketPolicy")
    assert len(policies) == 3
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        )


def _sse(template, prefix: str) -> dict:
    (bucket,) = [b for k, b in _buckets(template).items() if k.startswith(prefix)]
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    return rule


def _keys(template) -> dict[str, dict]:
    return {k: r for k, r in template.find_resources("AWS::KMS::Key").items()}


@pytest.mark.parametrize("variant", ["default", "multi_az", "eks"])
def test_every_bucket_but_the_access_log_target_is_sse_kms_with_a_customer_key(synth, variant):
    """S3 server access logging cannot deliver to an SSE-KMS bucket, so the log target alone stays SSE-S3; the data
    and lifecycle buckets (and Studio's MLflow artifacts) use customer managed keys by default."""
    s = synth(variant)
    templates = [s.template("storage")] + ([s.template("studio")] if "studio" in s.templates else [])
    seen = 0
    for t in templates:
        keys = _keys(t)
        for logical, bucket in _buckets(t).items():
            (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            sse = rule["ServerSideEncryptionByDefault"]
            if "AccessLogs" in logical:
                assert sse == {"SSEAlgorithm": "AES256"}, logical
                continue
            assert sse["SSEAlgorithm"] == "aws:kms" and rule["BucketKeyEnabled"] is True, logical
            key_id = sse["KMSMasterKeyID"]["Fn::GetAtt"][0]
            assert (
                keys[key_id]["Properties"]["EnableKeyRotation"] is True and keys[key_id]["DeletionPolicy"] == "Retain"
            )
            seen += 1
    assert seen >= 2


def _through_s3(key: dict) -> dict:
    (statement,) = [
        st
        for st in key["Properties"]["KeyPolicy"]["Statement"]
        if st.get("Sid") == "AccountUsesKeyThroughS3ForThisBucket"
    ]
    return statement


@pytest.mark.parametrize(
    "prefix, bucket",
    [
        ("LifecycleBucket", "sagemaker-lc-ml-cluster-<AWS::AccountId>-<AWS::Region>"),
        ("DataBucket", "ml-cluster-data-<AWS::AccountId>-<AWS::Region>"),
    ],
)
def test_bucket_keys_serve_this_account_through_s3_for_their_bucket_only(synth, prefix, bucket):
    t = synth("default").template("storage")
    key_id = _sse(t, prefix)["ServerSideEncryptionByDefault"]["KMSMasterKeyID"]["Fn::GetAtt"][0]
    statement = _through_s3(_keys(t)[key_id])
    assert statement["Principal"] == {"AWS": "*"}
    assert statement["Condition"]["StringEquals"] == {
        "kms:CallerAccount": {"Ref": "AWS::AccountId"},
        "kms:ViaService": "s3.us-west-2.amazonaws.com",
    }
    arns = [flatten(a) for a in statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:s3:arn"]]
    assert arns == [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]


def test_kms_data_bucket_lets_only_fsx_service_linked_role_use_the_key(synth):
    t = synth("default").template("storage")
    key_id = _sse(t, "DataBucket")["ServerSideEncryptionByDefault"]["KMSMasterKeyID"]["Fn::GetAtt"][0]
    key = _keys(t)[key_id]
    assert key_id.startswith("DataKey")
    statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    fsx = statements["FsxDataRepositoryServiceLinkedRole"]
    assert "AWSServiceRoleForFSxS3Access_*" in str(fsx["Condition"]["ArnLike"]["aws:PrincipalArn"])
    assert fsx["Condition"]["StringEquals"]["aws:PrincipalAccount"] == {"Ref": "AWS::AccountId"}
    assert key["Properties"]["EnableKeyRotation"] is True and key["DeletionPolicy"] == "Retain"


def test_data_bucket_sse_s3_is_an_explicit_opt_out():
    from platform_config import PlatformConfig, parse_config

    assert PlatformConfig().storage.data_bucket.encryption == "kms"
    assert (
        parse_config({"storage": {"data_bucket": {"encryption": "s3_managed"}}}).storage.data_bucket.encryption
        == "s3_managed"
    )


def test_lifecycle_bucket_has_a_deterministic_sagemaker_name(synth):
    t = synth("default").template("storage")
    lifecycle = [b for k, b in _buckets(t).items() if k.startswith("LifecycleBucket")][0]
    assert lifecycle["Properties"]["BucketName"] == {
        "Fn::Join": ["", ["sagemaker-lc-ml-cluster-", {"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}]]
    }


def _lifecycle_write_guard(t) -> dict:
    (policy,) = [
        p
        for p in t.find_resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"]["Ref"].startswith("LifecycleBucket")
    ]
    (deny,) = [
        st
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid") == "OnlyDeploymentsWriteLifecycleScripts"
    ]
    return deny


def _upload_role_names(template: dict) -> set[str]:
    return {
        flatten(r["Properties"]["RoleName"])
        for lid, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and lid.startswith("CustomCDKBucketDeployment")
    }


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_only_deploy_roles_and_platform_upload_roles_write_lifecycle_scripts(synth, variant):
    s = synth(variant)
    deny = _lifecycle_write_guard(s.template("storage"))
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert set(deny["Action"]) == set(OBJECT_WRITE_ACTIONS)
    assert "Resource" not in deny and flatten(deny["NotResource"]).endswith("/slurm-client/*")
    writers = {flatten(a) for a in deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]}
    role = "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/"
    # The roles that really upload (cluster and Studio stacks) carry exactly the names the policy allows.
    uploaders = _upload_role_names(s.templates["cluster"]) | _upload_role_names(s.templates["studio"])
    assert len(uploaders) == 2
    assert writers == CDK_DEPLOY_ROLES | {role + n for n in uploaders}
    assert all(len(n.replace("<AWS::Region>", "ap-southeast-5")) <= 64 for n in uploaders)


def _bucket_statement(t, sid: str) -> dict:
    (policy,) = [
        p
        for p in t.find_resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"]["Ref"].startswith("LifecycleBucket")
    ]
    (statement,) = [st for st in policy["Properties"]["PolicyDocument"]["Statement"] if st.get("Sid") == sid]
    return statement


def test_only_the_cluster_writes_slurm_client_bundles_and_nothing_else_in_the_lifecycle_bucket(synth):
    """The controller uploads its Slurm client bundle under slurm-client/: the cluster's execution role (by its fixed
    name) may write there and only there; the scripts' guard above excludes exactly that prefix."""
    s = synth("default")
    t = s.template("storage")
    guard = _bucket_statement(t, "OnlyDeploymentsWriteLifecycleScripts")
    bundles = _bucket_statement(t, "OnlyTheClusterWritesSlurmClientBundles")
    assert bundles["Effect"] == "Deny" and bundles["Principal"] == {"AWS": "*"}
    assert set(bundles["Action"]) == set(guard["Action"]) == set(OBJECT_WRITE_ACTIONS)
    assert flatten(bundles["Resource"]) == flatten(guard["NotResource"])
    assert flatten(bundles["Resource"]) == "<LifecycleBucket0668F9AE.Arn>/slurm-client/*"
    role = "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/"
    allowed = {flatten(a) for a in bundles["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]}
    cluster_role = flatten(
        s.templates["cluster"]["Resources"][
            next(
                k
                for k, r in s.templates["cluster"]["Resources"].items()
                if r["Type"] == "AWS::IAM::Role" and k.startswith("HyperPodExecutionRole")
            )
        ]["Properties"]["RoleName"]
    )
    assert allowed == CDK_DEPLOY_ROLES | {role + cluster_role}
    # ... and the cluster's role is none of the scripts' writers.
    assert role + cluster_role not in {flatten(a) for a in guard["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]}


CDK_DEPLOY_ROLES = {
    "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/cdk-hnb659fds-cfn-exec-role-<AWS::AccountId>-<AWS::Region>",
    "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/cdk-hnb659fds-deploy-role-<AWS::AccountId>-<AWS::Region>",
}


def _condition_lets_through(condition: dict, principal_arn: str) -> bool:
    """IAM's evaluation of the deny's one condition for a principal (Arn*Like: * and ? wildcards; Arn*Equals:
    exact), with the pseudo parameters rendered as <...> on both sides: True when the deny does NOT apply."""
    ((operator, values),) = condition.items()
    patterns = [flatten(v) for v in values["aws:PrincipalArn"]]
    if operator == "ArnNotLike":
        return any(fnmatch.fnmatchcase(principal_arn, p) for p in patterns)
    assert operator == "ArnNotEquals", operator
    return principal_arn in patterns


def test_an_account_principal_cannot_rewrite_the_lifecycle_scripts_by_naming_a_role_like_cdk_or_replicating(synth):
    """Attack as an account principal: a role the attacker creates and names like a CDK bootstrap role, and a
    replication rule writing into the bucket (s3:ReplicateObject), must both meet the deny."""
    deny = _lifecycle_write_guard(synth("default").template("storage"))
    role = "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/"
    for impostor in (
        f"{role}cdk-hnb659fds-attacker-role-<AWS::AccountId>-<AWS::Region>",
        f"{role}cdk-hnb659fds-cfn-exec-role-<AWS::AccountId>-<AWS::Region>-copy",
        f"{role}team/cdk-hnb659fds-deploy-role-<AWS::AccountId>-<AWS::Region>",
    ):
        assert not _condition_lets_through(deny["Condition"], impostor), impostor
    for real in CDK_DEPLOY_ROLES:
        assert _condition_lets_through(deny["Condition"], real)
    for action in (
        "s3:PutObject",
        "s3:DeleteObjectVersion",
        "s3:ReplicateObject",
        "s3:ReplicateDelete",
        "s3:ReplicateTags",
        "s3:PutObjectAcl",
        "s3:RestoreObject",
    ):
        assert any(fnmatch.fnmatchcase(action, pattern) for pattern in deny["Action"]), action


def _partition_guard(t) -> list[dict]:
    (policy,) = [
        p
        for p in t.find_resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"]["Ref"].startswith("DataBucket")
    ]
    return [
        st
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid") == "OnlyFsxAndPartitionHandlersTouchStudioPartitions"
    ]


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_only_fsx_and_the_partition_handlers_touch_the_studio_partitions_prefix(synth, variant):
    s = synth(variant)
    (deny,) = _partition_guard(s.template("storage"))
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    # Not only GetObject/PutObject/DeleteObject: by version id, ACL, tags, attributes, replication too.
    for action in ("s3:GetObjectVersion", "s3:DeleteObjectVersion", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert any(fnmatch.fnmatchcase(action, pattern) for pattern in deny["Action"]), action
    # <s3_prefix><partition_root>/ exactly as the handlers write markers (constructs/fsx_partitions.py): default
    # config has s3_prefix "" and partition_root "studio".
    assert flatten(deny["Resource"]) == "<DataBucketE3889A50.Arn>/studio/*"
    allowed = {flatten(a) for a in deny["Condition"]["ArnNotLike"]["aws:PrincipalArn"]}
    role = "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/"
    fs = next(iter(s.template("storage").find_resources("AWS::FSx::FileSystem")))
    slr = f"{role}aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_<{fs}>"
    # Every role a partition handler really runs as (Studio stack) carries a name the policy allows, and only those.
    studio = s.templates["studio"]["Resources"]
    handler_roles = {
        flatten(studio[fn["Properties"]["Role"]["Fn::GetAtt"][0]]["Properties"].get("RoleName", "<none>"))
        for lid, fn in studio.items()
        if fn["Type"] == "AWS::Lambda::Function"
        and lid.startswith("Partitions")
        and fn["Properties"]["Handler"].startswith(("custom_resource.", "profile_events."))
    }
    assert "<none>" not in handler_roles and len(handler_roles) == 3
    assert allowed == {slr} | {role + n for n in handler_roles}
    assert all(len(n.replace("<AWS::Region>", "ap-southeast-5")) <= 64 for n in handler_roles)


def test_studio_partitions_deny_covers_every_s3_object_action():
    """Every action the Service Authorization Reference lists on S3's `object` resource type (as cfn-lint 1.58 bundles
    it) matches one of the deny's patterns: no version-id read, tag, ACL or replication path around it."""
    import cfnlint
    from constructs.s3_object_actions import OBJECT_ACTIONS

    spec = json.loads((Path(cfnlint.__file__).parent / "data" / "AdditionalSpecs" / "Policies.json").read_text())
    object_actions = sorted(a for a, v in spec["s3"]["Actions"].items() if "object" in v.get("Resources", []))
    assert {
        "getobjectversion",
        "deleteobjectversion",
        "getobjectversionacl",
        "getobjectversiontagging",
        "getobjectversionattributes",
        "getobjectversionforreplication",
    } <= set(object_actions)
    uncovered = [
        a for a in object_actions if not any(fnmatch.fnmatchcase("s3:" + a, p.lower()) for p in OBJECT_ACTIONS)
    ]
    assert uncovered == []


# ------------------------------------------------------------------------------------ private directories through S3
def _data_bucket_denies(t) -> dict[str, dict]:
    (policy,) = [
        p
        for p in t.find_resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"]["Ref"].startswith("DataBucket")
    ]
    return {
        st["Sid"]: st
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Effect") == "Deny" and st.get("Sid", "").startswith("Only")
    }


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_every_s3_prefix_that_mirrors_a_private_fsx_directory_is_denied_to_all_but_fsx(synth, variant):
    """Each private directory root the platform makes on FSx (private_fsx_roots, which
    tests/lifecycle/private_dirs.bats checks against what the node scripts make) that the association mirrors has a
    deny on its prefix, and no other prefix has one: a user's checkpoints are as closed in S3 as on FSx."""
    from platform_config.storage import exported_prefix, private_fsx_roots

    s = synth(variant)
    storage = s.config.storage
    partition_root = s.config.studio.partition_root if s.config.studio.enabled else None
    expected = {
        p
        for p in (
            exported_prefix(storage.lustre.data_repository, r) for r in private_fsx_roots(storage, partition_root)
        )
        if p is not None
    }
    assert "checkpoints/" in expected
    denies = _data_bucket_denies(s.template("storage"))
    denied = set()
    for st in denies.values():
        for resource in st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]:
            text = flatten(resource)
            assert text.startswith("<DataBucketE3889A50.Arn>/") and text.endswith("*")
            denied.add(text[len("<DataBucketE3889A50.Arn>/") : -1])
    assert denied == expected
    private = denies["OnlyFsxTouchesPrivateDirectories"]
    assert private["Principal"] == {"AWS": "*"} and set(private["Action"]) == set(
        denies["OnlyFsxAndPartitionHandlersTouchStudioPartitions"]["Action"]
    )
    fs = next(iter(s.template("storage").find_resources("AWS::FSx::FileSystem")))
    assert {flatten(a) for a in private["Condition"]["ArnNotLike"]["aws:PrincipalArn"]} == {
        "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        f"AWSServiceRoleForFSxS3Access_<{fs}>"
    }


def test_a_whole_file_system_association_mirrors_homes_and_enroot_caches_too():
    from platform_config.storage import DataRepository, exported_prefix

    whole = DataRepository.model_validate({"file_system_path": "/", "s3_prefix": "fsx/"})
    assert exported_prefix(whole, "/home") == "fsx/home/"
    assert exported_prefix(whole, "/.hyperpod-platform/enroot-cache") == "fsx/.hyperpod-platform/enroot-cache/"
    data = DataRepository.model_validate({"file_system_path": "/data"})
    assert exported_prefix(data, "/data/checkpoints") == "checkpoints/"
    assert exported_prefix(data, "/home") is None and exported_prefix(data, "/database/x") is None
