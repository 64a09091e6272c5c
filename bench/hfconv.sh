#!/usr/bin/env bash
# Benchmark: hfconv of a synthetic ~1.1B-parameter bf16 checkpoint against `cp`
# of the same bytes, with peak RSS from /usr/bin/time. Prints a markdown table.
# Usage: bench/hfconv.sh [WORK_DIR]   (needs ~5 GB free; not a test)
# Environment: BENCH_RUNS (default 3); BENCH_SHAPE, mkmodel's shape options
# (default: the ~1.1B shape below; the checkpoint is reused while it exists).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-out/bench-hfconv}
bin=build/src/tools
mkdir -p "$work"
model="$work/synth-1b"
if [ ! -f "$model/config.json" ]; then
  # shellcheck disable=SC2086
  "$bin/mkmodel" "$model" --seed 1 ${BENCH_SHAPE:---hidden 2048 --ffn 8192 --layers 16 --heads 32 --kv-heads 8 \
    --vocab 32000} --dtype bf16 --shards 2 --untied >/dev/null
fi
bytes=$(du -cb "$model"/*.safetensors | tail -n1 | cut -f1)
measure() {  # label, command... -> "seconds peak_kb"
  local label=$1; shift
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >/dev/null
  read -r secs kb < "$work/time.txt"
  printf '| %s | %s | %.0f |\n' "$label" "$secs" "$((kb / 1024))"
}
echo "| command | wall s | peak RSS MiB |"
echo "|---|---|---|"
for run in $(seq "${BENCH_RUNS:-3}"); do
  measure "cp (${bytes} bytes), run $run" cp "$model"/model-00001-of-00002.safetensors "$model"/model-00002-of-00002.safetensors "$work/"
  measure "hfconv --outtype bf16, run $run" "$bin/hfconv" "$model" -o "$work/out.gguf" --outtype bf16 -q
done
rm -f "$work"/model-0000*.safetensors "$work/out.gguf" "$work/time.txt"
