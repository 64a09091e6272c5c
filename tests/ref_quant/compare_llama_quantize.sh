#!/usr/bin/env bash
# Dev check: our `quantize` against llama.cpp's `llama-quantize` (same tensor
# types for every preset and option set, byte-identical tensor data for the
# ggml formats). See tests/ref_quant/compare_llama_quantize.py.
#
#   tests/ref_quant/compare_llama_quantize.sh --build   # build the reference tools first (scripts/build_reference.sh)
#   tests/ref_quant/compare_llama_quantize.sh [--models a,b] [--presets Q4_K_M,Q8_0] [--gguf FILE ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
ref_build=.cache/llama-build
if [ "${1:-}" = "--build" ]; then
    shift
    ./scripts/build_reference.sh
fi
meson compile -C build quantize >/dev/null
exec .venv/bin/python tests/ref_quant/compare_llama_quantize.py --quantize build/src/tools/quantize \
    --llama-quantize "$ref_build/bin/llama-quantize" --workdir build/ref_quant "$@"
