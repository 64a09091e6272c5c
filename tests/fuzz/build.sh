#!/usr/bin/env bash
# Builds the libFuzzer targets (clang with -fsanitize=fuzzer) into build-fuzz/.
# Not part of the default build. Run, e.g.:
#   tests/fuzz/build.sh && build-fuzz/fuzz_gguf -max_total_time=60 build-fuzz/corpus_gguf
# (seed the corpus with a few .gguf files for deeper coverage).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build-fuzz
mkdir -p "$out/corpus_gguf"
clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
  tests/fuzz/fuzz_gguf.c formats/gguf_read.c formats/gguf_common.c formats/ggml_type.c formats/error.c \
  -lxxhash -o "$out/fuzz_gguf"
echo "built $out/fuzz_gguf"
