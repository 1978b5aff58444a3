"""Draws the CloudWatch dashboard's layout (docs/dashboard.svg) from the body the default config synthesizes, so the
docs/observability.md's picture is the generated definition, not a drawing. tests/test_dashboard_picture.py fails when stale.

    JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 .venv/bin/python tools/render_dashboard.py

Widgets carry no x/y: CloudWatch places them left to right in a 24-column grid, wrapping to a new row
(docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html, "x"/"y");
the picture packs them the same way, each grid unit 40 px wide and 20 px high."""

from __future__ import annotations

import json
import sys
import tempfile
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "dashboard.svg"
UNIT_X, UNIT_Y, GRID = 40, 20, 24
COLORS = {"metric": "#dbeafe", "text": "#f3f4f6", "alarm": "#fee2e2", "log": "#dcfce7"}


def flatten(value) -> str:
    """The DashboardBody string with every CloudFormation token replaced by TOKEN (JSON stays valid)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(flatten(p) for p in parts)
    return "TOKEN"


def body_from_template(template: dict) -> dict:
    (dashboard,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    return json.loads(flatten(dashboard["Properties"]["DashboardBody"]))


def layout(body: dict) -> list[tuple[dict, int, int]]:
    """(widget, x, y) in grid units, packed as CloudWatch packs widgets without a position."""
    placed, x, y, row_height = [], 0, 0, 0
    for widget in body["widgets"]:
        width, height = widget.get("width", 6), widget.get("height", 6)
        if x + width > GRID:
            x, y, row_height = 0, y + row_height, 0
        placed.append((widget, x, y))
        x += width
        row_height = max(row_height, height)
    return placed


def title(widget: dict) -> str:
    props = widget.get("properties", {})
    if widget["type"] == "text":
        return props.get("markdown", "").splitlines()[0].lstrip("# ")
    return props.get("title", widget["type"])


def render_svg(body: dict) -> str:
    placed = layout(body)
    height = max(y + w.get("height", 6) for w, _, y in placed) * UNIT_Y
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{GRID * UNIT_X}" height="{height}" '
            f'font-family="sans-serif" font-size="12">'
        )
    ]
    for widget, x, y in placed:
        w, h = widget.get("width", 6) * UNIT_X, widget.get("height", 6) * UNIT_Y
        px, py = x * UNIT_X, y * UNIT_Y
        parts.append(
            f'<rect x="{px + 2}" y="{py + 2}" width="{w - 4}" height="{h - 4}" rx="4" '
            f'fill="{COLORS.get(widget["type"], "#ffffff")}" stroke="#6b7280"/>'
        )
        parts.append(f'<text x="{px + 10}" y="{py + 20}" font-weight="bold">{escape(title(widget)[:60])}</text>')
        parts.append(
            f'<text x="{px + 10}" y="{py + 36}" fill="#4b5563">{escape(widget["type"])} widget, '
            f"{widget.get('width', 6)}x{widget.get('height', 6)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    import os

    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    sys.path.insert(0, str(ROOT))
    import aws_cdk as cdk

    from platform_config import load_config
    from stacks.platform import build_platform

    config = load_config(ROOT / "config" / "default.yaml")
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    with tempfile.TemporaryDirectory() as out:
        app = cdk.App(outdir=out, context=context)
        build_platform(app, config)
        app.synth()
        template = json.loads((Path(out) / f"{config.name}-observability.template.json").read_text())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render_svg(body_from_template(template)))


if __name__ == "__main__":
    main()
