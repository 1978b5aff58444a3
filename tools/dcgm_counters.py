"""Writes observability/facts/dcgm-default-counters.json: the counters dcgm-exporter collects by default
(etc/default-counters.csv) at a pinned commit of NVIDIA/dcgm-exporter, read from a local git dir.

    python tools/dcgm_counters.py /work/.mirror/NVIDIA+dcgm-exporter/repo [COMMIT]

The Grafana dashboards may name only DCGM fields in this file (tests/test_grafana.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "observability" / "facts" / "dcgm-default-counters.json"
PATH = "etc/default-counters.csv"


def counters(csv_text: str) -> dict[str, str]:
    found = {}
    for line in csv_text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, kind = (field.strip() for field in line.split(",")[:2])
            found[name] = kind
    return found


def main(git_dir: str, commit: str = "HEAD") -> None:
    resolved = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    text = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{resolved}:{PATH}"], check=True, capture_output=True, text=True
    ).stdout
    FACTS.parent.mkdir(parents=True, exist_ok=True)
    FACTS.write_text(
        json.dumps(
            {"repository": "NVIDIA/dcgm-exporter", "commit": resolved, "path": PATH, "counters": counters(text)},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
