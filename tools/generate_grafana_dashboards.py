"""Writes observability/grafana/<name>.json from constructs/grafana_dashboards.py (committed; tests/test_grafana.py
fails when a file differs from what this writes).

    python tools/generate_grafana_dashboards.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "observability" / "grafana"


def rendered() -> dict[str, str]:
    from constructs.grafana_dashboards import dashboards

    return {f"{name}.json": json.dumps(body, indent=2, sort_keys=True) + "\n" for name, body in dashboards().items()}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (OUT / name).write_text(text)


if __name__ == "__main__":
    main()
