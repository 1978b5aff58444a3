#!/usr/bin/env python3
"""The lifecycle record a deploy writes (constructs/lifecycle_scripts.py), for the fake Secrets Manager of the
lifecycle tests (stubs/stub): the sha256 of every file the scripts asset ships (the asset's exclusions: __pycache__,
*.md) and the parameters. tests/test_lifecycle_record.py checks that the synthesized record lists the same digests.

    lifecycle_record.py SCRIPTS_DIR PARAMS_FILE   prints the record's JSON
    lifecycle_record.py --scripts SCRIPTS_DIR     prints its "scripts" only (the stub keeps it for a test file's calls)
"""

import hashlib
import json
import sys
from pathlib import Path


def scripts_digests(scripts_dir: Path) -> dict:
    scripts = {}
    for path in sorted(scripts_dir.rglob("*")):
        relative = path.relative_to(scripts_dir)
        if path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".md":
            scripts[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return scripts


def record(scripts_dir: Path, params_file: Path) -> dict:
    return {
        "version": 1,
        "scripts": scripts_digests(scripts_dir),
        "parameters": json.loads(params_file.read_text()),
        "parameter_digests": {},
    }


if __name__ == "__main__":
    if sys.argv[1] == "--scripts":
        print(json.dumps(scripts_digests(Path(sys.argv[2]))))
    else:
        print(json.dumps(record(Path(sys.argv[1]), Path(sys.argv[2]))))
