#!/usr/bin/env bash
# Runner speed: perplexity of stories260K (F32) over tinystories-valid.txt at
# ctx 256 (763 chunks, ~195k tokens), as ppl-eval on 1 and 2 threads and, when
# scripts/build_reference.sh has built it, llama.cpp's llama-perplexity on 2
# threads; then greedy decoding speed. The GGUF is written with gguf-py as in
# tests/runner_stories.py. Run on an otherwise idle machine: threads that wait
# for each other suffer badly when another process holds a core.
# Usage: bench/runner_ppl.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build=${1:-build}
fix=${HFQ_FIXTURES:-../shared/fixtures}
ppl=$build/src/tools/ppl-eval
gen=$build/src/tools/generate
llama=.cache/llama-build/bin/llama-perplexity
text=$fix/text/tinystories-valid.txt
[ -x "$ppl" ] && [ -x "$gen" ] || { echo "no $ppl or $gen: build first" >&2; exit 1; }
[ -f "$text" ] || { echo "no $text (HFQ_FIXTURES)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/stories260K-f32.gguf
HFQ_FIXTURES=$fix .venv/bin/python - "$model" <<'PY'
import json, os, sys
sys.path.insert(0, "tests")
import runner_stories as rs
import sentencepiece
cfg = json.load(open(os.path.join(rs.MODEL_DIR, "config.json")))
w = rs.read_safetensors(os.path.join(rs.MODEL_DIR, "model.safetensors"))
sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(rs.MODEL_DIR, "tokenizer.model"))
rs.write_gguf(sys.argv[1], cfg, w, sp)
PY

seconds() {  # wall time of "$@", output discarded
    /usr/bin/time -f %e -o "$tmp/time" "$@" >/dev/null 2>&1
    cat "$tmp/time"
}
# RUNS rounds (default 3), the tools alternating within each: the machine may
# be shared and its load vary; medians at the end, with the load average.
runs=${RUNS:-3}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= runs; r++)); do
    for t in 1 2; do
        s=$(seconds "$ppl" "$model" --text "$text" --ctx 256 --threads "$t")
        echo "$s" >>"$tmp/ppl$t"
        printf 'round %d: ppl-eval, %d thread(s):        %8s s\n' "$r" "$t" "$s"
    done
    if [ -x "$llama" ]; then
        s=$(seconds "$llama" -m "$model" -f "$text" -c 256 -b 256 -t 2)
        echo "$s" >>"$tmp/llama"
        printf 'round %d: llama-perplexity, 2 threads:  %8s s\n' "$r" "$s"
    fi
done
echo "medians of $runs: ppl-eval 1 thread $(median <"$tmp/ppl1") s, 2 threads $(median <"$tmp/ppl2") s" \
    "$([ -f "$tmp/llama" ] && echo ", llama-perplexity 2 threads $(median <"$tmp/llama") s");" \
    "load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
"$gen" "$model" -p "" --temp 0 -n 400 --threads 1 2>&1 >/dev/null | sed 's/^generate: /generate (1 thread): /'
