"""Studio stack: the domain as the cluster's front door, SharedFSx both ways, partitions, network, IAM, MLflow."""

import json

import pytest

from support import iam_facts
from support.paths import ROOT

from support.iam import listed, statements_of
from support.intrinsics import flatten
from support.template import only, resources


def test_domain_is_vpc_only_iam_with_key_and_default_lifecycle_configs(synth):
    s = synth("default")
    domain = only(s.templates["studio"], "AWS::SageMaker::Domain")["Properties"]
    assert domain["AuthMode"] == "IAM" and domain["AppNetworkAccessType"] == "VpcOnly"
    assert "StudioKey" in json.dumps(domain["KmsKeyId"])
    # Studio's own subnet: the cluster's subnets keep root on FSx (root squash exemption), Studio's addresses do not.
    assert "VpcStudioSubnet" in json.dumps(domain["SubnetIds"]) and "Vpc" in json.dumps(domain["VpcId"])
    assert "Private" not in json.dumps(domain["SubnetIds"])
    settings = domain["DefaultUserSettings"]
    for app, lcc in (
        ("JupyterLabAppSettings", "LifecycleConfigsJupyterLab"),
        ("CodeEditorAppSettings", "LifecycleConfigsCodeEditor"),
    ):
        assert lcc in json.dumps(settings[app]["DefaultResourceSpec"]["LifecycleConfigArn"]), app
        assert lcc in json.dumps(settings[app]["LifecycleConfigArns"]), app
        idle = settings[app]["AppLifecycleManagement"]["IdleSettings"]
        assert idle["LifecycleManagement"] == "ENABLED" and idle["IdleTimeoutInMinutes"] == 120
    configs = resources(s.templates["studio"], "AWS::SageMaker::StudioLifecycleConfig")
    assert sorted(c["Properties"]["StudioLifecycleConfigAppType"] for c in configs.values()) == [
        "CodeEditor",
        "JupyterLab",
    ]


def test_lifecycle_config_bootstraps_the_shipped_slurm_login_script(synth):
    s = synth("default")
    t = s.templates["studio"]
    configs = resources(t, "AWS::SageMaker::StudioLifecycleConfig")
    content = next(iter(configs.values()))["Properties"]["StudioLifecycleConfigContent"]
    body, variables = content["Fn::Base64"]["Fn::Sub"]
    assert "export SLURM_LOGIN_SECRET_ARN='${SLURM_LOGIN_SECRET_ARN}'" in body and "SlurmLoginSecret" in json.dumps(
        variables
    )
    assert "aws s3 cp --quiet --recursive '${Source}'" in body
    assert "/studio/ml-cluster/" in json.dumps(variables["Source"])
    assert 'exec bash "${!scripts}/slurm_login_node.sh"' in body
    prefixes = sorted(
        r["Properties"]["DestinationBucketKeyPrefix"] for r in resources(t, "Custom::CDKBucketDeployment").values()
    )
    assert prefixes == ["studio-tools/ml-cluster/", "studio/ml-cluster/"]  # the tools: test_studio_tools_config.py
    assert sorted(p.name for p in s.out_dir.glob("asset.*/slurm_login_node.sh")) == ["slurm_login_node.sh"]


def test_shared_fsx_parameter_defaults_to_the_config(synth):
    for variant, default in (("default", "True"), ("containers", "False")):
        param = synth(variant).templates["studio"]["Parameters"]["SharedFSx"]
        assert param["AllowedValues"] == ["True", "False"] and param["Default"] == default, variant


def test_shared_mode_mounts_one_shared_partition_for_everyone(synth):
    t = synth("default").templates["studio"]
    assert t["Conditions"]["IsSharedFSx"] == {"Fn::Equals": [{"Ref": "SharedFSx"}, "True"]}
    configs = only(t, "AWS::SageMaker::Domain")["Properties"]["DefaultUserSettings"]["CustomFileSystemConfigs"]
    if_true, if_false = configs["Fn::If"][1:]
    assert configs["Fn::If"][0] == "IsSharedFSx" and if_false == {"Ref": "AWS::NoValue"}
    # The partition's Path attribute: the domain is created (or updated) only once the directory exists.
    (shared_id,) = resources(t, "Custom::FsxPartition")
    assert if_true[0]["FSxLustreFileSystemConfig"]["FileSystemPath"] == {"Fn::GetAtt": [shared_id, "Path"]}
    shared = [r for r in resources(t, "Custom::FsxPartition").values()]
    assert len(shared) == 1 and shared[0]["Condition"] == "IsSharedFSx"
    props = shared[0]["Properties"]
    assert (props["RelativePath"], props["Uid"], props["Gid"], props["Mode"]) == ("studio/shared", "0", "2000", "2775")


def test_per_user_mode_gives_each_profile_a_private_partition(synth):
    s = synth("containers")
    (nested,) = s.nested.values()
    assert nested["Conditions"]["IsPerUserFSx"] == {"Fn::Not": [{"Condition": "IsSharedFSx"}]}
    profiles = {
        r["Properties"]["UserProfileName"]: r["Properties"]
        for r in resources(nested, "AWS::SageMaker::UserProfile").values()
    }
    assert sorted(profiles) == ["alice", "bob", "carol", "ta"]
    alice = profiles["alice"]["UserSettings"]
    assert alice["CustomPosixUserConfig"]["Uid"] == 10001
    assert alice["CustomPosixUserConfig"]["Gid"] == {"Fn::If": ["IsSharedFSx", 2000, 10001]}
    partition_ids = {
        r["Properties"]["RelativePath"]: logical_id
        for logical_id, r in resources(nested, "Custom::FsxPartition").items()
    }
    fs_if = alice["CustomFileSystemConfigs"]["Fn::If"]
    # The profile mounts the partition's Path attribute, so it is created only after its directory exists.
    assert fs_if[0] == "IsPerUserFSx" and fs_if[1][0]["FSxLustreFileSystemConfig"]["FileSystemPath"] == {
        "Fn::GetAtt": [partition_ids["studio/alice"], "Path"]
    }
    partitions = {r["Properties"]["RelativePath"]: r for r in resources(nested, "Custom::FsxPartition").values()}
    assert sorted(partitions) == ["studio/alice", "studio/bob", "studio/carol", "studio/ta"]
    for partition in partitions.values():
        assert partition["Condition"] == "IsPerUserFSx" and partition["Properties"]["Mode"] == "0700"
    assert partitions["studio/bob"]["Properties"]["Uid"] == "10002"


def test_partitions_are_created_a_few_at_a_time(synth):
    from constructs.fsx_partitions import MAX_IMPORTS_IN_FLIGHT

    s = synth("large")
    from stacks.studio_stack import StudioStack

    nested = next(
        t
        for t in s.nested.values()
        if len(resources(t, "Custom::FsxPartition")) == StudioStack.USERS_PER_NESTED_STACK_WITH_TOKENS
    )
    partitions = resources(nested, "Custom::FsxPartition")
    # Partitions nothing waits on start at once: exactly MAX_IMPORTS_IN_FLIGHT lanes.
    heads = [i for i, r in partitions.items() if not [d for d in r.get("DependsOn", []) if d in partitions]]
    assert len(heads) == MAX_IMPORTS_IN_FLIGHT
    functions = [
        f
        for f in resources(s.templates["studio"], "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler", "").startswith(("custom_resource.", "profile_events."))
    ]
    assert len(functions) == 3
    for fn in functions:
        assert fn["Properties"]["Environment"]["Variables"]["MAX_IMPORTS_IN_FLIGHT"] == str(MAX_IMPORTS_IN_FLIGHT)


def test_nested_user_stacks_receive_the_parent_parameter(synth):
    t = synth("containers").templates["studio"]
    (stack,) = resources(t, "AWS::CloudFormation::Stack").values()
    assert stack["Properties"]["Parameters"]["SharedFSx"] == {"Ref": "SharedFSx"}


# Per-user mode on Slurm: what each user is in a nested stack, by logical id. A changed id, or a create-only property
# that reads differently (UserProfile DomainId, Secret Name, Role Path), replaces a profile, a token secret or a role
# on a running platform.
PER_USER_RESOURCES = {
    "SlurmToken": "AWS::SecretsManager::Secret",
    "ExecutionRole": "AWS::IAM::Role",
    "SlurmTokenPolicy": "AWS::SecretsManager::ResourcePolicy",
    "Partition": "Custom::FsxPartition",
    "Profile": "AWS::SageMaker::UserProfile",
}
# The nested stack's parameters under the names CDK generated for them before constructs/nested_template.py passed
# them explicitly (deployed nested stacks keep them), with what the parent passes. The file system's id is new: CDK
# referred to the storage stack's output from the nested stack directly; the parent now passes the same value, which
# only UserSettings (updatable) and the partitions (custom, same physical id) read.
USERS_STACK_PARAMETERS = {
    "SharedFSx": {"Ref": "SharedFSx"},
    "referencetocourseclusterstudioStudioUserPolicyAB0ED23FRef": {"Ref": "StudioUserPolicyA8F07D60"},
    "referencetocourseclusterstudioSlurmTokenIssuerRole9F97022DArn": {
        "Fn::GetAtt": ["SlurmTokenIssuerRole6122080F", "Arn"]
    },
    "referencetocourseclusterstudioSlurmTokenIssuerFunctionE1BDD6C0Arn": {
        "Fn::GetAtt": ["SlurmTokenIssuerFunction81DE674A", "Arn"]
    },
    "referencetocourseclusterstudioPartitionsProviderframeworkonEvent23F60A65Arn": {
        "Fn::GetAtt": ["PartitionsProviderframeworkonEventA058C525", "Arn"]
    },
    "referencetocourseclusterstudioDomainC5D0DE60DomainId": {"Fn::GetAtt": ["Domain", "DomainId"]},
    # New with the token secrets' customer managed key (issue 21): AWS::SecretsManager::Secret KmsKeyId updates
    # in place ("Update requires: No interruption").
    "referencetocourseclusterstudioSlurmTokenIssuerTokenKey352CD991Arn": {
        "Fn::GetAtt": ["SlurmTokenIssuerTokenKeyACF93B3F", "Arn"]
    },
    "referencetocourseclusterstorageLustreFileSystem81795A70Ref": {
        "Fn::GetStackOutput": {
            "StackName": "course-cluster-storage",
            "Region": "us-west-2",
            "OutputName": "PublishOutputRefLustreFileSystem4AFDAE78C7928CB3",
        }
    },
}


def test_per_user_resources_keep_their_logical_ids_and_parameters(synth):
    s = synth("containers")
    (nested,) = s.nested.values()
    expected = {
        f"{prefix}{user.name}": type_ for user in s.config.users for prefix, type_ in PER_USER_RESOURCES.items()
    }
    expected |= {"SlurmTokenSchedule": "AWS::Events::Rule", "SlurmTokenScheduleInvokes": "AWS::Lambda::Permission"}
    assert {logical_id: r["Type"] for logical_id, r in nested["Resources"].items()} == expected
    (stack,) = resources(s.templates["studio"], "AWS::CloudFormation::Stack").values()
    assert stack["Properties"]["Parameters"] == USERS_STACK_PARAMETERS
    assert sorted(nested["Parameters"]) == sorted(USERS_STACK_PARAMETERS)
    assert nested["Parameters"]["SharedFSx"] == {"Type": "String", "AllowedValues": ["True", "False"]}
    # Every user's resources read the shared values from those parameters (or pseudo parameters), each its own.
    by_name = {name.removeprefix("referencetocourseclusterstudio"): {"Ref": name} for name in USERS_STACK_PARAMETERS}
    users_stack = nested["Resources"]
    profile = users_stack["Profilealice"]["Properties"]
    assert profile["DomainId"] == by_name["DomainC5D0DE60DomainId"] and profile["UserProfileName"] == "alice"
    settings = profile["UserSettings"]
    assert settings["ExecutionRole"] == {"Fn::GetAtt": ["ExecutionRolealice", "Arn"]}
    assert settings["CustomFileSystemConfigs"]["Fn::If"][1][0]["FSxLustreFileSystemConfig"]["FileSystemPath"] == {
        "Fn::GetAtt": ["Partitionalice", "Path"]
    }
    role = users_stack["ExecutionRolealice"]["Properties"]
    assert role["Path"] == {"Fn::Join": ["", ["/hyperpod/course-cluster-", {"Ref": "AWS::Region"}, "/studio-users/"]]}
    assert role["ManagedPolicyArns"] == [by_name["StudioUserPolicyAB0ED23FRef"]]
    assert role["Policies"][0]["PolicyDocument"]["Statement"][0]["Resource"] == {"Ref": "SlurmTokenalice"}
    assert users_stack["SlurmTokenalice"]["Properties"]["Name"] == "course-cluster/slurm-token/alice"
    assert users_stack["SlurmTokenalice"]["Properties"]["KmsKeyId"] == by_name["SlurmTokenIssuerTokenKey352CD991Arn"]
    policy = users_stack["SlurmTokenPolicyalice"]["Properties"]
    assert policy["SecretId"] == {"Ref": "SlurmTokenalice"}
    readers, writers = (
        st["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] for st in policy["ResourcePolicy"]["Statement"]
    )
    assert readers == {"Fn::GetAtt": ["ExecutionRolealice", "Arn"]}
    assert writers[0] == by_name["SlurmTokenIssuerRole9F97022DArn"]
    assert writers[1]["Fn::Join"][1][:2] == ["arn:", {"Ref": "AWS::Partition"}]
    partition = users_stack["Partitionalice"]["Properties"]
    assert partition["ServiceToken"] == by_name["PartitionsProviderframeworkonEvent23F60A65Arn"]
    file_system = by_name[
        "referencetocourseclusterstorageLustreFileSystem81795A70Ref".removeprefix("referencetocourseclusterstudio")
    ]
    assert partition["FileSystemId"] == file_system
    mount = settings["CustomFileSystemConfigs"]["Fn::If"][1][0]["FSxLustreFileSystemConfig"]
    assert mount["FileSystemId"] == file_system
    # Partitions exist only in per-user mode and start MAX_IMPORTS_IN_FLIGHT at a time.
    partitions = [logical_id for logical_id in users_stack if logical_id.startswith("Partition")]
    assert all(users_stack[p]["Condition"] == "IsPerUserFSx" for p in partitions)
    assert [users_stack[p].get("DependsOn") for p in partitions] == [None] * 4  # containers: 4 users, 4 lanes
    # Nothing tags them in the template (the nested stack's tags reach them through CloudFormation, as before).
    assert not [i for i, r in users_stack.items() if "Tags" in r.get("Properties", {})]
    assert partition["DataBucket"] == {
        "Fn::Join": ["", ["course-cluster-data-", {"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}]]
    }
    assert (
        users_stack["SlurmTokenSchedule"]["Properties"]["Targets"][0]["Arn"]
        == by_name["SlurmTokenIssuerFunctionE1BDD6C0Arn"]
    )


def test_profiles_created_outside_the_stack_get_partitions(synth):
    t = synth("containers").templates["studio"]
    rule = only(t, "AWS::Events::Rule")
    assert rule["Condition"] == "IsPerUserFSx"
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail"]["eventName"] == ["CreateUserProfile"]
    assert pattern["detail"]["requestParameters"]["domainId"] == [{"Fn::GetAtt": ["Domain", "DomainId"]}]
    (target,) = rule["Properties"]["Targets"]
    assert "ProfileEventsDeadLetters" in json.dumps(target["DeadLetterConfig"])
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 8
    for permission in resources(t, "AWS::Lambda::Permission").values():
        if "OnCreateUserProfile" in json.dumps(permission):
            assert permission["Condition"] == "IsPerUserFSx"
    fn = [
        f
        for f in resources(t, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "profile_events.handler"
    ][0]
    assert "ProfileEventsDeadLetters" in json.dumps(fn["Properties"]["DeadLetterConfig"])


def test_profile_events_know_the_config_users_uids_and_may_list_profiles(synth):
    """The handler refuses a uid a config user or another profile holds: its code asset carries every config
    user's uid, and its role may list the domain's profiles."""
    s = synth("containers")
    t = s.templates["studio"]
    ((logical, fn),) = [
        (k, f)
        for k, f in resources(t, "AWS::Lambda::Function").items()
        if f["Properties"].get("Handler") == "profile_events.handler"
    ]
    path = fn["Properties"]["Environment"]["Variables"]["RESERVED_UIDS_FILE"]
    assert path == "/var/task/reserved_uids.json"
    asset = s.out_dir / f"asset.{fn['Properties']['Code']['S3Key'].removesuffix('.zip')}"
    reserved = json.loads((asset / "reserved_uids.json").read_text())
    assert reserved == {str(u.uid): u.name for u in s.config.users} and reserved
    assert (asset / "profile_events.py").is_file() and (asset / "partitions.py").is_file()
    statements = [
        st for p in resources(t, "AWS::IAM::Policy").values() for st in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    (listing,) = [st for st in statements if st.get("Sid") == "ListProfilesForUids"]
    assert listing["Action"] == "sagemaker:ListUserProfiles" and listing["Resource"] == "*"


def test_partition_handlers_reach_only_the_partition_prefix(synth):
    t = synth("default").templates["studio"]
    rendered = json.dumps([p for p in resources(t, "AWS::IAM::Policy").values() if "PartitionMarkers" in json.dumps(p)])
    assert "/studio/*" in rendered and "ml-cluster-data-" in rendered
    assert '"s3:DeleteObject' not in rendered  # partitions are never deleted by the stack


def test_studio_reaches_lustre_and_slurm_through_declared_rules(synth):
    t = synth("default").templates["studio"]
    egress = [r["Properties"] for r in resources(t, "AWS::EC2::SecurityGroupEgress").values()]
    ingress = [r["Properties"] for r in resources(t, "AWS::EC2::SecurityGroupIngress").values()]
    for low, high in ((988, 988), (1018, 1023), (6817, 6817), (6819, 6819)):
        assert any(
            r["FromPort"] == low
            and r["ToPort"] == high
            and "DestinationSecurityGroupId" in r
            and "EfaSecurityGroup" in json.dumps(r["DestinationSecurityGroupId"])
            for r in egress
        ), low
        assert any(
            r["FromPort"] == low
            and r["ToPort"] == high
            and "EfaSecurityGroup" in json.dumps(r["GroupId"])
            and "StudioAppsGroup" in json.dumps(r["SourceSecurityGroupId"])
            for r in ingress
        ), low
    assert any(r["FromPort"] == 2049 and "StudioAppsGroup" in json.dumps(r["SourceSecurityGroupId"]) for r in ingress)


def test_studio_role_is_least_privilege(synth):
    t = synth("multi_az").templates["studio"]
    roles = {k: v for k, v in resources(t, "AWS::IAM::Role").items() if k.startswith("ExecutionRole")}
    (role,) = roles.values()
    assert "ManagedPolicyArns" not in role["Properties"]
    policy = [
        p for p in resources(t, "AWS::IAM::Policy").values() if "ExecutionRole" in json.dumps(p["Properties"]["Roles"])
    ][0]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    own_spaces = {st.get("Sid") for st in STUDIO_ACCESS["own_spaces"]["policy"]["Statement"]} - {None}
    assert set(statements) == {
        "DescribeCluster",
        "ReadSlurmLoginSecret",
        "LifecycleConfigLogs",
        "UseMlflow",
        "ReadStudioScripts",
        "ListStudioScripts",
        "ReadStudioTools",
        "ListStudioTools",
        "ReadSlurmClientBundle",
        "ListClusters",
        "SharedSpaceApps",
        *own_spaces,
    }
    # The controller's client bundle: GetObject on the lifecycle bucket's slurm-client/ prefix, nothing more.
    bundle = statements["ReadSlurmClientBundle"]
    assert bundle["Action"] == "s3:GetObject"
    assert "/slurm-client/*" in json.dumps(bundle["Resource"]) and "Condition" not in bundle
    assert "MlflowTrackingServerArn" in json.dumps(statements["UseMlflow"]["Resource"]) or "Mlflow" in json.dumps(
        statements["UseMlflow"]["Resource"]
    )
    rendered = json.dumps(t)
    assert "FullAccess" not in rendered and '"ssm:*"' not in rendered and '"iam:' not in rendered


def test_mlflow_tracking_server_with_encrypted_artifact_bucket(synth):
    t = synth("multi_az").templates["studio"]
    server = only(t, "AWS::SageMaker::MlflowTrackingServer")["Properties"]
    assert server["TrackingServerSize"] == "Medium" and server["TrackingServerName"] == "llm-pretrain-mlflow"
    buckets = {k: v for k, v in resources(t, "AWS::S3::Bucket").items() if k.startswith("MlflowArtifacts")}
    (bucket,) = buckets.values()
    sse = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms" and bucket["DeletionPolicy"] == "Retain"
    assert resources(synth("default").templates["studio"], "AWS::SageMaker::MlflowTrackingServer") == {}


def test_thousand_users_split_into_nested_stacks_within_limits(synth):
    s = synth("large")
    assert len(s.nested) == 12  # 1,000 users at 90 per nested stack (per-user mode: a token secret and role each)
    profiles = sum(len(resources(n, "AWS::SageMaker::UserProfile")) for n in s.nested.values())
    assert profiles == 1000
    for name, template in s.nested.items():
        assert len(template["Resources"]) < 500, name


def test_studio_can_be_turned_off(synth):
    import aws_cdk as cdk

    from platform_config import parse_config
    from stacks.platform import build_platform
    from support.variants import cdk_json_context

    app = cdk.App(context=cdk_json_context(stage_assets=False))
    platform = build_platform(app, parse_config({"studio": {"enabled": False}}))
    assert platform.studio is None
    assert [c.node.id for c in app.node.children if isinstance(c, cdk.Stack)] == [
        "ml-cluster-network",
        "ml-cluster-storage",
        "ml-cluster-slurm-login",
        "ml-cluster-cluster",
        "ml-cluster-observability",
    ]
    assert synth("default").platform.studio is not None


@pytest.mark.parametrize("variant", ["default", "eks"])
def test_bootstrap_pins_the_digest_of_every_file_it_fetches(synth, variant):
    """The bootstrap lists one SHA-256 per file the Studio BucketDeployment ships, computed from the staged asset."""
    import hashlib
    import re

    s = synth(variant)
    t = s.templates["studio"]
    (config, *_) = resources(t, "AWS::SageMaker::StudioLifecycleConfig").values()
    body = config["Properties"]["StudioLifecycleConfigContent"]["Fn::Base64"]["Fn::Sub"][0]
    pinned = dict((path, digest) for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", body, re.M))
    assets = {h: a for m in s.out_dir.glob("*.assets.json") for h, a in json.loads(m.read_text())["files"].items()}
    (deployment,) = [
        r
        for r in resources(t, "Custom::CDKBucketDeployment").values()
        if r["Properties"]["DestinationBucketKeyPrefix"] == f"studio/{s.config.name}/"
    ]
    shipped = {}
    for key in deployment["Properties"]["SourceObjectKeys"]:
        root = s.out_dir / assets[key.split(".")[0]]["source"]["path"]
        shipped.update(
            {
                str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in root.rglob("*")
                if p.is_file()
            }
        )
    assert pinned == shipped
    assert body.index("sha256sum --check --strict") < body.index("exec bash")


@pytest.mark.parametrize("variant,fs_group", [("default", "EfaSecurityGroup"), ("existing_vpc", "LustreAccessGroup")])
def test_lustre_flows_both_ways_between_studio_and_the_file_system(synth, variant, fs_group):
    """FSx asks clients to accept 988 and 1018-1023 from the file system's group and that group to reach them: the
    platform's own file system (in the cluster's group) and one you bring (the storage stack's access group) get the
    same four rules per port range."""
    t = synth(variant).templates["studio"]
    rules = [
        (r["Type"], r["Properties"])
        for r in t["Resources"].values()
        if r["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
    ]

    def has(type_, owner, peer_key, peer, low, high):
        return any(
            ty == type_
            and p["FromPort"] == low
            and p["ToPort"] == high
            and p["IpProtocol"] == "tcp"
            and owner in json.dumps(p["GroupId"])
            and peer in json.dumps(p.get(peer_key, ""))
            for ty, p in rules
        )

    ingress, egress = "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"
    for low, high in ((988, 988), (1018, 1023)):
        assert has(egress, "StudioAppsGroup", "DestinationSecurityGroupId", fs_group, low, high), ("studio out", low)
        assert has(ingress, fs_group, "SourceSecurityGroupId", "StudioAppsGroup", low, high), ("fs in", low)
        assert has(ingress, "StudioAppsGroup", "SourceSecurityGroupId", fs_group, low, high), ("studio in", low)
        assert has(egress, fs_group, "DestinationSecurityGroupId", "StudioAppsGroup", low, high), ("fs out", low)


STUDIO_ACCESS = json.loads((ROOT / "config" / "facts" / "studio_access_policy.json").read_text())
# The one place the platform grants less than AWS's page: apps of spaces without an owner in this domain only.
PAGE_REFS = {"AWS::Partition": "aws", "AWS::AccountId": "${Account}", "AWS::Region": "${Region}"}
NARROWED = {
    "arn:aws:sagemaker:${Region}:${Account}:app/*": "arn:aws:sagemaker:${Region}:${Account}:app/${sagemaker:DomainId}/*"
}


def _rendered(value, region):
    """A policy value with CloudFormation's pseudo parameters as the page writes them."""
    if isinstance(value, list):
        return [_rendered(v, region) for v in value]
    if isinstance(value, dict) and not value.keys() & {"Fn::Join", "Ref"}:
        return {k: _rendered(v, region) for k, v in value.items()}
    if not isinstance(value, (str, dict)):
        return value
    return flatten(value, PAGE_REFS).replace(f":{region}:", ":${Region}:")


def _role_statements(template, region, role_prefix):
    return [_rendered(s, region) for s in statements_of(template, role_prefix, prefix=True)]


@pytest.mark.parametrize(
    "variant,role_prefix", [("multi_az", "ExecutionRole"), ("eks", "ExecutionRole"), ("eks", "MemberRolealice")]
)
def test_studio_roles_grant_what_aws_documents_for_own_spaces_and_hyperpod_pages(synth, variant, role_prefix):
    s = synth(variant)
    granted = _role_statements(s.templates["studio"], s.config.deployment.region, role_prefix)
    assert granted, role_prefix
    for documented in STUDIO_ACCESS["own_spaces"]["policy"]["Statement"]:
        want_resource = NARROWED.get(documented["Resource"], documented["Resource"])
        matches = [
            g
            for g in granted
            if set(listed(g["Action"])) == set(documented["Action"])
            and g.get("Condition") == documented.get("Condition")
            and g["Resource"] == want_resource
        ]
        assert len(matches) == 1, (documented, [g for g in granted if "sagemaker:" in json.dumps(g["Action"])])
        if "Sid" in documented:
            assert matches[0]["Sid"] == documented["Sid"]
    # Nothing else may create, change or delete spaces and apps, or tag.
    writes = {
        "sagemaker:CreateSpace",
        "sagemaker:UpdateSpace",
        "sagemaker:DeleteSpace",
        "sagemaker:CreateApp",
        "sagemaker:DeleteApp",
        "sagemaker:AddTags",
        "sagemaker:CreatePresignedDomainUrl",
    }
    documented_writes = sum(1 for d in STUDIO_ACCESS["own_spaces"]["policy"]["Statement"] if set(d["Action"]) & writes)
    assert sum(1 for g in granted if set(listed(g["Action"])) & writes) == documented_writes
    # Studio's HyperPod pages: the reference template's actions on this platform's clusters, and the cluster list.
    (pages,) = [g for g in granted if g.get("Sid") == "DescribeCluster"]
    assert set(listed(pages["Action"])) == set(STUDIO_ACCESS["hyperpod_pages"]["actions"])
    assert pages["Resource"] == "arn:aws:sagemaker:${Region}:${Account}:cluster/*"
    assert pages["Condition"] == {"StringEquals": {"aws:ResourceTag/hyperpod-platform": s.config.name}}
    (listing,) = [g for g in granted if g.get("Sid") == "ListClusters"]
    assert listing["Action"] == "sagemaker:ListClusters" and listing["Resource"] == "*"
    assert iam_facts.scoping_errors(s.templates["studio"]) == []


def test_per_user_roles_get_the_same_studio_access(synth):
    """Per-user mode on Slurm: each profile's own role gets the shared execution role's document (StudioUserPolicy)."""
    s = synth("large")
    (policy,) = resources(s.templates["studio"], "AWS::IAM::ManagedPolicy").values()
    sids = {st.get("Sid") for st in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert {
        "SMStudioRestrictSpacesToOwnerUserProfile",
        "SMStudioRestrictCreatePrivateSpaceAppsToOwnerUserProfile",
        "ListClusters",
        "DescribeCluster",
    } <= sids


def test_shared_spaces_get_the_lifecycle_config_and_in_shared_mode_the_shared_partition(synth):
    t = synth("multi_az").templates["studio"]
    domain = only(t, "AWS::SageMaker::Domain")["Properties"]
    spaces = domain["DefaultSpaceSettings"]
    lab = domain["DefaultUserSettings"]["JupyterLabAppSettings"]
    assert spaces["JupyterLabAppSettings"]["LifecycleConfigArns"] == lab["LifecycleConfigArns"]
    assert spaces["JupyterLabAppSettings"]["DefaultResourceSpec"] == lab["DefaultResourceSpec"]
    # The shared partition, as private spaces mount it, and the shared account's uid with the shared gid.
    assert spaces["CustomFileSystemConfigs"] == domain["DefaultUserSettings"]["CustomFileSystemConfigs"]
    posix = spaces["CustomPosixUserConfig"]
    assert posix == {"Fn::If": ["IsSharedFSx", {"Uid": 10010, "Gid": 2000}, {"Ref": "AWS::NoValue"}]}
    # Without studio.shared_space_user: the lifecycle config, no file system and no identity.
    plain = only(synth("default").templates["studio"], "AWS::SageMaker::Domain")["Properties"]["DefaultSpaceSettings"]
    assert "JupyterLabAppSettings" in plain
    assert "CustomFileSystemConfigs" not in plain and "CustomPosixUserConfig" not in plain
