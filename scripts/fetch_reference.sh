#!/usr/bin/env bash
# Test tooling: fetches llama.cpp's source as vendored in the PyPI sdist of
# llama-cpp-python (PyPI is the one source registry we reach) and unpacks the
# parts our reference tests compile (ggml's reference quantizers, gguf.cpp,
# llama-quant.cpp) into .cache/llama.cpp. Never part of the shipped tools.
set -euo pipefail
cd "$(dirname "$0")/.."
ver=0.3.36
dest=.cache/llama.cpp
patches=scripts/llama-log-flush.patch
stamp=.complete-$ver-$(cat $patches | md5sum | cut -c1-12)
[ -f "$dest/$stamp" ] && exit 0
mkdir -p .cache/sdist
sdist=.cache/sdist/llama_cpp_python-$ver.tar.gz
if [ ! -f "$sdist" ]; then
  echo "setup: fetching llama.cpp reference source (llama-cpp-python $ver sdist from PyPI)"
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps \
    --no-binary :all: -d .cache/sdist "llama-cpp-python==$ver"
fi
rm -rf "$dest" && mkdir -p "$dest"
tar xzf "$sdist" -C "$dest" --strip-components=3 \
  "llama_cpp_python-$ver/vendor/llama.cpp/ggml" \
  "llama_cpp_python-$ver/vendor/llama.cpp/src" \
  "llama_cpp_python-$ver/vendor/llama.cpp/include" \
  "llama_cpp_python-$ver/vendor/llama.cpp/tools" \
  "llama_cpp_python-$ver/vendor/llama.cpp/common" \
  "llama_cpp_python-$ver/vendor/llama.cpp/CMakeLists.txt" \
  "llama_cpp_python-$ver/vendor/llama.cpp/cmake" \
  "llama_cpp_python-$ver/vendor/llama.cpp/vendor"
for p in $patches; do patch -s -d "$dest" -p1 < "$p"; done
touch "$dest/$stamp"
