"""How long each deploy step of a synthesized platform is expected to take: the steps are the stack graph's waves
(cli/stack_graph.py, what `make deploy` runs side by side); a stack takes as long as the slowest resource type in it
that config/facts/deploy_times.json has a figure for (AWS's HyperPod reference repository, quoted there), a step as
long as its slowest stack. Stacks of only IAM roles, Lambda functions, alarms and the like have no figure on record
and are not counted: the total is a lower bound."""

from __future__ import annotations

import json
from pathlib import Path

from cli.stack_graph import waves

DEPLOY_TIMES_FACTS = Path(__file__).resolve().parent.parent / "config" / "facts" / "deploy_times.json"


def _span(low: int, high: int) -> str:
    return f"~{low} min" if low == high else f"{low}-{high} min"


def stack_types(templates: dict[str, dict], nested: dict[str, dict]) -> dict[str, set[str]]:
    """Resource types per stack, a nested stack's counted in its parent (found by the asset path CDK records)."""
    types = {}
    for stack, template in templates.items():
        found = set()
        for resource in template.get("Resources", {}).values():
            found.add(resource["Type"])
            if resource["Type"] == "AWS::CloudFormation::Stack":
                child = nested.get(str(resource.get("Metadata", {}).get("aws:asset:path", "")).split(".")[0], {})
                found |= {r["Type"] for r in child.get("Resources", {}).values()}
        types[stack] = found
    return types


def lines(
    deps: dict[str, set[str]], templates: dict[str, dict], nested: dict[str, dict], facts: dict | None = None
) -> list[str]:
    facts = facts or json.loads(DEPLOY_TIMES_FACTS.read_text())
    known = facts["types"]
    per_stack = stack_types(templates, nested)
    out = ["Deploy steps (`make deploy` runs a step's stacks side by side) and their expected time:"]
    total_low = total_high = 0
    for n, wave in enumerate(waves(deps), 1):
        parts, low, high = [], 0, 0
        for stack in wave:
            figures = [known[t] for t in sorted(per_stack.get(stack, ())) if t in known]
            if figures:
                slowest = max(figures, key=lambda f: tuple(f["minutes"][::-1]))
                s_low, s_high = max(f["minutes"][0] for f in figures), max(f["minutes"][1] for f in figures)
                parts.append(f"{stack} ({_span(s_low, s_high)}: {slowest['label']})")
                low, high = max(low, s_low), max(high, s_high)
            else:
                parts.append(f"{stack} (no time on record)")
        step = _span(low, high) if high else "no time on record"
        out.append(f"  step {n}: {step:<18} {', '.join(parts)}")
        total_low, total_high = total_low + low, total_high + high
    out.append(
        f"  total: at least {_span(total_low, total_high)}, plus what has no time on record; figures from "
        f"{facts['source']} (config/facts/deploy_times.json), not measured here"
    )
    return out
