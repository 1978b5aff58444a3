"""Locks the HyperPod CLI (`hyp`) for Studio spaces: lifecycle/studio_tools/hyp-cp311.txt and hyp-cp312.txt.

Usage: python tools/lock_studio_tools.py [--check-wheel WHEEL]

config/facts/studio_tools.json pins sagemaker-hyperpod's version and wheel sha256 and names the requirements left out
(`hyp.left_out`, each with its reason). This script downloads that wheel (hash-checked), takes its Requires-Dist,
drops the left-out ones, and lets pip resolve the rest for each Python of the SageMaker Distribution images
(`hyp.python_targets`; manylinux x86_64 up to glibc 2.35, wheels only, PyPI alone), with pip's own resolver
(`pip install --dry-run --ignore-installed --report`). Each lock lists every wheel with its sha256, sagemaker-hyperpod
included, so the space installs with `pip install --no-index --require-hashes --no-deps`. Each lock also pins the
installer (`hyp.installer`: pip, its version and wheel sha256 from PyPI), which the space runs from its wheel, so the
venv keeps that pip. It also checks that no module of the wheel imports a left-out distribution. Needs network
access to PyPI; nothing at test or synth time runs it (tools/build_studio_tools.py downloads what the locks name).
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "studio_tools.json"
LOCK_DIR = ROOT / "lifecycle" / "studio_tools"
_GLIBC = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)]
PLATFORMS = [*_GLIBC, "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
# Import names of left-out distributions, for the check that the wheel never imports them.
IMPORT_NAMES = {"zstandard": "zstandard"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise SystemExit(f"{requirement!r}: not a requirement line (no project name)")
    return canonical(match.group(1))


def facts() -> dict:
    return json.loads(FACTS.read_text())["hyp"]


def lock_path(python: str) -> Path:
    return LOCK_DIR / f"hyp-cp{python.replace('.', '')}.txt"


def target_args(python: str) -> list[str]:
    abi = f"cp{python.replace('.', '')}"
    return [
        *(arg for tag in PLATFORMS for arg in ("--platform", tag)),
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--abi",
        abi,
    ]


def download_wheel(pin: dict, dest: Path) -> Path:
    """The wheel `pin` names (distribution, version, wheel, sha256), downloaded and checked against its sha256."""
    requirement = f"{pin['distribution']}=={pin['version']}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--isolated",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--quiet",
            "-d",
            str(dest),
            requirement,
        ],
        check=True,
    )
    wheel = dest / pin["wheel"]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != pin["sha256"]:
        raise SystemExit(f"{wheel.name} has sha256 {digest}, config/facts/studio_tools.json pins {pin['sha256']}")
    return wheel


def wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = email.parser.Parser().parsestr(archive.read(metadata).decode())
    return [r for r in message.get_all("Requires-Dist") or [] if ";" not in r]


def imported_left_out(wheel: Path, left_out: list[str]) -> list[str]:
    """Modules of the wheel that import a left-out distribution (should be none)."""
    names = [IMPORT_NAMES.get(requirement_name(r), requirement_name(r).replace("-", "_")) for r in left_out]
    pattern = re.compile(rf"^\s*(import|from)\s+({'|'.join(map(re.escape, names))})\b", re.MULTILINE)
    with zipfile.ZipFile(wheel) as archive:
        return [n for n in archive.namelist() if n.endswith(".py") and pattern.search(archive.read(n).decode())]


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", *args], check=True)


def report(args: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.json"
        pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(path), *args)
        return json.loads(path.read_text())["install"]


def sdists_as_wheels(requirements: list[str], work: Path) -> dict[str, tuple[str, str]]:
    """Distributions PyPI ships only as source ({name: (version, sdist sha256)}): resolved for this machine, their
    sdists downloaded and built into (pure-Python) wheels under work/built, so the per-target resolution below can
    see their metadata. tools/build_studio_tools.py builds them from the hash-checked sdists with the lock's
    setuptools (the same bytes as pip's build environment, checked 2026-11-29)."""
    found = {}
    for item in report(requirements):
        if not item["download_info"]["url"].endswith(".whl"):
            found[canonical(item["metadata"]["name"])] = (
                item["metadata"]["version"],
                item["download_info"]["archive_info"]["hashes"]["sha256"],
            )
    if found:
        pip(
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary=:all:",
            "-d",
            str(work / "sdists"),
            *(f"{name}=={version}" for name, (version, _digest) in found.items()),
        )
        pip("wheel", "--quiet", "--no-deps", "-w", str(work / "built"), *map(str, (work / "sdists").iterdir()))
    return found


def resolve(
    requirements: list[str], python: str, built: Path, sdists: dict[str, tuple[str, str]]
) -> list[tuple[str, str, str]]:
    pinned = []
    for item in report(
        [
            "--only-binary=:all:",
            "--target",
            "/nonexistent",
            "--find-links",
            str(built),
            *target_args(python),
            *requirements,
        ]
    ):
        name, version = canonical(item["metadata"]["name"]), item["metadata"]["version"]
        if name in sdists:
            if sdists[name][0] != version:
                raise SystemExit(f"CPython {python} resolves {name}=={version}, this machine {sdists[name][0]}")
            pinned.append((name, version, sdists[name][1]))
        else:
            pinned.append((name, version, item["download_info"]["archive_info"]["hashes"]["sha256"]))
    return sorted(pinned)


def render(python: str, pinned: list[tuple[str, str, str]], hyp: dict, sdists: dict) -> str:
    lines = [
        f"# GENERATED by tools/lock_studio_tools.py for CPython {python} (manylinux x86_64, glibc <= 2.35) from",
        f"# {hyp['wheel']}'s Requires-Dist; do not edit. Left out (config/facts/studio_tools.json):",
        *(f"#   {requirement}" for requirement in hyp["left_out"]),
        f"# Source only on PyPI (tools/build_studio_tools.py builds each into a wheel): {', '.join(sorted(sdists))}",
        (
            f"# Installer: {hyp['installer']['distribution']}=={hyp['installer']['version']}"
            " (hyp.installer; the space runs it from its wheel)"
        ),
        "# Download: pip download --no-deps --require-hashes -r <this file> (and the target's --platform flags)",
    ]
    for name, version, digest in pinned:
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    hyp = facts()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download_wheel(hyp, Path(tmp))
        installer = hyp["installer"]
        download_wheel(installer, Path(tmp) / "installer")
        requirements = wheel_requirements(wheel)
        left_out = list(hyp["left_out"])
        missing = [r for r in left_out if r.replace(" ", "") not in {x.replace(" ", "") for x in requirements}]
        if missing:
            raise SystemExit(f"left_out names {missing}, which {wheel.name} does not require; update the facts")
        importers = imported_left_out(wheel, left_out)
        if importers:
            raise SystemExit(f"{wheel.name} imports a left-out distribution in {importers}; it cannot be left out")
        kept = [r for r in requirements if r not in left_out]
        sdists = sdists_as_wheels(kept, Path(tmp))
        for python in hyp["python_targets"]:
            # sagemaker-hyperpod itself is not resolved (pip would follow its left-out pins): its requirements are,
            # and its wheel joins the lock with the pinned digest, as does the installer's (pip, pure Python).
            resolved = resolve(kept, python, Path(tmp) / "built", sdists)
            if canonical(installer["distribution"]) in {name for name, _v, _d in resolved}:
                raise SystemExit(f"CPython {python}: hyp's requirements resolve {installer['distribution']} themselves")
            pinned = sorted(
                [
                    *resolved,
                    (canonical(hyp["distribution"]), hyp["version"], hyp["sha256"]),
                    (canonical(installer["distribution"]), installer["version"], installer["sha256"]),
                ]
            )
            # The resolver must not bring a left-out distribution back through another package.
            back = {requirement_name(r) for r in left_out} & {name for name, _v, _d in pinned}
            if back:
                raise SystemExit(f"CPython {python}: {sorted(back)} come back as dependencies of other packages")
            out = lock_path(python)
            out.write_text(render(python, pinned, hyp, sdists))
            print(f"wrote {out.relative_to(ROOT)} ({len(pinned)} wheels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
