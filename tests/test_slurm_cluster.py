"""Cluster stack: the HyperPod Slurm cluster, its execution role, lifecycle scripts and outputs."""
import json

from aws_cdk.assertions import Match

from conftest import ROOT


def _cluster(s):
    (props,) = [r["Properties"] for r in s.templates["cluster"]["Resources"].values()
                if r["Type"] == "AWS::SageMaker::Cluster"]
    return props


def _groups(s):
    return {g["InstanceGroupName"]: g for g in _cluster(s)["InstanceGroups"]}


def test_default_cluster_groups_and_slurm_node_types(synth):
    s = synth("default")
    props = _cluster(s)
    assert props["ClusterName"] == "ml-cluster"
    assert props["NodeRecovery"] == "Automatic"
    assert props["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    groups = _groups(s)
    assert {n: (g["InstanceType"], g["InstanceCount"], g["SlurmConfig"]) for n, g in groups.items()} == {
        "controller-machine": ("ml.m5.xlarge", 1, {"NodeType": "Controller"}),
        "login-group": ("ml.m5.xlarge", 1, {"NodeType": "Login"}),
        "worker-group-1": ("ml.g5.8xlarge", 1, {"NodeType": "Compute", "PartitionNames": ["gpu"]}),
    }
    worker = groups["worker-group-1"]
    assert worker["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert worker["ThreadsPerCore"] == 1
    assert worker["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert "OnStartDeepHealthChecks" not in groups["controller-machine"]
    assert worker["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    assert "hyperpod/ml-cluster/" in json.dumps(worker["LifeCycleConfig"]["SourceS3Uri"])


def test_training_plan_threads_and_per_group_az(synth):
    s = synth("multi_az")
    groups = _groups(s)
    p5 = groups["p5-reserved"]
    assert p5["TrainingPlanArn"] == "arn:aws:sagemaker:us-east-1:111122223333:training-plan/llm-pretrain-q1"
    assert p5["ThreadsPerCore"] == 2
    assert p5["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 1000}}]
    assert "Private1Subnet" in json.dumps(p5["OverrideVpcConfig"]["Subnets"])
    assert "Private2Subnet" in json.dumps(groups["g6e-dev"]["OverrideVpcConfig"]["Subnets"])
    assert "OverrideVpcConfig" not in groups["controller-machine"]
    assert "Private1Subnet" in json.dumps(_cluster(s)["VpcConfig"]["Subnets"])


def test_native_lustre_mount_when_configured(synth):
    groups = _groups(synth("containers"))
    for group in groups.values():
        lustre = [c["FsxLustreConfig"] for c in group["InstanceStorageConfigs"] if "FsxLustreConfig" in c]
        assert len(lustre) == 1 and lustre[0]["MountPath"] == "/fsx"
    assert all(len(g["InstanceStorageConfigs"]) == 1 for g in _groups(synth("default")).values())


def _role_statements(s):
    policies = [r["Properties"] for r in s.templates["cluster"]["Resources"].values()
                if r["Type"] == "AWS::IAM::Policy" and "HyperPodExecutionRole" in json.dumps(r["Properties"]["Roles"])]
    (policy,) = policies
    return {st["Sid"]: st for st in policy["PolicyDocument"]["Statement"]}


def test_execution_role_is_least_privilege(synth):
    s = synth("default")
    t = s.template("cluster")
    t.has_resource_properties("AWS::IAM::Role", {
        "AssumeRolePolicyDocument": Match.object_like({"Statement": [Match.object_like(
            {"Principal": {"Service": "sagemaker.amazonaws.com"}})]}),
        "ManagedPolicyArns": [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                 ":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]]}]})
    statements = _role_statements(s)
    assert set(statements) == {"DescribeNetwork", "CreateInterfacesInClusterSubnets", "ManageInterfacesInClusterVpc",
                               "TagNewInterfaces", "ReadOwnLifecycleScripts", "ListOwnLifecycleScripts",
                               "PublishSlurmLoginSecret"}
    assert all(a.startswith("ec2:Describe") for a in statements["DescribeNetwork"]["Action"])
    assert statements["ManageInterfacesInClusterVpc"]["Condition"]["ArnEquals"]["ec2:Vpc"]
    assert "hyperpod/ml-cluster/*" in json.dumps(statements["ReadOwnLifecycleScripts"]["Resource"])
    rendered = json.dumps(s.templates["cluster"])
    assert "FullAccess" not in rendered and '"ssm:*"' not in rendered and '"s3:*"' not in rendered


def test_execution_role_reads_exactly_the_container_artifacts(synth):
    statements = _role_statements(synth("containers"))
    resources = statements["ReadContainerRuntimeArtifacts"]["Resource"]
    assert len(resources) == 3 and all("*" not in json.dumps(r) for r in resources)
    assert "ReadContainerRuntimeArtifacts" not in _role_statements(synth("default"))


def test_lifecycle_scripts_ship_as_asset_with_generated_parameters(synth):
    s = synth("default")
    t = s.template("cluster")
    t.has_resource_properties("Custom::CDKBucketDeployment", {
        "DestinationBucketKeyPrefix": "hyperpod/ml-cluster/", "Prune": True, "RetainOnDelete": True})
    deployment = next(iter(t.find_resources("Custom::CDKBucketDeployment").values()))["Properties"]
    assert len(deployment["SourceObjectKeys"]) == 2  # the scripts folder and provisioning_parameters.json
    markers = json.dumps(deployment.get("SourceMarkers", []))
    assert "FsxDnsName" in markers or "DNSName" in markers  # the FSx DNS name is a deploy-time token
    cluster = next(iter(t.find_resources("AWS::SageMaker::Cluster").values()))
    assert any("LifecycleScripts" in d for d in cluster["DependsOn"])
    shipped = sorted(p.name for p in s.out_dir.glob("asset.*/on_create.sh"))
    assert shipped == ["on_create.sh"]


def test_provisioning_parameters_follow_config(synth):
    from stacks.slurm_cluster_stack import provisioning_parameters
    s = synth("containers")
    params = provisioning_parameters(s.config, s.platform.storage, s.platform.cluster.slurm_login_secret.secret_arn)
    assert params["controller_group"] == "controller-machine" and params["login_group"] == "login-group"
    assert params["worker_groups"] == [{"instance_group_name": "students", "partition_name": "class"}]
    assert params["fsx"]["mount"] is False  # native mount: on_create.sh must not mount it again
    assert params["users"][3] == {"name": "ta", "uid": 10100, "gid": 10100, "sudo": True}
    assert params["container_runtime"]["enabled"] is True
    fixture = json.loads((ROOT / "tests" / "lifecycle" / "fixtures" / "provisioning_parameters.json").read_text())
    assert _shape(fixture) == _shape(json.loads(json.dumps(params, default=str))), \
        "the bats fixture and the generated parameters must have the same keys"


def _shape(value):
    """The keys at every level (values may differ, and be null where the fixture leaves a feature off)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return "value"


def test_outputs_include_a_ready_session_manager_command(synth):
    outputs = synth("default").templates["cluster"]["Outputs"]
    assert {"ClusterName", "ClusterArn", "LifecycleScriptsUri", "ControllerShellCommand"} <= set(outputs)
    command = json.dumps(outputs["ControllerShellCommand"]["Value"])
    assert "aws sagemaker list-cluster-nodes" in command
    assert "--instance-group-name-contains controller-machine" in command
    assert "sagemaker-cluster:" in command and "_controller-machine-$INSTANCE_ID" in command
    assert "Fn::Split" in command  # the cluster id is cut from the cluster ARN at deploy time
