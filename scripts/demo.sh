#!/usr/bin/env bash
# The main job on an embedded default: generate a small synthetic Llama
# checkpoint, convert it to GGUF and inspect it; when the real fixture
# ../shared/fixtures/models/stories260K exists, convert it too.
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
echo "== quantize to Q4_K_M (llama.cpp's per-tensor rules)"
$bin/quantize "$out/synthetic-bf16.gguf" "$out/synthetic-q4_k_m.gguf" Q4_K_M --dry-run | tail -n 6
$bin/quantize "$out/synthetic-bf16.gguf" "$out/synthetic-q4_k_m.gguf" Q4_K_M

fixture=../shared/fixtures/models/stories260K
if [ -d "$fixture" ]; then
  echo "== real model: stories260K"
  $bin/hfconv "$fixture" -o "$out/stories260K-f32.gguf" --outtype f32
  $bin/gguf-info "$out/stories260K-f32.gguf" --no-tensors | head -n 20
else
  echo "== stories260K fixture not found at $fixture: skipped"
fi
echo "demo outputs are in $out/"
