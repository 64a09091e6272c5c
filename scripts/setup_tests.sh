#!/usr/bin/env bash
# Installs the test-only tooling (idempotent, as root or with sudo on a fresh
# Debian machine; scripts/test.sh runs it after scripts/setup.sh). Never
# needed by the shipped C tools.
#   Debian packages: python3-venv/python3-pip for .venv; cmake, g++ and make for
#     scripts/build_reference.sh (llama.cpp is C++, built with CMake); patch for
#     scripts/fetch_reference.sh's one logging patch.
#   .venv/: Python packages the tests use (reference readers/tokenizers; pip
#     also fetches llama.cpp's source package).
#   .venv: torch and transformers too (scripts/setup_tests_torch.sh, large).
#   .cache/llama.cpp, .cache/llama-build: llama.cpp's reference sources and
#     tools (scripts/build_reference.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/debs.sh
install_debs "for the tests" python3-venv python3-pip cmake g++ make patch

py_pkgs=(gguf==0.19.0 numpy==2.3.5 tokenizers==0.23.3 sentencepiece==0.2.3 ml_dtypes==0.6.0)
stamp=.venv/.hfq-setup-$(echo "${py_pkgs[*]}" | md5sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "setup: creating .venv with ${py_pkgs[*]}"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check "${py_pkgs[@]}"
  touch "$stamp"
fi
./scripts/setup_tests_torch.sh  # torch (CPU) and transformers: the forward pass's ground truth
./scripts/build_reference.sh  # fetches llama.cpp sources, builds its reference tools (tests only)
