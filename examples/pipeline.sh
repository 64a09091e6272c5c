#!/usr/bin/env bash
# pipeline.sh - a model build pipeline: convert a Hugging Face checkpoint,
# calibrate once, quantize to several formats from the saved statistics,
# score every result against the unquantized model and fail on a quality gate.
#
# usage: examples/pipeline.sh HF_MODEL_DIR CALIB_TEXT EVAL_TEXT [OUT_DIR]
#
# Steps (docs/calibration.md, docs/ppl-eval.md):
#   1. hfconv HF_MODEL_DIR -> OUT_DIR/base.gguf (F32: the reference)
#   2. quantize base.gguf --calibration-file CALIB_TEXT --save-stats OUT_DIR/stats.gguf
#      (one pass over the text; the file is llama.cpp's imatrix GGUF plus our statistics)
#   3. quantize base.gguf to each preset of $PRESETS with --stats stats.gguf and its uses
#   4. ppl-eval base.gguf --save-logits: the base's log-probabilities on EVAL_TEXT, once
#   5. ppl-eval each model --base-logits with the gates: PPL, mean KL divergence, top-1
#      agreement; a table (size, bits per weight, PPL, KLD, top-1); exit 3 if a gate fails
#
# Environment (defaults in brackets):
#   HFQ_BIN        folder with hfconv, quantize, ppl-eval [build/src/tools]
#   PRESETS        "PRESET:USES,..." entries, uses comma-separated
#                  [Q4_K_M:importance NVFP4:importance FP8_E4M3:importance INT8:awq,importance]
#   CTX [256], CALIB_CHUNKS [32], EVAL_CHUNKS [12], THREADS [all]
#   MAX_KLD [0.1], MAX_PPL_RATIO [1.10], MIN_TOP1 [0.80]   quality gates, every preset; MIN_TOP1
#                  is a fraction of the tokens (0.80 = 80 %), as the top-1 column
# Exit status: 0 all gates passed, 1 a step failed, 2 bad usage, 3 a gate failed.
set -uo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  sed -n '2,6p' "$0" >&2
  exit 2
fi
model_dir=$1 calib_text=$2 eval_text=$3 out=${4:-pipeline-out}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${HFQ_BIN:-$root/build/src/tools}
presets=${PRESETS:-"Q4_K_M:importance NVFP4:importance FP8_E4M3:importance INT8:awq,importance"}
ctx=${CTX:-256} calib_chunks=${CALIB_CHUNKS:-32} eval_chunks=${EVAL_CHUNKS:-12}
gates=(--max-kld "${MAX_KLD:-0.1}" --max-ppl-ratio "${MAX_PPL_RATIO:-1.10}" --min-top1 "${MIN_TOP1:-0.80}")
threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")

die() { echo "pipeline: $*" >&2; exit 1; }
for f in hfconv quantize ppl-eval; do [ -x "$bin/$f" ] || die "missing $bin/$f (build first, or set HFQ_BIN)"; done
for f in "$calib_text" "$eval_text"; do [ -f "$f" ] || die "missing $f"; done
mkdir -p "$out" || die "cannot create $out"

echo "== convert $model_dir"
"$bin/hfconv" "$model_dir" -o "$out/base.gguf" --outtype f32 -q || die "hfconv failed"

echo "== calibrate on $calib_text ($calib_chunks chunks of $ctx tokens)"
"$bin/quantize" "$out/base.gguf" --calibration-file "$calib_text" --save-stats "$out/stats.gguf" \
  --calib-ctx "$ctx" --calib-chunks "$calib_chunks" "${threads[@]}" || die "calibration failed"

models=() labels=() bpws=()
for entry in $presets; do
  preset=${entry%%:*} uses=()
  IFS=, read -ra names <<< "${entry#*:}"
  for u in "${names[@]}"; do [ -n "$u" ] && [ "$u" != "$preset" ] && uses+=("--$u"); done
  echo "== quantize $preset ${uses[*]}"
  json=$("$bin/quantize" "$out/base.gguf" "$out/$preset.gguf" "$preset" --stats "$out/stats.gguf" "${uses[@]}" \
         "${threads[@]}" --json) || die "quantize $preset failed"
  models+=("$out/$preset.gguf")
  labels+=("$preset ${uses[*]}")
  bpws+=("$(printf '%s\n' "$json" | sed -n 's/.*"out_bpw":[[:space:]]*\([0-9.]*\).*/\1/p' | tail -1)")
done

echo "== score against base.gguf on $eval_text ($eval_chunks chunks of $ctx tokens)"
"$bin/ppl-eval" "$out/base.gguf" --text "$eval_text" --ctx "$ctx" --chunks "$eval_chunks" "${threads[@]}" \
  --save-logits "$out/base.logits" > /dev/null || die "ppl-eval of the base failed"

# a number from ppl-eval's JSON: the first "key": value at or after the line holding `after`
field() { printf '%s\n' "$1" | sed -n "/\"$2\"/,\$p" | sed -n "s/^[[:space:]]*\"$3\":[[:space:]]*\([^,]*\),*$/\1/p" | head -1; }

printf '\n%-34s %10s %6s %9s %10s %7s  %s\n' model bytes bpw PPL KLD top-1 gates
failed=0 base_ppl=
for i in "${!models[@]}"; do
  json=$("$bin/ppl-eval" "${models[$i]}" --text "$eval_text" --base-logits "$out/base.logits" "${gates[@]}" \
         "${threads[@]}" --json 2>/dev/null)
  rc=$?
  [ $rc = 0 ] || [ $rc = 3 ] || die "ppl-eval failed on ${models[$i]}"
  [ $rc = 3 ] && failed=1
  base_ppl=$(field "$json" kl ppl_base)
  printf '%-34s %10s %6.2f %9.4f %10.6f %7.4f  %s\n' "${labels[$i]}" "$(stat -c %s "${models[$i]}")" "${bpws[$i]}" \
    "$(field "$json" model ppl)" "$(field "$json" kl kld)" "$(field "$json" kl same_top)" \
    "$([ $rc = 0 ] && echo passed || echo FAILED)"
done
printf '%-34s %10s %6.2f %9.4f\n' "base (F32)" "$(stat -c %s "$out/base.gguf")" 32 "$base_ppl"
if [ $failed = 1 ]; then
  echo "pipeline: a quality gate failed (${gates[*]})" >&2
  exit 3
fi
echo "all gates passed"
