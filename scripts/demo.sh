#!/usr/bin/env bash
# The main job on an embedded default: generate a small synthetic Llama
# checkpoint, convert it to GGUF and verify it, calibrate on text, quantize
# to Q4_K_M with the statistics, and measure what quantization cost against
# the unquantized model (perplexity, KL divergence, top-1 agreement). The
# calibration and evaluation texts are this repository's own docs, so no
# download is needed. When the real fixture ../shared/fixtures/models/stories260K
# exists, the same flow runs on it with TinyStories text and it tells a story.
# Outputs go to ./out/demo (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/src/tools
out=out/demo
mkdir -p "$out"

echo "== synthetic checkpoint (hidden 256, ffn 512, 4 layers, GQA, bf16, 2 shards)"
$bin/mkmodel "$out/synthetic-hf" --seed 1 --hidden 256 --ffn 512 --layers 4 --heads 8 --kv-heads 2 \
  --vocab 512 --dtype bf16 --shards 2 --untied
$bin/hfconv "$out/synthetic-hf" -o "$out/synthetic-bf16.gguf" --outtype auto
$bin/gguf-info "$out/synthetic-bf16.gguf" --verify | tail -n 4
echo "== calibrate on docs/architecture.md (activation statistics, llama.cpp's imatrix layout)"
$bin/quantize "$out/synthetic-bf16.gguf" --calibration-file docs/architecture.md --calib-ctx 128 \
  --save-stats "$out/synthetic-stats.gguf"
echo "== quantize to Q4_K_M (llama.cpp's per-tensor rules, importance-weighted rounding)"
$bin/quantize "$out/synthetic-bf16.gguf" "$out/synthetic-q4_k_m.gguf" Q4_K_M --stats "$out/synthetic-stats.gguf" \
  | tail -n 4
echo "== what it cost: Q4_K_M against bf16 on docs/calibration.md (a random model: high PPL is expected)"
$bin/ppl-eval "$out/synthetic-q4_k_m.gguf" --base "$out/synthetic-bf16.gguf" --text docs/calibration.md \
  --ctx 128 --chunks 8 2>/dev/null | grep -E '^(Mean PPL|Mean +KLD|Same top p)'

fixture=../shared/fixtures/models/stories260K
text=../shared/fixtures/text
if [ -d "$fixture" ] && [ -f "$text/tinystories-train.txt" ] && [ -f "$text/tinystories-valid.txt" ]; then
  echo "== real model: stories260K"
  $bin/hfconv "$fixture" -o "$out/stories260K-f32.gguf" --outtype f32
  $bin/gguf-info "$out/stories260K-f32.gguf" --no-tensors | head -n 12
  $bin/quantize "$out/stories260K-f32.gguf" "$out/stories260K-q4_k_m.gguf" Q4_K_M \
    --calibration-file "$text/tinystories-train.txt" --calib-ctx 256 --calib-chunks 16 | tail -n 4
  $bin/ppl-eval "$out/stories260K-q4_k_m.gguf" --base "$out/stories260K-f32.gguf" \
    --text "$text/tinystories-valid.txt" --ctx 256 --chunks 20 2>/dev/null | grep -E '^(Mean PPL|Mean +KLD|Same top p)'
  $bin/generate "$out/stories260K-q4_k_m.gguf" -p "" --temp 0 -n 60 2>/dev/null
  echo
else
  echo "== stories260K fixture or TinyStories text not found under ../shared/fixtures: skipped"
fi
echo "demo outputs are in $out/"
