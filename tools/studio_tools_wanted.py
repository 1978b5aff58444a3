"""Exit 0 when CONFIG's Studio spaces get the tools bundle (studio.tools.hyp_and_jq), 1 when not: `make synth` builds
the bundle only then. An invalid config also exits 1: synth itself then reports every error.

    python tools/studio_tools_wanted.py CONFIG
    python tools/studio_tools_wanted.py --requirements LOCK    # the lines of LOCK this check needs (any Python)

The check needs only the packages the config model reads YAML and validates with (CONFIG_DISTRIBUTIONS), so
`make synth` installs those from requirements.lock first, in seconds, and builds the bundle while the rest of the venv
(aws-cdk-lib, jsii, ...) installs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What `platform_config` imports beyond the standard library, as requirements.lock names them
# (tests/test_studio_tools_build.py checks that loading a config imports nothing else).
CONFIG_DISTRIBUTIONS = (
    "annotated-types",
    "pydantic",
    "pydantic-core",
    "pyyaml",
    "typing-extensions",
    "typing-inspection",
)

LOCK_ENTRY = re.compile(
    r"^([a-z0-9][a-z0-9._-]*)==\S+ \\\n(?:[ \t]+--hash=sha256:[0-9a-f]{64}(?: \\)?\n?)+", re.MULTILINE
)


def lock_subset(lock_text: str, names: tuple[str, ...] = CONFIG_DISTRIBUTIONS) -> str:
    """The entries of a hash-locked requirements file (`name==version \\` then its `--hash` lines) for `names`,
    refused unless every name has one."""
    blocks = {m[1]: m[0] for m in LOCK_ENTRY.finditer(lock_text)}
    missing = sorted(set(names) - set(blocks))
    if missing:
        raise SystemExit(f"the lock has no entry for {', '.join(missing)}")
    return "".join(blocks[name].rstrip("\n") + "\n" for name in names)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--requirements"]:
        sys.stdout.write(lock_subset(Path(argv[1]).read_text()))
        return 0
    sys.path.insert(0, str(ROOT))
    from platform_config import ConfigError, load_config

    try:
        return 0 if load_config(argv[0]).studio.tools.hyp_and_jq else 1
    except ConfigError:
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
