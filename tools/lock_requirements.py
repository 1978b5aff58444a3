"""Hash-locks the platform's Python dependencies: requirements.lock (what `make synth` and the user commands need,
from requirements.txt) and requirements-dev.lock (the tests' too, from requirements-dev.txt), every package pinned,
transitive ones (jsii, botocore, pydantic-core, ...) included, each with the sha256 of every file the index holds for
that version (so the lock installs on any platform PyPI has wheels for).

    python tools/lock_requirements.py        # resolves with pip (--dry-run --report), reads the index's hashes

It needs the package index (pip's own configuration: PIP_INDEX_URL or pip.conf); the Makefile installs the locks with
`pip install --require-hashes --no-deps`, and tests/test_requirement_locks.py checks offline that each lock holds
exactly the pins of its requirements file and everything they need, on this Python.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
LOCKS = {"requirements.txt": "requirements.lock", "requirements-dev.txt": "requirements-dev.lock"}


def resolve(requirements: Path) -> list[tuple[str, str]]:
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            "-",
            "-r",
            str(requirements),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(
        (canonicalize_name(item["metadata"]["name"]), item["metadata"]["version"])
        for item in json.loads(report)["install"]
    )


def index_url() -> str:
    sys.path.insert(0, str(ROOT / "tools"))
    from build_studio_tools import index_url as pip_index

    return pip_index()


def hashes(name: str, version: str) -> list[str]:
    request = urllib.request.Request(
        f"{index_url().rstrip('/')}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        files = json.loads(response.read())["files"]
    found = []
    for f in files:
        try:
            _n, v, *_ = (
                parse_wheel_filename(f["filename"])
                if f["filename"].endswith(".whl")
                else parse_sdist_filename(f["filename"])
            )
        except Exception:  # noqa: BLE001 - files of other formats (.egg, .exe) are not installable here
            continue
        if str(v) == version and f.get("hashes", {}).get("sha256") and not f.get("yanked"):
            found.append(f["hashes"]["sha256"])
    if not found:
        raise SystemExit(f"{name}=={version}: the index lists no file with a sha256")
    return sorted(set(found))


def lock_text(source: str, pins: list[tuple[str, str]]) -> str:
    lines = [
        f"# Generated from {source} by tools/lock_requirements.py: every package, with the sha256 of every file",
        "# of its version on the index. Install with pip install --require-hashes --no-deps -r <this file>.",
    ]
    for name, version in pins:
        lines.append(f"{name}=={version} \\")
        lines += [f"    --hash=sha256:{h} \\" for h in hashes(name, version)]
        lines[-1] = lines[-1].removesuffix(" \\")
    return "\n".join(lines) + "\n"


def main() -> int:
    for source, lock in LOCKS.items():
        (ROOT / lock).write_text(lock_text(source, resolve(ROOT / source)))
        print(f"wrote {lock}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
