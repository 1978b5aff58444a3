"""HyperPod's contract with the cluster stack: no reserved file beside SlurmConfig, the lifecycle hooks, no Slurm
restarts from a script, no SlurmConfigStrategy on a continuous cluster."""

import json

from support.paths import ROOT
from support.template import cluster_properties


# ---------------------------------------------------------------------------------------------- HyperPod's contract
SLURM_VARIANTS = ("default", "multi_az", "existing_vpc", "containers")


def _asset_files(s, deployment: dict) -> list[str]:
    """Every file a BucketDeployment copies: the contents of each source asset in the cloud assembly."""
    assets = {h: a for m in s.out_dir.glob("*.assets.json") for h, a in json.loads(m.read_text())["files"].items()}
    files = []
    for key in deployment["SourceObjectKeys"]:
        source = assets[key.split(".")[0]]["source"]["path"]
        root = s.out_dir / source
        files += (
            [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()] if root.is_dir() else _zip_names(root)
        )
    return files


def _zip_names(path) -> list[str]:
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return archive.namelist()


def test_lifecycle_prefix_never_holds_hyperpods_reserved_file_while_slurm_config_is_set(synth):
    """HyperPod refuses "a SLURM Orchestrator Config and a provisioning_parameters.json file simultaneously"
    (sagemaker-hyperpod-slurm-api-config-migration): no deployment into any group's SourceS3Uri may carry one."""
    from constructs.lifecycle_scripts import HYPERPOD_RESERVED_FILE, PARAMETERS_FILE

    for variant in SLURM_VARIANTS:
        s = synth(variant)
        groups = cluster_properties(s)["InstanceGroups"]
        assert all("SlurmConfig" in g for g in groups)
        prefixes = {json.dumps(g["LifeCycleConfig"]["SourceS3Uri"]) for g in groups}
        assert len(prefixes) == 1 and "hyperpod/" in prefixes.pop()
        for template in s.templates.values():
            for r in template["Resources"].values():
                if r["Type"] != "Custom::CDKBucketDeployment":
                    continue
                names = [n.rsplit("/", 1)[-1] for n in _asset_files(s, r["Properties"])]
                assert HYPERPOD_RESERVED_FILE not in names, (variant, r["Properties"]["DestinationBucketKeyPrefix"])
                if r["Properties"]["DestinationBucketKeyPrefix"] == f"hyperpod/{s.config.name}/":
                    assert PARAMETERS_FILE in names and "on_init_complete.sh" in names


def test_the_scripts_folder_cannot_ship_the_reserved_file(tmp_path):
    import aws_cdk as cdk
    import pytest
    from aws_cdk import aws_s3 as s3
    from constructs.lifecycle_scripts import LifecycleScripts

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "provisioning_parameters.json").write_text("{}")
    stack = cdk.Stack(cdk.App())
    with pytest.raises(ValueError, match=r"sub/provisioning_parameters.json would make HyperPod refuse"):
        LifecycleScripts(
            stack,
            "Scripts",
            bucket=s3.Bucket.from_bucket_name(stack, "B", "sagemaker-b"),
            prefix="p",
            upload_role_name="test-upload",
            source_dir=tmp_path,
        )


def test_slurm_groups_use_the_extended_hook_and_eks_groups_on_create(synth):
    """OnInitComplete ("runs after HyperPod configures the default software", mutually exclusive with OnCreate) for
    Slurm: HyperPod has written slurm.conf and started the daemons when our script runs. See lifecycle/hyperpod/README.md."""
    for variant in SLURM_VARIANTS:
        for group in cluster_properties(synth(variant))["InstanceGroups"]:
            hooks = {k: v for k, v in group["LifeCycleConfig"].items() if k != "SourceS3Uri"}
            assert hooks == {"OnInitComplete": "on_init_complete.sh"}, (variant, group["InstanceGroupName"])
    for group in cluster_properties(synth("eks"))["InstanceGroups"]:
        hooks = {k: v for k, v in group["LifeCycleConfig"].items() if k != "SourceS3Uri"}
        assert hooks == {"OnCreate": "on_create.sh"}
    scripts = ROOT / "lifecycle" / "hyperpod"
    assert (scripts / "on_init_complete.sh").is_file() and (scripts / "on_create.sh").is_file()


def test_the_hook_never_starts_or_rewrites_slurm():
    """Static half of the contract (the bats tests run it): no lifecycle script starts, stops or restarts a Slurm
    daemon or writes slurm.conf; scontrol appears only as `scontrol reconfigure`, the read-only `scontrol show`
    (apply_accounting.sh reads the running configuration), `scontrol ping` (lib/common.sh waits for slurmctld) or
    `scontrol update NodeName=` (a login node drains itself, configure_slurm.sh)."""
    import re

    for script in (ROOT / "lifecycle" / "hyperpod").rglob("*.sh"):
        code = "\n".join(line for line in script.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"systemctl\s+(start|restart|stop|enable|disable|mask)[^\n]*slurm", code), script
        assert not re.search(r"slurm(ctld|d)\s+-D|--conf-server", code), script
        assert not re.search(r">>?\s*\S*slurm\.conf", code), script
        assert all(
            m in ("reconfigure", "show", "ping", "update NodeName")
            for m in re.findall(r"\bscontrol\s+(\w+(?: NodeName)?)", code)
        ), script


def _bare_cluster(orchestrator):
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Template

    from constructs.hyperpod_cluster import GroupSpec, HyperPodCluster

    stack = cdk.Stack(cdk.App(), "Bare")
    HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="c",
        orchestrator=orchestrator,
        groups=[
            GroupSpec(
                name="controller",
                role="controller",
                instance_type="ml.m5.xlarge",
                instance_count=2,
                threads_per_core=1,
                ebs_volume_gib=100,
            )
        ],
        vpc_id="vpc-1",
        subnet_ids=["subnet-1"],
        default_subnet_id="subnet-1",
        security_group_id="sg-1",
        lifecycle_bucket=s3.Bucket.from_bucket_name(stack, "B", "sagemaker-lc-c"),
        lifecycle_prefix="p",
        node_recovery="Automatic",
        on_init_complete="on_init_complete.sh",
    )
    (props,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    return props["Properties"]


def test_a_continuous_cluster_carries_no_slurm_config_strategy_and_the_construct_refuses_one():
    """ "Clusters that use continuous provisioning support only the Merge behavior and reject requests that set
    SlurmConfigStrategy" (HyperPod developer guide, Migrating to API-driven Slurm configuration)."""
    import pytest

    from constructs.hyperpod_cluster import SlurmOrchestrator

    props = _bare_cluster(SlurmOrchestrator(config_strategy=None, node_provisioning_mode="Continuous"))
    assert props["NodeProvisioningMode"] == "Continuous"
    assert "SlurmConfigStrategy" not in props["Orchestrator"]["Slurm"]
    assert _bare_cluster(SlurmOrchestrator(config_strategy="Overwrite"))["Orchestrator"] == {
        "Slurm": {"SlurmConfigStrategy": "Overwrite"}
    }
    with pytest.raises(ValueError, match="HyperPod rejects a strategy on continuous clusters"):
        _bare_cluster(SlurmOrchestrator(config_strategy="Merge", node_provisioning_mode="Continuous"))
