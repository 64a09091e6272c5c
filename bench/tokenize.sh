#!/usr/bin/env bash
# Tokenizer speed: encodes wiki.test.raw (1.29 MB) with each fixture tokenizer
# and prints the best of N runs of the load alone and of load + encode, and the
# encode throughput. Usage: bench/tokenize.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-3}
fix=${HFQ_FIXTURES:-../shared/fixtures}
tool=$build/src/tools/tokenize
text=$fix/text/wiki.test.raw
[ -x "$tool" ] || { echo "no $tool: build first" >&2; exit 1; }
[ -f "$text" ] || { echo "no $text (HFQ_FIXTURES)" >&2; exit 1; }

best() {  # best wall time in seconds of running "$@" $runs times
    local best=999 t
    for _ in $(seq "$runs"); do
        t=$( { /usr/bin/time -f %e "$@" >/dev/null; } 2>&1 | tail -1 )
        best=$(awk -v a="$t" -v b="$best" 'BEGIN { print (a < b) ? a : b }')
    done
    echo "$best"
}

bytes=$(stat -c %s "$text")
printf '%-18s %8s %10s %10s %8s %10s\n' tokenizer tokens load_s total_s enc_s MB/s
for dir in tokenizers/llama3 tokenizers/qwen3 tokenizers/llama2 models/stories260K models/TinyStories-656K; do
    d=$fix/$dir
    [ -d "$d" ] || continue
    load=$(best taskset -c 0 "$tool" --tokenizer-dir "$d" -p x)
    total=$(best taskset -c 0 "$tool" --tokenizer-dir "$d" --text "$text" --no-bos)
    n=$("$tool" --tokenizer-dir "$d" --text "$text" --no-bos | wc -w)
    awk -v name="$(basename "$dir")" -v n="$n" -v l="$load" -v t="$total" -v b="$bytes" 'BEGIN {
        e = t - l; if (e < 0.001) e = 0.001
        printf "%-18s %8d %10.2f %10.2f %8.2f %10.1f\n", name, n, l, t, e, b / e / 1e6 }'
done
