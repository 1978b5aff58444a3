#!/usr/bin/env python3
"""Lays out a test node the way lifecycle/node_contract.json says HyperPod leaves it, for the bats and e2e tests.

Every fact's `fixture` says what HyperPod has put on the node before OnInitComplete: files (with the cluster's names
filled in), links, directories and their modes, installed packages and mount points, and the state of its services
when OnInitComplete begins (`state`: e.g. slurmctld-starts-in-parallel's `slurmctld_late`, the calls slurmctld leaves
unanswered while it starts, which the bats stub counts down). `--absent FACT` leaves one fact
out, which is how a test shows the scripts adapt when an unverified fact does not hold. Nothing here is typed by
hand: change the contract, and every test node changes with it.

    ami_model.py --node-type controller --root DIR [--map /node/path=/local/path]... [--fake-root DIR]
                 [--absent FACT]... [--node-ip IP] [--manifest FILE]
    ami_model.py --clean --manifest FILE           removes what an earlier layout created
    ami_model.py --clean --node-type ... --manifest FILE    both, in one start: the test node laid out again
    ami_model.py --clean --node-type ... --manifest FILE --each-absent
                                                   lays the node out once per fact, without it, each layout replacing
                                                   the last (a run of --absent FACT per fact, in one start)
    ami_model.py --facts [--status unverified]     lists fact ids

Node paths go to the longest `--map`ped prefix, else under --root; the same mapping rewrites the paths inside the files
(enroot.conf names /fsx and /opt/dlami/nvme). Packages and mount points go to the bats stubs' state under --fake-root
(`dpkg/<package>` holds a version, `mounts` one mount point a line, `<state name>` its value), as
tests/lifecycle/stubs/stub reads them.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

CONTRACT = Path(__file__).resolve().parents[2] / "lifecycle" / "node_contract.json"
NODE_TYPES = ("controller", "login", "compute")


class ModelError(Exception):
    pass


def load_contract(path: Path = CONTRACT) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fact_ids(contract: dict, status: str | None = None) -> list[str]:
    return [f["id"] for f in contract["facts"] if status is None or f["status"] == status]


class Layout:
    def __init__(self, root: Path, mapping: dict[str, str], fake_root: Path | None):
        self.root = root
        # Longest node prefix first, so /opt/slurm/etc/plugstack.conf.d wins over /opt/slurm/etc.
        self.mapping = sorted(mapping.items(), key=lambda kv: -len(kv[0]))
        self.fake_root = fake_root
        self.created: list[str] = []

    def local(self, node_path: str) -> Path:
        for prefix, target in self.mapping:
            if node_path == prefix or node_path.startswith(prefix.rstrip("/") + "/"):
                return Path(target + node_path[len(prefix) :])
        return self.root / node_path.lstrip("/")

    def rewrite(self, text: str) -> str:
        for prefix, target in self.mapping:
            text = text.replace(prefix, target)
        return text

    def _parent(self, path: Path) -> None:
        missing = []
        for parent in path.parents:
            if parent.exists():
                break
            missing.append(parent)
        for parent in reversed(missing):
            parent.mkdir()
            self.created.append(str(parent))

    def file(self, node_path: str, lines: list[str], append: bool) -> None:
        path = self.local(node_path)
        self._parent(path)
        existed = path.exists() or path.is_symlink()
        text = "".join(self.rewrite(line) + "\n" for line in lines)
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
        if not existed:
            self.created.append(str(path))

    def symlink(self, node_path: str, target: str) -> None:
        path = self.local(node_path)
        self._parent(path)
        if path.exists() or path.is_symlink():
            path.unlink()
        path.symlink_to(self.local(target))
        self.created.append(str(path))

    def directory(self, node_path: str, mode: str) -> None:
        path = self.local(node_path)
        self._parent(path)
        if not path.exists():
            path.mkdir()
            self.created.append(str(path))
        path.chmod(int(mode, 8))

    def package(self, name: str, version: str) -> None:
        if self.fake_root is None:
            return
        path = self.fake_root / "dpkg" / name
        self._parent(path)
        path.write_text(version + "\n")
        self.created.append(str(path))

    def state(self, name: str, value: str) -> None:
        if self.fake_root is None:
            return
        path = self.fake_root / name
        self._parent(path)
        path.write_text(value + "\n")
        self.created.append(str(path))

    def mount(self, node_path: str) -> None:
        if self.fake_root is None:
            return
        local = self.local(node_path)
        local.mkdir(parents=True, exist_ok=True)
        with open(self.fake_root / "mounts", "a", encoding="utf-8") as f:
            f.write(f"{local}\n")
        self.created.append(f"mount\t{self.fake_root / 'mounts'}\t{local}")


def resource_config(contract: dict) -> dict:
    """resource_config.json as the contract's `resource-config` fact describes it (MENTAL_MODEL, Key config files)."""
    cluster = contract["cluster"]
    controllers = [i["ip"] for g in cluster["groups"] if g["node_type"] == "controller" for i in g["instances"]]
    return {
        "ClusterType": "Slurm",
        "ClusterConfig": {"ClusterArn": cluster["arn"], "ClusterName": cluster["name"]},
        "SlurmConfig": {"PrimaryControllerIp": controllers[0], "SecondaryControllerIps": controllers[1:]},
        "InstanceGroups": [
            {
                "Name": g["name"],
                "InstanceType": g["instance_type"],
                "Instances": [
                    {
                        "InstanceName": f"{g['name']}-{n}",
                        "AgentIpAddress": i["agent_ip"],
                        "CustomerIpAddress": i["ip"],
                        "InstanceId": i["id"],
                    }
                    for n, i in enumerate(g["instances"], start=1)
                ],
            }
            for g in cluster["groups"]
        ],
    }


def fill(line: str, values: dict[str, str]) -> str:
    """{cluster_name}, {controller_host}, {controller_ip} filled in; every other brace (enroot's ${HOME}) kept."""
    for key, value in values.items():
        line = line.replace("{" + key + "}", value)
    return line


def lay_out(contract: dict, layout: Layout, node_type: str, absent: set[str]) -> None:
    if node_type not in NODE_TYPES:
        raise ModelError(f"node type must be one of {', '.join(NODE_TYPES)}, got {node_type!r}")
    unknown = absent - set(fact_ids(contract))
    if unknown:
        raise ModelError(f"--absent names no fact of the contract: {', '.join(sorted(unknown))}")
    cluster = contract["cluster"]
    controller = next(g for g in cluster["groups"] if g["node_type"] == "controller")
    values = {
        "cluster_name": cluster["name"],
        "controller_host": cluster["controller_host"],
        "controller_ip": controller["instances"][0]["ip"],
    }
    for fact in contract["facts"]:
        if fact["id"] in absent or node_type not in fact["node_types"]:
            continue
        fixture = fact.get("fixture") or {}
        if fixture.get("resource_config"):
            layout.file(
                "/opt/ml/config/resource_config.json", [json.dumps(resource_config(contract), indent=2)], append=False
            )
        for d in fixture.get("dirs", []):
            layout.directory(d["path"], d["mode"])
        for f in fixture.get("files", []):
            if node_type not in f.get("node_types", NODE_TYPES):
                continue
            if "symlink" in f:
                layout.symlink(f["path"], f["symlink"])
            else:
                layout.file(f["path"], [fill(line, values) for line in f["lines"]], bool(f.get("append")))
        for name, version in (fixture.get("packages") or {}).items():
            layout.package(name, version)
        for mount in fixture.get("mounts", []):
            layout.mount(mount)
        for name, value in (fixture.get("state") or {}).items():
            layout.state(name, str(value))


def clean(manifest: Path) -> None:
    if not manifest.exists():
        return
    for line in reversed(manifest.read_text().splitlines()):
        if line.startswith("mount\t"):
            _, mounts, mount_point = line.split("\t")
            if Path(mounts).exists():
                kept = [m for m in Path(mounts).read_text().splitlines() if m != mount_point]
                Path(mounts).write_text("".join(f"{m}\n" for m in kept))
            continue
        path = Path(line)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
    manifest.unlink()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contract", type=Path, default=CONTRACT)
    parser.add_argument("--node-type")
    parser.add_argument("--root", type=Path)
    parser.add_argument("--map", action="append", default=[], metavar="NODE_PATH=LOCAL_PATH")
    parser.add_argument("--fake-root", type=Path)
    parser.add_argument("--absent", action="append", default=[], metavar="FACT")
    parser.add_argument("--manifest", type=Path)
    parser.add_argument("--clean", action="store_true")
    parser.add_argument("--each-absent", action="store_true")
    parser.add_argument("--facts", action="store_true")
    parser.add_argument("--status")
    args = parser.parse_args(argv)
    try:
        contract = load_contract(args.contract)
        if args.facts:
            print("\n".join(fact_ids(contract, args.status)))
            return 0
        if args.clean:
            if args.manifest is None:
                raise ModelError("--clean needs --manifest")
            clean(args.manifest)
            if not args.node_type:
                return 0
        if not args.node_type or args.root is None:
            raise ModelError("--node-type and --root are required")
        mapping = {}
        for item in args.map:
            node_path, sep, local = item.partition("=")
            if not sep or not node_path.startswith("/"):
                raise ModelError(f"--map takes /node/path=/local/path, got {item!r}")
            mapping[node_path] = local
        if args.each_absent and args.manifest is None:
            raise ModelError("--each-absent needs --manifest")
        for absent in [[fact] for fact in fact_ids(contract)] if args.each_absent else [[]]:
            if absent:
                clean(args.manifest)  # the layout before, as --clean removes it
            layout = Layout(args.root, mapping, args.fake_root)
            lay_out(contract, layout, args.node_type, set(args.absent + absent))
            if args.manifest is not None:
                with open(args.manifest, "a", encoding="utf-8") as f:
                    f.writelines(f"{p}\n" for p in layout.created)
    except (ModelError, OSError, json.JSONDecodeError, KeyError) as e:
        print(f"ami_model: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
