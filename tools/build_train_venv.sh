#!/usr/bin/env bash
# Builds the fine-tuning example's CPU venv (VENV, default .venv-train) from examples/finetune/requirements-cpu.txt:
# every package from the hashed lock with --no-deps. torch's CPU build (2.13.0+cpu) is not on PyPI; this project's
# machines carry its wheel on local disk, where pip finds it. Where it is missing, torch 2.13.0 comes from PyPI
# instead (a CUDA build: several GB of downloads, same API on the CPU), and the rest of the lock is still hash-checked.
set -euo pipefail

VENV="${1:-.venv-train}"
LOCK=examples/finetune/requirements-cpu.txt
PYTHON="${PYTHON:-python3}"
pip_install() { "$VENV/bin/pip" install --quiet --disable-pip-version-check "$@"; }

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
if pip_install --require-hashes --no-deps -r "$LOCK"; then
  exit 0
fi
echo "build_train_venv: torch 2.13.0+cpu is not on this machine; installing torch 2.13.0 from PyPI (a CUDA build," \
  "several GB) and the rest of $LOCK hash-checked" >&2
without_torch="$(mktemp)"
trap 'rm -f "$without_torch"' EXIT
# The lock writes each package as 'name==version \' followed by its '--hash=...' line.
awk '/^torch==/ { skip = 1; next } skip && /^[[:space:]]+--hash=/ { next } { skip = 0; print }' "$LOCK" >"$without_torch"
grep -q '^torch==' "$without_torch" && { echo "build_train_venv: could not drop torch from $LOCK" >&2; exit 1; }
pip_install torch==2.13.0
pip_install --require-hashes --no-deps -r "$without_torch"
