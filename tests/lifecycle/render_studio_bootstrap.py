"""Writes the Studio bootstrap exactly as constructs/studio_lifecycle_configs.py renders it, for the scripts in FOLDER
(digests computed from that folder), fetching from the S3 URI SOURCE and running ENTRY; with `tools`, as with
studio.tools.hyp_and_jq (studio_tools.sh runs first), with `plain` without.

    render_studio_bootstrap.py FOLDER SOURCE ENTRY [tools]                        to stdout
    render_studio_bootstrap.py --out FILE FOLDER SOURCE ENTRY tools|plain ...      each to its FILE, one start for all

Importing the construct starts the CDK's jsii runtime, seconds of CPU: render every variant a test file needs at once.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from constructs.studio_lifecycle_configs import render_bootstrap, shipped_digests  # noqa: E402


def render(folder: str, source: str, entry: str, tools: bool) -> str:
    return render_bootstrap(
        exports="export STUDIO_TEST_VALUE='from-bootstrap'\n",
        region="eu-west-1",
        source=source,
        entry=entry,
        digests=shipped_digests([Path(folder)]),
        tools=tools,
    )


args = sys.argv[1:]
if args[:1] != ["--out"]:
    sys.stdout.write(render(*args[:3], tools=args[3:] == ["tools"]))
    sys.exit(0)
while args:
    if len(args) < 6 or args[0] != "--out" or args[5] not in ("tools", "plain"):
        sys.exit("usage: render_studio_bootstrap.py --out FILE FOLDER SOURCE ENTRY tools|plain ...")
    _, out, folder, source, entry, variant = args[:6]
    Path(out).write_text(render(folder, source, entry, variant == "tools"))
    args = args[6:]
