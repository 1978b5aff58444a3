"""The dashboard picture of docs/observability.md (docs/dashboard.svg) is drawn from the CloudWatch dashboard body the default config
synthesizes (tools/render_dashboard.py), and that body follows CloudWatch's documented body structure
(docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html)."""

from __future__ import annotations

from support.paths import ROOT
from tools.render_dashboard import OUT, body_from_template, layout, render_svg

# Widget types and what each needs, per the body structure page (metric widgets need metrics or an expression in
# "metrics"; alarm widgets "alarms"; log widgets "query" and "region"; text widgets "markdown").
REQUIRED = {"metric": {"metrics", "region"}, "alarm": {"alarms"}, "log": {"query", "region"}, "text": {"markdown"}}


def test_the_committed_picture_is_the_synthesized_dashboard(synth):
    body = body_from_template(synth("default").templates["observability"])
    assert OUT.read_text() == render_svg(body), (
        "docs/dashboard.svg is stale: run tools/render_dashboard.py and commit the result"
    )


def test_the_body_follows_the_documented_structure(synth):
    for variant in ("default", "metrics", "eks"):
        body = body_from_template(synth(variant).templates["observability"])
        assert set(body) <= {"widgets", "start", "end", "periodOverride", "variables"}
        assert body["periodOverride"] in ("auto", "inherit")
        for widget in body["widgets"]:
            assert widget["type"] in REQUIRED
            assert REQUIRED[widget["type"]] <= set(widget["properties"]), widget
            assert 1 <= widget["width"] <= 24 and 1 <= widget["height"] <= 1000
        for widget, x, y in layout(body):
            assert 0 <= x <= 23 and x + widget["width"] <= 24 and y >= 0


def test_picture_shows_each_widget(synth):
    body = body_from_template(synth("default").templates["observability"])
    svg = OUT.read_text()
    assert svg.count("<rect") == len(body["widgets"])
    assert "](dashboard.svg)" in (ROOT / "docs" / "observability.md").read_text()
