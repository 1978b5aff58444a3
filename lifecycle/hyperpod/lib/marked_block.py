"""PATH's text with the platform's marked block replaced, everything else kept, written to stdout.

Usage: marked_block.py PATH BEGIN END REFUSE [LINE...]
  No LINE: the block is removed. A missing PATH reads as empty. REFUSE: comma-separated Slurm keys (case-insensitive,
  empty for none) that no line outside the block may set. Exits non-zero, with the reason, on a BEGIN without its END
  or on a refused key.
"""

import sys

path, begin, end, refuse, *ours = sys.argv[1:]
try:
    text = open(path).read()
except FileNotFoundError:
    text = ""
kept, inside = [], False
for line in text.splitlines():
    if line == begin:
        inside = True
    elif line == end and inside:
        inside = False
    elif not inside:
        kept.append(line)
if inside:
    sys.exit(f"{path}: '{begin}' has no matching '{end}'; fix the file by hand")
refused = [key for key in refuse.split(",") if key]
if refused:  # re only then: its import is half of this script's start, and most callers refuse nothing
    import re

    for line in kept:
        m = re.match(r"\s*(\w+)\s*=", line)
        if m and m.group(1).lower() in (key.lower() for key in refused):
            sys.exit(
                f"{path} already sets {m.group(1)} outside the platform's block; remove it, the platform sets "
                f"{', '.join(refused)}"
            )
while kept and not kept[-1].strip():
    kept.pop()
if ours:
    kept += [begin, *ours, end]
sys.stdout.write("\n".join(kept) + ("\n" if kept else ""))
