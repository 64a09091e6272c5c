#!/usr/bin/env bash
# Test tooling: builds llama.cpp's reference tools (CPU only, static) from the
# unpacked sources in .cache/llama.cpp into .cache/llama-build, so tests can
# compare our outputs with llama-quantize, llama-perplexity and llama-imatrix.
# Idempotent; a few minutes on 2 cores the first time. Never shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/fetch_reference.sh
ref_build=.cache/llama-build
targets=(llama-quantize llama-perplexity llama-imatrix llama-tokenize)
# the stamp names the targets and the source's own stamp (its version and patches)
stamp=$ref_build/.hfq-built-$( (echo "${targets[*]}"; ls .cache/llama.cpp/.complete-*) | md5sum | cut -c1-12)
[ -f "$stamp" ] && exit 0
echo "setup: building llama.cpp reference tools (${targets[*]}); this takes a few minutes"
mkdir -p "$ref_build"
cmake -B "$ref_build" -S .cache/llama.cpp -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_APP=OFF >/dev/null
cmake --build "$ref_build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
touch "$stamp"
