"""The figures docs/testing.md states about the suite (how many rows a table of bad input has), read back so that the
module owning the table checks them: a table that grows or shrinks fails its own test until the page says so."""

from __future__ import annotations

import re

from support.paths import ROOT

TESTING = ROOT / "docs" / "testing.md"


def stated_count(pattern: str) -> int:
    """The number docs/testing.md states where the regular expression `pattern` matches, its one group the number
    (spaces and line breaks in the page match any run of whitespace in the pattern); fails unless it matches once."""
    text = TESTING.read_text()
    found = re.findall(pattern.replace(" ", r"\s+"), text)
    assert len(found) == 1, f"docs/testing.md: {len(found)} places match {pattern!r}"
    return int(found[0].replace(",", ""))
