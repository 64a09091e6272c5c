#!/usr/bin/env bash
# Installs what the project needs (idempotent, as root on a fresh Debian
# machine) and builds it in release mode into ./build.
#   Debian packages: the C toolchain and the libraries the tools link.
#   .venv/: Python packages used by the tests only (reference readers/tokenizers).
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(build-essential meson ninja-build pkg-config libcjson-dev libxxhash-dev zlib1g-dev
      python3-venv python3-pip)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Test tooling (never needed by the shipped C tools).
py_pkgs=(gguf==0.19.0 numpy==2.3.5 tokenizers==0.23.3 sentencepiece==0.2.3 ml_dtypes==0.6.0)
stamp=.venv/.hfq-setup-$(echo "${py_pkgs[*]}" | md5sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "setup: creating .venv with ${py_pkgs[*]}"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check "${py_pkgs[@]}"
  touch "$stamp"
fi
./scripts/build_reference.sh  # fetches llama.cpp sources, builds its reference tools (tests only)

buildtype=${HFQ_BUILDTYPE:-release}
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype="$buildtype" >/dev/null
fi
meson compile -C build >/dev/null || meson compile -C build
echo "setup: build ready in ./build"
