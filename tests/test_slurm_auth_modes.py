"""Who can obtain what, per mode, read from the synthesized templates.

Per-user mode (`shared_fsx: false`, config/examples/containers-per-user.yaml): the controller writes an auth/jwt signing
key that only the token issuer may read; each Studio profile runs as its own role, which can read only its own token
secret, and each token secret denies every other principal. The login secret carries no munge key (the controller is
told `slurm.auth: jwt`; tests/e2e/test_slurm_jwt.py shows what that value does on real Slurm).
Shared mode (default.yaml): today's trust model, unchanged: one Studio role, munge key in the login secret.
"""

from __future__ import annotations

import json

from support.paths import ROOT
from support.iam import actions, statements_of
from support.intrinsics import flatten
from support.template import resources

PER_USER, SHARED = "containers", "default"  # cluster names course-cluster and ml-cluster


def _user_stacks(s) -> list[dict]:
    return [t for t in s.nested.values() if resources(t, "AWS::SageMaker::UserProfile")]


def test_per_user_mode_tells_the_controller_jwt_and_names_the_key_secret(synth):
    s = synth(PER_USER)
    cluster = s.platform.cluster
    assert cluster.slurm_auth == "jwt"
    params = cluster.node_parameters.slurm
    assert params.auth == "jwt" and params.jwt_key_secret_arn == cluster.jwt_key.secret_arn
    shared = synth(SHARED)
    assert shared.platform.cluster.slurm_auth == "munge" and shared.platform.cluster.jwt_key is None
    assert shared.platform.cluster.node_parameters.slurm.auth == "munge"


def test_the_signing_key_is_written_by_the_cluster_and_read_only_by_the_issuer(synth):
    t = synth(PER_USER).templates["cluster"]
    res = t["Resources"]
    (secret_id,) = [k for k in resources(t, "AWS::SecretsManager::Secret") if k.startswith("SlurmJwtKeySecret")]
    (key_id,) = [k for k in resources(t, "AWS::KMS::Key") if k.startswith("SlurmJwtKeyKey")]
    (role_id,) = [k for k in resources(t, "AWS::IAM::Role") if k.startswith("HyperPodExecutionRole")]
    assert res[secret_id]["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    (policy,) = [
        r["Properties"]["ResourcePolicy"]
        for r in resources(t, "AWS::SecretsManager::ResourcePolicy").values()
        if r["Properties"]["SecretId"] == {"Ref": secret_id}
    ]
    deny = {s["Sid"]: s for s in policy["Statement"]}
    issuer = "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/course-cluster-slurm-tokens-<AWS::Region>"
    assert flatten(deny["OnlyTheTokenIssuerReads"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]) == issuer
    assert deny["OnlyTheTokenIssuerReads"]["Action"] == "secretsmanager:GetSecretValue"
    writers = deny["OnlyTheControllerWrites"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    assert writers[0] == {"Fn::GetAtt": [role_id, "Arn"]} and "cfn-exec-role" in flatten(writers[1])
    # The cluster's own role may write the key but never read it back.
    statements = [
        st for p in resources(t, "AWS::IAM::Policy").values() for st in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    on_key = [st for st in statements if st["Resource"] == {"Ref": secret_id}]
    assert [st["Action"] for st in on_key] == ["secretsmanager:PutSecretValue"]
    key_policy = {s.get("Sid"): s for s in res[key_id]["Properties"]["KeyPolicy"]["Statement"]}
    assert key_policy["TokenIssuerDecryptsTheJwtKey"]["Action"] == "kms:Decrypt"
    assert flatten(key_policy["TokenIssuerDecryptsTheJwtKey"]["Condition"]["ArnEquals"]["aws:PrincipalArn"]) == issuer
    assert "kms:Decrypt" not in key_policy["ClusterEncryptsTheJwtKey"]["Action"]
    # And the issuer's role in the Studio stack really has that name.
    studio = synth(PER_USER).templates["studio"]
    names = [flatten(r["Properties"].get("RoleName", "")) for r in resources(studio, "AWS::IAM::Role").values()]
    assert issuer.split("role/")[1] in names
    # The issuer names the key secret by its fixed name, not by a reference to the cluster stack (which Studio does
    # not wait for): reading it and decrypting through Secrets Manager only under that secret's ARN.
    assert res[secret_id]["Properties"]["Name"] == "course-cluster/slurm-jwt-key"
    issuer_statements = {
        st["Sid"]: st
        for p in resources(studio, "AWS::IAM::Policy").values()
        for st in p["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid")
    }
    pattern = "arn:aws:secretsmanager:us-west-2:<AWS::AccountId>:secret:course-cluster/slurm-jwt-key-??????"
    assert flatten(issuer_statements["ReadSigningKey"]["Resource"]) == pattern
    decrypt = issuer_statements["DecryptSigningKey"]
    assert flatten(decrypt["Condition"]["StringLike"]["kms:EncryptionContext:SecretARN"]) == pattern
    # ... and only through Secrets Manager: the key decrypts nothing for the issuer called directly.
    assert decrypt["Action"] == "kms:Decrypt"
    assert (
        flatten(decrypt["Condition"]["StringEquals"]["kms:ViaService"]) == "secretsmanager.<AWS::Region>.amazonaws.com"
    )
    assert "course-cluster-cluster:" not in json.dumps(studio)  # imports none of the cluster stack's exports


def test_login_secret_readers_include_the_per_user_role_path(synth):
    t = synth(PER_USER).templates["slurm-login"]
    (policy,) = [
        r["Properties"]["ResourcePolicy"]
        for r in resources(t, "AWS::SecretsManager::ResourcePolicy").values()
        if "OnlyTheClusterAndStudioRead" in json.dumps(r)
    ]
    deny = {s["Sid"]: s for s in policy["Statement"]}
    readers = [
        flatten(r) for r in deny["OnlyTheClusterAndStudioRead"]["Condition"]["ArnNotLike"]["aws:PrincipalArn"][1:]
    ]
    assert readers == [
        "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/course-cluster-studio-execution-<AWS::Region>",
        "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/hyperpod/course-cluster-<AWS::Region>/studio-users/*",
    ]


def test_each_profile_runs_as_its_own_role_that_reads_only_its_own_token(synth):
    s = synth(PER_USER)
    names = {u.name for u in s.config.users}
    seen = set()
    for t in _user_stacks(s):
        secrets = resources(t, "AWS::SecretsManager::Secret")
        roles = resources(t, "AWS::IAM::Role")
        policies = resources(t, "AWS::SecretsManager::ResourcePolicy")
        profiles = resources(t, "AWS::SageMaker::UserProfile")
        secret_of = {r["Properties"]["Name"].rsplit("/", 1)[1]: lid for lid, r in secrets.items()}
        for profile in profiles.values():
            user = profile["Properties"]["UserProfileName"]
            seen.add(user)
            assert secrets[secret_of[user]]["Properties"]["Name"] == f"course-cluster/slurm-token/{user}"
            role_ref = profile["Properties"]["UserSettings"]["ExecutionRole"]
            role_id = role_ref["Fn::GetAtt"][0]
            role = roles[role_id]["Properties"]
            assert flatten(role["Path"]) == "/hyperpod/course-cluster-<AWS::Region>/studio-users/"
            # Identity side: the only statement naming a secret is on this user's own secret, and the only decrypt
            # is of that secret, through Secrets Manager.
            (inline,) = role["Policies"]
            statement, decrypt = inline["PolicyDocument"]["Statement"]
            assert statement["Resource"] == {"Ref": secret_of[user]}
            assert "secretsmanager:GetSecretValue" in statement["Action"]
            assert decrypt["Action"] == "kms:Decrypt" and decrypt["Condition"] == {
                "StringEquals": {
                    "kms:ViaService": {"Fn::Join": ["", ["secretsmanager.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]},
                    "kms:EncryptionContext:SecretARN": {"Ref": secret_of[user]},
                }
            }
            # The secret is encrypted with the issuer's customer managed key, the one the decrypt names.
            assert secrets[secret_of[user]]["Properties"]["KmsKeyId"] == decrypt["Resource"]
            assert t["Parameters"][decrypt["Resource"]["Ref"]]
            # Resource side: every other principal is denied reading it, whatever its IAM policies say.
            (policy,) = [
                p["Properties"] for p in policies.values() if p["Properties"]["SecretId"] == {"Ref": secret_of[user]}
            ]
            deny = {st["Sid"]: st for st in policy["ResourcePolicy"]["Statement"]}
            assert deny["OnlyTheUserReads"]["Effect"] == "Deny" and deny["OnlyTheUserReads"]["Principal"] == "*"
            assert deny["OnlyTheUserReads"]["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": role_ref}}
            writers = deny["OnlyTheIssuerWrites"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
            assert len(writers) == 2 and "cfn-exec-role" in json.dumps(writers[1])
        # One schedule per nested stack, carrying exactly its users.
        (rule,) = resources(t, "AWS::Events::Rule").values()
        (target,) = rule["Properties"]["Targets"]
        assert sorted(json.loads(target["Input"])["users"]) == sorted(
            p["Properties"]["UserProfileName"] for p in profiles.values()
        )
        assert rule["Properties"]["ScheduleExpression"] == "rate(15 minutes)"
    assert seen == names


def test_per_user_roles_share_exactly_the_shared_roles_app_permissions(synth):
    t = synth(PER_USER).templates["studio"]
    (managed,) = resources(t, "AWS::IAM::ManagedPolicy").values()
    shared = [
        p
        for p in resources(t, "AWS::IAM::Policy").values()
        if any(r["Ref"].startswith("ExecutionRole") for r in p["Properties"]["Roles"])
    ]
    (shared,) = shared
    assert managed["Properties"]["PolicyDocument"] == shared["Properties"]["PolicyDocument"]
    assert "secretsmanager:PutSecretValue" not in json.dumps(managed)


def test_issuer_function_and_lcc_environment(synth):
    t = synth(PER_USER).templates["studio"]
    (fn,) = [
        f for f in resources(t, "AWS::Lambda::Function").values() if f["Properties"].get("Handler") == "issuer.handler"
    ]
    env = fn["Properties"]["Environment"]["Variables"]
    assert env["TOKEN_SECRET_PREFIX"] == "course-cluster/slurm-token/" and env["TOKEN_LIFETIME"] == "3600"
    # The names config validation refuses are exactly the ones the issuer refuses: one list, the committed facts.
    facts = json.loads((ROOT / "config" / "facts" / "reserved-users.json").read_text())
    assert env["RESERVED_USERS"].split(",") == sorted(facts["names"])
    assert env["RESERVED_USER_PREFIXES"].split(",") == list(facts["prefixes"])
    assert {"root", "slurm", "ubuntu"} <= set(env["RESERVED_USERS"].split(","))
    lcc = json.dumps(resources(t, "AWS::SageMaker::StudioLifecycleConfig"))
    assert "SLURM_TOKEN_SECRET_PREFIX" in lcc and "course-cluster/slurm-token/" in lcc


def test_shared_mode_keeps_one_role_and_no_tokens(synth):
    s = synth(SHARED)
    studio = s.templates["studio"]
    assert not [
        f
        for f in resources(studio, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "issuer.handler"
    ]
    assert not resources(studio, "AWS::IAM::ManagedPolicy")
    for t in _user_stacks(s):
        assert not resources(t, "AWS::SecretsManager::Secret") and not resources(t, "AWS::IAM::Role")
        for profile in resources(t, "AWS::SageMaker::UserProfile").values():
            assert "ExecutionRole" not in profile["Properties"]["UserSettings"]
    assert "SLURM_TOKEN_SECRET_PREFIX" not in json.dumps(resources(studio, "AWS::SageMaker::StudioLifecycleConfig"))
    # No signing key secret in the cluster stack; the login secret is the slurm-login stack's only resource secret.
    # (The cluster stack's one secret is the lifecycle record: tests/test_lifecycle_record.py.)
    assert [
        r["Properties"]["Name"] for r in resources(s.templates["cluster"], "AWS::SecretsManager::Secret").values()
    ] == ["hyperpod-platform/ml-cluster/lifecycle-record"]
    assert len(resources(s.templates["slurm-login"], "AWS::SecretsManager::Secret")) == 1


def test_only_the_controller_group_runs_as_the_role_that_writes_what_studio_trusts(synth):
    """Both modes: the controller group runs as the fixed-name role the login secret (and, per-user, the signing
    key) name as writer; login and compute groups run as another role with no Secrets Manager or KMS action but reading
    the lifecycle record."""
    for variant, name in ((SHARED, "ml-cluster"), (PER_USER, "course-cluster")):
        s = synth(variant)
        t = s.templates["cluster"]
        roles = resources(t, "AWS::IAM::Role")
        (controller_id,) = [k for k in roles if k.startswith("HyperPodExecutionRole")]
        (worker_id,) = [k for k in roles if k.startswith("HyperPodWorkerRole")]
        assert flatten(roles[controller_id]["Properties"]["RoleName"]) == f"{name}-cluster-execution-<AWS::Region>"
        assert "RoleName" not in roles[worker_id]["Properties"]
        (cluster,) = resources(t, "AWS::SageMaker::Cluster").values()
        by_type = {}
        for group in cluster["Properties"]["InstanceGroups"]:
            by_type.setdefault(group["SlurmConfig"]["NodeType"], set()).add(group["ExecutionRole"]["Fn::GetAtt"][0])
        assert by_type.pop("Controller") == {controller_id}, variant
        assert by_type and all(ids == {worker_id} for ids in by_type.values()), (variant, by_type)

        login_secret = s.platform.slurm_login.secret
        login_arn = s.platform.cluster.resolve(login_secret.secret_arn)
        worker = statements_of(t, worker_id)
        # Its one Secrets Manager statement reads the lifecycle record (tests/test_lifecycle_record.py), nothing else.
        touching = [st for st in worker if any(a.startswith(("secretsmanager:", "kms:")) for a in actions(st))]
        assert [(st["Sid"], st["Action"]) for st in touching] == [
            ("ReadLifecycleRecord", "secretsmanager:GetSecretValue")
        ]
        assert worker
        assert login_arn not in [st["Resource"] for st in worker]
        controller = statements_of(t, controller_id)
        (publish,) = [st for st in controller if st["Resource"] == login_arn]
        assert "secretsmanager:PutSecretValue" in actions(publish)
        jwt = [st for st in controller if "secretsmanager:PutSecretValue" in actions(st) and st is not publish]
        assert len(jwt) == (1 if variant == PER_USER else 0), variant


def test_secret_and_key_policies_name_only_the_controller_role_as_writer(synth):
    """The slurm-login stack names the writer by the controller role's fixed name (and CloudFormation's role);
    per-user mode's signing key names the controller role by reference. Nothing names the worker role."""
    for variant, name in ((SHARED, "ml-cluster"), (PER_USER, "course-cluster")):
        s = synth(variant)
        login = s.templates["slurm-login"]
        controller = f"arn:<AWS::Partition>:iam::<AWS::AccountId>:role/{name}-cluster-execution-<AWS::Region>"
        (policy,) = [
            r["Properties"]["ResourcePolicy"] for r in resources(login, "AWS::SecretsManager::ResourcePolicy").values()
        ]
        deny = {st["Sid"]: st for st in policy["Statement"]}
        writers = [flatten(w) for w in deny["OnlyTheClusterWrites"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]]
        assert writers[0] == controller and len(writers) == 2 and "cfn-exec-role" in writers[1]
        (key,) = resources(login, "AWS::KMS::Key").values()
        encrypting = [
            st
            for st in key["Properties"]["KeyPolicy"]["Statement"]
            if "kms:Encrypt" in actions(st) or "kms:GenerateDataKey" in actions(st)
        ]
        assert [
            flatten(st["Condition"]["ArnEquals"]["aws:PrincipalArn"])
            for st in encrypting
            if "ArnEquals" in st.get("Condition", {})
        ] == [controller]
        t = s.templates["cluster"]
        (worker_id,) = [k for k in resources(t, "AWS::IAM::Role") if k.startswith("HyperPodWorkerRole")]
        assert worker_id not in json.dumps(
            [
                r
                for r in t["Resources"].values()
                if r["Type"] in ("AWS::SecretsManager::ResourcePolicy", "AWS::KMS::Key")
            ]
        )
        if variant == PER_USER:
            (jwt_policy,) = [
                r["Properties"]["ResourcePolicy"]
                for r in resources(t, "AWS::SecretsManager::ResourcePolicy").values()
                if "OnlyTheControllerWrites" in json.dumps(r)
            ]
            jwt_deny = {st["Sid"]: st for st in jwt_policy["Statement"]}
            jwt_writers = jwt_deny["OnlyTheControllerWrites"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
            (controller_id,) = [k for k in resources(t, "AWS::IAM::Role") if k.startswith("HyperPodExecutionRole")]
            assert jwt_writers[0] == {"Fn::GetAtt": [controller_id, "Arn"]} and len(jwt_writers) == 2
            (jwt_key,) = [r for k, r in resources(t, "AWS::KMS::Key").items() if k.startswith("SlurmJwtKeyKey")]
            (encrypt,) = [
                st
                for st in jwt_key["Properties"]["KeyPolicy"]["Statement"]
                if st.get("Sid") == "ClusterEncryptsTheJwtKey"
            ]
            assert encrypt["Principal"] == {"AWS": {"Fn::GetAtt": [controller_id, "Arn"]}}


def test_token_secrets_use_a_customer_key_the_issuer_may_use_only_for_token_secrets(synth):
    t = synth(PER_USER).templates["studio"]
    (key_id,) = [k for k in resources(t, "AWS::KMS::Key") if k.startswith("SlurmTokenIssuerTokenKey")]
    key = t["Resources"][key_id]
    assert key["Properties"]["EnableKeyRotation"] is True and key["DeletionPolicy"] == "Retain"
    statements = {
        st["Sid"]: st
        for p in resources(t, "AWS::IAM::Policy").values()
        for st in p["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid")
    }
    encrypt = statements["EncryptUserTokens"]
    assert encrypt["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert (
        flatten(encrypt["Condition"]["StringEquals"]["kms:ViaService"]) == "secretsmanager.<AWS::Region>.amazonaws.com"
    )
    assert flatten(encrypt["Condition"]["StringLike"]["kms:EncryptionContext:SecretARN"]) == (
        "arn:aws:secretsmanager:us-west-2:<AWS::AccountId>:secret:course-cluster/slurm-token/*"
    )
    # Every user stack passes exactly this key to its secrets.
    for nested in _user_stacks(synth(PER_USER)):
        for secret in resources(nested, "AWS::SecretsManager::Secret").values():
            assert "KmsKeyId" in secret["Properties"]
