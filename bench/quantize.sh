#!/usr/bin/env bash
# Benchmark: `quantize` against llama.cpp's `llama-quantize` on a synthetic ~1.1B-parameter
# F16 GGUF (16 layers, hidden 2048, ffn 8192, GQA 32/8, vocab 32000, untied), presets Q4_K_M
# and Q8_0, both tools on the same number of threads. Runs alternate between the tools; the
# table gives the median wall time, the median CPU time (user + sys) and the largest peak RSS
# (/usr/bin/time), and checks that the two outputs of each preset hold identical tensors.
# Prints markdown on stdout. Not a test: it takes minutes and ~4 GB of disk.
#
# Usage: bench/quantize.sh [WORK_DIR]      (default out/bench-quantize)
#   F16=PATH      an existing F16 GGUF of the model (else it is built in WORK_DIR with
#                 mkmodel + hfconv)
#   RUNS=3        runs per tool and preset
#   THREADS=2     threads for both tools
#   PRESETS="Q4_K_M Q8_0"
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
work=${1:-out/bench-quantize}
runs=${RUNS:-3}
threads=${THREADS:-2}
presets=${PRESETS:-Q4_K_M Q8_0}
bin=build/src/tools
llama=.cache/llama-build/bin/llama-quantize
py=.venv/bin/python
for exe in "$bin/quantize" "$bin/mkmodel" "$bin/hfconv" "$llama" "$py"; do
  [ -x "$exe" ] || { echo "bench/quantize.sh: $exe is missing" >&2; exit 1; }
done
mkdir -p "$work"

f16=${F16:-$work/synth-1b-f16.gguf}
if [ ! -f "$f16" ]; then
  model="$work/synth-1b"
  if [ ! -f "$model/config.json" ]; then
    "$bin/mkmodel" "$model" --seed 1 --hidden 2048 --ffn 8192 --layers 16 --heads 32 --kv-heads 8 \
      --vocab 32000 --dtype bf16 --untied >/dev/null
  fi
  "$bin/hfconv" "$model" -o "$f16" --outtype f16 -q
fi

# tool preset out -> appends "wall cpu peak_kb" to $work/<tool>-<preset>.txt
measure() {
  local tool=$1 preset=$2 out=$3
  local cmd=("$bin/quantize" "$f16" "$out" "$preset" --threads "$threads")
  [ "$tool" = llama ] && cmd=("$llama" "$f16" "$out" "$preset" "$threads")
  if ! /usr/bin/time -f "%e %U %S %M" -o "$work/time.txt" "${cmd[@]}" >"$work/log.txt" 2>&1; then
    cat "$work/log.txt" >&2
    exit 1
  fi
  awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$work/time.txt" >>"$work/$tool-$preset.txt"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rm -f "$work"/ours-*.txt "$work"/llama-*.txt
declare -A identical
for preset in $presets; do
  for ((run = 1; run <= runs; run++)); do
    order="llama ours"
    ((run % 2 == 0)) && order="ours llama"
    for tool in $order; do measure "$tool" "$preset" "$work/$tool-$preset.gguf"; done
  done
  identical[$preset]=$(same_tensors "$work/llama-$preset.gguf" "$work/ours-$preset.gguf")
  rm -f "$work/llama-$preset.gguf" "$work/ours-$preset.gguf"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "Input: $f16 ($(( $(stat -Lc %s "$f16") / 1048576 )) MiB), $threads threads, $runs runs each, $(nproc) cores;"
echo "load average (1, 5, 15 min) before: $load_before, after: $load_after."
echo
echo "| preset | tool | wall s (median) | wall s (runs) | CPU s (median) | peak RSS MiB |"
echo "|---|---|---|---|---|---|"
for preset in $presets; do
  for tool in llama ours; do
    f="$work/$tool-$preset.txt"
    name=$([ "$tool" = llama ] && echo "llama-quantize" || echo "quantize (ours)")
    walls=$(cut -d' ' -f1 "$f" | paste -sd' ')
    peak=$(sort -n -k3,3 "$f" | tail -n1 | awk '{ printf "%.0f", $3 / 1024 }')
    echo "| $preset | $name | $(awk '{ print $1 }' "$f" | median) | $walls | $(awk '{ print $2 }' "$f" | median) | $peak |"
  done
done
echo
echo "| preset | speed-up, wall (llama / ours) | speed-up, CPU | identical tensors |"
echo "|---|---|---|---|"
for preset in $presets; do
  lw=$(awk '{ print $1 }' "$work/llama-$preset.txt" | median) ow=$(awk '{ print $1 }' "$work/ours-$preset.txt" | median)
  lc=$(awk '{ print $2 }' "$work/llama-$preset.txt" | median) oc=$(awk '{ print $2 }' "$work/ours-$preset.txt" | median)
  awk -v p="$preset" -v lw="$lw" -v ow="$ow" -v lc="$lc" -v oc="$oc" -v same="${identical[$preset]}" \
    'BEGIN { printf "| %s | %.2fx | %.2fx | %s |\n", p, lw / ow, lc / oc, same }'
done
rm -f "$work/time.txt" "$work/log.txt"
