"""Writes the Studio bootstrap exactly as constructs/studio_lifecycle_configs.py renders it, for the scripts in
argv[1] (digests computed from that folder), fetching from the S3 URI argv[2] and running argv[3]; with a fourth
argument `tools`, as with studio.tools.hyp_and_jq (studio_tools.sh runs first)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from constructs.studio_lifecycle_configs import render_bootstrap, shipped_digests  # noqa: E402

folder, source, entry = sys.argv[1:4]
sys.stdout.write(render_bootstrap(exports="export STUDIO_TEST_VALUE='from-bootstrap'\n", region="eu-west-1",
                                  source=source, entry=entry, digests=shipped_digests([Path(folder)]),
                                  tools=sys.argv[4:] == ["tools"]))
