#!/bin/sh
# The program of every Python-driven test (tests/meson.build): runs the
# project's virtual environment's python, or skips (exit 77) when .venv is
# absent, so `meson setup build && meson compile -C build` needs only the C
# dependencies. Decided at run time: a .venv created later is used without
# reconfiguring. scripts/test.sh (scripts/setup_tests.sh) creates it.
src=${HFQ_SOURCE:-$(dirname "$0")/..}
if [ -x "$src/.venv/bin/python" ]; then
  exec "$src/.venv/bin/python" "$@"
fi
echo "SKIP: .venv missing: run ./scripts/test.sh (it installs the test tooling)"
exit 77
