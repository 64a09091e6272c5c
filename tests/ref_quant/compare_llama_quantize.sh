#!/usr/bin/env bash
# Dev check: our `quantize` against llama.cpp's `llama-quantize` (same tensor
# types for every preset and option set, byte-identical tensor data for the
# ggml formats). See tests/ref_quant/compare_llama_quantize.py.
#
#   tests/ref_quant/compare_llama_quantize.sh --build   # build llama-quantize first (CPU only, a while on 2 cores)
#   tests/ref_quant/compare_llama_quantize.sh [--models a,b] [--presets Q4_K_M,Q8_0] [--gguf FILE ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
ref_build=.cache/llama-build
if [ "${1:-}" = "--build" ]; then
    shift
    [ -d .cache/llama.cpp ] || { echo "no .cache/llama.cpp: run scripts/fetch_reference.sh" >&2; exit 1; }
    # a real directory in this checkout (.cache itself may be a shared link)
    mkdir -p "$ref_build"
    cmake -B "$ref_build" -S .cache/llama.cpp -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
    cmake --build "$ref_build" --target llama-quantize -j"$(nproc)"
fi
meson compile -C build quantize >/dev/null
exec .venv/bin/python tests/ref_quant/compare_llama_quantize.py --quantize build/src/tools/quantize \
    --llama-quantize "$ref_build/bin/llama-quantize" --workdir build/ref_quant "$@"
