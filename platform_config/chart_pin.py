"""Which HyperPod dependency chart synth may deploy: the pinned upstream revision, checked file by file, and the
config's `eks.hyperpod_dependencies.chart_dir` checked against it.

The pin (config/hyperpod-chart-pin.json) names the upstream commit, the chart directory's git tree id at that
commit, and the sha256 over every file of that tree except subchart archives (`charts/*.tgz`), which
`helm dependency build` adds or rebuilds. `tools/fetch_hyperpod_chart.sh` verifies the tree while fetching and
writes `.pin` and `.dependencies.sha256` (the archives it built) into the chart directory; synth then recomputes
the content digest and the archive checksums, so a test stand-in or an edited copy is never deployed.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from platform_config.errors import ConfigError

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

ROOT = Path(__file__).resolve().parent.parent
PIN_FILE = ROOT / "config" / "hyperpod-chart-pin.json"
BUILD_FILES = frozenset({".pin", ".dependencies.sha256"})  # written by tools/fetch_hyperpod_chart.sh
_ARCHIVE = re.compile(r"(^|/)charts/[^/]+\.tgz$")


def pin() -> dict[str, str]:
    return json.loads(PIN_FILE.read_text())


def is_build_product(relative: str) -> bool:
    return relative in BUILD_FILES or bool(_ARCHIVE.search(relative))


def content_digest(files: dict[str, bytes]) -> str:
    """sha256 over (path, sha256 of content) of every upstream file, in path order."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(f"{path}\0{hashlib.sha256(files[path]).hexdigest()}\n".encode())
    return h.hexdigest()


def directory_files(chart_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(chart_dir).as_posix(): p.read_bytes()
        for p in chart_dir.rglob("*")
        if p.is_file() and not is_build_product(p.relative_to(chart_dir).as_posix())
    }


def problems(chart_dir: Path) -> list[str]:
    """Why `chart_dir` is not the pinned chart as tools/fetch_hyperpod_chart.sh writes it (empty: it is)."""
    expected = pin()
    recorded = (
        dict(line.split("=", 1) for line in (chart_dir / ".pin").read_text().splitlines() if "=" in line)
        if (chart_dir / ".pin").is_file()
        else {}
    )
    found = []
    if not recorded:
        found.append("it has no .pin (tools/fetch_hyperpod_chart.sh writes one)")
    for key in ("commit", "tree"):
        if recorded and recorded.get(key) != expected[key]:
            found.append(f".pin {key} {recorded.get(key)!r}, pinned {expected[key]!r}")
    digest = content_digest(directory_files(chart_dir))
    if digest != expected["content_sha256"]:
        found.append(
            f"its files (archives aside) have digest {digest}, the pinned revision's is {expected['content_sha256']}"
        )
    archives = sorted(
        p.relative_to(chart_dir).as_posix()
        for p in chart_dir.rglob("*.tgz")
        if _ARCHIVE.search(p.relative_to(chart_dir).as_posix())
    )
    listed: dict[str, str] = {}
    sums = chart_dir / ".dependencies.sha256"
    for line in sums.read_text().splitlines() if sums.is_file() else []:
        digest_, _, path = line.partition("  ")
        listed[path.removeprefix("./")] = digest_
    for archive in archives:
        actual = hashlib.sha256((chart_dir / archive).read_bytes()).hexdigest()
        if listed.get(archive) != actual:
            found.append(f"{archive} is not the archive the fetch recorded in .dependencies.sha256")
        else:
            found.extend(_stale_copy(chart_dir, archive))
    return found


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """A regular file's bytes (extractfile answers None only for other kinds of member)."""
    extracted = tar.extractfile(member)
    if extracted is None:
        raise ValueError(f"{member.name} in the chart archive is not a regular file")
    return extracted.read()


def _stale_copy(chart_dir: Path, archive: str) -> list[str]:
    """Helm loads both charts/<name>/ and charts/<name>-<version>.tgz and keeps one of them for the dependency
    <name>; they must not differ. (Upstream commits a stale health-monitoring-agent archive next to its
    directory; `helm dependency build` replaces it, so a fetched chart passes.)"""
    directory = (chart_dir / archive).parent / (chart_dir / archive).name.rsplit("-", 1)[0]
    if not (directory / "Chart.yaml").is_file():
        return []
    with tarfile.open(chart_dir / archive) as tar:
        packed = {
            m.name.split("/", 1)[1]: _member_bytes(tar, m)
            for m in tar.getmembers()
            if m.isfile() and "/" in m.name and "/charts/" not in f"/{m.name.split('/', 1)[1]}"
        }
    own = {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in directory.rglob("*")
        if p.is_file() and not p.relative_to(directory).as_posix().startswith("charts/")
    }
    differing = sorted(name for name in set(packed) & set(own) if packed[name] != own[name])
    missing = sorted(name for name in own if name not in packed and not name.startswith("."))
    if differing or missing:
        return [
            (
                f"{archive} differs from {directory.relative_to(chart_dir).as_posix()}/ "
                f"({', '.join((differing + missing)[:3])}); Helm would deploy either copy"
            )
        ]
    return []


def chart_directory(config: PlatformConfig, *, allow_stand_in: bool = False) -> Path:
    """The dependency chart to deploy. It must be the pinned upstream revision as tools/fetch_hyperpod_chart.sh
    writes it (`problems` above); tests pass allow_stand_in, and the stack then makes its template undeployable."""
    path = config.eks.hyperpod_dependencies.chart_dir
    chart_dir = Path(path) if Path(path).is_absolute() else ROOT / path
    if not (chart_dir / "Chart.yaml").is_file():
        raise ConfigError(
            "eks.hyperpod_dependencies.chart_dir",
            [
                (
                    f"eks.hyperpod_dependencies.chart_dir: {path!r} holds no Chart.yaml; "
                    "the HyperPod dependency chart is not committed: run `make hyperpod-chart` to fetch the pinned revision "
                    "(needs network access to github.com), or point chart_dir at a copy of it"
                )
            ],
        )
    found = problems(chart_dir)
    if found and not allow_stand_in:
        pinned = pin()
        raise ConfigError(
            "eks.hyperpod_dependencies.chart_dir",
            [
                (
                    f"eks.hyperpod_dependencies.chart_dir: {path!r} is not the pinned HyperPod chart ({pinned['repository']} "
                    f"{pinned['path']} at {pinned['commit']}): {'; '.join(found)}; run `make hyperpod-chart`"
                )
            ],
        )
    return chart_dir


def chart_is_pinned(chart_dir: Path) -> bool:
    return not problems(chart_dir)
