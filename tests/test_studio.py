"""Studio stack: the domain as the cluster's front door, SharedFSx both ways, partitions, network, MLflow."""

import json

import pytest


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


def test_mlflow_tracking_server_with_encrypted_artifact_bucket(synth):
    t = synth("multi_az").templates["studio"]
    server = only(t, "AWS::SageMaker::MlflowTrackingServer")["Properties"]
    assert server["TrackingServerSize"] == "Medium" and server["TrackingServerName"] == "llm-pretrain-mlflow"
    buckets = {k: v for k, v in resources(t, "AWS::S3::Bucket").items() if k.startswith("MlflowArtifacts")}
    (bucket,) = buckets.values()
    sse = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms" and bucket["DeletionPolicy"] == "Retain"
    assert resources(synth("default").templates["studio"], "AWS::SageMaker::MlflowTrackingServer") == {}


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
