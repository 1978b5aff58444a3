"""Storage stack: FSx for Lustre PERSISTENT_2 with its data repository association, its outputs, a file system
you bring instead, root squash and its exemptions."""

import json
import re

from aws_cdk.assertions import Match


def test_lustre_file_system_from_config(synth):
    t = synth("default").template("storage")
    t.has_resource(
        "AWS::FSx::FileSystem",
        {
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": Match.object_like(
                {
                    "FileSystemType": "LUSTRE",
                    "FileSystemTypeVersion": "2.15",
                    "StorageCapacity": 1200,
                    "StorageType": "SSD",
                    "KmsKeyId": {"Ref": Match.string_like_regexp("DataKey")},
                    "LustreConfiguration": {
                        "DeploymentType": "PERSISTENT_2",
                        "PerUnitStorageThroughput": 250,
                        "DataCompressionType": "LZ4",
                        "CopyTagsToBackups": True,
                        "MetadataConfiguration": {"Mode": "AUTOMATIC"},
                    },
                }
            ),
        },
    )
    big = synth("multi_az").template("storage")
    big.has_resource_properties(
        "AWS::FSx::FileSystem",
        {
            "StorageCapacity": 4800,
            "LustreConfiguration": Match.object_like(
                {"PerUnitStorageThroughput": 500, "MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": 12000}}
            ),
        },
    )


def test_lustre_is_in_the_cluster_subnet_and_efa_group(synth):
    s = synth("multi_az")
    fs = next(iter(s.template("storage").find_resources("AWS::FSx::FileSystem").values()))["Properties"]
    assert len(fs["SubnetIds"]) == 1 and "Private1Subnet" in str(fs["SubnetIds"])
    assert "EfaSecurityGroup" in str(fs["SecurityGroupIds"])


def test_data_repository_association_imports_and_exports(synth):
    t = synth("default").template("storage")
    t.has_resource_properties(
        "AWS::FSx::DataRepositoryAssociation",
        {
            "FileSystemPath": "/data",
            "BatchImportMetaDataOnCreate": True,
            "DataRepositoryPath": {"Fn::Join": ["", ["s3://", {"Ref": Match.string_like_regexp("DataBucket")}, "/"]]},
            "S3": {
                "AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]},
                "AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]},
            },
        },
    )


def test_storage_outputs(synth):
    outputs = synth("default").templates["storage"]["Outputs"]
    for name in ("FsxFileSystemId", "FsxDnsName", "FsxMountName", "DataBucketName", "LifecycleBucketName"):
        assert name in outputs


# ---------------------------------------------------------------------------------------------- bring your own FSx
def test_existing_file_system_is_used_not_created(synth):
    s = synth("existing_vpc")
    t = s.templates["storage"]
    types = {r["Type"] for r in t["Resources"].values()}
    assert "AWS::FSx::FileSystem" not in types and "AWS::FSx::DataRepositoryAssociation" not in types
    (access,) = [r["Properties"] for r in t["Resources"].values() if r["Type"] == "Custom::FsxAccessGroup"]
    assert access["FileSystemId"] == "fs-0a1b2c3d4e5f60718"
    groups = {k: r for k, r in t["Resources"].items() if r["Type"] == "AWS::EC2::SecurityGroup"}
    (group_id,) = groups
    assert access["SecurityGroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ingress = sorted(
        (r["Properties"]["FromPort"], r["Properties"]["SourceSecurityGroupId"])
        for r in t["Resources"].values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress"
    )
    assert ingress == [(988, "sg-0a1b2c3d4e5f60718"), (1018, "sg-0a1b2c3d4e5f60718")]


def test_existing_file_system_reaches_the_cluster_and_studio(synth):
    s = synth("existing_vpc")
    params = [
        json.loads(re.sub(r"<<marker:[^>]*>>", '"TOKEN"', p.read_text()))
        for p in s.out_dir.glob("asset.*/platform_parameters.json")
    ]
    assert params[0]["fsx"]["dns_name"] == "fs-0a1b2c3d4e5f60718.fsx.eu-west-1.amazonaws.com"
    assert params[0]["fsx"]["mount_name"] == "abcdefgh"
    studio = s.templates["studio"]
    partitions = [r["Properties"] for r in studio["Resources"].values() if r["Type"] == "Custom::FsxPartition"]
    assert partitions and all(p["DataBucket"] == "research-datasets-eu-west-1" for p in partitions)
    lustre_in = [
        r["Properties"]
        for r in studio["Resources"].values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and r["Properties"]["Description"] == "Lustre from Studio apps"
    ]
    assert len(lustre_in) == 2
    # The rules land on the storage stack's access group, not on the cluster's group you brought.
    assert all(p["GroupId"] != "sg-0a1b2c3d4e5f60718" for p in lustre_in)


# ---------------------------------------------------------------------------------------------- root squash
def _root_squash(t) -> list[dict]:
    return [r["Properties"] for r in t["Resources"].values() if r["Type"] == "Custom::FsxRootSquash"]


def test_root_squash_exempts_exactly_the_slurm_cluster_subnets(synth):
    """Slurm: the cluster's private subnets keep root (lifecycle scripts create homes); Studio's own subnet does not."""
    s = synth("multi_az")
    (squash,) = _root_squash(s.templates["storage"])
    assert squash["RootSquash"] == "65534:65534"
    exempt = json.dumps(squash["NoSquashSubnetIds"])
    assert len(squash["NoSquashSubnetIds"]) == 2 and "Private1Subnet" in exempt and "Private2Subnet" in exempt
    assert "Studio" not in exempt
    fs = next(iter(s.template("storage").find_resources("AWS::FSx::FileSystem")))
    assert squash["FileSystemId"] == {"Ref": fs}
    # The handler may change only this file system.
    statements = [
        st
        for r in s.templates["storage"]["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for st in r["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid") == "SetRootSquash"
    ]
    assert len(statements) == 1 and statements[0]["Action"] == "fsx:UpdateFileSystem"
    assert f'"Ref": "{fs}"' in json.dumps(statements[0]["Resource"])


def test_root_squash_exempts_nothing_on_eks_and_skips_a_brought_file_system(synth):
    """EKS pods reach FSx through their node's client: exempting nodes would exempt pods, so nothing is exempt."""
    (squash,) = _root_squash(synth("eks").templates["storage"])
    assert squash["RootSquash"] == "65534:65534" and squash["NoSquashSubnetIds"] == []
    assert _root_squash(synth("existing_vpc").templates["storage"]) == []


def test_root_squash_off_is_0_0_without_exemptions():
    import aws_cdk as cdk

    from support.variants import cdk_json_context
    from platform_config import parse_config
    from stacks.platform import build_platform

    app = cdk.App(context=cdk_json_context(stage_assets=False))
    platform = build_platform(
        app, parse_config({"storage": {"lustre": {"root_squash": {"enabled": False}}}, "studio": {"enabled": False}})
    )
    from aws_cdk.assertions import Template

    (squash,) = _root_squash(Template.from_stack(platform.storage).to_json())
    assert squash["RootSquash"] == "0:0" and squash["NoSquashSubnetIds"] == []
