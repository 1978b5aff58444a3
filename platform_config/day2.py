"""Day-2 rules: config edits that can never be deployed in place, judged against what is deployed.

`snapshot(config)` is the part of a config whose change would replace or orphan something stateful; the storage
stack carries it as template metadata (SNAPSHOT_METADATA_KEY), so cli/replacement_guard.py can read the
deployed one and `check_day2(deployed_snapshot, new_config)` can refuse an edit before any change set exists.
Errors name the config key, the old and new value, what would be lost, and the in-place alternative if any.

Which FSx for Lustre changes are in place (CloudFormation User Guide, AWS::FSx::FileSystem and its
LustreConfiguration, https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-fsx-filesystem.html):
- StorageCapacity: "Update requires: No interruption", increases only (UpdateFileSystem cannot shrink; the FSx
  for Lustre guide, "Increasing storage capacity": persistent SSD grows in multiples of 2400 GiB).
- LustreConfiguration.PerUnitStorageThroughput: "Update requires: Replacement" in the CloudFormation
  documentation, although the FSx API (UpdateFileSystem, "Managing throughput capacity") changes it in place and
  the registry schema cfn-lint bundles does not list it as create-only. CloudFormation's documented behaviour
  decides what a stack update does, so a change through the config is refused; change it with
  `aws fsx update-file-system` and keep the config's value (the file system keeps its data either way).
"""

from __future__ import annotations

from typing import Any

from platform_config import PlatformConfig

SNAPSHOT_METADATA_KEY = "HyperPodPlatformCreateOnly"


def snapshot(config: PlatformConfig) -> dict[str, Any]:
    """JSON-safe values of the create-only inputs (small: no user list, no instance groups). No nulls: the CDK
    drops them from template metadata."""
    lustre = config.storage.lustre
    network = config.network
    return {
        "name": config.name,
        # Attach mode: the existing cluster's ARN; build mode: "" (no nulls in template metadata).
        "attach": config.cluster.existing.arn if config.cluster.existing else "",
        "orchestrator": config.orchestrator,
        "region": config.deployment.region,
        "network": {
            "existing": network.existing.vpc_id if network.existing else "",
            "vpc_cidr": network.vpc_cidr,
            "az_ids": list(network.az_ids),
            "public_subnet_cidr": network.public_subnet_cidr,
            "private_subnet_cidrs": list(network.private_subnet_cidrs),
        },
        "lustre": {
            "existing": lustre.existing.file_system_id if lustre.existing else "",
            "storage_capacity_gib": lustre.storage_capacity_gib,
            "throughput_mib_per_tib": lustre.throughput_mib_per_tib,
            "file_system_path": lustre.data_repository.file_system_path,
            "s3_prefix": lustre.data_repository.s3_prefix,
        },
        "eks_version": config.eks.kubernetes_version if config.orchestrator == "eks" else "",
        "partition_root": config.studio.partition_root,
        "uids": {user.name: user.uid for user in config.users},
    }


def check_day2(deployed: dict[str, Any], config: PlatformConfig | dict[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings) for deploying `config` (or its snapshot) over a platform whose snapshot is `deployed`."""
    new = snapshot(config) if isinstance(config, PlatformConfig) else config
    errors: list[str] = []
    warnings: list[str] = []

    def changed(key: str, old: Any, now: Any, loss: str, *, fix: str = "") -> None:
        if old != now:
            errors.append(
                f"{key}: {old!r} -> {now!r} cannot be deployed in place: {loss}" + (f"; {fix}" if fix else "")
            )

    changed(
        "name",
        deployed.get("name"),
        new["name"],
        "every resource name (cluster, buckets, domain) derives from it, so this is a new platform, "
        "not an update; deploy it as a separate platform",
    )
    changed("deployment.region", deployed.get("region"), new["region"], "stacks cannot move between regions")
    changed(
        "orchestrator",
        deployed.get("orchestrator"),
        new["orchestrator"],
        "the HyperPod cluster's orchestrator is create-only (AWS::SageMaker::Cluster Orchestrator/Eks) and the "
        "cluster has a fixed name: it would have to be deleted with its nodes",
    )

    old_attach, new_attach = deployed.get("attach", ""), new.get("attach", "")
    if bool(old_attach) != bool(new_attach):
        errors.append(
            f"cluster.existing: {'attach' if old_attach else 'build'} -> {'attach' if new_attach else 'build'} cannot "
            "be deployed in place: "
            + (
                "the deployed platform built its own cluster, network and file system; attach mode would delete the "
                "cluster and its nodes from the cluster stack and orphan the retained file system"
                if new_attach
                else "the deployed platform is the Studio front door of a cluster it did not build; build mode would create "
                "a second cluster, network and file system beside it and move Studio to them"
            )
            + ". Deploy the other mode as a separate platform (another name) and destroy this one when done"
        )
    elif old_attach and old_attach != new_attach:
        changed(
            "cluster.existing.arn",
            old_attach,
            new_attach,
            "Studio's partitions, login secret and access entries belong to the attached cluster",
            fix="attach the other cluster as a separate platform (another name)",
        )

    old_net, new_net = deployed.get("network", {}), new["network"]
    if old_net.get("existing", "") != new_net["existing"]:
        changed(
            "network.existing.vpc_id",
            old_net.get("existing"),
            new_net["existing"],
            "switching between a platform-built and an existing VPC replaces every subnet, the file system "
            "(SubnetIds is create-only) and the cluster",
        )
    elif not new_net["existing"]:
        changed(
            "network.vpc_cidr",
            old_net.get("vpc_cidr"),
            new_net["vpc_cidr"],
            "AWS::EC2::VPC CidrBlock is create-only: a new VPC, and with it new subnets, a new FSx file system "
            "(the old one retained but orphaned, its data unreachable by the cluster) and a new cluster",
        )
        for index, (old_az, new_az) in enumerate(zip(old_net.get("az_ids", []), new_net["az_ids"], strict=False)):
            changed(
                f"network.az_ids[{index}]",
                old_az,
                new_az,
                "AWS::EC2::Subnet AvailabilityZoneId is create-only: the subnet is replaced"
                + (", and the FSx file system in it (SubnetIds is create-only)" if index == 0 else ""),
                fix="append new AZ IDs (and CIDRs) at the end instead",
            )
        for index, (old_cidr, new_cidr) in enumerate(
            zip(old_net.get("private_subnet_cidrs", []), new_net["private_subnet_cidrs"], strict=False)
        ):
            changed(
                f"network.private_subnet_cidrs[{index}]",
                old_cidr,
                new_cidr,
                "AWS::EC2::Subnet CidrBlock is create-only: the subnet is replaced"
                + (", and the FSx file system in it (SubnetIds is create-only)" if index == 0 else ""),
                fix="append a new subnet at the end instead",
            )
        if len(new_net["az_ids"]) < len(old_net.get("az_ids", [])):
            errors.append(
                f"network.az_ids: {len(old_net['az_ids'])} -> {len(new_net['az_ids'])} AZs: removing a "
                "private subnet deletes it while cluster groups or Studio may still use it"
            )
        if old_net.get("public_subnet_cidr") != new_net["public_subnet_cidr"]:
            warnings.append(
                f"network.public_subnet_cidr: {old_net.get('public_subnet_cidr')!r} -> "
                f"{new_net['public_subnet_cidr']!r} replaces the public subnet and the NAT gateway "
                "(outbound traffic from the nodes stops for a few minutes)"
            )

    old_fs, new_fs = deployed.get("lustre", {}), new["lustre"]
    if old_fs.get("existing", "") != new_fs["existing"]:
        changed(
            "storage.lustre.existing",
            old_fs.get("existing"),
            new_fs["existing"],
            "switching between a platform-built and an existing file system deletes one from the stack "
            "(retained, orphaned) and points the cluster and Studio at the other",
        )
    elif not new_fs["existing"]:
        old_capacity, new_capacity = old_fs.get("storage_capacity_gib"), new_fs["storage_capacity_gib"]
        if old_capacity is not None and new_capacity < old_capacity:
            errors.append(
                f"storage.lustre.storage_capacity_gib: {old_capacity} -> {new_capacity} cannot be "
                "deployed: FSx for Lustre storage capacity only grows (UpdateFileSystem); keep "
                f"{old_capacity} or more"
            )
        changed(
            "storage.lustre.throughput_mib_per_tib",
            old_fs.get("throughput_mib_per_tib"),
            new_fs["throughput_mib_per_tib"],
            "CloudFormation documents LustreConfiguration.PerUnitStorageThroughput as 'Update requires: "
            "Replacement', i.e. a new, empty file system",
            fix=f"change it in place with `aws fsx update-file-system --file-system-id <id> "
            f"--lustre-configuration PerUnitStorageThroughput={new_fs['throughput_mib_per_tib']}` and keep "
            f"{old_fs.get('throughput_mib_per_tib')!r} in the config",
        )
    changed(
        "storage.lustre.data_repository.file_system_path",
        old_fs.get("file_system_path"),
        new_fs["file_system_path"],
        "AWS::FSx::DataRepositoryAssociation FileSystemPath is create-only: the association is replaced and "
        "every Studio partition path moves",
    )
    changed(
        "storage.lustre.data_repository.s3_prefix",
        old_fs.get("s3_prefix"),
        new_fs["s3_prefix"],
        "AWS::FSx::DataRepositoryAssociation DataRepositoryPath is create-only: the association is replaced "
        "and the file system's view of the bucket changes",
    )

    old_version, new_version = deployed.get("eks_version"), new["eks_version"]
    if old_version and new_version and old_version != new_version:
        old_minor, new_minor = (int(v.split(".")[1]) for v in (old_version, new_version))
        if new_minor < old_minor:
            errors.append(f"eks.kubernetes_version: {old_version!r} -> {new_version!r}: EKS cannot downgrade a cluster")
        elif new_minor > old_minor + 1:
            errors.append(
                f"eks.kubernetes_version: {old_version!r} -> {new_version!r}: EKS upgrades one minor "
                f"version at a time; deploy 1.{old_minor + 1} first"
            )

    if deployed.get("partition_root") not in (None, new["partition_root"]):
        warnings.append(
            f"studio.partition_root: {deployed['partition_root']!r} -> {new['partition_root']!r}: "
            "new partitions are created under the new root; the old directories stay, unmounted"
        )
    for name, uid in deployed.get("uids", {}).items():
        if name in new["uids"] and new["uids"][name] != uid:
            warnings.append(
                f"users[{name}].uid: {uid} -> {new['uids'][name]}: files the user owns on FSx keep "
                "the old uid; chown them after the change"
            )
    return errors, warnings
