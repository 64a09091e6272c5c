#!/usr/bin/env bash
# Builds the libFuzzer targets (clang -fsanitize=fuzzer,address,undefined)
# into build-fuzz/: the library sources are compiled once, instrumented, into
# build-fuzz/libhfq_fuzz.a, then each tests/fuzz/fuzz_*.c is linked against it.
# Not part of the default build. Usage: tests/fuzz/build.sh [TARGET...]
# (default: every target). Then tests/fuzz/corpus.sh seeds the corpora and
# tests/fuzz/run.sh runs them.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build-fuzz
CC=${CC:-clang}
# shellcheck disable=SC2054  # commas inside -fsanitize=... are not separators
flags=(-std=gnu11 -g -O1 -fno-omit-frame-pointer -ffp-contract=off -fopenmp -I.
       -fsanitize=address,undefined -fno-sanitize-recover=undefined -DHFQ_VERSION='"fuzz"')
mkdir -p "$out/obj"
newest_h=$(ls -t formats/*.h quant/*.h src/*/*.h "$0" | head -n1)   # plain file names
objs=()
for src in formats/*.c quant/*.c $(ls src/*/*.c | grep -v "^src/tools/"); do
  obj="$out/obj/$(echo "${src%.c}" | tr / _).o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_h" -nt "$obj" ]; then
    $CC "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
rm -f "$out/libhfq_fuzz.a"
ar rcs "$out/libhfq_fuzz.a" "${objs[@]}"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "${f%.c}")"); done
fi
for t in "${targets[@]}"; do
  $CC "${flags[@]}" -Wall -Wextra -fsanitize=fuzzer "tests/fuzz/$t.c" "$out/libhfq_fuzz.a" \
    -lcjson -lxxhash -lz -lm -lpthread -o "$out/$t"
  echo "built $out/$t"
done
