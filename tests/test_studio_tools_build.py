"""tools/build_studio_tools.py's own checks, without building: the jq source comes from the index pip is set up
with (a local index served here stands in for a company's mirror), its digest is checked, and only an x86-64 Linux host
builds jq, which must come out a static x86-64 binary."""

from __future__ import annotations

import base64
import hashlib
import http.server
import importlib.util
import json
import os
import shutil
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from support.paths import ROOT, in_memory_dir

spec = importlib.util.spec_from_file_location("build_studio_tools", ROOT / "tools" / "build_studio_tools.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)


def test_the_jq_source_comes_from_the_index_pip_is_set_up_with(index, tmp_path):
    _url, sdist, asked = index
    digest = hashlib.sha256(sdist).hexdigest()
    got = build.fetch_sdist("demo", "demo-1.0.tar.gz", digest, tmp_path / "out")
    assert got.read_bytes() == sdist
    assert [path for path, _auth in asked] == ["/simple/demo/", "/files/demo-1.0.tar.gz"]


def test_a_source_with_another_digest_is_refused(index, tmp_path):
    with pytest.raises(SystemExit, match="has sha256 .*, pinned 0{64}"):
        build.fetch_sdist("demo", "demo-1.0.tar.gz", "0" * 64, tmp_path / "out")


def test_a_file_the_index_does_not_list_is_refused(index, tmp_path):
    url, _sdist, _asked = index
    with pytest.raises(SystemExit, match=f"{url}/demo/ lists no demo-2.0.tar.gz"):
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
def test_make_synth_builds_the_bundle_only_for_a_config_that_ships_it(tmp_path, monkeypatch, text, wanted):
    """The exit status `make synth` decides by. A config with the tools and one without run the script as make does
    (a process: its `__main__` block hands main()'s answer to the shell either way); the invalid one calls the same
    main() here (a fresh interpreter importing pydantic again costs ~0.4 s of CPU)."""
    import subprocess
    import sys

    from tools import studio_tools_wanted

    config = ROOT / "config" / "default.yaml"
    if text is not None:
        config = tmp_path / "c.yaml"
        config.write_text(text)
    if text == "name: [\n":
        monkeypatch.setattr(sys, "path", list(sys.path))  # main() puts the repository first on it, as a script must
        assert studio_tools_wanted.main([str(config)]) == wanted
        return
    result = subprocess.run([sys.executable, "tools/studio_tools_wanted.py", str(config)], cwd=ROOT, timeout=60)
    assert result.returncode == wanted


# The bundle's downloads: every file of the hyp locks by the sha256 the index states for it (PEP 503 `#sha256=` or
# PEP 691 JSON `hashes`), from the indexes pip is set up with, side by side. A local index stands in for PyPI or a
# company's mirror; it records what was asked and with which Authorization header.
@pytest.fixture(scope="module")
def pinned_index_server():
    routes: dict[str, tuple[str, bytes]] = {}
    asked: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append((self.path, self.headers.get("Authorization")))
            if self.path not in routes:
                self.send_error(404)
                return
            content_type, body = routes[self.path]
            if content_type == "status":
                self.send_error(int(body))
                return
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_port}", routes, asked
    server.shutdown()


@pytest.fixture
def pinned_index(pinned_index_server):
    _host, routes, asked = pinned_index_server
    routes.clear()
    asked.clear()
    return pinned_index_server


@pytest.fixture
def index(pinned_index, monkeypatch):
    """The local index as a PEP 503 simple index holding one sdist, and pip set up with it alone: yields (index URL,
    the sdist's bytes, the paths asked for with their Authorization header). The same index URL as the pinned-file
    tests', so that build.pip_settings, which runs `pip config list` (~0.5 s of CPU) once per process and PIP_*
    variables as a build does, runs it once for all of them."""
    host, routes, asked = pinned_index
    sdist = b"demo source distribution"
    routes["/simple/demo/"] = (
        "text/html",
        b'<html><body><a href="../../files/demo-1.0.tar.gz#sha256=x">demo-1.0.tar.gz</a>'
        b'<a href="../../files/demo-0.9.tar.gz">demo-0.9.tar.gz</a></body></html>',
    )
    routes["/files/demo-1.0.tar.gz"] = ("application/octet-stream", sdist)
    _only_index(monkeypatch, f"http://{host}/simple")
    return f"http://{host}/simple", sdist, asked


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _only_index(monkeypatch, *indexes: str) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", indexes[0])
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", " ".join(indexes[1:]))
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    # Read once before fetch_pinned's threads, as build_studio_tools.main does: each thread that found it not yet read
    # would start its own `pip config list` (two in the first test here, ~0.5 s of CPU each).
    build.pip_settings()


def test_each_pinned_file_is_found_by_the_digest_the_index_states_and_fetched_once(pinned_index, tmp_path, monkeypatch):
    host, routes, asked = pinned_index
    files = {
        "alpha-1.0-py3-none-any.whl": b"alpha pure",
        "alpha-1.0-cp311-cp311-linux.whl": b"alpha 311",
        "alpha-0.9-py3-none-any.whl": b"alpha old",
        "beta-2.0.tar.gz": b"beta source",
    }
    for name, data in files.items():
        routes[f"/files/{name}"] = ("application/octet-stream", data)
    routes["/simple/alpha/"] = (
        "text/html",
        "".join(
            f'<a href="../../files/{n}#sha256={_digest(d)}">{n}</a>' for n, d in files.items() if n.startswith("alpha")
        ).encode(),
    )
    routes["/simple/beta/"] = (
        "application/vnd.pypi.simple.v1+json",
        json.dumps(
            {
                "files": [
                    {
                        "filename": "beta-2.0.tar.gz",
                        "url": "../../files/beta-2.0.tar.gz",
                        "hashes": {"sha256": _digest(files["beta-2.0.tar.gz"])},
                    }
                ]
            }
        ).encode(),
    )
    _only_index(monkeypatch, f"http://{host}/simple")
    wanted = {
        _digest(files[n]): n.split("-")[0]
        for n in ("alpha-1.0-py3-none-any.whl", "alpha-1.0-cp311-cp311-linux.whl", "beta-2.0.tar.gz")
    }
    got = build.fetch_pinned(wanted, tmp_path / "files")
    assert {d: p.read_bytes() for d, p in got.items()} == {d: files[p.name] for d, p in got.items()}
    assert set(got) == set(wanted)
    paths = sorted(path for path, _auth in asked)
    assert paths == sorted(
        [
            "/simple/alpha/",
            "/simple/beta/",
            "/files/alpha-1.0-py3-none-any.whl",
            "/files/alpha-1.0-cp311-cp311-linux.whl",
            "/files/beta-2.0.tar.gz",
        ]
    )


def test_a_file_whose_bytes_are_not_its_pin_is_refused_and_not_kept(pinned_index, tmp_path, monkeypatch):
    host, routes, _asked = pinned_index
    pinned = _digest(b"the real wheel")
    routes["/files/alpha-1.0-py3-none-any.whl"] = ("application/octet-stream", b"another wheel")
    routes["/simple/alpha/"] = (
        "text/html",
        f'<a href="/files/alpha-1.0-py3-none-any.whl#sha256={pinned}">x</a>'.encode(),
    )
    _only_index(monkeypatch, f"http://{host}/simple")
    with pytest.raises(SystemExit, match=f"has sha256 {_digest(b'another wheel')}, pinned {pinned}"):
        build.fetch_pinned({pinned: "alpha"}, tmp_path / "files")
    assert not list((tmp_path / "files").iterdir())


def test_files_no_index_states_a_digest_for_are_left_to_pip(pinned_index, tmp_path, monkeypatch):
    host, routes, asked = pinned_index
    routes["/files/alpha-1.0-py3-none-any.whl"] = ("application/octet-stream", b"alpha")
    routes["/simple/alpha/"] = ("text/html", b'<a href="/files/alpha-1.0-py3-none-any.whl">x</a>')
    _only_index(monkeypatch, f"http://{host}/simple")
    assert build.fetch_pinned({_digest(b"alpha"): "alpha"}, tmp_path / "files") == {}
    assert [path for path, _auth in asked] == ["/simple/alpha/"]


def test_extra_indexes_are_searched_and_an_index_urls_credentials_are_sent(pinned_index, tmp_path, monkeypatch):
    """A company index (credentials in its URL, as CodeArtifact's) that lacks the project, then an extra index."""
    host, routes, asked = pinned_index
    routes["/files/alpha-1.0-py3-none-any.whl"] = ("application/octet-stream", b"alpha")
    routes["/extra/alpha/"] = (
        "text/html",
        f'<a href="/files/alpha-1.0-py3-none-any.whl#sha256={_digest(b"alpha")}">'
        "alpha-1.0-py3-none-any.whl</a>".encode(),
    )
    _only_index(monkeypatch, f"http://aws:s3cr%40t@{host}/company", f"http://{host}/extra")
    got = build.fetch_pinned({_digest(b"alpha"): "alpha"}, tmp_path / "files")
    assert got[_digest(b"alpha")].read_bytes() == b"alpha"
    assert asked[0] == ("/company/alpha/", "Basic " + base64.b64encode(b"aws:s3cr@t").decode())
    assert [path for path, _auth in asked[1:]] == ["/extra/alpha/", "/files/alpha-1.0-py3-none-any.whl"]


def test_the_settings_are_pips_own_configuration(tmp_path, monkeypatch):
    """pip.conf's [download] over [global], PIP_* variables over both, no-index drops every index."""
    for variable in [v for v in os.environ if v.startswith("PIP_")]:
        monkeypatch.delenv(variable)
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = https://global.example/simple\nproxy = http://proxy.example:3128\n"
        "[download]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = https://a.example/simple https://b.example/simple\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    settings = build.pip_settings()
    assert settings.indexes == ("https://mirror.example/simple", "https://a.example/simple", "https://b.example/simple")
    assert settings.proxy == "http://proxy.example:3128"
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")
    assert build.pip_settings().indexes[0] == "https://env.example/simple"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert build.pip_settings().indexes == ()


def _sdist(tmp_path: Path, requires: str) -> Path:
    source = tmp_path / "src" / "demo-1.0"
    source.mkdir(parents=True)
    (source / "demo.py").write_text("VALUE = 1\n")
    (source / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='demo', version='1.0', py_modules=['demo'])\n"
    )
    (source / "pyproject.toml").write_text(f"[build-system]\nrequires = [{requires}]\n")
    sdist = tmp_path / "demo-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(source, arcname="demo-1.0")
    return sdist


def _backend_wheels() -> list[Path]:
    """The lock's setuptools and packaging, as the built bundle holds them (make test builds it first)."""
    wheels = ROOT / "build" / "studio-tools" / "hyp" / "wheels"
    return sorted([*wheels.glob("setuptools-*.whl"), *wheels.glob("packaging-*.whl")])


def test_a_source_distribution_builds_with_the_locks_setuptools_into_the_same_bytes_every_time(tmp_path):
    # Each build unpacks the backend's wheels (~380 files) and writes the build's: in memory when there is room
    # (support.paths.in_memory_dir; the test's CPU 1.3-1.4 s there, 1.7-2.3 s under /tmp, three runs each).
    with in_memory_dir(tmp_path, 2**28) as work:
        sdist = _sdist(work, '"setuptools", "wheel"')
        first = build.build_wheels({"a" * 64: sdist}, _backend_wheels(), work / "one")["a" * 64]
        second = build.build_wheels({"a" * 64: sdist}, _backend_wheels(), work / "two")["a" * 64]
        assert first.name == "demo-1.0-py3-none-any.whl"
        assert first.read_bytes() == second.read_bytes()
        with zipfile.ZipFile(first) as archive:
            generator = archive.read("demo-1.0.dist-info/WHEEL").decode()
    (setuptools,) = [w for w in _backend_wheels() if w.name.startswith("setuptools-")]
    assert f"Generator: setuptools ({setuptools.name.split('-')[1]})" in generator


def test_a_source_distribution_that_needs_another_build_backend_is_refused_by_name(tmp_path):
    with pytest.raises(SystemExit, match=r"demo-1.0.tar.gz builds with .* and needs \['hatchling', 'setuptools'\]"):
        build.build_wheels({"a" * 64: _sdist(tmp_path, '"setuptools", "hatchling"')}, _backend_wheels(), tmp_path / "w")


def test_deciding_on_the_bundle_needs_only_the_packages_make_installs_first():
    """`make synth` installs CONFIG_DISTRIBUTIONS first and starts the bundle while the rest installs: loading a config
    must import nothing else, and the lock's subset is exactly those entries, hashes and all."""
    import subprocess
    import sys

    from packaging.utils import canonicalize_name
    from tools.studio_tools_wanted import CONFIG_DISTRIBUTIONS, lock_subset

    script = (
        "import sys, importlib.metadata as md; sys.path.insert(0, sys.argv[1]); before = set(sys.modules)\n"
        "from platform_config import load_config; load_config(sys.argv[2])\n"
        "tops = {m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names)\n"
        "found = md.packages_distributions()\n"
        "print('\\n'.join(sorted({d for t in tops for d in found.get(t, [])})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(ROOT), str(ROOT / "config" / "default.yaml")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    imported = {canonicalize_name(line) for line in result.stdout.split()}
    assert imported <= set(CONFIG_DISTRIBUTIONS), imported - set(CONFIG_DISTRIBUTIONS)
    lock = (ROOT / "requirements.lock").read_text()
    subset = lock_subset(lock)
    assert [line.split("==")[0] for line in subset.splitlines() if "==" in line] == list(CONFIG_DISTRIBUTIONS)
    assert all(line in lock.splitlines() for line in subset.splitlines())
    with pytest.raises(SystemExit, match="the lock has no entry for pydantic"):
        lock_subset(lock.replace("pydantic==", "pydantix=="), ("pydantic",))


def test_a_page_that_cannot_be_read_here_leaves_its_files_to_pip(pinned_index, tmp_path, monkeypatch, capsys):
    """An index that wants a credential pip has (keyring, netrc) and this reader has not: pip downloads its files."""
    host, routes, asked = pinned_index
    routes["/simple/alpha/"] = ("status", b"401")
    _only_index(monkeypatch, f"http://{host}/simple")
    assert build.fetch_pinned({_digest(b"alpha"): "alpha"}, tmp_path / "files") == {}
    assert "cannot read http://" in capsys.readouterr().err


def test_the_bundle_build_waits_for_the_configs_packages_not_for_the_whole_venv():
    """Dry run with every target out of date but the config's packages: the bundle's recipe runs, the install of the
    whole requirements.lock (aws-cdk-lib, jsii, ...) is not among its prerequisites, so `make -j` overlaps them."""
    import subprocess

    result = subprocess.run(
        ["make", "-n", "-B", "-o", ".venv/.config-installed", "build/studio-tools/BUILD_INPUTS"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "tools/build_studio_tools.py" in result.stdout
    assert "-r requirements.lock" not in result.stdout
