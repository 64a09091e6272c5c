#!/usr/bin/env bash
# Tokenizer speed: encodes wiki.test.raw four times over (5.2 MB, so that the
# encode outweighs the load's noise) with each fixture tokenizer on one core and
# prints the median of N runs of the load alone and of load + encode, the
# encode throughput and the largest peak RSS of load + encode.
# Usage: bench/tokenize.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-3}
fix=${HFQ_FIXTURES:-../shared/fixtures}
tool=$build/src/tools/tokenize
[ -x "$tool" ] || { echo "no $tool: build first" >&2; exit 1; }
[ -f "$fix/text/wiki.test.raw" ] || { echo "no $fix/text/wiki.test.raw (HFQ_FIXTURES)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
text=$tmp/wiki4.txt
for _ in 1 2 3 4; do cat "$fix/text/wiki.test.raw"; done >"$text"

median_run() {  # "median_wall_s max_peak_kb" of running "$@" $runs times on core 0
    : >"$tmp/runs"
    for _ in $(seq "$runs"); do
        /usr/bin/time -f "%e %M" -a -o "$tmp/runs" taskset -c 0 "$@" >/dev/null
    done
    sort -g "$tmp/runs" | awk '{ w[NR] = $1; if ($2 > kb) kb = $2 }
        END { m = (NR % 2) ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2; print m, kb }'
}

bytes=$(stat -c %s "$text")
printf '%-18s %8s %10s %10s %8s %10s %8s\n' tokenizer tokens load_s total_s enc_s MB/s rss_MiB
for dir in tokenizers/llama3 tokenizers/qwen3 tokenizers/llama2 models/stories260K models/TinyStories-656K; do
    d=$fix/$dir
    [ -d "$d" ] || continue
    read -r load _ < <(median_run "$tool" --tokenizer-dir "$d" -p x)
    read -r total kb < <(median_run "$tool" --tokenizer-dir "$d" --text "$text" --no-bos)
    n=$("$tool" --tokenizer-dir "$d" --text "$text" --no-bos | wc -w)
    awk -v name="$(basename "$dir")" -v n="$n" -v l="$load" -v t="$total" -v b="$bytes" -v kb="$kb" 'BEGIN {
        e = t - l; if (e < 0.001) e = 0.001
        printf "%-18s %8d %10.2f %10.2f %8.2f %10.1f %8.0f\n", name, n, l, t, e, b / e / 1e6, kb / 1024 }'
done
