"""tools/build_studio_tools.py's own checks, without building: the jq source comes from the index pip is set up
with (a local index served here stands in for a company's mirror), its digest is checked, and only an x86-64 Linux host
builds jq, which must come out a static x86-64 binary."""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import shutil
import threading
from pathlib import Path

import pytest

from support.paths import ROOT

spec = importlib.util.spec_from_file_location("build_studio_tools", ROOT / "tools" / "build_studio_tools.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)


@pytest.fixture
def index(tmp_path):
    """A PEP 503 simple index on loopback holding one sdist; yields (index URL, its file, the paths asked for)."""
    root = tmp_path / "index"
    (root / "simple" / "demo").mkdir(parents=True)
    (root / "files").mkdir()
    sdist = root / "files" / "demo-1.0.tar.gz"
    sdist.write_bytes(b"demo source distribution")
    (root / "simple" / "demo" / "index.html").write_text(
        '<html><body><a href="../../files/demo-1.0.tar.gz#sha256=x">demo-1.0.tar.gz</a>'
        '<a href="../../files/demo-0.9.tar.gz">demo-0.9.tar.gz</a></body></html>'
    )
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):
            asked.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/simple", sdist, asked
    server.shutdown()


def test_the_jq_source_comes_from_the_index_pip_is_set_up_with(index, tmp_path, monkeypatch):
    url, sdist, asked = index
    monkeypatch.setenv("PIP_INDEX_URL", url)
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    got = build.fetch_sdist("demo", "demo-1.0.tar.gz", digest, tmp_path / "out")
    assert got.read_bytes() == sdist.read_bytes()
    assert asked == ["/simple/demo/", "/files/demo-1.0.tar.gz"]


def test_a_source_with_another_digest_is_refused(index, tmp_path, monkeypatch):
    url, _sdist, _asked = index
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(SystemExit, match="has sha256 .*, pinned 0{64}"):
        build.fetch_sdist("demo", "demo-1.0.tar.gz", "0" * 64, tmp_path / "out")


def test_a_file_the_index_does_not_list_is_refused(index, tmp_path, monkeypatch):
    url, _sdist, _asked = index
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(SystemExit, match="lists no demo-2.0.tar.gz"):
        build.fetch_sdist("demo", "demo-2.0.tar.gz", "0" * 64, tmp_path / "out")


def test_pip_runs_with_the_users_configuration_not_isolated(monkeypatch):
    seen = []
    monkeypatch.setattr(build.subprocess, "run", lambda args, **kwargs: seen.append(args))
    build.pip("download", "x")
    assert "--isolated" not in seen[0]


@pytest.mark.parametrize("system, machine", [("darwin", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64")])
def test_a_host_that_cannot_build_the_x86_64_linux_jq_refuses_in_one_line(monkeypatch, system, machine):
    monkeypatch.setattr(build.sys, "platform", system)
    monkeypatch.setattr(build.platform, "machine", lambda: machine)
    with pytest.raises(SystemExit) as info:
        build.check_build_host()
    assert "\n" not in str(info.value)
    assert f"this is {system} {machine}" in str(info.value)


def test_a_dynamically_linked_or_foreign_binary_is_not_shipped_as_jq(tmp_path):
    with pytest.raises(SystemExit, match="dynamically linked"):
        build.check_static_x86_64(Path(shutil.which("ls")))
    arm = tmp_path / "arm"
    data = bytearray(Path(shutil.which("ls")).read_bytes()[:64])
    data[18:20] = (183).to_bytes(2, "little")  # EM_AARCH64
    arm.write_bytes(bytes(data))
    with pytest.raises(SystemExit, match="not a 64-bit x86-64 ELF"):
        build.check_static_x86_64(arm)


def test_the_bundled_jq_is_a_static_x86_64_binary():
    """make test builds the bundle first (its studio-tools prerequisite)."""
    build.check_static_x86_64(ROOT / "build" / "studio-tools" / "jq" / "jq")


@pytest.mark.parametrize(
    "text, wanted", [(None, 0), ("studio:\n  tools:\n    hyp_and_jq: false\n", 1), ("name: [\n", 1)]
)
def test_make_synth_builds_the_bundle_only_for_a_config_that_ships_it(tmp_path, text, wanted):
    import subprocess
    import sys

    config = ROOT / "config" / "default.yaml"
    if text is not None:
        config = tmp_path / "c.yaml"
        config.write_text(text)
    result = subprocess.run([sys.executable, "tools/studio_tools_wanted.py", str(config)], cwd=ROOT, timeout=60)
    assert result.returncode == wanted
