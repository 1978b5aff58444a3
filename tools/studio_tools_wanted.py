"""Exit 0 when CONFIG's Studio spaces get the tools bundle (studio.tools.hyp_and_jq), 1 when not: `make synth` builds
the bundle only then. An invalid config also exits 1: synth itself then reports every error.

    python tools/studio_tools_wanted.py CONFIG
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from platform_config import ConfigError, load_config


def main(argv: list[str]) -> int:
    try:
        return 0 if load_config(argv[0]).studio.tools.hyp_and_jq else 1
    except ConfigError:
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
