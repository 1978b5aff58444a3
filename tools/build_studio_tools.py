"""Builds the Studio tools bundle (build/studio-tools/) from package registries only: the HyperPod CLI's wheelhouse
and a static jq. `make studio-tools` runs it; synth ships the result (constructs/studio_tools.py), the space installs it
without any network but S3 (lifecycle/studio/studio_tools.sh).

    python tools/build_studio_tools.py [OUT]          # default build/studio-tools
    python tools/build_studio_tools.py --eksctl       # build/studio-eksctl/eksctl/<file>, from GitHub

hyp: for each lock in lifecycle/studio_tools/ (hyp-cp311.txt, hyp-cp312.txt; tools/lock_studio_tools.py writes them)
`pip download --require-hashes --no-deps` for that CPython and manylinux x86_64, from PyPI. The four distributions PyPI
ships only as source are downloaded hash-checked too and built here into pure-Python wheels. The bundle holds
hyp/wheels/ and, per Python, hyp/requirements-cpXY.txt: every wheel with its sha256 (PyPI's, or for a wheel built
here the built file's), which the space installs with `pip install --no-index --require-hashes --no-deps`.

jq: PyPI's source distribution of jq.py (config/facts/studio_tools.json `jq`) carries jq's own release tarball;
both digests are pinned. jq is configured with its bundled oniguruma and linked statically (`-all-static`), so it
runs on any x86-64 Linux whatever its glibc; it needs gcc and make (Debian build-essential, in the Makefile's
APT_PACKAGES). Debian's jq is not used: bookworm's libjq1 needs GLIBC_2.36 (arc4random), the SageMaker Distribution
images have Ubuntu 22.04's 2.35.

The bundle ends with SHA256SUMS (every other file) and BUILD_INPUTS (the sha256 of the inputs: facts, locks and this
script), which synth compares to refuse a stale bundle.

eksctl (`studio.tools.eksctl`, `make studio-eksctl`) is published only on GitHub: `--eksctl` downloads the pinned
release tarball (config/facts/studio_tools.json `eksctl`) and keeps it only if its sha256 is the pinned one. CI never
runs it; an operator without github.com can copy the file into build/studio-eksctl/eksctl/ by hand, synth checks it.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from constructs.studio_tools import (BUNDLE_DIR, EKSCTL_DIR, FACTS, INPUTS, LOCK_DIR, MANIFEST,  # noqa: E402
                                     inputs_digest, sha256)  # (importing `constructs` starts jsii: a few seconds)
from tools.lock_studio_tools import canonical, target_args  # noqa: E402

LOCK_LINE = re.compile(r"^([a-z0-9-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})", re.MULTILINE)


# Reproducible: the same inputs give the same bundle on any machine, so the lifecycle config (which carries the
# bundle's digest) does not change from one `make synth` to the next. Timestamps in the built wheels and paths in jq
# are fixed; the build backend of the source-only distributions is the lock's setuptools.
SOURCE_DATE_EPOCH = "1700000000"
# pip's build environment for a setup.py project installs setuptools, packaging and wheel: the first two at the lock's
# versions, wheel (not in the lock) at this one (PyPI's newest, 2026-11-25).
BUILD_WHEEL = "wheel==0.48.0"


def pip(*args: str, env: dict | None = None) -> None:
    """pip as the user has set it up (pip.conf, PIP_INDEX_URL: a company's mirror is used); every file is pinned by
    sha256, so where it comes from cannot change what is built."""
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args], check=True, env=env)


def index_url() -> str:
    """The package index pip would use: PIP_INDEX_URL, else pip's configuration, else PyPI."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    for scope in ("download", "global"):
        match = re.search(rf"^{scope}\.index-url='([^']+)'$", listed, re.MULTILINE)
        if match:
            return match[1]
    return "https://pypi.org/simple"


def fetch_sdist(name: str, filename: str, digest: str, target: Path) -> Path:
    """One source distribution, by its file name, from the index's simple page for `name` (PEP 691 JSON, or the
    PEP 503 HTML page), kept only if its sha256 is `digest`. Not `pip download`: pip prepares an sdist's metadata
    before it keeps it, which for jq.py means building Cython in a build environment, only to read a version."""
    import html.parser
    import urllib.parse
    import urllib.request

    page_url = f"{index_url().rstrip('/')}/{name}/"
    request = urllib.request.Request(page_url, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read().decode()
        content_type = response.headers.get("Content-Type", "")
    if "json" in content_type:
        links = [f["url"] for f in json.loads(body)["files"] if f["filename"] == filename]
    else:
        class Anchors(html.parser.HTMLParser):
            def __init__(self) -> None:
                super().__init__()
                self.found: list[str] = []

            def handle_starttag(self, tag, attrs):
                href = dict(attrs).get("href") or ""
                if tag == "a" and urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1] == filename:
                    self.found.append(href)
        anchors = Anchors()
        anchors.feed(body)
        links = anchors.found
    if not links:
        raise SystemExit(f"{page_url} lists no {filename}")
    url = urllib.parse.urljoin(page_url, links[0]).split("#", 1)[0]
    target.mkdir(parents=True, exist_ok=True)
    path = target / filename
    with urllib.request.urlopen(url, timeout=300) as response, path.open("wb") as out:
        shutil.copyfileobj(response, out)
    if sha256(path) != digest:
        raise SystemExit(f"{url} has sha256 {sha256(path)}, pinned {digest}")
    return path


def check_build_host() -> None:
    """Studio spaces are x86-64 Linux: jq is built with this machine's compiler, so only such a machine can make it."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        raise SystemExit(f"the Studio tools' jq is an x86-64 Linux binary, built with the local compiler; this is "
                         f"{sys.platform} {platform.machine()}: build on x86-64 Linux, or set "
                         "studio.tools.hyp_and_jq: false")


def check_static_x86_64(binary: Path) -> None:
    """The ELF header says x86-64 (e_machine 62) and there is no program interpreter (a static binary runs on any
    glibc): what a Studio space needs."""
    data = binary.read_bytes()
    if data[:5] != b"\x7fELF\x02" or int.from_bytes(data[18:20], "little") != 62:
        raise SystemExit(f"{binary} is not a 64-bit x86-64 ELF binary")
    if b"/lib64/ld-linux" in data[:4096] or b"/lib/ld-linux" in data[:4096]:
        raise SystemExit(f"{binary} is dynamically linked (it names a program interpreter); Studio needs it static")


def build_wheel(sdist: Path, out: Path, backend: str) -> Path:
    """A pure-Python wheel from a hash-checked sdist, its build backend pinned (PIP_CONSTRAINT reaches pip's isolated
    build environment: checked, a constraint to another setuptools is what that environment installs) and
    SOURCE_DATE_EPOCH fixing the archive's timestamps."""
    constraint = out.parent / f"{out.name}-build-constraint.txt"
    constraint.write_text(backend + "\n")
    pip("wheel", "--no-deps", "-w", str(out), str(sdist),
        env={**os.environ, "PIP_CONSTRAINT": str(constraint), "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH})
    (wheel,) = out.glob("*.whl")
    return wheel


def lock_entries(lock: Path) -> list[tuple[str, str, str]]:
    return LOCK_LINE.findall(lock.read_text())


def build_hyp(stage: Path, work: Path) -> None:
    wheels = stage / "hyp" / "wheels"
    wheels.mkdir(parents=True)
    built: dict[str, Path] = {}  # sdist sha256 -> the wheel built from it
    for lock in sorted(LOCK_DIR.glob("hyp-cp*.txt")):
        tag = lock.stem.removeprefix("hyp-")
        python = f"{tag[2]}.{tag[3:]}"
        download = work / f"download-{tag}"
        pip("download", "--no-deps", "--require-hashes", *target_args(python), "-d", str(download), "-r", str(lock))
        by_digest = {sha256(p): p for p in download.iterdir()}
        lines = [f"# Installs hyp for CPython {python} from the wheels beside this file (tools/build_studio_tools.py):",
                 "# pip install --no-index --find-links wheels --require-hashes --no-deps -r <this file>"]
        for name, version, digest in lock_entries(lock):
            source = by_digest.get(digest)
            if source is None:
                raise SystemExit(f"{lock.name}: nothing downloaded for {name}=={version} with sha256 {digest}")
            if source.name.endswith(".whl"):
                wheel = source
            else:
                if digest not in built:
                    backend = "\n".join([*(f"{n}=={v}" for n, v, _d in lock_entries(lock)
                                            if n in ("setuptools", "packaging")), BUILD_WHEEL])
                    built[digest] = build_wheel(source, work / f"built-{digest[:12]}", backend)
                wheel = built[digest]
                if not wheel.name.endswith("-py3-none-any.whl") and "-none-any" not in wheel.name:
                    raise SystemExit(f"{source.name} built {wheel.name}, not a pure-Python wheel")
            target = wheels / wheel.name
            if not target.exists():
                shutil.copyfile(wheel, target)
            elif sha256(target) != sha256(wheel):
                raise SystemExit(f"two different files named {wheel.name}")
            lines.append(f"{canonical(name)}=={version} --hash=sha256:{sha256(target)}")
        (stage / "hyp" / f"requirements-{tag}.txt").write_text("\n".join(lines) + "\n")


def build_jq(stage: Path, work: Path) -> None:
    jq = json.loads(FACTS.read_text())["jq"]
    name, version = jq["pypi_sdist"].split("==")
    sdist = fetch_sdist(name, f"{name}-{version}.tar.gz", jq["pypi_sdist_sha256"], work / "jq")
    with tarfile.open(sdist) as outer:
        member = outer.extractfile(jq["release_member"])
        release = work / Path(jq["release_member"]).name
        release.write_bytes(member.read())
    if sha256(release) != jq["release_sha256"]:
        raise SystemExit(f"{jq['release_member']} has sha256 {sha256(release)}, pinned {jq['release_sha256']}")
    with tarfile.open(release) as tar:
        tar.extractall(work / "jq-src", filter="data")
    (source,) = (work / "jq-src").iterdir()
    env = {**os.environ, "LC_ALL": "C", "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    # Given to make, not configure: jq records its configure arguments (`jq --build-configuration`), and the build
    # directory's path must not reach the binary.
    cflags = f"CFLAGS=-O2 -ffile-prefix-map={source}=jq-{jq['version']}"
    for step in (["./configure", "--with-oniguruma=builtin", "--enable-all-static", "--disable-shared",
                  "--disable-docs", "--disable-valgrind"],
                 ["make", f"-j{os.cpu_count() or 2}", "LDFLAGS=-all-static", cflags]):
        result = subprocess.run(step, cwd=source, env=env, capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"building jq: {' '.join(step)} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    subprocess.run(["strip", "jq"], cwd=source, check=True)
    check_static_x86_64(source / "jq")
    version = subprocess.run([str(source / "jq"), "--version"], capture_output=True, text=True, check=True).stdout
    if version.strip() != f"jq-{jq['version']}":
        raise SystemExit(f"the jq built from {release.name} says {version.strip()!r}, not jq-{jq['version']}")
    (stage / "jq").mkdir()
    shutil.copyfile(source / "jq", stage / "jq" / "jq")
    os.chmod(stage / "jq" / "jq", 0o755)


def write_manifest(stage: Path, inputs: str) -> None:
    files = sorted(p for p in stage.rglob("*") if p.is_file())
    (stage / MANIFEST).write_text("".join(f"{sha256(p)}  {p.relative_to(stage).as_posix()}\n" for p in files))
    (stage / INPUTS).write_text(inputs + "\n")


def fetch_eksctl() -> None:
    import urllib.request
    pin = json.loads(FACTS.read_text())["eksctl"]
    target = EKSCTL_DIR / "eksctl" / pin["file"]
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.part")
    with urllib.request.urlopen(pin["url"], timeout=120) as response, partial.open("wb") as out:
        shutil.copyfileobj(response, out)
    actual = sha256(partial)
    if actual != pin["sha256"]:
        partial.unlink()
        raise SystemExit(f"{pin['url']} has sha256 {actual}, not the pinned {pin['sha256']}; kept nothing")
    partial.rename(target)
    print(f"fetched eksctl {pin['version']} into {target.relative_to(ROOT)} (sha256 {actual})")


def main(argv: list[str]) -> int:
    if argv == ["--eksctl"]:
        fetch_eksctl()
        return 0
    check_build_host()
    out = Path(argv[0]).resolve() if argv else BUNDLE_DIR
    inputs = inputs_digest()  # read before building: an input edited meanwhile makes the bundle stale, not current
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        work, stage = Path(tmp) / "work", Path(tmp) / "stage"
        work.mkdir()
        stage.mkdir()
        build_jq(stage, work)
        build_hyp(stage, work)
        write_manifest(stage, inputs)
        if out.exists():
            shutil.rmtree(out)
        stage.rename(out)
    print(f"built {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
