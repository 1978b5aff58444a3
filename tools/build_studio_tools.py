"""Builds the Studio tools bundle (build/studio-tools/) from package registries only: the HyperPod CLI's wheelhouse
and a static jq. `make studio-tools` runs it; synth ships the result (constructs/studio_tools.py), the space installs it
without any network but S3 (lifecycle/studio/studio_tools.sh).

    python tools/build_studio_tools.py [OUT]          # default build/studio-tools
    python tools/build_studio_tools.py --eksctl       # build/studio-eksctl/eksctl/<file>, from GitHub

hyp: every file the locks in lifecycle/studio_tools/ name (hyp-cp311.txt, hyp-cp312.txt; tools/lock_studio_tools.py
writes them), each once, found on the indexes pip is set up with (pip.conf, PIP_INDEX_URL, extra indexes, find-links,
its cert, proxy and trusted hosts, credentials in an index URL) by the sha256 the index states for it, eight at a
time, each checked against its pin as it is written. A file no index states a digest for is left to
`pip download --require-hashes --no-deps` for its CPython. (pip download itself, for both Pythons, cost about 95 s of
CPU here: it reads every candidate file's tags of every project page; the pins already say which file.) The four
distributions PyPI ships only as source are built into pure-Python wheels side by side by setuptools' PEP 517 hooks,
from the lock's own setuptools and packaging wheels (hash-checked with the rest), in a Python that sees nothing else:
no build environment per sdist, nothing unpinned. The bundle holds hyp/wheels/ and, per Python,
hyp/requirements-cpXY.txt: every wheel with its sha256 (PyPI's, or for a wheel built here the built file's), which
the space installs with `pip install --no-index --require-hashes --no-deps`.

jq: PyPI's source distribution of jq.py (config/facts/studio_tools.json `jq`) carries jq's own release tarball;
both digests are pinned. jq is configured with its bundled oniguruma and linked statically (`-all-static`), so it
runs on any x86-64 Linux whatever its glibc; it needs gcc and make (Debian build-essential, in the Makefile's
APT_PACKAGES). Debian's jq is not used: bookworm's libjq1 needs GLIBC_2.36 (arc4random), the SageMaker Distribution
images have Ubuntu 22.04's 2.35. jq compiles while hyp's files download.

The bundle ends with SHA256SUMS (every other file) and BUILD_INPUTS (the sha256 of the inputs: facts, locks and this
script), which synth compares to refuse a stale bundle.

eksctl (`studio.tools.eksctl`, `make studio-eksctl`) is published only on GitHub: `--eksctl` downloads the pinned
release tarball (config/facts/studio_tools.json `eksctl`) and keeps it only if its sha256 is the pinned one. CI never
runs it; an operator without github.com can copy the file into build/studio-eksctl/eksctl/ by hand, synth checks it.
"""
from __future__ import annotations

import ast
import concurrent.futures
import functools
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.lock_studio_tools import canonical, target_args  # noqa: E402


def _load_by_path(name: str, path: Path):
    """A module of this repository loaded from its file. `import constructs.studio_tools` would first import the
    `constructs` library (this folder shares its name), whose jsii runtime starts Node.js: seconds of CPU that
    neither the build nor the packer needs, and which would tie them to the installed venv."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


_bundle = _load_by_path("studio_tools_bundle", ROOT / "constructs" / "studio_tools.py")
BUNDLE_DIR, EKSCTL_DIR, FACTS, INPUTS = _bundle.BUNDLE_DIR, _bundle.EKSCTL_DIR, _bundle.FACTS, _bundle.INPUTS
LOCK_DIR, MANIFEST, inputs_digest, sha256 = _bundle.LOCK_DIR, _bundle.MANIFEST, _bundle.inputs_digest, _bundle.sha256

LOCK_LINE = re.compile(r"^([a-z0-9-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})", re.MULTILINE)


# Reproducible: the same inputs give the same bundle on any machine, so the lifecycle config (which carries the
# bundle's digest) does not change from one `make synth` to the next. Timestamps in the built wheels and paths in jq
# are fixed; the build backend of the source-only distributions is the lock's setuptools.
SOURCE_DATE_EPOCH = "1700000000"


def pip(*args: str, env: dict | None = None) -> None:
    """pip as the user has set it up (pip.conf, PIP_INDEX_URL: a company's mirror is used); every file is pinned by
    sha256, so where it comes from cannot change what is built."""
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args], check=True, env=env)


class PipSettings(NamedTuple):
    """What of pip's configuration decides where a file comes from and how it is fetched: `pip config list` (pip's
    own merge of its configuration files and PIP_* variables), a PIP_* variable over the `download` section over
    `global`, as pip reads them for `pip download`."""

    indexes: tuple[str, ...]  # index-url (unless no-index), then every extra-index-url
    find_links: tuple[str, ...]
    cert: str | None  # replaces the default CA bundle, as pip's --cert does
    client_cert: str | None
    proxy: str | None
    trusted_hosts: frozenset[str]
    timeout: float


def pip_settings() -> PipSettings:
    return _pip_settings(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_"))))


@functools.cache
def _pip_settings(variables: tuple[tuple[str, str], ...]) -> PipSettings:
    """pip_settings() for these PIP_* variables: `pip config list` once per process and environment."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], check=False, capture_output=True,
                            text=True).stdout
    # Each line is key=repr(value): a value written on several lines in pip.conf arrives with its newlines escaped.
    found = {key: ast.literal_eval(shown) for key, shown in re.findall(r"^([^=\s]+)=('.*'|\".*\")$", listed, re.MULTILINE)}

    def value(key: str) -> str | None:
        variable = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if variable is not None:
            return variable
        return next((found[f"{scope}.{key}"] for scope in (":env:", "download", "global") if f"{scope}.{key}" in found),
                    None)

    def truthy(key: str) -> bool:
        return (value(key) or "").strip().lower() in ("1", "true", "yes", "on")

    primary = [] if truthy("no-index") else [value("index-url") or "https://pypi.org/simple"]
    extras = [] if truthy("no-index") else (value("extra-index-url") or "").split()
    return PipSettings(
        indexes=tuple(primary + extras),
        find_links=tuple((value("find-links") or "").split()),
        cert=value("cert") or None,
        client_cert=value("client-cert") or None,
        proxy=value("proxy") or None,
        trusted_hosts=frozenset(h.split(":")[0] for h in (value("trusted-host") or "").split()),
        timeout=float(value("timeout") or value("default-timeout") or 60),
    )


def index_url() -> str:
    """The package index pip would use: PIP_INDEX_URL, else pip's configuration, else PyPI."""
    return (pip_settings().indexes or ("https://pypi.org/simple",))[0]


def open_url(url: str, accept: str | None = None):
    """A response for `url` with pip's certificate settings, proxy and trusted hosts, and the credentials an index URL
    may carry (https://user:token@host/simple, as CodeArtifact's do)."""
    import base64
    import ssl
    import urllib.parse
    import urllib.request

    settings = pip_settings()
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": accept} if accept else {}
    if parts.username is not None:
        user_password = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(user_password.encode()).decode()
        parts = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
    handlers: list = []
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=settings.cert)
        if settings.client_cert:
            context.load_cert_chain(settings.client_cert)
        if parts.hostname in settings.trusted_hosts:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        handlers.append(urllib.request.HTTPSHandler(context=context))
    if settings.proxy:
        handlers.append(urllib.request.ProxyHandler({"http": settings.proxy, "https": settings.proxy}))
    request = urllib.request.Request(urllib.parse.urlunsplit(parts), headers=headers)
    return urllib.request.build_opener(*handlers).open(request, timeout=settings.timeout)


class Listed(NamedTuple):
    filename: str
    url: str
    sha256: str | None  # as the index states it (PEP 691 `hashes`, PEP 503 `#sha256=`), None when it does not


def project_files(index: str, name: str) -> list[Listed]:
    """The files an index's simple page lists for `name` (PEP 691 JSON or the PEP 503 HTML page; a file: index is a
    directory of pages, as pip reads one). An index that has no such page, or whose page cannot be read here (a
    credential only pip's keyring or netrc has), lists nothing: pip then fetches those files (download_with_pip)."""
    import html.parser
    import urllib.error
    import urllib.parse

    page_url = f"{index.rstrip('/')}/{name}/"
    if page_url.startswith("file:"):
        page = Path(urllib.parse.unquote(urllib.parse.urlsplit(page_url).path)) / "index.html"
        if not page.is_file():
            return []
        body, content_type, base = page.read_text(), "text/html", page.as_uri()
    else:
        try:
            with open_url(page_url, "application/vnd.pypi.simple.v1+json, text/html;q=0.1") as response:
                body = response.read().decode()
                content_type, base = response.headers.get("Content-Type", ""), response.geturl()
        except urllib.error.HTTPError as error:
            if error.code != 404:
                print(f"cannot read {page_url} ({error}); what it lists is left to pip", file=sys.stderr)
            return []
        except (urllib.error.URLError, OSError) as error:
            print(f"cannot read {page_url} ({error}); what it lists is left to pip", file=sys.stderr)
            return []
    if "json" in content_type:
        return [Listed(f["filename"], urllib.parse.urljoin(base, f["url"]), f.get("hashes", {}).get("sha256"))
                for f in json.loads(body)["files"]]

    class Anchors(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[Listed] = []

        def handle_starttag(self, tag, attrs):
            href = dict(attrs).get("href") or ""
            if tag != "a" or not href:
                return
            url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
            digest = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
            self.found.append(Listed(urllib.parse.unquote(url.rsplit("/", 1)[-1]), url, digest))

    anchors = Anchors()
    anchors.feed(body)
    return anchors.found


def download(url: str, target: Path, digest: str | None = None) -> Path:
    """`url` into `target` (through a partial file), kept only if its sha256 is `digest` when one is given."""
    import urllib.error
    import urllib.parse

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.part")
    for attempt in range(3):  # a dropped connection is tried again, as pip retries
        hashed = hashlib.sha256()
        try:
            if url.startswith("file:"):
                source = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).open("rb")
            else:
                source = open_url(url)
            with source as response, partial.open("wb") as out:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    hashed.update(chunk)
                    out.write(chunk)
            break
        except (ConnectionError, TimeoutError, urllib.error.URLError) as error:
            if attempt == 2 or (isinstance(error, urllib.error.HTTPError) and error.code < 500):
                raise
    if digest is not None and hashed.hexdigest() != digest:
        partial.unlink()
        raise SystemExit(f"{url} has sha256 {hashed.hexdigest()}, pinned {digest}")
    partial.rename(target)
    return target


def fetch_sdist(name: str, filename: str, digest: str, target: Path) -> Path:
    """One source distribution, by its file name, from the first index pip is set up with that lists it, kept only if
    its sha256 is `digest`. Not `pip download`: pip prepares an sdist's metadata before it keeps it, which for jq.py
    means building Cython in a build environment, only to read a version."""
    for index in pip_settings().indexes:
        links = [f for f in project_files(index, name) if f.filename == filename]
        if links:
            return download(links[0].url, target / filename, digest)
    pages = ", ".join(f"{index.rstrip('/')}/{name}/" for index in pip_settings().indexes)
    raise SystemExit(f"{pages or 'no index (pip: no-index)'} lists no {filename}")


def fetch_pinned(wanted: dict[str, str], target: Path) -> dict[str, Path]:
    """The files of the locks, {sha256: project name} -> {sha256: downloaded file}, found by the digest the index
    states for each file (every index pip is set up with, then its find-links), fetched side by side and each checked
    against its pin as it is written. What no index states a digest for is left out of the answer: pip downloads it
    (download_with_pip)."""
    import concurrent.futures

    by_project: dict[str, set[str]] = {}
    for digest, name in wanted.items():
        by_project.setdefault(name, set()).add(digest)

    def one_project(name: str) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for index in pip_settings().indexes:
            missing = by_project[name] - set(found)
            if not missing:
                break
            for listed in project_files(index, name):
                if listed.sha256 in missing:
                    found[listed.sha256] = download(listed.url, target / listed.filename, listed.sha256)
                    missing.discard(listed.sha256)
        return found

    found: dict[str, Path] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for result in pool.map(one_project, sorted(by_project)):
            found |= result
    missing = set(wanted) - set(found)
    for location in pip_settings().find_links if missing else ():
        directory = Path(location.removeprefix("file://"))
        for path in sorted(directory.iterdir()) if directory.is_dir() else ():
            if missing and canonical(path.name.split("-")[0]) in {canonical(wanted[d]) for d in missing}:
                digest = sha256(path)
                if digest in missing:
                    found[digest] = shutil.copyfile(path, target / path.name)
                    missing.discard(digest)
    return found


def download_with_pip(lock: Path, entries: list[tuple[str, str, str]], python: str, target: Path) -> dict[str, Path]:
    """The entries no index stated a digest for, by `pip download` for that Python: slower (pip reads every
    candidate's tags), but it reaches what pip reaches (keyring, netrc, a find-links page)."""
    requirements = target / f"pip-{lock.name}"
    requirements.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text("".join(f"{n}=={v} --hash=sha256:{d}\n" for n, v, d in entries))
    out = target / f"pip-{lock.stem}"
    pip("download", "--no-deps", "--require-hashes", *target_args(python), "-d", str(out), "-r", str(requirements))
    return {sha256(p): p for p in out.iterdir()}


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


# The PEP 517 hooks, in the order pip calls them for a wheel, run by a Python that sees only the backend's directory
# (-I -S: no site-packages, no user site, no PYTHON* variables; the source tree is the working directory).
BUILD_HOOKS = """
import importlib, sys
backend_dir, backend_name, out, metadata_dir = sys.argv[1:5]  # (setuptools rewrites sys.argv as it runs setup.py)
sys.path.insert(0, backend_dir)
module, _, attribute = backend_name.partition(":")
backend = importlib.import_module(module)
for part in filter(None, attribute.split(".")):
    backend = getattr(backend, part)
backend.get_requires_for_build_wheel()
metadata = backend.prepare_metadata_for_build_wheel(metadata_dir)
backend.build_wheel(out, metadata_directory=metadata_dir + "/" + metadata)
"""
# What the source-only distributions may ask of their build environment: setuptools' own backend, which needs no
# `wheel` since setuptools 70.1 (it ships bdist_wheel).
BUILD_REQUIRES = {"setuptools", "wheel"}
BUILD_BACKENDS = {"setuptools.build_meta", "setuptools.build_meta:__legacy__"}


def unpack_sdist(sdist: Path, target: Path) -> Path:
    if sdist.name.endswith(".zip"):
        with zipfile.ZipFile(sdist) as archive:
            archive.extractall(target)
    else:
        with tarfile.open(sdist) as archive:
            archive.extractall(target, filter="data")
    (source,) = target.iterdir()
    return source


def build_wheels(sdists: dict[str, Path], backend_wheels: list[Path], work: Path) -> dict[str, Path]:
    """Pure-Python wheels from the hash-checked sdists ({sha256: sdist} -> {sha256: wheel}), all side by side. The
    build backend is the lock's own setuptools (and packaging), whose wheels were downloaded and hash-checked with
    the rest of the lock, unpacked once for every build: no build environment per sdist, nothing fetched that is not
    pinned by sha256. SOURCE_DATE_EPOCH fixes the archives' timestamps."""
    backend_dir = work / "build-backend"
    for wheel in backend_wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(backend_dir)
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    running = {}
    for digest, sdist in sorted(sdists.items()):
        source = unpack_sdist(sdist, work / f"source-{digest[:12]}")
        pyproject = source / "pyproject.toml"
        system = tomllib.loads(pyproject.read_text()).get("build-system", {}) if pyproject.is_file() else {}
        requires = {canonical(re.match(r"[A-Za-z0-9._-]+", r)[0]) for r in system.get("requires", ["setuptools"])}
        backend = system.get("build-backend", "setuptools.build_meta:__legacy__")
        if not requires <= BUILD_REQUIRES or backend not in BUILD_BACKENDS:
            raise SystemExit(f"{sdist.name} builds with {backend} and needs {sorted(requires)}; the bundle builds "
                             f"source distributions with the lock's setuptools only ({sorted(BUILD_REQUIRES)})")
        out, metadata = work / f"built-{digest[:12]}", work / f"metadata-{digest[:12]}"
        out.mkdir()
        metadata.mkdir()
        command = [sys.executable, "-I", "-S", "-c", BUILD_HOOKS, str(backend_dir), backend, str(out), str(metadata)]
        running[digest] = (sdist, out, subprocess.Popen(command, cwd=source, env=env, stdout=subprocess.PIPE,
                                                        stderr=subprocess.STDOUT, text=True))
    built = {}
    for digest, (sdist, out, process) in running.items():
        output = process.communicate()[0]
        if process.returncode:
            raise SystemExit(f"building a wheel from {sdist.name} failed:\n{output[-3000:]}")
        (wheel,) = out.glob("*.whl")
        if not wheel.name.endswith("-none-any.whl"):
            raise SystemExit(f"{sdist.name} built {wheel.name}, not a pure-Python wheel")
        built[digest] = wheel
    return built


def lock_entries(lock: Path) -> list[tuple[str, str, str]]:
    return LOCK_LINE.findall(lock.read_text())


def build_hyp(stage: Path, work: Path) -> None:
    """Every file of every lock, each once (most wheels are pure Python and serve both Pythons), fetched side by side;
    the sdists built into wheels; per Python, the requirements file the space installs from."""
    wheels = stage / "hyp" / "wheels"
    wheels.mkdir(parents=True)
    locks = {lock: lock_entries(lock) for lock in sorted(LOCK_DIR.glob("hyp-cp*.txt"))}
    files = fetch_pinned({d: n for entries in locks.values() for n, _v, d in entries}, work / "files")
    for lock, entries in locks.items():
        rest = [entry for entry in entries if entry[2] not in files]
        if rest:
            tag = lock.stem.removeprefix("hyp-")
            print(f"{lock.name}: no index states the sha256 of {len(rest)} files; pip downloads them")
            files |= download_with_pip(lock, rest, f"{tag[2]}.{tag[3:]}", work)
    for lock, entries in locks.items():
        for name, version, digest in entries:
            if digest not in files:
                raise SystemExit(f"{lock.name}: nothing downloaded for {name}=={version} with sha256 {digest}")
    backend = [files[d] for entries in locks.values() for n, _v, d in entries if n in ("setuptools", "packaging")]
    sdists = {d: p for d, p in files.items() if not p.name.endswith(".whl")}
    built = build_wheels(sdists, sorted(set(backend)), work) if sdists else {}
    for lock, entries in locks.items():
        tag = lock.stem.removeprefix("hyp-")
        lines = [f"# Installs hyp for CPython {tag[2]}.{tag[3:]} from the wheels beside this file (tools/build_studio_tools.py):",
                 "# pip install --no-index --find-links wheels --require-hashes --no-deps -r <this file>"]
        for name, version, digest in entries:
            wheel = built.get(digest, files[digest])
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
    # A make of its own: not the jobserver or flags of the `make -j` that may run this script (its descriptors do not
    # reach this process).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    env |= {"LC_ALL": "C", "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
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
    pip_settings()  # once, before the threads that read it
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        work, stage = Path(tmp) / "work", Path(tmp) / "stage"
        work.mkdir()
        stage.mkdir()
        # jq compiles while hyp's files download: the one waits on the CPU, the other mostly on the network.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for step in [pool.submit(build_jq, stage, work), pool.submit(build_hyp, stage, work)]:
                step.result()
        write_manifest(stage, inputs)
        if out.exists():
            shutil.rmtree(out)
        stage.rename(out)
    print(f"built {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
