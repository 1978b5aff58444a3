#!/usr/bin/env bash
# What `make test` costs (`make bench-test`): runs the suite as `make test` does (`make test-suite`: shellcheck and
# the lint steps, bats and pytest side by side) under /usr/bin/time, and prints its wall time and CPU (user + system
# of every process it waited for) in all and per part, then pytest's slowest set-ups and calls. The CPU figures are
# the ones to compare on a shared machine: the wall time depends on what else runs, the CPU far less. On 2 cores the
# suite cannot end in less than its CPU / 2.
#   tools/time_test_suite.sh [--cold]   --cold: remove the checkout's bytecode and the linters' caches first (a fresh
#                                       clone, as CI's, has none: mypy without .mypy_cache costs ~30 s of CPU, with ~1)
# Writes build/test-times/{all,lint,bats,pytest} (elapsed, user, system seconds), each pytest test's CPU into
# build/test-cpu (tools/pytest_cpu.py, which prints it by module), and keeps build/pytest.log.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --cold ]; then
  find . -path ./.venv -prune -o -path ./.venv-train -prune -o -path ./node_modules -prune -o -path ./build -prune \
    -o -name __pycache__ -type d -prune -exec rm -rf {} +
  rm -rf .mypy_cache .ruff_cache
fi
times=build/test-times cpu=build/test-cpu
rm -rf "$times" "$cpu"
mkdir -p "$times" "$cpu"
rc=0
/usr/bin/time -f '%e %U %S' -o "$times/all" \
  env PYTEST_CPU_DIR="$PWD/$cpu" make --no-print-directory test-suite TEST_TIMES="$times" TEST_DURATIONS=40 \
  PYTEST_ARGS="-p tools.pytest_cpu" >build/test-suite.log 2>&1 || rc=$?

python3 - "$times" <<'EOF'
import sys
from pathlib import Path

times = Path(sys.argv[1])
print(f"{'part':<8} {'wall s':>8} {'CPU s':>8} {'user s':>8} {'sys s':>8}")
for part in ("lint", "bats", "pytest", "all"):
    path = times / part
    if not path.exists():
        print(f"{part:<8} (not run)")
        continue
    wall, user, system = (float(field) for field in path.read_text().split()[-3:])
    print(f"{part:<8} {wall:8.1f} {user + system:8.1f} {user:8.1f} {system:8.1f}")
EOF
.venv/bin/python tools/pytest_cpu.py "$cpu" 40
sed -n '/slowest .* durations/,/^=.*short test summary\|^=.* passed\|^=.* failed/p' build/pytest.log | head -n 45
tail -n 3 build/test-suite.log
exit "$rc"
