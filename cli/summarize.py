"""Prints what `cdk synth` wrote (each stack, its resource count and template path) and, with --config, what the
configuration buys (cli/sizing.py)."""
import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli.preconditions import loaded_config, missing_assembly  # noqa: E402
from cli.sizing import render, size  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.summarize", description=__doc__)
    parser.add_argument("out_dir", nargs="?", default="cdk.out")
    parser.add_argument("--config", help="the config file that was synthesized")
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    problem = missing_assembly(out)
    if problem:
        print(f"summarize: {problem}", file=sys.stderr)
        return 2
    manifest = json.loads((out / "manifest.json").read_text())
    stacks = {name: a for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    print(f"\nSynthesized {len(stacks)} stack(s) into {out}/ (no AWS calls were made):")
    for name, artifact in stacks.items():
        path = out / artifact["properties"]["templateFile"]
        resources = json.loads(path.read_text()).get("Resources", {})
        top = ", ".join(f"{t.split('::', 1)[1]} x{n}" for t, n in Counter(r["Type"] for r in resources.values())
                        .most_common(4))
        print(f"  {name:<28} {len(resources):>4} resources  {path}  ({top}, ...)")
    if args.config:
        cfg = loaded_config(args.config)
        if cfg is None:
            return 2
        print()
        print("\n".join(render(size(cfg), cfg)))
    print("Review with `make diff CONFIG=...`, deploy with `make deploy CONFIG=...`: it refuses to replace or delete "
          "stateful resources (see docs/deploy.md: Day-2 changes).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
