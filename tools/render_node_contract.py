"""Renders the fact table of lifecycle/CONTRACT.md from lifecycle/node_contract.json.

    python3 tools/render_node_contract.py          rewrites the part of CONTRACT.md between the markers
    python3 tools/render_node_contract.py --check  exits 1 when CONTRACT.md is not what the JSON renders

The JSON is the one place the facts live (tests/lifecycle/ami_model.py lays out test nodes from it); the prose of
CONTRACT.md around the markers is written by hand. tests/test_node_contract.py runs --check. Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_JSON = ROOT / "lifecycle" / "node_contract.json"
CONTRACT_MD = ROOT / "lifecycle" / "CONTRACT.md"
BEGIN = "<!-- BEGIN facts: rendered from node_contract.json by tools/render_node_contract.py; edit the JSON -->"
END = "<!-- END facts -->"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(contract: dict) -> str:
    out = [BEGIN, ""]
    for status in contract["statuses"]:
        facts = [f for f in contract["facts"] if f["status"] == status]
        if not facts:
            continue
        out += [f"### {status.capitalize()}: {contract['statuses'][status]}", ""]
        for f in facts:
            sources = "; ".join(f"{s['ref']}: {s['says']}" for s in f["sources"])
            tests = ", ".join(f"`{t}`" for t in f["tests"]) or "none (used as given)"
            out += [
                f"#### `{f['id']}` ({', '.join(f['node_types'])})",
                "",
                f"- **What**: {cell(f['what'])}",
                f"- **Source**: {cell(sources)}",
                f"- **Used by**: {', '.join(f'`{u}`' for u in f['used_by']) or 'nothing yet'}",
                f"- **When absent ({f['when_absent']})**: {cell(f['behaviour'])}",
                f"- **Tests**: {tests}",
                "",
            ]
    out += ["### Sources", ""]
    out += [f"- `{key}`: {value}" for key, value in contract["sources"].items()]
    out += ["", END]
    return "\n".join(out)


def rendered_document(contract: dict, document: str) -> str:
    if BEGIN not in document or END not in document:
        raise SystemExit(f"{CONTRACT_MD}: the markers {BEGIN!r} and {END!r} are missing")
    head, rest = document.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + render(contract) + tail


def main(argv: list[str]) -> int:
    contract = json.loads(CONTRACT_JSON.read_text(encoding="utf-8"))
    document = CONTRACT_MD.read_text(encoding="utf-8")
    new = rendered_document(contract, document)
    if "--check" in argv:
        if new != document:
            print(f"{CONTRACT_MD} is not current: run python3 tools/render_node_contract.py", file=sys.stderr)
            return 1
        return 0
    CONTRACT_MD.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
