#!/usr/bin/env bash
# Perplexity on real llama.cpp GGUF files, ppl-eval against llama-perplexity
# side by side: the same file, text, context, chunks and thread count, the
# tools alternating within each round (the machine may be shared). Prints a
# markdown table: wall and CPU seconds (medians), PPL of each and their
# relative difference. The files are scripts/fetch_models.sh's
# (.cache/models/*.gguf) unless named; skips, saying so, when there are none
# or a tool is missing. A benchmark, never a test.
#
# usage: bench/real_gguf.sh [MODEL.gguf...]
#   env: BUILD (default build), RUNS (rounds, default 1), THREADS (default 2),
#        CTX (default 512), CHUNKS (default 4), TEXT (default the fixtures'
#        wiki.test.raw), HFQ_FIXTURES (default ../shared/fixtures)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
export LC_ALL=C
build=${BUILD:-build} runs=${RUNS:-1} threads=${THREADS:-2} ctx=${CTX:-512} chunks=${CHUNKS:-4}
fix=${HFQ_FIXTURES:-../shared/fixtures}
text=${TEXT:-$fix/text/wiki.test.raw}
ppl=$build/src/tools/ppl-eval
llama=.cache/llama-build/bin/llama-perplexity
models=("$@")
[ ${#models[@]} -gt 0 ] || for f in .cache/models/*.gguf; do [ -f "$f" ] && models+=("$f"); done
[ ${#models[@]} -gt 0 ] || { echo "bench/real_gguf.sh: no .cache/models/*.gguf (scripts/fetch_models.sh): skipped"; exit 0; }
[ -x "$ppl" ] || { echo "bench/real_gguf.sh: no $ppl: build first: skipped"; exit 0; }
[ -x "$llama" ] || { echo "bench/real_gguf.sh: no $llama (scripts/build_reference.sh): skipped"; exit 0; }
[ -f "$text" ] || { echo "bench/real_gguf.sh: no $text (HFQ_FIXTURES): skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run TAG COMMAND...: one timed run; appends "wall cpu" to $tmp/TAG.time, keeps the output in $tmp/TAG.out
run() {
  local tag=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" >"$tmp/$tag.out" 2>&1 ||
    { echo "bench/real_gguf.sh: failed: $*: $(tail -n 1 "$tmp/$tag.out")" >&2; return 1; }
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$tmp/time" >>"$tmp/$tag.time"
}
col() { awk -v c="$1" '{ print $c }' "$2" | median; }

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads," \
  "ctx $ctx x $chunks chunks of $(basename "$text"), $runs round(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| model | tool | wall s | CPU s | PPL |"
echo "|---|---|---:|---:|---:|"
for m in "${models[@]}"; do
  rm -f "$tmp"/*.time
  for _ in $(seq "$runs"); do
    run ours "$ppl" "$m" --text "$text" --ctx "$ctx" --chunks "$chunks" --threads "$threads"
    run llama "$llama" -m "$m" -f "$text" -c "$ctx" -b "$ctx" --chunks "$chunks" -t "$threads"
  done
  p_ours=$(sed -n 's/^PPL = \([0-9.]*\) .*/\1/p' "$tmp/ours.out")
  p_llama=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmp/llama.out")
  tok=$(sed -n 's/.*tokenization took \([0-9.]*\) ms.*/\1/p' "$tmp/llama.out")
  name=$(basename "$m")
  echo "| $name | ppl-eval | $(col 1 "$tmp/ours.time") | $(col 2 "$tmp/ours.time") | $p_ours |"
  echo "| $name | llama-perplexity | $(col 1 "$tmp/llama.time") | $(col 2 "$tmp/llama.time") | $p_llama |"
  awk -v a="$p_ours" -v b="$p_llama" -v t="$tok" 'BEGIN {
    printf "| | PPL ours / llama.cpp - 1 | | | %+.3f %% |\n", (a / b - 1) * 100
    if (t != "") printf "| | (llama-perplexity wall includes tokenizing: %.1f s) | | | |\n", t / 1000 }'
done
echo
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
