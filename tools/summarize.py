"""Prints what `cdk synth` wrote: each stack, its resource count and template path."""
import json
import sys
from collections import Counter
from pathlib import Path


def main(out_dir: str) -> None:
    out = Path(out_dir)
    manifest = json.loads((out / "manifest.json").read_text())
    stacks = {name: a for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    print(f"\nSynthesized {len(stacks)} stack(s) into {out}/ (no AWS calls were made):")
    for name, artifact in stacks.items():
        path = out / artifact["properties"]["templateFile"]
        resources = json.loads(path.read_text()).get("Resources", {})
        top = ", ".join(f"{t.split('::', 1)[1]} x{n}" for t, n in Counter(r["Type"] for r in resources.values())
                        .most_common(4))
        print(f"  {name:<28} {len(resources):>4} resources  {path}  ({top}, ...)")
    print("Review with `npx cdk diff`, deploy with `npx cdk deploy --all` (see README: Deploy).")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cdk.out")
