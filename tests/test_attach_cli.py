"""cli/attach.py (`make attach`): the partition step on a file system without an S3 link. The command it builds is run
for real (bash, the real script, a directory listed as a Lustre mount); the controller is found on a moto server's
HyperPod cluster; only Session Manager itself (the session-manager-plugin and a HyperPod node) is not here."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from support.paths import ROOT
from support.variants import VARIANT_FILES
from support.moto_server import CREDENTIALS, client, reset
from slurm_root import SLURM_ROOT, in_root, missing as missing_in_root, plugin_dir, skip_reason
from platform_config import parse_config

from cli import attach

SLURM = yaml.safe_load(VARIANT_FILES["attach_slurm"].read_text())
# moto's cluster ARN ends in the cluster's name (a real one in a generated 12-character id): name it like an id.
CLUSTER = "a1b2c3d4e5f6"


def config(**changes):
    data = copy.deepcopy(SLURM)
    data["cluster"]["existing"].update(name=CLUSTER, arn=f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{CLUSTER}")
    for key, value in changes.items():
        node = data
        *parents, last = key.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return parse_config(data)


def test_config_partitions_per_user_and_shared():
    per_user = config(shared_fsx=False)
    assert [p.entry for p in attach.config_partitions(per_user)] == [
        "data-scientist:10001:10001:0700",
        "ml-engineer:10002:10002:0700",
    ]
    shared = config(shared_fsx=True)
    assert [p.entry for p in attach.config_partitions(shared)] == ["shared:0:2000:2775"]
    assert attach.partition_parent(per_user) == "data/studio"
    assert attach.partition_parent(config(storage__lustre__data_repository={"file_system_path": "/"})) == "studio"


def test_the_remote_command_runs_the_real_script_and_makes_the_partitions(tmp_path):
    """The command exactly as the session would run it (without sudo: the test runs as root), through bash: the
    base64 payload, the quoting and the arguments reach the script intact."""
    fsx = tmp_path / "fsx"
    fsx.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    mounts = tmp_path / "mounts"
    mounts.write_text(f"10.0.0.5@tcp:/abcdefgh {fsx} lustre rw 0 0\n")
    cfg = config(storage__lustre__mount_path=str(fsx), shared_fsx=False)
    command = attach.remote_command(cfg, attach.config_partitions(cfg))
    assert command.startswith("sudo bash -c ")
    result = subprocess.run(
        ["bash", "-c", command.removeprefix("sudo ")],
        capture_output=True,
        text=True,
        env={**os.environ, "PROC_MOUNTS": str(mounts)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for user in cfg.users:
        st = (fsx / "data" / "studio" / user.name).stat()
        assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777)) == (user.uid, user.group_id, "0o700")
    # A changed script is a changed payload: what runs is what the repository holds.
    assert attach.remote_command(cfg, [], script=b"echo other") != attach.remote_command(cfg, [])


@pytest.fixture
def clients(moto_endpoint, monkeypatch):
    reset(moto_endpoint)
    for key, value in {**CREDENTIALS, "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(key, value)
    return lambda service: client(moto_endpoint, service, "us-west-2")


def create_cluster(clients, groups=(("controller-machine", 1), ("workers", 2))):
    role = "arn:aws:iam::123456789012:role/hyperpod"
    clients("sagemaker").create_cluster(
        ClusterName=CLUSTER,
        InstanceGroups=[
            {
                "InstanceGroupName": name,
                "InstanceType": "ml.m5.xlarge",
                "InstanceCount": count,
                "ExecutionRole": role,
                "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/lc/", "OnCreate": "on_create.sh"},
                "ThreadsPerCore": 1,
            }
            for name, count in groups
        ],
        VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
    )


def test_the_controller_target_is_the_running_node_of_the_controller_group(clients):
    create_cluster(clients)
    target = attach.controller_target(clients("sagemaker"), config())
    (node,) = [
        n
        for n in clients("sagemaker").list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "controller-machine"
    ]
    assert target == f"sagemaker-cluster:{CLUSTER}_controller-machine-{node['InstanceId']}"


def test_a_cluster_other_than_the_configured_arn_or_without_the_group_is_refused(clients):
    create_cluster(clients, groups=(("head", 1), ("workers", 1)))
    with pytest.raises(attach.AttachError, match="no running node in group 'controller-machine'"):
        attach.controller_target(clients("sagemaker"), config())
    other = config(cluster__existing__arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/zzzzzzzzzzzz")
    with pytest.raises(
        attach.AttachError,
        match="cluster.existing.arn: 'arn:aws:sagemaker:us-west-2:123456789012:"
        "cluster/zzzzzzzzzzzz', but cluster a1b2c3d4e5f6 is",
    ):
        attach.controller_target(clients("sagemaker"), other)


def test_run_prints_the_session_asks_first_and_runs_it_once(clients, tmp_path, capsys):
    create_cluster(clients)
    path = tmp_path / "attach.yaml"
    data = copy.deepcopy(SLURM)
    data["cluster"]["existing"].update(name=CLUSTER, arn=f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{CLUSTER}")
    data["shared_fsx"] = False
    path.write_text(yaml.safe_dump(data))
    ran: list[list[str]] = []
    step = ["--config", str(path), "--step", "partitions"]
    status = attach.run(step, clients=clients, execute=lambda cmd: ran.append(cmd) or 0, ask=lambda _: "wrong")
    assert status == 1 and ran == []  # not confirmed: nothing ran
    status = attach.run(step, clients=clients, execute=lambda cmd: ran.append(cmd) or 0, ask=lambda _: "studio-front")
    assert status == 0 and len(ran) == 1
    cmd = ran[0]
    assert cmd[:3] == ["aws", "ssm", "start-session"]
    assert cmd[cmd.index("--document-name") + 1] == "AWS-StartInteractiveCommand"
    assert cmd[cmd.index("--target") + 1].startswith(f"sagemaker-cluster:{CLUSTER}_controller-machine-")
    (remote,) = json.loads(cmd[cmd.index("--parameters") + 1])["command"]
    assert remote == attach.remote_command(parse_config(data), attach.config_partitions(parse_config(data)))
    out = capsys.readouterr().out
    assert "data-scientist (10001:10001 0700)" in out and "start-session" in out
    # A refused partition on the node is a failed run.
    assert attach.run([*step, "--yes"], clients=clients, execute=lambda cmd: 1) == 1


def test_a_build_config_is_not_attached(tmp_path, capsys):
    path = tmp_path / "build.yaml"
    path.write_text((ROOT / "config" / "default.yaml").read_text())
    assert attach.run(["--config", str(path)], clients=lambda s: None) == 2
    assert "not an attach config" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- the login step
BUCKET = "studio-front-lifecycle"


# The controller's side of the hand-over runs in the Slurm root (tests/e2e/slurm_root.py): Debian 13's Slurm 24.11,
# the release HyperPod's AMI runs, whatever this machine has (a clean one has no Slurm client of its own).
CONTROLLER_COMMANDS = ["bash", "sinfo", "curl", "python3", "tar"]


def on_the_controller(remote: str, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    """A session's command run as root on the controller: in the Slurm root, with the test's environment."""
    return subprocess.run(
        in_root("bash", "-c", remote.removeprefix("sudo ")), capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.fixture
def controller(tmp_path):
    """What an existing controller has: HyperPod's slurm.conf and a munge key (the Slurm root's Slurm 24.11 client
    stands in for the AMI's; the bundle is built from it for real). Its plugin directory (the script's
    SLURM_PLUGIN_DIR) holds libslurmfull.so and the auth and cred plugins, the ones a client talking munge loads: the
    hand-over never looks inside the bundle, and all 120 plugins with their libraries made each build 39 MB and ~3 s
    of CPU. tests/lifecycle/slurm_client_bundle.bats tests what the bundle holds, and tests/e2e/test_attach_slurm.py
    hands over a bundle of a whole Slurm 24.11 plugin directory and runs its commands."""
    if os.geteuid() != 0 or missing_in_root(CONTROLLER_COMMANDS):
        pytest.skip(f"needs root; {skip_reason(CONTROLLER_COMMANDS)}")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-12(10.1.0.12)\nSlurmctldPort=6817\n")
    key = tmp_path / "munge.key"
    key.write_bytes(bytes(range(256)) * 4)
    key.chmod(0o400)
    plugins = tmp_path / "slurm-plugins"
    plugins.mkdir()
    inside = Path("/") / plugin_dir()  # the links are followed inside the root
    for plugin in [
        "libslurmfull.so",
        *(p.name for pattern in ("auth_*.so", "cred_*.so") for p in (SLURM_ROOT / plugin_dir()).glob(pattern)),
    ]:
        (plugins / plugin).symlink_to(inside / plugin)
    return {"SLURM_CONF": str(conf), "MUNGE_KEY": str(key), "ATTACH_ALLOW_HTTP": "1", "SLURM_PLUGIN_DIR": str(plugins)}


def login_handover(clients, controller):
    s3 = clients("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    secret = clients("secretsmanager").create_secret(Name="studio-front/slurm-login")["ARN"]
    handover = attach.prepare_login(s3, BUCKET, nonce="0123456789abcdef")
    assert handover.remote.startswith("sudo bash -c ")
    result = on_the_controller(handover.remote, {**os.environ, **controller}, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    key = __import__("base64").b64encode(bytes(range(256)) * 4).decode()
    assert key not in result.stdout + result.stderr  # the munge key never passes through the session's output
    return s3, secret, handover


def keys(s3) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def test_the_login_step_hands_over_the_controllers_value_and_bundle_into_the_secret(clients, controller):
    s3, secret, handover = login_handover(clients, controller)
    summary = attach.finish_login(s3, clients("secretsmanager"), handover, secret)
    value = json.loads(clients("secretsmanager").get_secret_value(SecretId=secret)["SecretString"])
    assert value["controller_addr"] == "10.1.0.12" and value["cluster_name"] == "ml-cluster"
    assert value["munge_key_b64"] == __import__("base64").b64encode(bytes(range(256)) * 4).decode()
    bundle = value["client_bundle"]
    key = bundle["s3_uri"].removeprefix(f"s3://{BUCKET}/")
    data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert __import__("hashlib").sha256(data).hexdigest() == bundle["sha256"]
    assert key == f"slurm-client/slurm-client-{value['slurm_version']}-{bundle['sha256']}.tar.gz"
    # The hand-over objects are gone; the tools archive (named by its sha256) and the bundle stay.
    assert not any("attach-0123456789abcdef" in k for k in keys(s3))
    assert "secret updated" in summary
    assert "secret already current" in attach.finish_login(
        s3, clients("secretsmanager"), login_handover_again(s3, handover, controller), secret
    )


def login_handover_again(s3, handover, controller):
    result = on_the_controller(handover.remote, {**os.environ, **controller}, timeout=300)
    assert result.returncode == 0, result.stderr
    return handover


def test_a_bundle_other_than_the_one_the_value_names_writes_nothing(clients, controller):
    s3, secret, handover = login_handover(clients, controller)
    s3.put_object(Bucket=BUCKET, Key=handover.bundle_key, Body=b"a planted bundle")
    with pytest.raises(attach.AttachError, match="is not the one the value names"):
        attach.finish_login(s3, clients("secretsmanager"), handover, secret)
    sm = clients("secretsmanager")
    with pytest.raises(sm.exceptions.ResourceNotFoundException):  # the secret still has no value
        sm.get_secret_value(SecretId=secret)
    assert not any("attach-0123456789abcdef" in k for k in keys(s3))
    assert not any(k.startswith("slurm-client/slurm-client-") for k in keys(s3))


def test_a_tools_archive_changed_in_the_bucket_is_refused_on_the_controller(clients, controller):
    s3 = clients("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    handover = attach.prepare_login(s3, BUCKET, nonce="0123456789abcdef")
    (tools_key,) = [k for k in keys(s3) if k.startswith("slurm-client/attach-tools-")]
    s3.put_object(Bucket=BUCKET, Key=tools_key, Body=b"#!/bin/bash\necho changed\n")
    result = on_the_controller(handover.remote, {**os.environ, **controller}, timeout=120)
    assert result.returncode != 0 and "FAILED" in result.stdout + result.stderr
    assert handover.value_key not in keys(s3)


def test_make_attach_in_shared_mode_fills_the_secret_and_makes_the_shared_partition(clients, controller, tmp_path):
    """The whole run, as `make attach --yes` does it: both sessions' commands executed for real by bash (the
    controller's part), the stacks' outputs read from moto's CloudFormation."""
    create_cluster(clients)
    s3 = clients("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    secret = clients("secretsmanager").create_secret(Name="studio-front/slurm-login")["ARN"]
    cloudformation = clients("cloudformation")
    for stack, outputs in (
        ("studio-front-storage", {"LifecycleBucketName": BUCKET}),
        ("studio-front-slurm-login", {"SlurmLoginSecretArn": secret}),
    ):
        cloudformation.create_stack(
            StackName=stack,
            TemplateBody=json.dumps(
                {
                    "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                    "Outputs": {k: {"Value": v} for k, v in outputs.items()},
                }
            ),
        )
    fsx = tmp_path / "fsx"
    fsx.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    (tmp_path / "mounts").write_text(f"10.0.0.5@tcp:/abcdefgh {fsx} lustre rw 0 0\n")
    data = copy.deepcopy(SLURM)
    data["cluster"]["existing"].update(name=CLUSTER, arn=f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{CLUSTER}")
    data["storage"]["lustre"]["mount_path"] = str(fsx)
    path = tmp_path / "attach.yaml"
    path.write_text(yaml.safe_dump(data))

    def run_session(cmd: list[str]) -> int:
        (remote,) = json.loads(cmd[cmd.index("--parameters") + 1])["command"]
        env = {**os.environ, **controller, "PROC_MOUNTS": str(tmp_path / "mounts")}
        result = on_the_controller(remote, env, timeout=300)
        print(result.stdout, result.stderr)
        return result.returncode

    assert attach.run(["--config", str(path), "--yes"], clients=clients, execute=run_session) == 0
    value = json.loads(clients("secretsmanager").get_secret_value(SecretId=secret)["SecretString"])
    assert value["auth"] == "munge" and value["client_bundle"]["s3_uri"].startswith(f"s3://{BUCKET}/slurm-client/")
    st = (fsx / "data" / "studio" / "shared").stat()
    assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777)) == (0, 2000, "0o2775")


# ----------------------------------------------------------------------------------------------- per-user auth/jwt
def test_the_jwt_step_shows_the_change_first_applies_it_only_when_confirmed_and_fills_the_key_secret(
    clients, tmp_path, capsys
):
    """make attach --step jwt in per-user mode: the plan session runs first, the apply session only after the
    platform's name is typed (or --yes), and the key it hands over through its presigned URL lands in the key secret.
    The controller here only answers the sessions (the plan prints, the apply PUTs a key to the URL in its command);
    tests/lifecycle/enable_slurm_jwt.bats runs the script and tests/e2e/test_attach_slurm.py runs it on slurmctld."""
    import base64
    import shlex
    import urllib.request

    create_cluster(clients)
    s3 = clients("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    sm = clients("secretsmanager")
    key_secret = sm.create_secret(Name="studio-front/slurm-jwt-key")["ARN"]
    clients("cloudformation").create_stack(
        StackName="studio-front-storage",
        TemplateBody=json.dumps(
            {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": {"LifecycleBucketName": {"Value": BUCKET}}}
        ),
    )
    data = copy.deepcopy(SLURM)
    data["cluster"]["existing"].update(name=CLUSTER, arn=f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{CLUSTER}")
    data["shared_fsx"] = False
    path = tmp_path / "attach.yaml"
    path.write_text(yaml.safe_dump(data))
    key = bytes(range(32))
    sessions: list[str] = []

    def controller(cmd: list[str]) -> int:
        (remote,) = json.loads(cmd[cmd.index("--parameters") + 1])["command"]
        script = shlex.split(remote)[3]  # sudo bash -c SCRIPT
        action = "apply" if 'enable_slurm_jwt.sh" apply' in script else "plan"
        sessions.append(action)
        if action == "apply":
            url = shlex.split(script.rsplit('enable_slurm_jwt.sh" apply ', 1)[1])[0]
            body = json.dumps({"jwt_hs256_key_b64": base64.b64encode(key).decode()}).encode()
            # as curl -T sends it (a form Content-Type would have moto's server read the body as a form)
            urllib.request.urlopen(
                urllib.request.Request(
                    url, data=body, method="PUT", headers={"Content-Type": "application/octet-stream"}
                ),
                timeout=10,
            ).close()
        return 0

    def only_the_issuer_reads(params, **_):
        # The key secret's policy denies GetSecretValue to all but the token issuer (stacks/slurm_login_stack.py,
        # OnlyTheTokenIssuerReads); moto does not enforce resource policies, so the attach step's client refuses here.
        if "slurm-jwt-key" in params.get("SecretId", ""):
            raise AssertionError("make attach read the key secret, which its policy denies to the attach role")

    def attach_clients(service):
        client = clients(service)
        if service == "secretsmanager":
            client.meta.events.register("provide-client-params.secrets-manager.GetSecretValue", only_the_issuer_reads)
        return client

    argv = ["--config", str(path), "--step", "jwt"]
    assert attach.run(argv, clients=attach_clients, execute=controller, ask=lambda _: "no") == 1
    assert sessions == ["plan"]  # shown, not made
    with pytest.raises(sm.exceptions.ResourceNotFoundException):
        sm.get_secret_value(SecretId=key_secret)
    assert attach.run(argv, clients=attach_clients, execute=controller, ask=lambda _: "studio-front") == 0
    assert sessions == ["plan", "plan", "apply"]
    value = json.loads(sm.get_secret_value(SecretId=key_secret)["SecretString"])
    assert base64.b64decode(value["jwt_hs256_key_b64"]) == key
    assert "the auth/jwt key is in studio-front/slurm-jwt-key (version" in capsys.readouterr().out
    assert not any(k.endswith("jwt_key.json") for k in keys(s3))
    # --yes asks nothing; a second run leaves the secret as it is.
    assert (
        attach.run([*argv, "--yes"], clients=attach_clients, execute=controller, ask=lambda _: pytest.fail("asked"))
        == 0
    )
    assert len(sm.list_secret_version_ids(SecretId=key_secret)["Versions"]) == 1
    capsys.readouterr()
    # A controller that refuses the plan (or rolls back the apply) fails the run; nothing is written.
    assert attach.run([*argv, "--yes"], clients=attach_clients, execute=lambda cmd: 1) == 1
    # In shared mode there is no jwt step.
    data["shared_fsx"] = True
    path.write_text(yaml.safe_dump(data))
    assert attach.run(argv, clients=attach_clients, execute=controller) == 2
    assert "per-user auth/jwt is for shared_fsx: false" in capsys.readouterr().err


def test_a_handed_over_key_that_is_not_a_32_byte_key_is_not_written(clients):
    s3 = clients("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    sm = clients("secretsmanager")
    secret = sm.create_secret(Name="studio-front/slurm-jwt-key")["ARN"]
    handover = attach.prepare_jwt(s3, BUCKET, nonce="0123456789abcdef")
    for body in (
        b'{"jwt_hs256_key_b64": "c2hvcnQ="}',
        b"not json",
        b'{"jwt_hs256_key_b64": "%%%"}',
        b"[1]",
        b'{"jwt_hs256_key_b64": "' + __import__("base64").b64encode(bytes(32)) + b'", "other": 1}',
    ):
        s3.put_object(Bucket=BUCKET, Key=handover.key_key, Body=body)
        with pytest.raises((attach.AttachError, ValueError)):
            attach.finish_jwt(s3, sm, handover, secret)
        assert handover.key_key not in keys(s3)
    with pytest.raises(sm.exceptions.ResourceNotFoundException):
        sm.get_secret_value(SecretId=secret)


# ----------------------------------------------------------------------------------------------- EKS: the partition Job
EKS = yaml.safe_load(VARIANT_FILES["attach_eks"].read_text())
IMAGE = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ubuntu@sha256:" + "a" * 64


def eks_unlinked():
    data = copy.deepcopy(EKS)
    del data["storage"]["lustre"]["existing"]["data_bucket"]
    data["cluster"]["existing"].update(
        partition_namespace="studio-admin", partition_claim="fsx-root", partition_image=IMAGE
    )
    return parse_config(data)


def test_the_partition_job_is_a_valid_job_that_runs_the_repositorys_script(tmp_path):
    """The objects pass Kubernetes' schemas (kubernetes-validate, offline); the Job's container command, run by bash
    here with the ConfigMap's script and the Job's arguments (the claim's mount point replaced by a directory listed
    as Lustre), makes the partitions."""
    import kubernetes_validate
    from platform_config.eks import DEFAULT_KUBERNETES

    cfg = eks_unlinked()
    config_map, job = attach.partition_job(cfg, attach.config_partitions(cfg))
    for obj in (config_map, job):
        kubernetes_validate.validate(obj, DEFAULT_KUBERNETES, strict=True)
    assert (
        config_map["data"]["make_partitions.sh"] == (ROOT / "lifecycle" / "attach" / "make_partitions.sh").read_text()
    )
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE and container["securityContext"]["runAsUser"] == 0
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "fsx-root"}
    assert job["metadata"]["namespace"] == config_map["metadata"]["namespace"] == "studio-admin"
    assert attach.partition_job(cfg, attach.config_partitions(cfg)) == [config_map, job]  # a rerun: the same Job

    (tmp_path / "attach").mkdir()
    (tmp_path / "attach" / "make_partitions.sh").write_text(config_map["data"]["make_partitions.sh"])
    fsx = tmp_path / "fsx"
    fsx.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    (tmp_path / "mounts").write_text(f"fs@tcp:/x {fsx} lustre rw 0 0\n")
    args = container["args"]
    assert args[0] == container["volumeMounts"][0]["mountPath"] == "/fsx"
    result = subprocess.run(
        ["bash", str(tmp_path / "attach" / "make_partitions.sh"), str(fsx), *args[1:]],
        capture_output=True,
        text=True,
        env={**os.environ, "PROC_MOUNTS": str(tmp_path / "mounts")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for user in cfg.users:  # the example's per-user partitions, under data/studio
        st = (fsx / "data" / "studio" / user.name).stat()
        assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o777)) == (user.uid, user.group_id, "0o700")


def test_make_attach_on_eks_applies_waits_and_shows_the_log(tmp_path, capsys):
    cfg_path = tmp_path / "eks.yaml"
    data = copy.deepcopy(EKS)
    del data["storage"]["lustre"]["existing"]["data_bucket"]
    data["cluster"]["existing"].update(
        partition_namespace="studio-admin", partition_claim="fsx-root", partition_image=IMAGE
    )
    cfg_path.write_text(yaml.safe_dump(data))
    assert attach.run(["--config", str(cfg_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "kubectl apply -f" in out and '"kind": "Job"' in out
    ran: list[list[str]] = []
    assert attach.run(["--config", str(cfg_path), "--yes"], execute=lambda cmd: ran.append(cmd) or 0) == 0
    assert [cmd[:2] for cmd in ran] == [["kubectl", "apply"], ["kubectl", "-n"], ["kubectl", "-n"]]
    assert ran[1][3:5] == ["wait", "--for=condition=complete"]
    # A failed Job (a refused partition) is a failed run.
    assert attach.run(["--config", str(cfg_path), "--yes"], execute=lambda cmd: 0 if cmd[1] == "apply" else 1) == 1
