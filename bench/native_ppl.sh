#!/usr/bin/env bash
# Prompt speed against llama.cpp built for this CPU: ppl-eval and
# llama-perplexity (ctx 256, 4 chunks of wiki.test.raw, 2 threads) on each
# GGUF given, tokens/s of the evaluation alone (llama.cpp's from its log's
# timestamps), RUNS rounds (default 3) with the tools alternating, and the
# perplexities. The reference build of the tests (scripts/build_reference.sh)
# is AVX2 only (GGML_NATIVE=OFF); this one is compiled once into
# .cache/llama-native with GGML_NATIVE=ON (AVX-512, VNNI where the CPU has
# them; several minutes on 2 cores). A benchmark, never a test.
# LLAMA_BUILD=DIR compares against another llama.cpp build instead (e.g. the
# AVX2 reference, .cache/llama-build, with HFQ_CPU_ISA=avx2 for ours: an AVX2
# CPU's comparison on this one).
# Usage: bench/native_ppl.sh [BUILD_DIR] FILE.gguf...
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ $# -gt 0 ] && [ -d "$1" ]; then build=$1; shift; fi
[ $# -gt 0 ] || { echo "usage: bench/native_ppl.sh [BUILD_DIR] FILE.gguf..." >&2; exit 2; }
fix=${HFQ_FIXTURES:-../shared/fixtures}
text=$fix/text/wiki.test.raw
ppl=$build/src/tools/ppl-eval
native=${LLAMA_BUILD:-.cache/llama-native}
[ -x "$ppl" ] || { echo "no $ppl: build first" >&2; exit 1; }
[ -f "$text" ] || { echo "no $text (HFQ_FIXTURES)" >&2; exit 1; }
./scripts/fetch_reference.sh
if [ ! -x "$native/bin/llama-perplexity" ]; then
    [ -z "${LLAMA_BUILD:-}" ] || { echo "no $native/bin/llama-perplexity" >&2; exit 1; }
    echo "bench/native_ppl.sh: building llama.cpp with GGML_NATIVE=ON into $native" >&2
    cmake -B "$native" -S .cache/llama.cpp -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_BUILD_APP=OFF >/dev/null
    cmake --build "$native" -j"$(nproc)" --target llama-perplexity >/dev/null
fi
runs=${RUNS:-3}
echo "| file | ppl-eval tokens/s | llama-perplexity ($native) tokens/s | PPL ours / llama.cpp |"
echo "|---|---:|---:|---|"
for m in "$@"; do
    ours="" theirs="" p_ours="" p_theirs=""
    for _ in $(seq "$runs"); do
        out=$("$ppl" "$m" --text "$text" --ctx 256 --chunks 4 --threads 2 2>&1)
        ours="$ours $(grep -o '([0-9]* tokens/s' <<<"$out" | tr -d '(' | cut -d' ' -f1)"
        p_ours=$(grep -o 'PPL = [0-9.]*' <<<"$out" | cut -d' ' -f3)
        out=$("$native/bin/llama-perplexity" -m "$m" -f "$text" -c 256 -b 256 --chunks 4 -t 2 2>&1)
        theirs="$theirs $(awk 'function t(s,  a) { split(s, a, "."); return a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 }
            /calculating perplexity/ { s = t($1) } /Final estimate/ { e = t($1) }
            END { printf "%.0f", 1024 / (e - s) }' <<<"$out")"
        p_theirs=$(grep -o 'Final estimate: PPL = [0-9.]*' <<<"$out" | awk '{print $5}')
    done
    echo "| $(basename "$m") |$ours |$theirs | $p_ours / $p_theirs |"
done
