"""vCPUs, memory and accelerators (model, count, memory each) of every HyperPod instance type, for the synth summary,
written to config/facts/instance_type_specs.json.

    python tools/instance_type_specs.py [--check]

Source: EC2's DescribeInstanceTypes answers as moto records them (moto/ec2/resources/instance_types.json of the pinned
moto, a copy of EC2's own answers: VCpuInfo, MemoryInfo, GpuInfo, NeuronInfo), for the ml. types of
config/facts/cluster_instance_types.json; a type EC2's copy lacks is listed under `unknown`. The ml. type is the EC2 type
with its prefix. --check exits 1 when the committed file differs from the installed moto's copy. Nothing here calls
AWS; nothing at synth time imports moto.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import sys
from importlib.metadata import version
from pathlib import Path

from committed_file import write_or_check

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "instance_type_specs.json"
CLUSTER_TYPES = ROOT / "config" / "facts" / "cluster_instance_types.json"


def _accelerator(info: dict) -> dict | None:
    for key, devices in (("GpuInfo", "Gpus"), ("NeuronInfo", "NeuronDevices")):
        if info.get(key):
            (device,) = info[key][devices]
            return {
                "name": " ".join(filter(None, [device.get("Manufacturer"), device["Name"]])),
                "count": device["Count"],
                "memory_mib_each": device["MemoryInfo"]["SizeInMiB"],
            }
    return None


def ec2_instance_types() -> dict:
    """moto's copy of EC2's DescribeInstanceTypes answers, by EC2 type, read from the file the installed moto ships
    (moto.ec2.models.instance_types loads the same file, but importing it also imports moto and loads every region's
    instance type offerings: a `--check` took 1.9 s of CPU that way, 0.2 s this way)."""
    spec = importlib.util.find_spec("moto")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("moto is not installed in this interpreter: run it with the dev venv (make deps), .venv/bin/python")
    (package,) = spec.submodule_search_locations
    return json.loads(gzip.decompress((Path(package) / "ec2" / "resources" / "instance_types.json.gz").read_bytes()))


def derive() -> str:
    instance_types = ec2_instance_types()
    specs, unknown = {}, []
    for ml_type in json.loads(CLUSTER_TYPES.read_text())["instance_types"]:
        info = instance_types.get(ml_type.removeprefix("ml."))
        if info is None:
            unknown.append(ml_type)
            continue
        specs[ml_type] = {
            "vcpus": info["VCpuInfo"]["DefaultVCpus"],
            "memory_mib": info["MemoryInfo"]["SizeInMiB"],
            "accelerator": _accelerator(info),
        }
    return (
        json.dumps(
            {
                "source": f"moto {version('moto')} moto/ec2/resources/instance_types.json (EC2 "
                "DescribeInstanceTypes answers: VCpuInfo, MemoryInfo, GpuInfo, NeuronInfo)",
                "specs": specs,
                "unknown": unknown,
            },
            indent=2,
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    return write_or_check(FACTS, derive(), check=args.check, source="moto's copy of EC2 DescribeInstanceTypes")


if __name__ == "__main__":
    sys.exit(main())
