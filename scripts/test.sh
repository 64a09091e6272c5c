#!/usr/bin/env bash
# Runs the whole test suite (setting up first if needed) and ends with the line
# "N passed, N failed, N skipped". Exit status: 0 only when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
meson test -C build --num-processes "${HFQ_TEST_JOBS:-2}" --print-errorlogs "$@"
.venv/bin/python scripts/test_summary.py build/meson-logs/testlog.json
