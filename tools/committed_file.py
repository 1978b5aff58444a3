"""The `--check` of the fact generators: write the text they derived to its committed file, or compare and fail."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(path: Path, text: str, *, check: bool, source: str) -> int:
    """With check: 0 when `path` holds `text`, else 1 and one line on stderr saying it differs from `source` (what the
    text was derived from). Without: writes it. Returns the exit code."""
    shown = path.relative_to(ROOT)
    if check:
        if not path.is_file() or path.read_text() != text:
            print(f"{shown} differs from {source}: rerun without --check", file=sys.stderr)
            return 1
        print(f"{shown} matches {source}")
        return 0
    path.write_text(text)
    print(f"wrote {shown}")
    return 0
