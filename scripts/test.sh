#!/usr/bin/env bash
# Runs the whole test suite (setting up first if needed): once on the release
# build, once more on an ASan+UBSan build (build-asan, without the CUDA backend; HFQ_SANITIZE=0 skips
# it), and ends with the line "N passed, N failed, N skipped" over both.
# Installs the test tooling first (scripts/setup_tests.sh: .venv and
# llama.cpp's reference tools), after the C tools' setup (scripts/setup.sh).
# Exit status: 0 only when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
./scripts/setup_tests.sh || { echo "0 passed, 1 failed"; exit 1; }
# tests/meson.build looks for llama.cpp's reference sources (tests/ref) at
# configure time: reconfigure so a build set up before they were fetched
# picks them up (cheap when nothing changed).
meson setup --reconfigure build >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
jobs=${HFQ_TEST_JOBS:-2}
logs=(build/meson-logs/testlog.json)
# Everything built first: meson test builds only what tests link against, and
# the CUDA backend module (loaded at run time) is none of that.
compile() {
  meson compile -C "$1" >"$1/meson-logs/compile.log" 2>&1 ||
    { tail -30 "$1/meson-logs/compile.log"; echo "0 passed, 1 failed"; exit 1; }
}
compile build
meson test -C build --num-processes "$jobs" --print-errorlogs "$@"
if [ "${HFQ_SANITIZE:-1}" = 1 ]; then
  if [ ! -f build-asan/build.ninja ]; then
    # no CUDA backend here: the release build compiles and links it, and a
    # sanitizer cannot look into device code
    meson setup build-asan --buildtype=debugoptimized -Db_sanitize=address,undefined -Dcuda=disabled \
      -Dc_args=-fno-sanitize-recover=all >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
  else
    meson setup --reconfigure build-asan >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
  fi
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  compile build-asan
  meson test -C build-asan --num-processes "$jobs" --print-errorlogs "$@"
  logs+=(build-asan/meson-logs/testlog.json)
fi
.venv/bin/python scripts/test_summary.py "${logs[@]}"
