#!/usr/bin/env bash
# Installs what the C tools need (idempotent, as root or with sudo on a fresh
# Debian machine): the C toolchain and the libraries the tools link, and
# builds them in release mode into ./build. Nothing else: the test tooling
# (.venv, llama.cpp's reference tools) is scripts/setup_tests.sh, which
# scripts/test.sh runs.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/debs.sh
install_debs "for the tools" build-essential meson ninja-build pkg-config libcjson-dev libxxhash-dev zlib1g-dev

buildtype=${HFQ_BUILDTYPE:-release}
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype="$buildtype" >/dev/null
fi
meson compile -C build >/dev/null || meson compile -C build
echo "setup: build ready in ./build"
