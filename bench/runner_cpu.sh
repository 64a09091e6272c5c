#!/usr/bin/env bash
# Benchmark for a shared machine: CPU time (user seconds, /usr/bin/time) per token of
# the runner and of llama.cpp's llama-bench on ONE thread, on the GGUF files
# bench/runner.sh made (run it first, e.g. with RUNS=1 FORMATS=... or let it finish).
# Wall-clock speeds swing with other jobs' load; CPU time per token much less, so
# this compares the kernels when the machine is busy. Each figure is a difference of
# two runs (N1 and N2 tokens), which cancels loading and start-up costs:
#   pp: a prompt of N1 vs N2 tokens (generate -n 0; llama-bench -p N -n 0)
#   tg: N1 vs N2 generated tokens   (generate --ignore-eos; llama-bench -p 0 -n N)
# Prints a markdown table. Usage: bench/runner_cpu.sh [WORK_DIR]  (default out/bench-runner)
#   BUILD=build  FORMATS="F16 Q8_0 Q4_K_M"  PP="32 96"  TG="8 40"
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
work=${1:-out/bench-runner}
bin=${BUILD:-build}/src/tools
lbench=.cache/llama-build/bin/llama-bench
text=${HFQ_FIXTURES:-../shared/fixtures}/text/tinystories-valid.txt
read -r pp1 pp2 <<<"${PP:-32 96}"
read -r tg1 tg2 <<<"${TG:-8 40}"
for exe in "$bin/generate" "$bin/tokenize" "$lbench"; do
    [ -x "$exe" ] || { echo "bench/runner_cpu.sh: $exe is missing" >&2; exit 1; }
done
[ -f "$text" ] || { echo "bench/runner_cpu.sh: no $text (HFQ_FIXTURES)" >&2; exit 1; }

n_tokens() { "$bin/tokenize" "$1" -p "$2" | wc -w; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cpu_ms() { /usr/bin/time -f %U -o "$tmp" "$@" >/dev/null 2>&1; awk '{ printf "%d\n", $1 * 1000 }' "$tmp"; }
per_token() { echo $((($2 - $1) / ($4 - $3))); }   # ms1 ms2 n1 n2

echo "| model | pp ms CPU/token: ours | llama.cpp | tg ms CPU/token: ours | llama.cpp |"
echo "| --- | ---: | ---: | ---: | ---: |"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for f in ${FORMATS:-F16 Q8_0 Q4_K_M}; do
    m=$work/synth-1b-$f.gguf
    [ -f "$m" ] || { echo "bench/runner_cpu.sh: no $m (run bench/runner.sh first)" >&2; exit 1; }
    p1=$(prompt_for "$bin/tokenize" "$m" "$text" "$pp1") p2=$(prompt_for "$bin/tokenize" "$m" "$text" "$pp2")
    k1=$(n_tokens "$m" "$p1") k2=$(n_tokens "$m" "$p2")
    o1=$(cpu_ms "$bin/generate" "$m" -p "$p1" -n 0 --ctx "$k2" --threads 1)
    l1=$(cpu_ms "$lbench" -m "$m" -t 1 -p "$k1" -n 0 -r 1 --no-warmup)
    o2=$(cpu_ms "$bin/generate" "$m" -p "$p2" -n 0 --ctx "$k2" --threads 1)
    l2=$(cpu_ms "$lbench" -m "$m" -t 1 -p "$k2" -n 0 -r 1 --no-warmup)
    gen() { cpu_ms "$bin/generate" "$m" -p Once -n $(($1 + 1)) --temp 0 --ignore-eos --threads 1; }
    g1=$(gen "$tg1")
    h1=$(cpu_ms "$lbench" -m "$m" -t 1 -p 0 -n "$tg1" -r 1 --no-warmup)
    g2=$(gen "$tg2")
    h2=$(cpu_ms "$lbench" -m "$m" -t 1 -p 0 -n "$tg2" -r 1 --no-warmup)
    echo "| synth-1b-$f | $(per_token "$o1" "$o2" "$k1" "$k2") | $(per_token "$l1" "$l2" "$k1" "$k2") |" \
        "$(per_token "$g1" "$g2" "$tg1" "$tg2") | $(per_token "$h1" "$h2" "$tg1" "$tg2") |"
done
echo
echo "1 thread; pp: prompts of $k1 and $k2 tokens, tg: $tg1 and $tg2 tokens; lower is better." \
    "Load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)."
