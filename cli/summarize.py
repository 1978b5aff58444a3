"""Prints what `cdk synth` wrote (each stack, its resource count and template path) and, with --config, what the
configuration buys (cli/sizing.py)."""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


from cli import costs, deploy_times, prices
from cli.preconditions import loaded_config, missing_assembly
from cli.sizing import render, size
from cli.stack_graph import stack_dependencies


# What a reader looks for first, by CloudFormation type: the things that cost money or hold data.
KEY_TYPES = {
    "AWS::SageMaker::Cluster": "HyperPod cluster",
    "AWS::FSx::FileSystem": "FSx file system",
    "AWS::SageMaker::Domain": "Studio domain",
    "AWS::EKS::Cluster": "EKS control plane",
    "AWS::SageMaker::MlflowTrackingServer": "MLflow tracking server",
}
# Resources that bill by the hour or by the unit whatever the instance groups do, counted per type.
STANDING_TYPES = {
    "AWS::EC2::NatGateway": "NAT gateway",
    "AWS::ElasticLoadBalancingV2::LoadBalancer": "load balancer",
    "AWS::EC2::VPCEndpoint": "interface endpoint",
    "AWS::KMS::Key": "KMS key",
    "AWS::CloudWatch::Alarm": "CloudWatch alarm",
    "AWS::SecretsManager::Secret": "secret",
    "AWS::RDS::DBCluster": "RDS cluster",
}


def _literal(value) -> str:
    """A template value as text: a string or number as it is, an intrinsic as the reference it makes."""
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Fn::Join":
            return "".join(_literal(v) for v in arg[1])
        if fn == "Ref":
            return f"${{{arg}}}"
    return "(set at deploy)"


def describe(resource: dict) -> str:
    props = resource.get("Properties", {})
    kind = resource["Type"]
    if kind == "AWS::SageMaker::Cluster":
        groups = props.get("InstanceGroups", [])
        orchestrator = "EKS" if "Eks" in props.get("Orchestrator", {}) else "Slurm"
        return (
            f"{_literal(props.get('ClusterName'))} ({orchestrator}; "
            + ", ".join(
                f"{_literal(g.get('InstanceGroupName'))} {_literal(g.get('InstanceCount'))} x "
                f"{_literal(g.get('InstanceType'))}"
                for g in groups
            )
            + ")"
        )
    if kind == "AWS::FSx::FileSystem":
        lustre = props.get("LustreConfiguration", {})
        return (
            f"{props.get('FileSystemType', '')} {_literal(props.get('StorageCapacity'))} GiB "
            f"{_literal(lustre.get('DeploymentType'))} {_literal(lustre.get('PerUnitStorageThroughput'))} "
            f"MB/s/TiB" + (", kept on delete" if resource.get("DeletionPolicy") == "Retain" else "")
        )
    name = next((props[k] for k in ("DomainName", "Name", "TrackingServerName") if k in props), None)
    return _literal(name) if name is not None else ""


def key_resources(templates: dict[str, dict]) -> list[str]:
    """The cluster, the file system, the domain (each named, with its stack) and a count of what bills while the
    instance groups are at 0."""
    lines: list[str] = []
    standing: Counter[str] = Counter()
    for stack, template in templates.items():
        for resource in template.get("Resources", {}).values():
            kind = resource["Type"]
            if kind in KEY_TYPES:
                lines.append(f"  {KEY_TYPES[kind]:<24} {describe(resource)}  [{stack}]")
            elif kind in STANDING_TYPES:
                if (
                    kind == "AWS::EC2::VPCEndpoint"
                    and resource["Properties"].get("VpcEndpointType", "Gateway") == "Gateway"
                ):
                    continue  # gateway endpoints (S3) are free; interface endpoints bill by the hour
                standing[STANDING_TYPES[kind]] += 1
    if standing:
        lines.append(
            "  billed even with every group at 0: " + ", ".join(f"{n} x {what}" for what, n in sorted(standing.items()))
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.summarize", description=__doc__)
    parser.add_argument("out_dir", nargs="?", default="cdk.out")
    parser.add_argument("--config", help="the config file that was synthesized")
    parser.add_argument(
        "--prices",
        type=Path,
        default=prices.PRICES_FACTS,
        help="the price table for the cost estimate (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    problem = missing_assembly(out)
    if problem:
        print(f"summarize: {problem}", file=sys.stderr)
        return 2
    manifest = json.loads((out / "manifest.json").read_text())
    stacks = {name: a for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    print(f"\nSynthesized {len(stacks)} stack(s) into {out}/ (no AWS calls were made):")
    templates = {}
    for name, artifact in stacks.items():
        path = out / artifact["properties"]["templateFile"]
        templates[name] = json.loads(path.read_text())
        resources = templates[name].get("Resources", {})
        top = ", ".join(
            f"{t.split('::', 1)[1]} x{n}" for t, n in Counter(r["Type"] for r in resources.values()).most_common(4)
        )
        print(f"  {name:<28} {len(resources):>4} resources  {path}  ({top}, ...)")
    nested = {p.name.split(".")[0]: json.loads(p.read_text()) for p in sorted(out.glob("*.nested.template.json"))}
    key = key_resources({**templates, **nested})
    if key:
        print("\nWhat it creates that matters:")
        print("\n".join(key))
    print()
    print("\n".join(deploy_times.lines(stack_dependencies(out), templates, nested)))
    if args.config:
        cfg = loaded_config(args.config)
        if cfg is None:
            return 2
        print()
        print("\n".join(render(size(cfg), cfg)))
        print()
        print(
            "\n".join(
                costs.estimate(
                    costs.quantities({**templates, **nested}), cfg.deployment.region, prices.load(args.prices)
                )
            )
        )
    print(
        "Review with `make diff CONFIG=...`, deploy with `make deploy CONFIG=...`: it refuses to replace or delete "
        "stateful resources (see docs/deploy.md: Day-2 changes)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
