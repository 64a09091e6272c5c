#!/usr/bin/env bash
# Benchmark: peak RSS of hfconv and quantize Q4_K_M on a synthetic Mixtral of
# 8 experts and about 1 B parameters (bench/moe_synth.py from a dense mkmodel
# checkpoint), with /usr/bin/time. Prints a markdown table.
# Usage: bench/hfconv_moe.sh [WORK_DIR]   (needs ~6 GB free; not a test)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-out/bench-hfconv-moe}
bin=build/src/tools
mkdir -p "$work"
if [ ! -f "$work/moe/config.json" ]; then
  "$bin/mkmodel" "$work/dense" --seed 1 --hidden 1024 --ffn 2816 --layers 12 --heads 16 --kv-heads 4 \
    --vocab 32000 --dtype bf16 --untied >/dev/null
  .venv/bin/python bench/moe_synth.py "$work/dense" "$work/moe" 8
  rm -rf "$work/dense"
fi
measure() {  # label, command... -> a table row
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" >/dev/null
  read -r secs kb < "$work/time.txt"
  printf '| %s | %s | %.0f |\n' "$label" "$secs" "$((kb / 1024))"
}
echo "| command | wall s | peak RSS MiB |"
echo "|---|---|---|"
measure "hfconv --outtype bf16 ($(du -cb "$work"/moe/*.safetensors | tail -n1 | cut -f1) bytes)" \
  "$bin/hfconv" "$work/moe" -o "$work/moe.gguf" --outtype bf16 -q
measure "quantize Q4_K_M" "$bin/quantize" "$work/moe.gguf" "$work/moe-q4_k_m.gguf" Q4_K_M --quiet
rm -f "$work/moe.gguf" "$work/moe-q4_k_m.gguf" "$work/time.txt"
