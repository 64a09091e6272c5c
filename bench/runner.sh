#!/usr/bin/env bash
# Benchmark: the CPU runner against llama.cpp's llama-bench, prompt processing
# (a PP-token prompt, default 512) and decoding (TG tokens, default 128) on
# THREADS threads (default 2), on the same GGUF files:
#   - a synthetic ~1.1B-parameter model (mkmodel: 16 layers, hidden 2048, ffn 8192,
#     GQA 32/8 heads, vocab 32000, untied; the shape of bench/quantize.sh), converted
#     to F16 by hfconv and quantized to Q8_0 and Q4_K_M by our quantize;
#   - stories260K (F32, written with gguf-py as tests/runner_stories.py does).
# Ours: generate --temp 0 --ignore-eos; pp = the prompt's forward pass (-n 0),
# tg = TG single-token forward passes after a one-token prompt (TG + 1 tokens
# generated: the last one needs no forward pass). llama-bench: -p PP / -n TG
# with --no-warmup -r 1, so each run of either tool is one cold process.
# Runs alternate ours / llama.cpp (the machine may be shared: load varies);
# the table gives the median tokens/s of RUNS runs each. Prints markdown on
# stdout. Not a test: it takes many minutes and ~4 GB of disk.
#
# llama-bench is built on demand in .cache/llama-build, the CMake build folder
# scripts/build_reference.sh configures (that script must have run).
#
# Usage: bench/runner.sh [WORK_DIR]   (default out/bench-runner; models are kept there)
#   RUNS=3  THREADS=2  PP=512  TG=128  FORMATS="F16 Q8_0 Q4_K_M" ("": none)  STORIES=1 (0: skip)
#   BUILD=build (the meson build folder of the tools)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
work=${1:-out/bench-runner}
runs=${RUNS:-3}
threads=${THREADS:-2}
pp=${PP:-512}
tg=${TG:-128}
formats=${FORMATS-F16 Q8_0 Q4_K_M}
fix=${HFQ_FIXTURES:-../shared/fixtures}
bin=${BUILD:-build}/src/tools
py=.venv/bin/python
lbuild=.cache/llama-build
lbench=$lbuild/bin/llama-bench
text=$fix/text/tinystories-valid.txt
for exe in "$bin/generate" "$bin/tokenize" "$bin/mkmodel" "$bin/hfconv" "$bin/quantize" "$py"; do
    [ -x "$exe" ] || { echo "bench/runner.sh: $exe is missing (build first)" >&2; exit 1; }
done
[ -f "$text" ] || { echo "bench/runner.sh: no $text (HFQ_FIXTURES)" >&2; exit 1; }
if [ ! -x "$lbench" ]; then
    [ -f "$lbuild/CMakeCache.txt" ] || { echo "bench/runner.sh: no $lbuild: run scripts/build_reference.sh" >&2; exit 1; }
    echo "bench/runner.sh: building llama-bench" >&2
    cmake --build "$lbuild" --target llama-bench -j "$(nproc)" >/dev/null
fi
mkdir -p "$work"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- models ----
models=()
if [ -n "$formats" ]; then
    hf=$work/synth-1b
    if [ ! -f "$hf/config.json" ]; then
        "$bin/mkmodel" "$hf" --seed 1 --hidden 2048 --ffn 8192 --layers 16 --heads 32 --kv-heads 8 \
            --vocab 32000 --dtype bf16 --untied >/dev/null
    fi
    f16=$work/synth-1b-F16.gguf
    [ -f "$f16" ] || "$bin/hfconv" "$hf" -o "$f16" --outtype f16 -q
    for f in $formats; do
        m=$work/synth-1b-$f.gguf
        [ -f "$m" ] || "$bin/quantize" "$f16" "$m" "$f" --threads "$threads" >/dev/null
        models+=("$m")
    done
fi
if [ "${STORIES:-1}" != 0 ]; then
    stories=$work/stories260K-F32.gguf
    if [ ! -f "$stories" ]; then
        HFQ_FIXTURES=$fix "$py" - "$stories" <<'PY'
import json, os, sys
sys.path.insert(0, "tests")
import runner_stories as rs
import sentencepiece
cfg = json.load(open(os.path.join(rs.MODEL_DIR, "config.json")))
w = rs.read_safetensors(os.path.join(rs.MODEL_DIR, "model.safetensors"))
sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(rs.MODEL_DIR, "tokenizer.model"))
rs.write_gguf(sys.argv[1], cfg, w, sp)
PY
    fi
    models+=("$stories")
fi

n_tokens() { "$bin/tokenize" "$1" -p "$2" | wc -w; }

# generate's stderr line: "prompt N tokens in S s (R tokens/s); generated M tokens in S s (R tokens/s)"
ours_pp() {
    "$bin/generate" "$1" -p "$2" -n 0 --temp 0 --ctx "$pp" --threads "$threads" 2>&1 >/dev/null |
        sed -n 's/.*prompt [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p'
}
ours_tg() {
    "$bin/generate" "$1" -p "Once" -n $((tg + 1)) --temp 0 --ignore-eos --ctx $((tg + 8)) --threads "$threads" \
        2>&1 >/dev/null | sed -n "s/.*generated $((tg + 1)) tokens in \([0-9.]*\) s.*/\1/p" |
        awk -v n="$tg" '{ printf "%.2f\n", n / $1 }'
}
llama_run() {  # model -p N -n M -> tokens/s
    "$lbench" -m "$1" -t "$threads" "${@:2}" -r 1 --no-warmup -o jsonl 2>/dev/null |
        sed -n 's/.*"avg_ts": *\([0-9.e+]*\).*/\1/p' | awk '{ printf "%.2f\n", $1 }'
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for m in "${models[@]}"; do
    name=$(basename "$m" .gguf)
    prompt=$(prompt_for "$bin/tokenize" "$m" "$text" "$pp")
    echo "$(n_tokens "$m" "$prompt")" >"$tmp/$name.ppn"
    for ((r = 0; r < runs; r++)); do
        echo "bench/runner.sh: $name run $((r + 1))/$runs" >&2
        ours_pp "$m" "$prompt" >>"$tmp/$name.ours-pp"
        llama_run "$m" -p "$pp" -n 0 >>"$tmp/$name.llama-pp"
        ours_tg "$m" >>"$tmp/$name.ours-tg"
        llama_run "$m" -p 0 -n "$tg" >>"$tmp/$name.llama-tg"
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "| model (prompt tokens: ours) | pp tokens/s: ours | llama.cpp | ratio | tg tokens/s: ours | llama.cpp | ratio |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in "${models[@]}"; do
    name=$(basename "$m" .gguf)
    read -r opp lpp otg ltg < <(echo "$(median <"$tmp/$name.ours-pp") $(median <"$tmp/$name.llama-pp")" \
        "$(median <"$tmp/$name.ours-tg") $(median <"$tmp/$name.llama-tg")")
    awk -v n="$name ($(cat "$tmp/$name.ppn"))" -v a="$opp" -v b="$lpp" -v c="$otg" -v d="$ltg" \
        'BEGIN { printf "| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", n, a, b, a / b, c, d, c / d }'
done
echo
echo "pp: a prompt of at most $pp tokens for ours (llama-bench: $pp), tg: $tg tokens;" \
    "$threads threads; median of $runs runs each, alternating. $(lscpu | sed -n 's/^Model name: *//p');" \
    "load average before $load_before, after $load_after."
