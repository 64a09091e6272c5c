#!/usr/bin/env bash
# pipeline.sh - a model build pipeline: convert a Hugging Face checkpoint,
# calibrate once, quantize to several formats from the saved statistics,
# score every result against the unquantized model and fail on a quality gate.
#
# usage: examples/pipeline.sh HF_MODEL_DIR CALIB_TEXT EVAL_TEXT [OUT_DIR]
#
# Steps (docs/calibration.md):
#   1. hfconv HF_MODEL_DIR -> OUT_DIR/base.gguf (F32: the reference)
#   2. quantize base.gguf --calibration-file CALIB_TEXT --save-stats OUT_DIR/stats.gguf
#      (one pass over the text; the file is llama.cpp's imatrix GGUF plus our statistics)
#   3. quantize base.gguf to each preset of $PRESETS with --stats stats.gguf and its uses
#   4. score each against base.gguf on EVAL_TEXT: PPL, mean KL divergence, top-1 agreement
#   5. print a table (size, bits per weight, PPL, KLD, top-1); exit 3 if a gate fails
#
# Environment (defaults in brackets):
#   HFQ_BIN        folder with hfconv, quantize, ppl-eval [build/src/tools]
#   HFQ_KLD        the KL-divergence scorer [build/tests/calib_kld]
#   PRESETS        "PRESET:USES,..." entries, uses comma-separated
#                  [Q4_K_M:importance NVFP4:importance,act-scales FP8_E4M3:importance INT8:awq,importance]
#   CTX [256], CALIB_CHUNKS [32], EVAL_CHUNKS [12], THREADS [all]
#   MAX_KLD [0.1], MAX_PPL_RATIO [1.10], MIN_TOP1 [0.80]   quality gates, every preset
# Exit status: 0 all gates passed, 1 a step failed, 2 bad usage, 3 a gate failed.
#
# Scoring hook: the scores come from HFQ_KLD (tests/calib_kld.c). When ppl-eval
# knows --base (KL statistics and gates with exit status 3), each model is also
# run through `ppl-eval MODEL --base BASE --max-kld --max-ppl-ratio --min-top1`
# and its exit status 3 counts as a failed gate.
set -uo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  sed -n '2,6p' "$0" >&2
  exit 2
fi
model_dir=$1 calib_text=$2 eval_text=$3 out=${4:-pipeline-out}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${HFQ_BIN:-$root/build/src/tools}
kld=${HFQ_KLD:-$root/build/tests/calib_kld}
presets=${PRESETS:-"Q4_K_M:importance NVFP4:importance,act-scales FP8_E4M3:importance INT8:awq,importance"}
ctx=${CTX:-256} calib_chunks=${CALIB_CHUNKS:-32} eval_chunks=${EVAL_CHUNKS:-12}
max_kld=${MAX_KLD:-0.1} max_ppl_ratio=${MAX_PPL_RATIO:-1.10} min_top1=${MIN_TOP1:-0.80}
threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")

die() { echo "pipeline: $*" >&2; exit 1; }
for f in "$bin/hfconv" "$bin/quantize" "$kld"; do [ -x "$f" ] || die "missing $f (build first, or set HFQ_BIN / HFQ_KLD)"; done
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
scores=$("$kld" "$out/base.gguf" "$eval_text" "${models[@]}" --ctx "$ctx" --chunks "$eval_chunks" "${threads[@]}") \
  || die "scoring failed"

field() { printf '%s\n' "$1" | sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p"; }
ppl_eval_has_base=0
if [ -x "$bin/ppl-eval" ] && "$bin/ppl-eval" --help 2>&1 | grep -q -- '--base'; then ppl_eval_has_base=1; fi

printf '\n%-34s %10s %6s %9s %10s %7s  %s\n' model bytes bpw PPL KLD top-1 gate
failed=0
for i in "${!models[@]}"; do
  line=$(printf '%s\n' "$scores" | sed -n "$((i + 1))p")
  ppl=$(field "$line" ppl) base_ppl=$(field "$line" ppl_base) k=$(field "$line" kld) top1=$(field "$line" top1)
  verdict=$(awk -v k="$k" -v p="$ppl" -v b="$base_ppl" -v t="$top1" -v mk="$max_kld" -v mr="$max_ppl_ratio" \
    -v mt="$min_top1" 'BEGIN { bad = "";
      if (k > mk) bad = bad " kld>" mk; if (p / b > mr) bad = bad " ppl-ratio>" mr; if (t < mt) bad = bad " top1<" mt;
      print bad == "" ? "ok" : "FAIL" bad }')
  if [ "$ppl_eval_has_base" = 1 ]; then
    "$bin/ppl-eval" "${models[$i]}" --base "$out/base.gguf" --text "$eval_text" --ctx "$ctx" --chunks "$eval_chunks" \
      --max-kld "$max_kld" --max-ppl-ratio "$max_ppl_ratio" --min-top1 "$min_top1" > /dev/null 2>&1
    rc=$?
    [ $rc = 3 ] && verdict="FAIL (ppl-eval gate)"
    [ $rc != 0 ] && [ $rc != 3 ] && die "ppl-eval --base failed on ${models[$i]}"
  fi
  [ "${verdict%% *}" = ok ] || failed=1
  printf '%-34s %10s %6.2f %9.4f %10.6f %7.4f  %s\n' "${labels[$i]}" "$(stat -c %s "${models[$i]}")" "${bpws[$i]}" \
    "$ppl" "$k" "$top1" "$verdict"
done
printf '%-34s %10s %6.2f %9.4f\n' "base (F32)" "$(stat -c %s "$out/base.gguf")" 32 "$(field "$(printf '%s\n' "$scores" | head -1)" ppl_base)"
if [ $failed = 1 ]; then
  echo "pipeline: a quality gate failed (MAX_KLD=$max_kld MAX_PPL_RATIO=$max_ppl_ratio MIN_TOP1=$min_top1)" >&2
  exit 3
fi
echo "all gates passed"
