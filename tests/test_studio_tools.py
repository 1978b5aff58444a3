"""The built Studio tools bundle (hyp, jq): the locks against the pinned wheel's own metadata, the bundle against the
committed pins, the built zip as the packing of the built bundle, and a real offline install of the bundle by
lifecycle/studio/studio_tools.sh (`make studio-tools` builds and packs it; `make test` does). The zip's packing and
synth's refusals: test_studio_tools_zip.py; the config's switch and the lifecycle configs:
test_studio_tools_config.py."""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from constructs.studio_tools import (
    BUNDLE_DIR,
    BUNDLE_ZIP,
    LOCK_DIR,
    MANIFEST,
    digest_file,
    sha256,
    studio_tools_bundle,
)
from support.paths import in_memory_dir
from support.studio_bundles import PINS, built_bundle, files_of
from tools.pack_studio_tools import pack

ROOT = Path(__file__).resolve().parent.parent
LOCK_LINE = re.compile(r"^([a-z0-9-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})", re.M)
SCRIPT = ROOT / "lifecycle" / "studio" / "studio_tools.sh"


def _lock(python_tag: str) -> dict[str, tuple[str, str]]:
    text = (LOCK_DIR / f"hyp-{python_tag}.txt").read_text()
    return {name: (version, digest) for name, version, digest in LOCK_LINE.findall(text)}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("python_tag", ["cp311", "cp312"])
def test_each_lock_holds_every_requirement_of_the_pinned_wheel_but_the_documented_one(python_tag):
    """Read from the wheel itself (in the built bundle, whose sha256 is the pinned one): every Requires-Dist is in the
    lock at a version it allows, except `left_out`, which neither the lock nor any module of the wheel has."""
    wheel = built_bundle() / "hyp" / "wheels" / PINS["hyp"]["wheel"]
    assert sha256(wheel) == PINS["hyp"]["sha256"]
    lock = _lock(python_tag)
    assert lock[PINS["hyp"]["distribution"]] == (PINS["hyp"]["version"], PINS["hyp"]["sha256"])
    # The installer the space runs from its wheel (studio_tools.sh), pinned like every other wheel.
    installer = PINS["hyp"]["installer"]
    assert lock[installer["distribution"]] == (installer["version"], installer["sha256"])
    assert sha256(built_bundle() / "hyp" / "wheels" / installer["wheel"]) == installer["sha256"]
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = email.parser.Parser().parsestr(archive.read(meta).decode()).get_all("Requires-Dist")
        sources = "\n".join(archive.read(n).decode() for n in archive.namelist() if n.endswith(".py"))
    left_out = {_canonical(Requirement(r).name) for r in PINS["hyp"]["left_out"]}
    assert left_out == {"zstandard"}
    for text in requires:
        requirement = Requirement(text)
        name = _canonical(requirement.name)
        if name in left_out:
            assert name not in lock
            assert not re.search(rf"^\s*(import|from)\s+{name}\b", sources, re.M)
            continue
        assert name in lock, f"{text} is not in hyp-{python_tag}.txt"
        assert requirement.specifier.contains(lock[name][0], prereleases=True), (text, lock[name][0])


def test_the_bundle_matches_the_committed_pins():
    bundle = studio_tools_bundle()
    assert bundle.manifest_sha256 == sha256(built_bundle() / MANIFEST)
    listed = dict(line.split("  ")[::-1] for line in (BUNDLE_DIR / MANIFEST).read_text().splitlines())
    for tag in ("cp311", "cp312"):
        installs = dict(
            re.findall(
                r"^([a-z0-9-]+)==\S+ --hash=sha256:([0-9a-f]{64})$",
                (BUNDLE_DIR / "hyp" / f"requirements-{tag}.txt").read_text(),
                re.M,
            )
        )
        lock = _lock(tag)
        assert set(installs) == set(lock)
        # Wheels from PyPI keep PyPI's digest; only the four source-only distributions were built here.
        rebuilt = {name for name, digest in installs.items() if digest != lock[name][1]}
        assert rebuilt == {"antlr4-python3-runtime", "awscli-cwlogs", "pytest-dependency", "ratelimit"}
        assert set(installs.values()) <= {d for n, d in listed.items() if n.startswith("hyp/wheels/")}


def test_the_built_zip_is_the_packing_of_the_built_bundle(tmp_path):
    """What synth ships is exactly build/studio-tools/: packing it again gives the recorded sha256, and the zip
    extracts to its files."""
    bundle = studio_tools_bundle()
    assert bundle.archive_sha256 == digest_file(BUNDLE_ZIP).read_text().split()[0]
    again = tmp_path / "again.zip"
    pack(built_bundle(), again, force=True)
    assert sha256(again) == bundle.archive_sha256
    with zipfile.ZipFile(BUNDLE_ZIP) as opened:
        assert sorted(opened.namelist()) == sorted(files_of(BUNDLE_DIR))


@pytest.fixture
def install_home(tmp_path) -> Iterator[Path]:
    """The home the offline install writes into: ~600 MB in ~23,000 files (the bundle's copy, hyp's venv), in memory
    when there is room (support.paths.in_memory_dir). The same pip install spent 1.3-1.4 s of system CPU in /dev/shm
    and 2.9-12.5 s under /tmp, its removal 0.3 against 0.7-0.8 s (back to back on this machine)."""
    with in_memory_dir(tmp_path, 2 * 2**30) as directory:
        yield directory / "home"


def test_the_built_bundle_installs_offline_and_hyp_and_jq_run(tmp_path, install_home):
    """The real bundle, through the real installer, in a network namespace without any network and with no index
    (pip --no-index, no pip configuration): a venv for this Python, hyp answering --help (run by the installer
    before it links ~/.local/bin/hyp to it), the static jq 1.8.2. The installer is the bundle's pinned pip, run from
    its wheel: a `pip` that fails stands first on PYTHONPATH, so a `python -m pip` of the venv (ensurepip's pip)
    would fail, while pip run from its wheel puts the wheel first; the venv then holds the lock's pip.
    pip leaves the installed modules uncompiled here (PIP_NO_COMPILE=0: pip reads a --no-* option's variable as
    the value of the option it negates, so 0 is --no-compile): byte-compiling hyp's 6,499 modules is pip's own work,
    not the installer's, and was most of this test's CPU (measured: docs/testing.md); what hyp imports compiles when
    it runs, without writing its bytecode (PYTHONDONTWRITEBYTECODE: nothing runs it a second time). The Python is
    this one's base interpreter itself, not a launcher in front of it (pyenv's python3.11 shim is a bash script that
    starts several processes each time the installer runs Python)."""
    bundle = built_bundle()
    home = install_home
    home.mkdir()
    not_the_bundles = tmp_path / "shadow" / "pip"
    not_the_bundles.mkdir(parents=True)
    (not_the_bundles / "__init__.py").write_text("raise SystemExit('a pip that is not the bundle pip ran')\n")
    env = {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "STUDIO_TOOLS_SOURCE_DIR": str(bundle),
        "STUDIO_TOOLS_SHA256": sha256(bundle / MANIFEST),
        "STUDIO_TOOLS_FOREGROUND": "1",
        "STUDIO_TOOLS_PYTHON": os.path.realpath(sys.executable),
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_COMPILE": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(not_the_bundles.parent),
    }
    run = subprocess.run(
        ["unshare", "--net", "bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (venv,) = (home / ".studio-tools").glob("hyp-*")
    # hyp ran, in the namespace without network: the installer runs it before linking and logs what it printed
    # (a second run here would cost hyp's ~1,240 imports again), and ~/.local/bin/hyp is that same program.
    assert f"[studio-tools] {venv}/bin/hyp --help runs: Usage: hyp [OPTIONS] COMMAND" in run.stdout, run.stdout
    assert os.readlink(home / ".local" / "bin" / "hyp") == str(venv / "bin" / "hyp")
    tag = venv.name.rsplit("-", 1)[1]
    (pip_metadata,) = venv.glob("lib/python3*/site-packages/pip-*.dist-info")
    assert pip_metadata.name == f"pip-{_lock(tag)['pip'][0]}.dist-info"
    assert _lock(tag)["pip"] == (PINS["hyp"]["installer"]["version"], PINS["hyp"]["installer"]["sha256"])
    jq = home / ".local" / "bin" / "jq"
    assert subprocess.run([str(jq), "--version"], capture_output=True, text=True).stdout.strip() == "jq-1.8.2"
    assert (
        subprocess.run([str(jq), "-r", ".a.b"], input='{"a": {"b": "ok"}}', capture_output=True, text=True).stdout
        == "ok\n"
    )
    check = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True)
    # The one requirement left out on purpose, and nothing else.
    assert check.stdout.strip() == "sagemaker-hyperpod 3.12.0 requires zstandard, which is not installed.", check.stdout
