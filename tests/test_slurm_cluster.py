"""Cluster stack: the HyperPod Slurm cluster, its execution role, lifecycle scripts and outputs, the Slurm login
secret and the Slurm job role."""

import json

from aws_cdk.assertions import Match

from support.paths import ROOT
from support.iam import by_sid, statements_by_role, statements_of
from support.intrinsics import flatten
from support.template import cluster_properties

PSEUDO_BY_NAME = {name: name for name in ("AWS::AccountId", "AWS::Partition", "AWS::Region", "AWS::URLSuffix")}


def _groups(s):
    return {g["InstanceGroupName"]: g for g in cluster_properties(s)["InstanceGroups"]}


def test_default_cluster_groups_and_slurm_node_types(synth):
    s = synth("default")
    props = cluster_properties(s)
    assert props["ClusterName"] == "ml-cluster"
    assert props["NodeRecovery"] == "Automatic"
    # Continuous (HyperPod's cluster events), so no SlurmConfigStrategy: continuous clusters reject one.
    assert props["NodeProvisioningMode"] == "Continuous" and props["Orchestrator"] == {"Slurm": {}}
    groups = _groups(s)
    assert {n: (g["InstanceType"], g["InstanceCount"], g["SlurmConfig"]) for n, g in groups.items()} == {
        "controller-machine": ("ml.m5.xlarge", 1, {"NodeType": "Controller"}),
        "login-group": ("ml.m5.xlarge", 1, {"NodeType": "Login"}),
        "worker-group-1": ("ml.g5.8xlarge", 1, {"NodeType": "Compute", "PartitionNames": ["gpu"]}),
    }
    worker = groups["worker-group-1"]
    assert worker["OnStartDeepHealthChecks"] == ["InstanceStress"]  # one instance: no connectivity check
    assert worker["ThreadsPerCore"] == 1
    assert worker["InstanceStorageConfigs"][0] == {"EbsVolumeConfig": {"VolumeSizeInGB": 500}}
    assert "OnStartDeepHealthChecks" not in groups["controller-machine"]
    assert "hyperpod/ml-cluster/" in json.dumps(worker["LifeCycleConfig"]["SourceS3Uri"])


def test_training_plan_threads_and_per_group_az(synth):
    s = synth("multi_az")
    groups = _groups(s)
    p5 = groups["p5-reserved"]
    assert p5["TrainingPlanArn"] == "arn:aws:sagemaker:us-east-1:111122223333:training-plan/llm-pretrain-q1"
    assert p5["ThreadsPerCore"] == 2
    assert p5["InstanceStorageConfigs"][0] == {"EbsVolumeConfig": {"VolumeSizeInGB": 1000}}
    assert "Private1Subnet" in json.dumps(p5["OverrideVpcConfig"]["Subnets"])
    assert "Private2Subnet" in json.dumps(groups["g6e-dev"]["OverrideVpcConfig"]["Subnets"])
    assert "OverrideVpcConfig" not in groups["controller-machine"]
    assert "Private1Subnet" in json.dumps(cluster_properties(s)["VpcConfig"]["Subnets"])


def test_native_lustre_mount_when_configured(synth):
    groups = _groups(synth("containers"))
    for group in groups.values():
        lustre = [c["FsxLustreConfig"] for c in group["InstanceStorageConfigs"] if "FsxLustreConfig" in c]
        assert len(lustre) == 1 and lustre[0]["MountPath"] == "/fsx"
    lifecycle_mounted = _groups(synth("multi_az"))
    assert all(len(g["InstanceStorageConfigs"]) == 1 for g in lifecycle_mounted.values())


def _role_statements(s):
    return by_sid(statements_of(s.templates["cluster"], "HyperPodExecutionRole", prefix=True))


def test_execution_role_is_least_privilege(synth):
    s = synth("default")
    t = s.template("cluster")
    t.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": Match.object_like(
                {"Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}
            ),
            "ManagedPolicyArns": Match.absent(),
        },
    )
    statements = _role_statements(s)
    # The EC2 and FSx statements come from config/facts/execution_role_network.json (tests/test_instance_role_policy.py
    # checks them against AWS's reference and the Service Authorization Reference).
    assert set(statements) == {
        "DescribeNetworkAndFileSystems",
        "CreateInterfaces",
        "CreateInterfacesInClusterSecurityGroup",
        "CreateInterfacesInClusterSubnets",
        "ManageInterfacesInClusterVpc",
        "TagInterfacesOnCreate",
        "DetachInterfacesFromHyperPodInstances",
        "ReadOwnLifecycleScripts",
        "ListOwnLifecycleScripts",
        "CreateClusterLogGroup",
        "PublishClusterLogStreams",
        "PublishClusterMetrics",
        "SessionManagerChannels",
        "PublishSlurmLoginSecret",
        "PublishSlurmClientBundle",
        "ReadLifecycleRecord",
    }
    assert all(
        a.startswith("ec2:Describe") or a == "fsx:DescribeFileSystems"
        for a in statements["DescribeNetworkAndFileSystems"]["Action"]
    )
    assert statements["ManageInterfacesInClusterVpc"]["Condition"]["ArnEquals"]["ec2:Vpc"]
    assert "hyperpod/ml-cluster/*" in json.dumps(statements["ReadOwnLifecycleScripts"]["Resource"])
    rendered = json.dumps(s.templates["cluster"])
    assert "FullAccess" not in rendered and '"ssm:*"' not in rendered and '"s3:*"' not in rendered
    assert "AmazonSageMakerClusterInstanceRolePolicy" not in rendered  # it reads every sagemaker-* bucket
    s3_sids = {
        sid
        for sid, st in statements.items()
        if any(a.startswith("s3:") for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"]))
    }
    assert s3_sids == {
        "ReadOwnLifecycleScripts",
        "ListOwnLifecycleScripts",  # no read on other sagemaker-* buckets
        "PublishSlurmClientBundle",
    }
    # The one write into the lifecycle bucket: PutObject on its slurm-client/ prefix, nothing else.
    bundle = statements["PublishSlurmClientBundle"]
    assert bundle["Action"] == "s3:PutObject"
    assert (
        flatten(bundle["Resource"])
        == "arn:aws:s3:::sagemaker-lc-ml-cluster-<AWS::AccountId>-<AWS::Region>/slurm-client/*"
    )


def test_the_controller_learns_where_to_upload_its_client_bundle(synth):
    s = synth("default")
    from manifests.node_parameters import slurm_node_parameters

    params = s.platform.cluster.node_parameters.model_dump()
    assert (
        flatten(s.platform.cluster.resolve(params["slurm"]["client_bundle_s3_prefix"]))
        == "s3://sagemaker-lc-ml-cluster-<AWS::AccountId>-<AWS::Region>/slurm-client/"
    )
    without_login = slurm_node_parameters(
        s.config,
        lustre=s.platform.storage.lustre,
        region="us-west-2",
        slurm_login_secret_arn=None,
        jwt_key_secret_arn=None,
        parameters_s3_uri="s3://b/p.json",
        client_bundle_s3_prefix="s3://b/slurm-client/",
        node_metrics_remote_write_url=None,
        job_role_arn=None,
    )
    assert without_login["slurm"]["client_bundle_s3_prefix"] is None


def test_execution_role_logs_and_metrics_only_for_this_cluster(synth):
    statements = _role_statements(synth("default"))
    group = "arn:aws:logs:us-west-2:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/ml-cluster/*"
    assert flatten(statements["CreateClusterLogGroup"]["Resource"]) == group
    assert statements["CreateClusterLogGroup"]["Action"] == "logs:CreateLogGroup"
    assert flatten(statements["PublishClusterLogStreams"]["Resource"]) == group + ":log-stream:*"
    metrics = statements["PublishClusterMetrics"]
    assert metrics["Action"] == "cloudwatch:PutMetricData"
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}}
    assert all(a.startswith("ssmmessages:") for a in statements["SessionManagerChannels"]["Action"])


def test_execution_role_reads_exactly_the_container_artifacts(synth):
    statements = _role_statements(synth("containers"))
    resources = statements["ReadContainerRuntimeArtifacts"]["Resource"]
    assert len(resources) == 3 and all("*" not in json.dumps(r) for r in resources)
    assert "ReadContainerRuntimeArtifacts" not in _role_statements(synth("default"))


def test_lifecycle_scripts_ship_as_asset_with_generated_parameters(synth):
    s = synth("default")
    t = s.template("cluster")
    t.has_resource_properties(
        "Custom::CDKBucketDeployment",
        {"DestinationBucketKeyPrefix": "hyperpod/ml-cluster/", "Prune": True, "RetainOnDelete": True},
    )
    deployment = next(iter(t.find_resources("Custom::CDKBucketDeployment").values()))["Properties"]
    assert len(deployment["SourceObjectKeys"]) == 2  # the scripts folder and platform_parameters.json
    markers = json.dumps(deployment.get("SourceMarkers", []))
    assert "FsxDnsName" in markers or "DNSName" in markers  # the FSx DNS name is a deploy-time token
    cluster = next(iter(t.find_resources("AWS::SageMaker::Cluster").values()))
    assert any("LifecycleScripts" in d for d in cluster["DependsOn"])
    shipped = sorted(p.name for p in s.out_dir.glob("asset.*/on_init_complete.sh"))
    assert shipped == ["on_init_complete.sh"]


def test_provisioning_parameters_follow_config(synth):
    s = synth("containers")
    params = s.platform.cluster.node_parameters.model_dump()
    assert params["controller_group"] == "controller-machine" and params["login_group"] == "login-group"
    # ml.g5.2xlarge: one NVIDIA A10G, the GRES count check_gres.sh expects HyperPod's slurm.conf to give each node.
    assert params["worker_groups"] == [{"instance_group_name": "students", "partition_name": "class", "gpus": 1}]
    assert params["slurm"]["pam_slurm_adopt"] is False
    assert params["slurm"]["controller_ssh"] == "admins"  # configure_controller_ssh.sh: only administrators by default
    assert params["fsx"]["mount"] is False  # native mount: on_init_complete.sh waits for it, never mounts it again
    assert params["fsx"]["checkpoint_dir"] == "/data/checkpoints"  # inside the S3-linked /data
    assert params["users"][3] == {"name": "ta", "uid": 10100, "gid": 10100, "sudo": True}
    assert params["container_runtime"]["enabled"] is True
    fixture = json.loads((ROOT / "tests" / "lifecycle" / "fixtures" / "platform_parameters.json").read_text())
    # LifecycleScripts adds the record's name (tests/test_lifecycle_record.py checks the uploaded block).
    assert set(fixture.pop("lifecycle_record")) == {"secret_name", "region"}
    assert _shape(fixture) == _shape(json.loads(json.dumps(params, default=str))), (
        "the bats fixture and the generated parameters must have the same keys"
    )


def test_accounting_reaches_the_controller_in_the_uploaded_parameters(synth):
    """The research-institution example's departments and QoS are in the platform_parameters.json the stack
    uploads, in the shape apply_accounting.sh reads (tests/e2e/test_slurm_accounting.py applies it to slurmdbd)."""
    import re

    s = synth("research")
    (raw,) = [p.read_text() for p in s.out_dir.glob("asset.*/platform_parameters.json")]
    # Deploy-time values (the FSx names) are markers outside JSON strings until deployment; none is in this section.
    accounting = json.loads(re.sub(r"<<marker:[^>]*>>", "null", raw))["accounting"]
    assert accounting["enabled"] is True
    assert [(d["name"], d["fairshare"], d["users"]) for d in accounting["departments"]] == [
        ("physics", 40, ["ada", "enrico"]),
        ("biology", 40, ["rosalind", "gregor"]),
        ("teaching", 20, ["student1", "student2", "enrico"]),
    ]
    assert {q["name"]: q["max_tres_per_user"] for q in accounting["qos"]} == {
        "normal": "gres/gpu=8",
        "short": "gres/gpu=4",
        "long": "gres/gpu=8",
        "teaching": "node=1,gres/gpu=1",
    }
    assert accounting["priority_weights"]["PriorityWeightFairshare"] == 10000


def _by_name(value) -> str:
    """A CloudFormation string with pseudo parameters by name (Ref AWS::Region -> 'AWS::Region'), any other value
    known at deploy time as <other> (e.g. the FSx DNS name, read from the storage stack's outputs)."""
    return flatten(value, PSEUDO_BY_NAME, token="<other>")


def test_the_users_sync_polls_the_uploaded_parameters_which_the_nodes_may_read(synth):
    """sync_users.sh on every node downloads users_sync.parameters_s3_uri: it must name the object this stack uploads,
    inside the prefix the node role may read; otherwise user changes would never reach a running node."""
    import fnmatch
    import re
    from constructs.lifecycle_scripts import PARAMETERS_FILE

    s = synth("default")
    deployment = next(
        r for r in s.templates["cluster"]["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment"
    )["Properties"]
    markers = {k: v for source in deployment.get("SourceMarkers", []) for k, v in source.items()}
    (raw,) = [p.read_text() for p in s.out_dir.glob("asset.*/platform_parameters.json")]
    params = json.loads(re.sub(r"<<marker:[^>]*>>", lambda m: _by_name(markers[m.group(0)]), raw))
    uri = params["users_sync"]["parameters_s3_uri"]
    bucket = "sagemaker-lc-ml-cluster-AWS::AccountId-AWS::Region"
    assert uri == f"s3://{bucket}/{deployment['DestinationBucketKeyPrefix']}{PARAMETERS_FILE}"
    assert _by_name(deployment["DestinationBucketName"]) == bucket
    readable = _by_name(_role_statements(s)["ReadOwnLifecycleScripts"]["Resource"])
    assert readable.startswith("arn:") and ":s3:::" in readable, readable
    assert fnmatch.fnmatchcase(uri.removeprefix("s3://"), readable.split(":s3:::", 1)[1]), readable


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


def test_slurm_login_secret_uses_its_own_rotating_key_and_names_its_readers_and_writer(synth):
    """The secret and its key live in the slurm-login stack, deployed before the cluster and Studio: they name both
    roles by their fixed names (a reference to the cluster's role would make the stack wait for the cluster)."""
    s = synth("default")
    res = s.templates["slurm-login"]["Resources"]
    (key_id,) = [k for k, r in res.items() if r["Type"] == "AWS::KMS::Key"]
    (secret_id,) = [k for k, r in res.items() if r["Type"] == "AWS::SecretsManager::Secret"]
    assert res[key_id]["Properties"]["EnableKeyRotation"] is True
    assert res[secret_id]["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    cluster_role = "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/ml-cluster-cluster-execution-<AWS::Region>"
    studio_role = "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/ml-cluster-studio-execution-<AWS::Region>"

    (policy,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::SecretsManager::ResourcePolicy"]
    deny = {s["Sid"]: s for s in policy["ResourcePolicy"]["Statement"]}
    assert all(s["Effect"] == "Deny" and s["Principal"] == {"AWS": "*"} for s in deny.values())
    writers = deny["OnlyTheClusterWrites"]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    assert flatten(writers[0]) == cluster_role and "cfn-exec-role" in flatten(writers[1]) and len(writers) == 2
    assert "secretsmanager:PutSecretValue" in deny["OnlyTheClusterWrites"]["Action"]
    readers = deny["OnlyTheClusterAndStudioRead"]["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    assert [flatten(r) for r in readers] == [cluster_role, studio_role]

    key_statements = {s.get("Sid"): s for s in res[key_id]["Properties"]["KeyPolicy"]["Statement"]}
    cluster = key_statements["ClusterEncryptsAndDecryptsTheLoginSecret"]
    assert cluster["Principal"] == {"AWS": "*"}
    assert flatten(cluster["Condition"]["ArnEquals"]["aws:PrincipalArn"]) == cluster_role
    assert "secretsmanager." in flatten(cluster["Condition"]["StringEquals"]["kms:ViaService"])
    studio = key_statements["StudioDecryptsTheLoginSecret"]
    assert studio["Action"] == "kms:Decrypt"
    assert [flatten(r) for r in studio["Condition"]["ArnLike"]["aws:PrincipalArn"]] == [studio_role]
    # The cluster's execution role and the Studio stack's execution role really have those names.
    cluster_res = s.templates["cluster"]["Resources"]
    (cluster_role_props,) = [
        r["Properties"]
        for k, r in cluster_res.items()
        if k.startswith("HyperPodExecutionRole") and r["Type"] == "AWS::IAM::Role"
    ]
    assert flatten(cluster_role_props["RoleName"]) == "ml-cluster-cluster-execution-<AWS::Region>"
    studio_roles = [
        r["Properties"].get("RoleName")
        for lid, r in s.templates["studio"]["Resources"].items()
        if lid.startswith("ExecutionRole") and r["Type"] == "AWS::IAM::Role"
    ]
    assert [flatten(n) for n in studio_roles] == ["ml-cluster-studio-execution-<AWS::Region>"]


def test_slurm_jobs_log_to_mlflow_through_a_job_role_only_the_worker_nodes_may_assume(synth):
    """No node role may use MLflow itself (a user never gets a node role's credentials, block_imds.sh): the Slurm job
    role may, on the one tracking server only; it trusts the worker role alone, which may assume it and no other; the
    nodes' parameters name it (lifecycle/hyperpod/install_job_credentials.sh)."""
    s = synth("multi_az")
    assert s.config.studio.mlflow.enabled and s.config.shared_fsx
    groups = _groups(s)
    worker = {g["ExecutionRole"]["Fn::GetAtt"][0] for name, g in groups.items() if not name.startswith("controller")}
    controller = {g["ExecutionRole"]["Fn::GetAtt"][0] for name, g in groups.items() if name.startswith("controller")}
    (worker,), (controller,) = worker, controller
    resources = s.templates["cluster"]["Resources"]
    (job_role,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::IAM::Role" and "slurm-job" in flatten(r["Properties"].get("RoleName", ""))
    ]
    props = resources[job_role]["Properties"]
    assert flatten(props["RoleName"]) == f"{s.config.name.lower()[:20]}-slurm-job-<AWS::Region>"
    assert props["MaxSessionDuration"] == 3600
    (trust,) = props["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole" and trust["Effect"] == "Allow"
    assert trust["Principal"] == {"AWS": {"Fn::GetAtt": [worker, "Arn"]}}
    statements = statements_by_role(s.templates["cluster"])
    (mlflow,) = statements[job_role]
    assert mlflow["Sid"] == "LogToPlatformMlflow" and mlflow["Action"] == "sagemaker-mlflow:*"
    server = [
        r["Properties"]["TrackingServerName"]
        for r in s.templates["studio"]["Resources"].values()
        if r["Type"] == "AWS::SageMaker::MlflowTrackingServer"
    ]
    assert (
        flatten(mlflow["Resource"])
        == f"arn:aws:sagemaker:{s.config.deployment.region}:<AWS::AccountId>:mlflow-tracking-server/{server[0]}"
    )
    (assume,) = [st for st in statements[worker] if "sts:AssumeRole" in json.dumps(st)]
    assert assume == {
        "Sid": "AssumeSlurmJobRole",
        "Action": "sts:AssumeRole",
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [job_role, "Arn"]},
    }
    for role in (worker, controller):
        assert "sagemaker-mlflow" not in json.dumps(statements[role]), role
    assert 'sts:AssumeRole"' not in json.dumps(statements[controller])
    default = json.dumps(synth("default").templates["cluster"])
    assert "sagemaker-mlflow" not in default and "slurm-job" not in default  # MLflow off: no role, nothing
