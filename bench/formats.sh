#!/usr/bin/env bash
# bench/formats.sh - one model in every format, our tools against llama.cpp's
# side by side: per format, the quantize time of `quantize` and `llama-quantize`
# (from the same F32 GGUF, same threads) and whether their outputs hold the same
# tensors byte for byte; the prompt speed of `ppl-eval` and `llama-perplexity`
# on that file (same text, context and chunks); the decode speed of `generate`
# and `llama-bench`; the file's size and bits per weight. The tools alternate
# (the order flips every format) so that a shared machine's load spreads over
# both. Formats llama.cpp lacks (NVFP4, MXFP4, INT8, FP8) get our figures only.
# Prints a markdown table with a one-line machine header on stdout. One run
# per figure: a benchmark, never a test.
#
# usage: bench/formats.sh [--quick] [WORK_DIR]    (default out/bench-formats)
#   --quick    stories260K (fixture, hfconv F32), a handful of formats, ctx 128
#   env: BUILD (default build), THREADS (2), F32 (the base GGUF; default Gemma 3
#        270M made from .cache/models/gemma-3-270m-q4_k_m.gguf by `quantize F32`,
#        scripts/fetch_models.sh; the table then names the file), IMATRIX (a llama-imatrix GGUF for the formats
#        that need one; default made by llama-imatrix over 8 chunks of 256 tokens
#        of tinystories-train.txt), FORMATS (the list; default all below),
#        CTX (256) CHUNKS (2) TEXT (wiki.test.raw) GEN (decoded tokens, 32),
#        HFQ_FIXTURES (../shared/fixtures), LLAMA_BUILD (the llama.cpp build
#        directory whose bin/ holds llama-quantize, llama-perplexity and
#        llama-imatrix; default .cache/llama-build, scripts/build_reference.sh's
#        AVX2 build; e.g. a -DGGML_NATIVE=ON build of .cache/llama.cpp)
# llama-bench, which scripts/build_reference.sh does not build, is compiled once
# into WORK_DIR from .cache/llama.cpp against that build's static libraries
# (or taken from LLAMA_BENCH=PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
export LC_ALL=C
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
work=${1:-out/bench-formats$([ "$quick" = 1 ] && echo -quick)}
build=${BUILD:-build} threads=${THREADS:-2} gen=${GEN:-32}
fix=${HFQ_FIXTURES:-../shared/fixtures}
bin=$build/src/tools
lsrc=.cache/llama.cpp lbuild=${LLAMA_BUILD:-.cache/llama-build}
llama=$lbuild/bin
py=.venv/bin/python
# llama-quantize's presets that our quantize makes too, then ours alone
shared=(F16 BF16 Q8_0 Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 IQ4_NL IQ4_XS Q3_K_L Q3_K_M Q3_K_S
        IQ3_M IQ3_S IQ3_XS IQ3_XXS Q2_K Q2_K_S IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S TQ2_0 TQ1_0 MXFP4_MOE)
own=(NVFP4 MXFP4 INT8 FP8_E4M3 FP8_E5M2)
needs_imatrix=" IQ3_XS IQ3_XXS Q2_K_S IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S "   # llama-quantize refuses these without one (IQ3_XS: where a tensor takes IQ3_XXS)
if [ "$quick" = 1 ]; then
  formats=${FORMATS:-F16 Q8_0 Q4_0 Q4_K_M Q6_K IQ4_NL NVFP4 MXFP4 INT8 FP8_E4M3}
  ctx=${CTX:-128} chunks=${CHUNKS:-2} text=${TEXT:-$fix/text/tinystories-valid.txt}
else
  formats=${FORMATS:-${shared[*]} ${own[*]}}
  ctx=${CTX:-256} chunks=${CHUNKS:-2} text=${TEXT:-$fix/text/wiki.test.raw}
fi
for exe in "$bin/quantize" "$bin/ppl-eval" "$bin/generate" "$py"; do
  [ -x "$exe" ] || { echo "bench/formats.sh: no $exe (build first)" >&2; exit 1; }
done
[ -f "$text" ] || { echo "bench/formats.sh: no $text (HFQ_FIXTURES)" >&2; exit 1; }
have_llama=1
for t in llama-quantize llama-perplexity; do [ -x "$llama/$t" ] || have_llama=0; done
[ "$have_llama" = 1 ] || echo "bench/formats.sh: no llama.cpp tools in $llama (scripts/build_reference.sh): ours only" >&2
mkdir -p "$work"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ------------------------------------------------------------------ inputs
if [ "$quick" = 1 ]; then
  f32=${F32:-$work/stories260K-F32.gguf}
  [ -f "$f32" ] || "$bin/hfconv" "$fix/models/stories260K" -o "$f32" --outtype f32 -q
  model_name="stories260K (fixture, hfconv F32)"
else
  src=.cache/models/gemma-3-270m-q4_k_m.gguf
  f32=${F32:-$work/gemma-3-270m-F32.gguf}
  if [ ! -f "$f32" ]; then
    [ -f "$src" ] || { echo "bench/formats.sh: no $src (scripts/fetch_models.sh) and no F32=" >&2; exit 1; }
    "$bin/quantize" "$src" "$f32" F32 --allow-requantize --quiet --threads "$threads" >/dev/null
  fi
  model_name="Gemma 3 270M (F32 of gemma-3-270m-q4_k_m.gguf by our quantize)"
fi
[ -n "${F32:-}" ] && model_name="$(basename "$F32") (F32=)"
imatrix=${IMATRIX:-$work/imatrix.gguf}
make_imatrix() {  # once, when a format needs it
  [ -f "$imatrix" ] && return 0
  [ -x "$llama/llama-imatrix" ] || return 1
  "$llama/llama-imatrix" -m "$f32" -f "$fix/text/tinystories-train.txt" -o "$imatrix" -c 256 -b 256 --chunks 8 \
    -t "$threads" >"$tmp/imatrix.log" 2>&1 || { tail -n 3 "$tmp/imatrix.log" >&2; return 1; }
}
lbench=${LLAMA_BENCH:-$llama/llama-bench}
if [ "$have_llama" = 1 ] && [ ! -x "$lbench" ]; then
  lbench=$work/llama-bench
  if [ ! -x "$lbench" ]; then
    echo "bench/formats.sh: compiling llama-bench into $work (a few minutes)" >&2
    c++ -O2 -DNDEBUG -std=c++17 -I"$lsrc/include" -I"$lsrc/ggml/include" -I"$lsrc/common" -I"$lsrc/vendor" \
      "$lsrc/tools/llama-bench/main.cpp" "$lsrc/tools/llama-bench/llama-bench.cpp" -o "$lbench" \
      "$lbuild/common/libllama-common.a" "$lbuild/common/libllama-common-base.a" "$lbuild/src/libllama.a" \
      "$lbuild/ggml/src/libggml.a" "$lbuild/ggml/src/libggml-cpu.a" "$lbuild/ggml/src/libggml-base.a" \
      "$lbuild/vendor/cpp-httplib/libcpp-httplib.a" -fopenmp -lpthread || { echo "bench/formats.sh: llama-bench failed to build: no llama.cpp decode figures" >&2; lbench=''; }
  fi
fi

# ------------------------------------------------------------------ measuring
# timed NAME COMMAND...: one run; "wall cpu" into $tmp/NAME.time, output in $tmp/NAME.out; fails quietly
timed() {
  local n=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$tmp/$n.time" "$@" >"$tmp/$n.out" 2>&1 &&
    awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$tmp/$n.time" >"$tmp/$n.t"
}
secs() { cut -d' ' -f1 "$tmp/$1.t" 2>/dev/null || echo failed; }
why() {  # NAME -> a short reason for its failure
  if grep -q -E 'unable to load model|failed to load model' "$tmp/$1.out"; then echo "cannot load the file"
  else grep -v '^Command exited' "$tmp/$1.out" | tail -n 1 | cut -c1-60 | tr '|' '/'; fi
}

quantize_ours() {  # FORMAT OUT
  local extra=()
  [[ $needs_imatrix == *" $1 "* ]] && extra=(--stats "$imatrix")
  timed q_ours "$bin/quantize" "$f32" "$2" "$1" --threads "$threads" --quiet "${extra[@]}"
}
quantize_llama() {
  local extra=()
  [[ $needs_imatrix == *" $1 "* ]] && extra=(--imatrix "$imatrix")
  timed q_llama "$llama/llama-quantize" "${extra[@]}" "$f32" "$2" "$1" "$threads"
}
prompt_ours() {  # GGUF -> tokens/s of evaluation; PPL in $tmp/ppl_ours
  timed p_ours "$bin/ppl-eval" "$1" --text "$text" --ctx "$ctx" --chunks "$chunks" --threads "$threads" || return 0
  sed -n 's/^PPL = \([0-9.]*\) .*/\1/p' "$tmp/p_ours.out" >"$tmp/ppl_ours"
  sed -n 's/^ppl-eval: .* (\([0-9.]*\) tokens\/s.*/\1/p' "$tmp/p_ours.out" >"$tmp/p_ours.r"
}
prompt_llama() {  # CTX x CHUNKS tokens over its evaluation (lib.sh: llama_eval_tps); PPL when its log kept it
  timed p_llama "$llama/llama-perplexity" -m "$1" -f "$text" -c "$ctx" -b "$ctx" --chunks "$chunks" -t "$threads" ||
    return 0
  sed -n 's/.*Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/p_llama.out" >"$tmp/ppl_llama"
  [ -s "$tmp/ppl_llama" ] || echo "(lost)" >"$tmp/ppl_llama"
  llama_eval_tps $((ctx * chunks)) "$tmp/p_llama.out" "$(secs p_llama)" >"$tmp/p_llama.r"
}
decode_ours() {  # generate's own "generated N tokens in S s (R tokens/s)"
  timed d_ours "$bin/generate" "$1" -p "Once upon a time" -n "$gen" --temp 0 --ignore-eos --threads "$threads" ||
    return 0
  sed -n 's/.*generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' "$tmp/d_ours.out" >"$tmp/d_ours.r"
}
decode_llama() {  # llama-bench tg GEN, one cold repetition (as bench/runner.sh)
  [ -n "$lbench" ] || return 0
  timed d_llama "$lbench" -m "$1" -t "$threads" -p 0 -n "$gen" -r 1 --no-warmup -o jsonl || return 0
  sed -n 's/.*"avg_ts": *\([0-9.e+]*\).*/\1/p' "$tmp/d_llama.out" | awk '{ printf "%.1f\n", $1 }' >"$tmp/d_llama.r"
}
rate() {  # NAME -> its figure, "failed: why", or - when it did not run
  if [ -s "$tmp/$1.r" ]; then cat "$tmp/$1.r"
  elif [ -f "$tmp/$1.out" ]; then echo "failed: $(why "$1")"
  else echo -; fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores," \
  "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -E 'avx2|avx512f|avx_vnni|avx512_vnni' | paste -sd' ');" \
  "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); commit" \
  "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' 2>/dev/null || echo '+changes'); $threads threads;" \
  "llama.cpp: $lbuild; load average $load_start at the start"
echo
echo "$model_name, $(( $(stat -Lc %s "$f32") / 1048576 )) MiB F32. Quantize: wall s from that F32, \`sync\` before each (imatrix formats:"
echo "both tools read the same llama-imatrix file). Prompt: tokens/s evaluating $chunks chunks of $ctx tokens of"
echo "$(basename "$text") (ppl-eval's own figure; llama-perplexity: from its log's start of evaluation to its exit),"
echo "on the file our quantize wrote. PPL (lost): llama-perplexity's last log lines were lost at its exit."
echo "Decode: tokens/s of \`generate -n $gen --temp 0\` after a 5-token prompt against \`llama-bench -p 0 -n $gen\`."
echo "Ratios: llama.cpp's time / ours for quantize, our tokens/s / llama.cpp's for prompt and decode (> 1: ours faster)."
echo
echo "| format | bits/weight | MiB | quantize s: ours | llama.cpp | ratio | identical | prompt t/s: ours | llama.cpp | ratio | decode t/s: ours | llama.cpp | ratio | PPL: ours | llama.cpp |"
echo "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
i=0
for fmt in $formats; do
  i=$((i + 1))
  rm -f "$tmp"/*.t "$tmp"/*.r "$tmp"/*.out "$tmp"/ppl_*
  ours=$work/ours-$fmt.gguf lout=$work/llama-$fmt.gguf
  is_shared=0
  [[ " ${shared[*]} " == *" $fmt "* ]] && [ "$have_llama" = 1 ] && is_shared=1
  if [[ $needs_imatrix == *" $fmt "* ]] && ! make_imatrix; then
    echo "| $fmt | | | no imatrix (IMATRIX=, or llama-imatrix) | | | | | | | | | | | |"
    continue
  fi
  echo "bench/formats.sh: $fmt ($i)" >&2
  # the order of the two tools flips every format
  if [ $((i % 2)) = 1 ] || [ "$is_shared" = 0 ]; then order="ours llama"; else order="llama ours"; fi
  for t in $order; do
    # each tool starts with no dirty pages: the previous write's flush would
    # otherwise throttle whichever tool writes next (~1 s for 950 MB here)
    sync
    if [ "$t" = ours ]; then quantize_ours "$fmt" "$ours" || true
    elif [ "$is_shared" = 1 ]; then quantize_llama "$fmt" "$lout" || true; fi
  done
  same=-
  if [ "$is_shared" = 1 ] && [ -f "$ours" ] && [ -f "$lout" ]; then same=$(same_tensors "$ours" "$lout"); fi
  if [ ! -f "$ours" ]; then
    echo "| $fmt | | | failed: $(why q_ours) | $(secs q_llama) | | | | | | | | | | |"
    rm -f "$lout"
    continue
  fi
  [ "$is_shared" = 1 ] && [ ! -f "$lout" ] && same="llama-quantize failed: $(why q_llama)"
  rm -f "$lout"
  for t in $order; do
    if [ "$t" = ours ]; then prompt_ours "$ours"; decode_ours "$ours"
    elif [ "$have_llama" = 1 ]; then prompt_llama "$ours"; decode_llama "$ours"; fi
  done
  bpw=$(bits_per_weight "$ours") mib=$(awk -v b="$(stat -c %s "$ours")" 'BEGIN { printf "%.1f", b / 1048576 }')
  qo=$(secs q_ours) ql=-; [ "$is_shared" = 1 ] && ql=$(secs q_llama)
  po=$(rate p_ours) pl=$(rate p_llama) dec=$(rate d_ours) dl=$(rate d_llama)
  echo "| $fmt | $bpw | $mib | $qo | $ql | $(ratio "$ql" "$qo") | $same | $po | $pl | $(ratio "$po" "$pl") |" \
    "$dec | $dl | $(ratio "$dec" "$dl") | $(cat "$tmp/ppl_ours" 2>/dev/null) | $(cat "$tmp/ppl_llama" 2>/dev/null) |"
  rm -f "$ours"
done
echo
echo "Load average $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end ($(date -u '+%H:%M UTC'))."
