"""The stack graph of a synthesized cloud assembly, read from its manifest.json (the dependencies CDK itself
deploys by), not from the code: which stack waits for which, which run side by side, and how many at most run
at once (what `make deploy` passes as `cdk deploy --concurrency`).

    python -m cli.stack_graph [cdk.out] [--mermaid | --waves | --concurrency]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path


from cli.preconditions import missing_assembly


def stack_dependencies(out_dir: Path) -> dict[str, set[str]]:
    """Stack name -> the stacks it depends on directly (asset artifacts left out)."""
    artifacts = json.loads((Path(out_dir) / "manifest.json").read_text())["artifacts"]
    stacks = {name for name, a in artifacts.items() if a.get("type") == "aws:cloudformation:stack"}
    return {name: {d for d in artifacts[name].get("dependencies", []) if d in stacks} for name in sorted(stacks)}


def ancestors(deps: dict[str, set[str]], stack: str) -> set[str]:
    """Every stack `stack` waits for, directly or through others."""
    seen: set[str] = set()
    todo = list(deps[stack])
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo += deps[current]
    return seen


def waves(deps: dict[str, set[str]]) -> list[list[str]]:
    """Stacks by the earliest step each can start in: a stack starts once every stack it depends on is done."""
    level: dict[str, int] = {}

    def depth(stack: str) -> int:
        if stack not in level:
            level[stack] = 1 + max((depth(d) for d in deps[stack]), default=-1)
        return level[stack]

    for stack in deps:
        depth(stack)
    return [sorted(s for s in deps if level[s] == i) for i in range(max(level.values(), default=-1) + 1)]


def concurrency(deps: dict[str, set[str]]) -> int:
    """The most stacks that can be deploying at the same moment: the largest set of stacks none of which waits
    for another (a platform has at most seven stacks, so every subset is tried)."""
    before = {s: ancestors(deps, s) for s in deps}
    for size in range(len(deps), 0, -1):
        for group in itertools.combinations(deps, size):
            if all(a not in before[b] and b not in before[a] for a, b in itertools.combinations(group, 2)):
                return size
    return 1


def mermaid(deps: dict[str, set[str]]) -> str:
    """A flowchart, producer --> consumer, without the arrows another path already implies."""
    ids = {s: f"s{i}" for i, s in enumerate(deps)}
    lines = ["flowchart LR"] + [f'  {ids[s]}["{s}"]' for s in deps]
    for stack in deps:
        implied = set().union(*(ancestors(deps, d) for d in deps[stack]))
        lines += [f"  {ids[d]} --> {ids[stack]}" for d in sorted(deps[stack] - implied)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.stack_graph", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default="cdk.out")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--mermaid", action="store_true", help="the graph as a Mermaid flowchart")
    what.add_argument("--waves", action="store_true", help="the deployment steps (the default output)")
    what.add_argument("--concurrency", action="store_true", help="how many stacks deploy at once, at most")
    args = parser.parse_args(argv)
    problem = missing_assembly(Path(args.out_dir))
    if problem:
        print(f"stack_graph: {problem}", file=sys.stderr)
        return 2
    deps = stack_dependencies(Path(args.out_dir))
    if args.concurrency:
        print(concurrency(deps))
    elif args.mermaid:
        print(mermaid(deps))
    else:
        for i, wave in enumerate(waves(deps), 1):
            print(f"step {i}: {', '.join(wave)}")
        print(f"at most {concurrency(deps)} stacks deploy at once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
