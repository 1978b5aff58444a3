"""What a configuration buys: accelerators per group, FSx for Lustre throughput and metadata IOPS, and how long one
checkpoint of `storage.checkpoint_gib` takes to write and read. Pure arithmetic on the config; no AWS calls.

Per-unit figures are AWS's published ones for PERSISTENT_2 SSD file systems ("File system performance for SSD
storage options", https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html, also the "Aggregate file
system performance" table of https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html): disk throughput
baseline equals the throughput tier (125/250/500/1000 MB/s per TiB); network throughput baseline 320/640/1300/2600
MB/s per TiB. "Throughput capacity = storage capacity (TiB) x throughput per unit of storage"
(https://repost.aws/knowledge-center/fsx-for-lustre-performance). Writing a checkpoint is bound by the disk
baseline; reading one that is not in the servers' cache is bound by the lower of disk and network, i.e. disk too.
Burst credits and LZ4 compression can make both faster; the estimate ignores them on purpose (a lower bound on
speed is what a budget needs).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path


from cli.preconditions import loaded_config
from platform_config import PlatformConfig
from platform_config.facts import ACCELERATORS
from platform_config.storage import checkpoint_dir

# Baseline MB/s per TiB of storage, by throughput tier (PERSISTENT_2 SSD; sources in the module docstring).
DISK_BASELINE_MBPS_PER_TIB = {125: 125, 250: 250, 500: 500, 1000: 1000}
NETWORK_BASELINE_MBPS_PER_TIB = {125: 320, 250: 640, 500: 1300, 1000: 2600}
METADATA_DOC = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-metadata-performance.html"
MB_PER_GIB = 1024**3 / 1e6  # 1 GiB = 1073.74 MB (AWS quotes throughput in decimal MB/s)


# vCPUs, memory and accelerator model per instance type (tools/instance_type_specs.py, from EC2's answers).
INSTANCE_SPECS_FACTS = Path(__file__).resolve().parent.parent / "config" / "facts" / "instance_type_specs.json"


def instance_specs() -> dict[str, dict]:
    return json.loads(INSTANCE_SPECS_FACTS.read_text())["specs"]


@dataclass(frozen=True)
class GroupSizing:
    name: str
    instance_type: str
    count: int
    accelerator: str | None  # extended resource name, None when the type has no accelerators we know
    per_instance: int
    model: str | None = None  # "NVIDIA A10G", from the instance's specs
    memory_gib_each: float | None = None
    vcpus: int | None = None
    memory_gib: float | None = None

    @property
    def total(self) -> int:
        return self.count * self.per_instance


@dataclass(frozen=True)
class Sizing:
    groups: list[GroupSizing]
    capacity_tib: float
    disk_mbps: float
    network_mbps: float
    metadata: str
    checkpoint_gib: int | None
    write_seconds: float | None
    read_seconds: float | None
    budget_minutes: int
    warnings: list[str]


def accelerators(instance_type: str) -> tuple[str | None, int]:
    known = ACCELERATORS.get(instance_type)
    return (known[0], known[1]) if known else (None, 0)


def size(cfg: PlatformConfig) -> Sizing:
    groups = []
    specs = instance_specs()
    for g in cfg.cluster.instance_groups:
        if cfg.orchestrator == "eks" and g.role != "compute":
            continue  # EKS builds only the compute groups
        kind, per = accelerators(g.instance_type)
        spec = specs.get(g.instance_type) or {}
        device = spec.get("accelerator") or {}
        groups.append(
            GroupSizing(
                g.name,
                g.instance_type,
                g.instance_count,
                kind,
                per,
                device.get("name"),
                device["memory_mib_each"] / 1024 if device else None,
                spec.get("vcpus"),
                spec["memory_mib"] / 1024 if spec else None,
            )
        )
    lustre = cfg.storage.lustre
    tib = lustre.storage_capacity_gib / 1024
    disk = tib * DISK_BASELINE_MBPS_PER_TIB[lustre.throughput_mib_per_tib]
    network = tib * NETWORK_BASELINE_MBPS_PER_TIB[lustre.throughput_mib_per_tib]
    if lustre.metadata.mode == "USER_PROVISIONED":
        metadata = f"{lustre.metadata.iops} metadata IOPS (USER_PROVISIONED)"
    else:
        metadata = f"metadata IOPS scaled by FSx with capacity (AUTOMATIC; {METADATA_DOC})"
    ckpt = cfg.storage.checkpoint_gib
    write = read = None
    warnings: list[str] = []
    budget = cfg.storage.checkpoint_budget_minutes
    if ckpt:
        write = ckpt * MB_PER_GIB / disk
        read = ckpt * MB_PER_GIB / min(disk, network)
        if write > budget * 60:
            needed = ckpt * MB_PER_GIB / (budget * 60)
            warnings.append(
                f"writing one {ckpt} GiB checkpoint takes {_duration(write)} at the file system's baseline "
                f"{disk:,.0f} MB/s, over storage.checkpoint_budget_minutes ({budget} min); it needs about "
                f"{needed:,.0f} MB/s: raise storage.lustre.throughput_mib_per_tib or storage_capacity_gib"
            )
    return Sizing(groups, tib, disk, network, metadata, ckpt, write, read, budget, warnings)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render(s: Sizing, cfg: PlatformConfig) -> list[str]:
    lines = ["What this configuration buys:"]
    for g in s.groups:
        device = g.model or g.accelerator
        memory = f", {g.memory_gib_each:.0f} GiB each" if g.memory_gib_each else ""
        what = f"{g.total} x {device} ({g.per_instance} per instance{memory})" if g.accelerator else "no accelerators"
        host = f"{g.vcpus} vCPU, {g.memory_gib:.0f} GiB; " if g.vcpus else ""
        lines.append(f"  {g.name:<24} {g.count:>4} x {g.instance_type:<18} {host}{what}")
    by_kind: dict[str, int] = {}
    for g in s.groups:
        if g.accelerator:
            device = f"{g.model} ({g.memory_gib_each:.0f} GiB)" if g.model and g.memory_gib_each else g.accelerator
            by_kind[device] = by_kind.get(device, 0) + g.total
    if by_kind:
        lines.append("  total: " + ", ".join(f"{n} x {k}" for k, n in sorted(by_kind.items())))
    lustre = cfg.storage.lustre
    if lustre.existing:
        lines.append(
            f"  FSx for Lustre: existing {lustre.existing.file_system_id}; sizing from storage.lustre "
            "assumes it matches"
        )
    lines.append(
        f"  FSx for Lustre: {lustre.storage_capacity_gib} GiB at {lustre.throughput_mib_per_tib} MB/s/TiB: "
        f"{s.disk_mbps:,.0f} MB/s disk baseline, {s.network_mbps:,.0f} MB/s network baseline; {s.metadata}"
    )
    mount = lustre.mount_path.rstrip("/")
    lines.append(
        f"  checkpoints: {mount}{checkpoint_dir(cfg.storage)} (exported to S3 through the data repository "
        f"association at {mount}{lustre.data_repository.file_system_path})"
    )
    if s.checkpoint_gib:
        assert s.write_seconds is not None and s.read_seconds is not None  # sizing() sets them with checkpoint_gib
        lines.append(
            f"  one {s.checkpoint_gib} GiB checkpoint: write {_duration(s.write_seconds)}, read "
            f"{_duration(s.read_seconds)} at baseline (budget {s.budget_minutes} min)"
        )
    else:
        lines.append("  checkpoint time: set storage.checkpoint_gib to see write and read time")
    lines += [f"  WARNING: {w}" for w in s.warnings]
    return lines


def main(argv: list[str] | None = None) -> int:
    """What a config buys, without synthesizing it (`make synth` prints the same after its summary)."""
    parser = argparse.ArgumentParser(prog="python -m cli.sizing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/default.yaml")
    args = parser.parse_args(argv)
    cfg = loaded_config(args.config)
    if cfg is None:
        return 2
    print("\n".join(render(size(cfg), cfg)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
